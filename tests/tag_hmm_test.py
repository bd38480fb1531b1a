"""HMM taggers: lattices = compositions, Viterbi, M-step, files, supervised accuracy.

The tagging lattice built by the numba kernel is checked against the
engine's ``compose`` of the sentence acceptor with ``tagger_transducer()``
and against pynini's composition of the same two machines (same language
and weights: total weight, best path weight, posteriors per (position,
tag)); Viterbi against brute-force enumeration of all taggings.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pynini
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsmlearn import Machine
from fsmlearn.algo import best_path, compose, forward_backward, total_weight
from fsmlearn.errors import ModelError, ModelFormatError
from fsmlearn.tag.hmm import (HMM, accuracy, encode_sentences, lattice, sentence_lattice, tag_sentences,
                              viterbi)
from fsmlearn.testing import openfst_distances


# --------------------------------------------------------------------------- helpers

def random_hmm(rng, T=3, V=4, order=2, zero=0.3, suffix=False):
    """A random smoothed HMM; some emissions are zero, but every tag emits and
    every word (the unknown one too) is emitted by some tag."""
    tags = [f"T{i}" for i in range(T)]
    vocab = [f"w{i}" for i in range(V)]
    tc = rng.random((T + 1,) * order) * 5 * (rng.random((T + 1,) * order) > 0.2)
    ec = rng.random((T, V + 1)) * 5 * (rng.random((T, V + 1)) > zero)
    ec[np.arange(T), rng.integers(0, V + 1, T)] += 1.0
    ec[rng.integers(0, T, V + 1), np.arange(V + 1)] += 1.0
    return HMM.from_counts(tags, vocab, tc, ec, smoothing=0.2)


def random_sentence(rng, hmm, L):
    V = hmm.V
    return [hmm.vocab[i] if i < V else f"oov{i}" for i in rng.integers(0, V + 1, L)]


def brute_force(hmm, words):
    """(ln p of every tagging, taggings) by enumeration, over emissions and transitions."""
    ids = hmm.encode_words(words)
    T = hmm.T
    out, seqs = [], []
    for tg in itertools.product(range(T), repeat=len(words)):
        lp = 0.0
        hist = [T] * (hmm.order - 1)
        for w, t in zip(ids, tg):
            lp += (hmm.log_trans[hist[-1], t] if hmm.order == 2 else hmm.log_trans3[hist[-2], hist[-1], t])
            lp += hmm.log_emit[t, w]
            hist.append(t)
        lp += hmm.log_trans[hist[-1], T] if hmm.order == 2 else hmm.log_trans3[hist[-2], hist[-1], T]
        out.append(lp)
        seqs.append(tg)
    return np.array(out), seqs


def depth_of_states(m: Machine) -> np.ndarray:
    """Distance (in arcs) of every state from the start (a straight-line input makes it unique)."""
    d = np.full(m.num_states, -1)
    d[m.start] = 0
    order = [m.start]
    for s in order:
        for a in m.out_arcs(s):
            q = int(m.dst[a])
            if d[q] < 0:
                d[q] = d[s] + 1
                order.append(q)
            assert d[q] == d[s] + 1
    return d


def position_posteriors_of(m: Machine, post: np.ndarray, L: int, T: int) -> np.ndarray:
    """[L, T] posteriors of a composition's arcs by (position, tag); epsilon outputs skipped."""
    depth = depth_of_states(m)
    out = np.zeros((L, T))
    for a in range(m.num_arcs):
        if m.olabel[a] > 0:
            out[depth[m.arc_src[a]], m.olabel[a] - 1] += post[a]
    return out


# --------------------------------------------------------------------------- lattice = composition

@pytest.mark.parametrize("order", [2, 3])
@given(seed=st.integers(0, 2**31), L=st.integers(1, 5))
def test_lattice_equals_engine_composition(order, seed, L):
    rng = np.random.default_rng(seed)
    hmm = random_hmm(rng, T=int(rng.integers(1, 4)), V=4, order=order)
    words = random_sentence(rng, hmm, L)
    lat = sentence_lattice(hmm, words, symbols=True)
    comp = compose(hmm.sentence_acceptor(words), hmm.tagger_transducer())
    # total weight
    z_lat = float(total_weight(lat.machine))
    assert z_lat == pytest.approx(float(total_weight(comp)), rel=1e-12, abs=1e-12)
    lp, seqs = brute_force(hmm, words)
    assert z_lat == pytest.approx(-np.logaddexp.reduce(lp), rel=1e-12, abs=1e-12)
    # best path: same weight, same output string
    p1, p2 = best_path(lat.machine), best_path(comp)
    assert p1.weight == pytest.approx(p2.weight, rel=1e-12, abs=1e-12)
    assert p1.weight == pytest.approx(-lp.max(), rel=1e-12, abs=1e-12)
    # posteriors per (position, tag)
    fb1, fb2 = forward_backward(lat.machine), forward_backward(comp)
    P1 = lat.position_posteriors(fb1.posteriors)
    P2 = position_posteriors_of(comp, fb2.posteriors, L, hmm.T)
    np.testing.assert_allclose(P1, P2, atol=1e-12)
    np.testing.assert_allclose(P1.sum(axis=1), 1.0, atol=1e-12)
    # the same language: every lattice arc's labels are those of the composition
    assert lat.machine.isyms == comp.isyms and lat.machine.osyms == comp.osyms


@pytest.mark.parametrize("order", [2, 3])
def test_lattice_equals_pynini_composition(order):
    rng = np.random.default_rng(7 + order)
    for _ in range(6):
        hmm = random_hmm(rng, T=3, V=5, order=order)
        words = random_sentence(rng, hmm, int(rng.integers(1, 6)))
        lat = sentence_lattice(hmm, words, symbols=True)
        a = hmm.sentence_acceptor(words).to_pynini("log64")
        b = hmm.tagger_transducer().to_pynini("log64")
        pc = pynini.compose(a, pynini.arcsort(b, "ilabel"))
        # total weight: OpenFst's shortest distance at full precision
        z_pynini = float(openfst_distances(pc, reverse=True)[pc.start()])
        assert float(total_weight(lat.machine)) == pytest.approx(z_pynini, abs=1e-9)
        # best path: OpenFst's shortest path on the tropical copy (float32 weights)
        trop = pynini.arcmap(pc, map_type="to_std")
        sp = pynini.shortestpath(trop)
        w_sp = float(pynini.shortestdistance(sp, reverse=True)[sp.start()])
        assert best_path(lat.machine).weight == pytest.approx(w_sp, rel=1e-5)
        # the output string of the best path agrees
        tags_pynini = [hmm.tags[int(x) - 1] for x in
                       sp.paths(output_token_type=b.output_symbols()).olabels()]
        tags_lat = [hmm.tags[t] for t in lat.path_tags(best_path(lat.machine))]
        assert tags_pynini == tags_lat
        # posteriors per (position, tag) of pynini's composition, by the engine
        m = Machine.from_pynini(pc)
        P2 = position_posteriors_of(m, forward_backward(m).posteriors, len(words), hmm.T)
        P1 = lat.position_posteriors(forward_backward(lat.machine).posteriors)
        np.testing.assert_allclose(P1, P2, atol=1e-9)


@pytest.mark.parametrize("order", [2, 3])
def test_concatenated_lattice_is_the_sentences_side_by_side(order):
    rng = np.random.default_rng(3)
    hmm = random_hmm(rng, T=3, V=5, order=order)
    sents = [random_sentence(rng, hmm, int(rng.integers(0, 6))) for _ in range(7)]
    ptr, ids, oov = encode_sentences(hmm, sents)
    for sr in ("log", "real"):
        lat = lattice(hmm, ptr, ids, oov_words=oov, semiring=sr)
        m = lat.machine
        assert np.all(m.dst > m.arc_src)                      # topologically numbered
        fb = forward_backward(m)
        z = 0.0
        P = lat.position_posteriors(fb.posteriors)
        for i, s in enumerate(sents):
            if not s:
                continue
            single = sentence_lattice(hmm, s)
            fs = forward_backward(single.machine)
            z += fs.logz
            np.testing.assert_allclose(P[ptr[i]:ptr[i + 1]],
                                       single.position_posteriors(fs.posteriors), atol=1e-12)
        assert fb.logz == pytest.approx(z, rel=1e-12)
        # expected transition counts: the </s> arcs carry one count per non-empty sentence
        tc = np.bincount(lat.arc_trans, fb.posteriors, minlength=hmm.trans.size).reshape(hmm.trans.shape)
        assert tc[..., hmm.T].sum() == pytest.approx(sum(1 for s in sents if s), rel=1e-12)


def test_lattice_input_errors():
    rng = np.random.default_rng(0)
    hmm = random_hmm(rng)
    with pytest.raises(Exception, match="offsets"):
        lattice(hmm, [0, 3], np.array([0, 1], np.int32))
    with pytest.raises(Exception, match="word ids"):
        lattice(hmm, [0, 1], np.array([hmm.V + 1], np.int32))
    # a word no tag may emit
    le = hmm.log_emit.copy()
    le[:, 0] = -np.inf
    le = le - np.logaddexp.reduce(le, axis=1, keepdims=True)
    h2 = HMM(hmm.tags, hmm.vocab, hmm.log_trans, le)
    with pytest.raises(Exception, match="'w0'.*no possible tag"):
        lattice(h2, [0, 2], np.array([1, 0], np.int32))


# --------------------------------------------------------------------------- Viterbi

@pytest.mark.parametrize("order", [2, 3])
@given(seed=st.integers(0, 2**31))
def test_viterbi_is_the_best_tagging(order, seed):
    rng = np.random.default_rng(seed)
    hmm = random_hmm(rng, T=3, V=4, order=order)
    sents = [random_sentence(rng, hmm, int(rng.integers(1, 5))) for _ in range(4)]
    ptr, ids, oov = encode_sentences(hmm, sents)
    got = viterbi(hmm, ptr, ids, oov_words=oov, batch_tokens=5)     # several lattices
    for i, s in enumerate(sents):
        lp, seqs = brute_force(hmm, s)
        best = seqs[int(np.argmax(lp))]
        mine = tuple(int(t) for t in got[ptr[i]:ptr[i + 1]])
        # ties: the found tagging must score as well as the best
        assert lp[seqs.index(mine)] == pytest.approx(lp.max(), abs=1e-9)
        if np.sum(np.isclose(lp, lp.max(), atol=1e-9)) == 1:
            assert mine == best
    assert tag_sentences(hmm, sents) == [[hmm.tags[t] for t in got[ptr[i]:ptr[i + 1]]] for i in range(4)]


# --------------------------------------------------------------------------- M-step

def test_from_counts_is_normalised_counts():
    tags, vocab = ["A", "B"], ["x", "y", "z"]
    tc = np.array([[1.0, 3.0, 0.0], [2.0, 0.0, 2.0], [4.0, 0.0, 0.0]])
    ec = np.array([[1.0, 1.0, 0.0, 2.0], [0.0, 5.0, 5.0, 0.0]])
    h = HMM.from_counts(tags, vocab, tc, ec)
    np.testing.assert_allclose(np.exp(h.log_trans[0]), [0.25, 0.75, 0.0])
    np.testing.assert_allclose(np.exp(h.log_trans[1]), [0.5, 0.0, 0.5])
    np.testing.assert_allclose(np.exp(h.log_trans[2]), [1.0, 0.0, 0.0])
    assert h.log_trans[2, 2] == -np.inf
    np.testing.assert_allclose(np.exp(h.log_emit[0]), [0.25, 0.25, 0.0, 0.5])
    np.testing.assert_allclose(np.exp(h.log_emit[1]), [0.0, 0.5, 0.5, 0.0])
    # the allowed mask: disallowed emissions get -inf, the rest renormalise
    allowed = np.ones((4, 2), bool)
    allowed[3, 0] = False
    h = HMM.from_counts(tags, vocab, tc, ec, allowed=allowed)
    assert h.log_emit[0, 3] == -np.inf
    np.testing.assert_allclose(np.exp(h.log_emit[0]), [0.5, 0.5, 0.0, 0.0])
    # a tag with no count emits uniformly over its allowed words; an empty row is uniform
    h = HMM.from_counts(tags, vocab, np.zeros((3, 3)), np.zeros((2, 4)), allowed=allowed)
    np.testing.assert_allclose(np.exp(h.log_emit[0]), [1 / 3, 1 / 3, 1 / 3, 0.0])
    np.testing.assert_allclose(np.exp(h.log_trans[2]), [0.5, 0.5, 0.0])
    # additive smoothing
    h = HMM.from_counts(tags, vocab, tc, ec, smoothing=1.0)
    np.testing.assert_allclose(np.exp(h.log_trans[0]), np.array([2, 4, 1]) / 7)
    np.testing.assert_allclose(np.exp(h.log_trans[2]), [5 / 6, 1 / 6, 0.0])


def test_from_counts_interpolation_and_trigram():
    rng = np.random.default_rng(5)
    T, V = 4, 6
    tags, vocab = [f"t{i}" for i in range(T)], [f"w{i}" for i in range(V)]
    c3 = rng.integers(0, 6, (T + 1,) * 3).astype(float)
    c3[:, T, T] = 0
    ec = rng.integers(1, 5, (T, V + 1)).astype(float)
    for sm in ("interpolate", None, 0.5):
        h = HMM.from_counts(tags, vocab, c3, ec, smoothing=sm)
        assert h.order == 3 and h.log_trans3.shape == (T + 1,) * 3
        np.testing.assert_allclose(np.exp(h.log_trans3).sum(axis=2), 1.0, atol=1e-12)
        np.testing.assert_allclose(np.exp(h.log_trans).sum(axis=1), 1.0, atol=1e-12)
        assert np.all(h.log_trans3[:, T, T] == -np.inf)
    h = HMM.from_counts(tags, vocab, c3, ec, smoothing="interpolate")
    # interpolation: every possible transition gets mass from the unigram
    assert np.all(np.isfinite(h.log_trans3[:, :, :T]))
    # ML trigram relative frequencies where the history was seen
    h = HMM.from_counts(tags, vocab, c3, ec)
    a, b = 1, 2
    np.testing.assert_allclose(np.exp(h.log_trans3[a, b]), c3[a, b] / c3[a, b].sum())
    with pytest.raises(ModelError, match="shape"):
        HMM.from_counts(tags, vocab, np.zeros((T, T)), ec)
    with pytest.raises(ModelError, match="smoothing"):
        HMM.from_counts(tags, vocab, c3, ec, smoothing="bogus")


def test_constructor_validates():
    rng = np.random.default_rng(1)
    h = random_hmm(rng)
    with pytest.raises(ModelError, match="log_emit has shape"):
        HMM(h.tags, h.vocab, h.log_trans, h.log_emit[:, :-1])
    bad = h.log_trans.copy()
    bad[0, 0] = np.log(np.exp(bad[0, 0]) + 0.1)
    with pytest.raises(ModelError, match="row \\[0\\] of log_trans sums to"):
        HMM(h.tags, h.vocab, bad, h.log_emit)
    nan = h.log_emit.copy()
    nan[1, 1] = np.nan
    with pytest.raises(ModelError, match=r"log_emit\[1, 1\]"):
        HMM(h.tags, h.vocab, h.log_trans, nan)


# --------------------------------------------------------------------------- files

@pytest.fixture(scope="module")
def wsj():
    from fsmlearn.data import load_dataset
    return load_dataset("wsj-train"), load_dataset("wsj-small")


@pytest.fixture(scope="module")
def supervised(wsj):
    import time
    from fsmlearn.tag.train import train_supervised
    t0 = time.time()
    hmm = train_supervised(wsj[0], order=2)
    return hmm, time.time() - t0


def test_save_load_round_trip(tmp_path, supervised):
    rng = np.random.default_rng(2)
    for h in (random_hmm(rng, order=2), random_hmm(rng, order=3), supervised[0]):
        p = tmp_path / "m.hmm"
        h.save(p)
        g = HMM.load(p)
        assert (g.tags, g.vocab, g.order) == (h.tags, h.vocab, h.order)
        np.testing.assert_array_equal(g.log_trans, h.log_trans)
        np.testing.assert_array_equal(g.log_emit, h.log_emit)
        if h.order == 3:
            np.testing.assert_array_equal(g.log_trans3, h.log_trans3)
        if h.unknown is not None:
            words = ["Frobnicated", "unbelievably", "1.5-million", "re-election", "zz"]
            np.testing.assert_array_equal(g.unknown_scores(words), h.unknown_scores(words))
            assert g.unknown.theta == h.unknown.theta
        assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_save_is_atomic(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    old, new = random_hmm(rng), random_hmm(rng, T=2)
    p = tmp_path / "m.hmm"
    old.save(p)
    before = p.read_bytes()

    def crash(f, **arrays):        # write part of the archive, then fail
        f.write(b"PK\x03\x04 partial data")
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="simulated"):
        new.save(p)
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.hmm"]          # no temporary file left
    monkeypatch.undo()
    assert HMM.load(p).T == old.T


def test_load_errors(tmp_path):
    rng = np.random.default_rng(6)
    h = random_hmm(rng)
    good = tmp_path / "good.hmm"
    h.save(good)
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}

    def write(name, **changes):
        a = dict(arrays)
        a.update(changes)
        for k in [k for k, v in changes.items() if v is None]:
            del a[k]
        p = tmp_path / name
        with open(p, "wb") as f:
            np.savez(f, **a)
        return p

    cases = [
        (tmp_path / "missing.hmm", "no such file"),
        (write("shape.hmm", log_emit=arrays["log_emit"][:, :-1]), "log_emit has shape"),
        (write("trans.hmm", log_trans=arrays["log_trans"][:-1]), "log_trans has shape"),
        (write("rows.hmm", log_emit=arrays["log_emit"] + 0.1), "sums to"),
        (write("nan.hmm", log_trans=np.full_like(arrays["log_trans"], np.nan)), "not a log probability"),
        (write("nometa.hmm", meta=None), "no 'meta' array"),
        (write("noemit.hmm", log_emit=None), "missing array 'log_emit'"),
        (write("format.hmm", meta=np.frombuffer(b'{"format": "other", "version": 1}', np.uint8)),
         "not a fsmlearn HMM"),
        (write("version.hmm", meta=np.frombuffer(
            arrays["meta"].tobytes().replace(b'"version": 1', b'"version": 99'), np.uint8)), "version 99"),
        (write("dtype.hmm", log_emit=np.zeros(arrays["log_emit"].shape, np.int64)), "dtype"),
    ]
    corrupt = tmp_path / "corrupt.hmm"
    corrupt.write_bytes(good.read_bytes()[:200])
    cases.append((corrupt, "corrupt"))
    text = tmp_path / "text.hmm"
    text.write_text("not a model\n")
    cases.append((text, "corrupt or not a model file"))
    for path, msg in cases:
        with pytest.raises(ModelFormatError, match=msg) as e:
            HMM.load(path)
        assert str(path) in str(e.value)


# --------------------------------------------------------------------------- supervised tagging

def test_supervised_bigram_accuracy_on_wsj_small(wsj, supervised):
    hmm, seconds = supervised
    assert hmm.T == 45 and hmm.order == 2
    assert seconds < 60
    a = accuracy(hmm, wsj[1])
    # measured: total 95.33, known 96.12, unknown 83.50 (2,933 unknown tokens)
    assert a["tokens"] == 46461
    assert a["total"] >= 0.950
    assert a["known"] > 0.955 and a["unknown"] > 0.75
    assert a["known_tokens"] + a["unknown_tokens"] == a["tokens"]


def test_supervised_trigram_beats_bigram(wsj, supervised):
    from fsmlearn.tag.train import train_supervised
    h3 = train_supervised(wsj[0], order=3)
    a3 = accuracy(h3, wsj[1])
    a2 = accuracy(supervised[0], wsj[1])
    # measured: trigram 95.71 total
    assert a3["total"] > a2["total"] and a3["total"] >= 0.953


def test_unknown_word_model_features(supervised):
    hmm = supervised[0]
    ti = hmm.tag_index
    s = hmm.unknown_scores(["Frobnitz", "frobnicating", "1,234", "glorfed", "re-glorfed"])
    best = [hmm.tags[i] for i in np.argmax(s + np.log(np.exp(hmm.log_trans[ti["DT"], :hmm.T])), axis=1)]
    assert best[0] == "NNP" and best[1] == "VBG" and best[2] == "CD"
    assert np.isfinite(s).any(axis=1).all()


def test_unk_as_a_vocabulary_word_gets_a_distinct_oov_symbol():
    """A tagger trained on an LM's vocabulary has the word <unk>; the transducer's
    out-of-vocabulary symbol is then <oov>, so the symbol table stays one-to-one."""
    import math as _m
    tags = ["A", "B"]
    vocab = ["x", "<unk>"]
    with np.errstate(divide="ignore"):     # <s> -> </s> is impossible: log 0
        lt = np.log(np.array([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25], [0.5, 0.5, 0.0]]))
    le = np.log(np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]]))
    h = HMM(tags, vocab, lt, le)
    syms = h.word_symbols()
    assert syms.find("<unk>") == 2 and syms.find("<oov>") == 3
    m = h.tagger_transducer()
    assert m.num_arcs == 3 * 2 * 3 and _m.isfinite(float(m.final[1:].min()))

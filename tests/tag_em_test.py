"""EM for HMM taggers: expected counts against enumeration, monotone likelihood,
corpora on disk, the Merialdo set-up on WSJ data."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsmlearn.data.tagsets import TAG17_OPEN_CLASS, tag_dictionary, tagset_tags
from fsmlearn.tag.em import (Corpus, dictionary_mask, em, encode_corpus, evaluation_model, expected_counts,
                             log_likelihood, uniform_hmm)
from fsmlearn.tag.hmm import HMM
from fsmlearn.tag.lattice import encode_sentences


def random_model(rng, T, V, order, allowed):
    """A random model under the allowed mask; the unknown word (column V) gets no mass."""
    tc = rng.random((T + 1,) * order) + 0.05
    ec = (rng.random((T, V + 1)) + 0.05) * allowed.T
    train = allowed.copy()
    train[V] = False
    return HMM.from_counts([f"t{i}" for i in range(T)], [f"w{i}" for i in range(V)], tc, ec, allowed=train)


def random_allowed(rng, T, V):
    a = rng.random((V + 1, T)) < 0.6
    a[np.arange(V + 1), rng.integers(0, T, V + 1)] = True      # every word has a tag
    a[rng.integers(0, V, T), np.arange(T)] = True               # every tag a known word
    return a


def brute_counts(hmm, sents):
    """Expected counts and log-likelihood by enumerating every tagging of every sentence."""
    T, V = hmm.T, hmm.V
    tc = np.zeros((T + 1,) * hmm.order)
    ec = np.zeros((T, V + 1))
    ll = 0.0
    for ids in sents:
        lps, seqs = [], []
        for tg in itertools.product(range(T), repeat=len(ids)):
            h = [T] * (hmm.order - 1)
            lp = 0.0
            for w, t in zip(ids, tg):
                lp += hmm.trans[tuple(h[-(hmm.order - 1):]) + (t,)] + hmm.log_emit[t, w]
                h.append(t)
            lp += hmm.trans[tuple(h[-(hmm.order - 1):]) + (T,)]
            lps.append(lp)
            seqs.append(tg)
        lps = np.array(lps)
        z = np.logaddexp.reduce(lps)
        ll += z
        for lp, tg in zip(lps, seqs):
            p = math.exp(lp - z)
            if p == 0.0:
                continue
            full = [T] * (hmm.order - 1) + list(tg) + [T]
            for k in range(hmm.order - 1, len(full)):
                tc[tuple(full[k - hmm.order + 1:k + 1])] += p
            for w, t in zip(ids, tg):
                ec[t, w] += p
    return tc, ec, ll


@pytest.mark.parametrize("order", [2, 3])
@given(seed=st.integers(0, 2**31), chunk=st.sampled_from([1, 3, 1000]))
def test_expected_counts_equal_enumeration(order, seed, chunk):
    rng = np.random.default_rng(seed)
    T, V = int(rng.integers(1, 4)), 5
    allowed = random_allowed(rng, T, V)
    hmm = random_model(rng, T, V, order, allowed)
    sents = [list(rng.integers(0, V, int(rng.integers(1, 5)))) for _ in range(int(rng.integers(1, 5)))]
    ptr = np.concatenate([[0], np.cumsum([len(s) for s in sents])]).astype(np.int64)
    corpus = Corpus(ptr, np.concatenate(sents).astype(np.int32), hmm.vocab)
    tc, ec, ll = expected_counts(hmm, corpus, allowed, chunk_tokens=chunk)
    btc, bec, bll = brute_counts(hmm, sents)
    assert ll == pytest.approx(bll, rel=1e-10)
    np.testing.assert_allclose(tc, btc, atol=1e-10)
    np.testing.assert_allclose(ec, bec, atol=1e-10)
    assert tc.sum() == pytest.approx(corpus.num_tokens + corpus.num_sentences)
    assert log_likelihood(hmm, corpus.ptr, corpus.ids) == pytest.approx(bll, rel=1e-10)


@pytest.mark.parametrize("order", [2, 3])
def test_em_likelihood_never_decreases(order):
    rng = np.random.default_rng(11 + order)
    T, V = 4, 12
    allowed = random_allowed(rng, T, V)
    gen = random_model(rng, T, V, 2, allowed)
    # sample a corpus from a random bigram HMM
    sents = []
    P = np.exp(gen.log_trans)
    E = np.exp(gen.log_emit)
    for _ in range(60):
        s, t = [], T
        while True:
            t = int(rng.choice(T + 1, p=P[t]))
            if t == T or len(s) > 12:
                break
            s.append(int(rng.choice(V + 1, p=E[t])))
        if s:
            sents.append([f"w{i}" for i in s])
    corpus = encode_corpus(sents)
    A = np.zeros((len(corpus.vocab) + 1, T), bool)
    idx = {w: i for i, w in enumerate(gen.vocab)}
    for i, w in enumerate(corpus.vocab):
        A[i] = allowed[idx[w]]
    A[-1] = True
    h0 = uniform_hmm(gen.tags, corpus.vocab, A, order=order)
    model, recs = em(h0, corpus, A, 12, heldout=sents[:5], chunk_tokens=50)
    ll = [r.loglik for r in recs]
    assert len(recs) == 13 and [r.iteration for r in recs] == list(range(13))
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(ll, ll[1:])), ll
    assert ll[-1] > ll[0] + 1.0
    assert all(math.isfinite(r.heldout_loglik) for r in recs)
    # the recorded likelihood of each model is that model's
    h = h0
    for r in recs[:3]:
        assert r.loglik == pytest.approx(log_likelihood(h, corpus.ptr, corpus.ids), rel=1e-10)
        tc, ec, _ = expected_counts(h, corpus, A)
        h = HMM.from_counts(h.tags, h.vocab, tc, ec, allowed=np.vstack([A[:-1], np.zeros((1, T), bool)]))


def test_corpus_encoding_and_files(tmp_path):
    sents = [["a", "b", "a"], [], ["c", "a"], ["b"]]
    c = encode_corpus(sents)
    assert c.vocab == ("a", "b", "c")                     # most frequent first
    assert c.ptr.tolist() == [0, 3, 5, 6]                 # the empty sentence is dropped
    assert c.ids.tolist() == [0, 1, 0, 2, 0, 1]
    assert c.word_counts().tolist() == [3, 2, 1, 0]
    d = encode_corpus(sents, vocab=["b", "a"])
    assert d.ids.tolist() == [1, 0, 1, 2, 1, 0]           # c is outside: id V = 2
    c.save(tmp_path / "corp")
    m = Corpus.load(tmp_path / "corp")
    assert isinstance(m.ids, np.memmap) and m.ids.dtype == np.int32
    assert m.vocab == c.vocab and m.ptr.tolist() == c.ptr.tolist() and m.ids.tolist() == c.ids.tolist()
    from fsmlearn.errors import ModelFormatError
    with pytest.raises(ModelFormatError, match="corpus"):
        Corpus.load(tmp_path / "nothing")


def test_merialdo_setup_pieces():
    tags = tagset_tags("tag17")
    td = tag_dictionary("tag17")
    vocab = ("the", "of", "zzyzx-unseen", "run")
    A = dictionary_mask(vocab, tags, td)
    ti = {t: i for i, t in enumerate(tags)}
    assert A[0].sum() >= 1 and A[0, ti["DET"]]
    assert set(np.array(tags)[A[1]]) == set(td["of"])
    openrow = {tags[i] for i in np.flatnonzero(A[2])}
    assert openrow == set(TAG17_OPEN_CLASS)
    assert {tags[i] for i in np.flatnonzero(A[4])} == set(TAG17_OPEN_CLASS)   # the unknown word
    h = uniform_hmm(tags, vocab, A, tagdict=td)
    pe = np.exp(h.log_emit)
    for t in range(len(tags)):
        allowed_words = np.flatnonzero(A[:4, t])
        if allowed_words.size:
            np.testing.assert_allclose(pe[t, allowed_words], 1.0 / allowed_words.size)
            assert pe[t, 4] == 0.0
    np.testing.assert_allclose(np.exp(h.log_trans[:17]), 1 / 18)
    # the evaluation model: unknown mass = the singletons' mass, rows still normalised
    ev = evaluation_model(h, np.array([False, False, True, True]))
    pe2 = np.exp(ev.log_emit)
    np.testing.assert_allclose(pe2.sum(axis=1), 1.0, atol=1e-12)
    k = ti["V"]
    assert pe2[k, 4] == pytest.approx(max(pe[k, 2:4].sum(), 1e-6))
    assert np.all(np.isfinite(ev.log_trans[:, :17]))
    # unknown words take the dictionary's tags: "of" is not in this vocabulary
    h2 = uniform_hmm(tags, ("the", "run"), dictionary_mask(("the", "run"), tags, td), tagdict=td)
    s = h2.unknown_scores(["of", "qwertyuiop"])
    assert {tags[i] for i in np.flatnonzero(np.isfinite(evaluation_model(h2, [1]).unknown_scores(["of"])[0]))} \
        == set(td["of"])
    assert s.shape == (2, 17)


@pytest.fixture(scope="module")
def wsj():
    from fsmlearn.data import load_dataset
    return load_dataset("wsj-train"), load_dataset("wsj-small")


def test_em_on_wsj_train_improves_accuracy(wsj):
    train, small = wsj
    corpus = encode_corpus([[w for w, _ in s] for s in train])
    tags = tagset_tags("tag17")
    td = tag_dictionary("tag17")
    A = dictionary_mask(corpus.vocab, tags, td)
    h0 = uniform_hmm(tags, corpus.vocab, A, tagdict=td)
    model, recs = em(h0, corpus, A, 3, eval=small, heldout=[[w for w, _ in s] for s in small])
    ll = [r.loglik for r in recs]
    assert all(b > a for a, b in zip(ll, ll[1:]))
    # measured: accuracy 76.33, 81.09, 82.55, 83.23 %; held-out -9.670, -6.544, -6.500, -6.470 per token
    acc = [r.accuracy for r in recs]
    assert acc[0] == pytest.approx(0.7633, abs=0.005)
    assert acc[3] > acc[1] > acc[0] and acc[3] == pytest.approx(0.8323, abs=0.005)
    held = [r.heldout_loglik for r in recs]
    assert held[3] > held[1] > held[0]
    assert all(r.seconds > 0 for r in recs[1:])
    # the returned model is the evaluation model of the last iteration
    ptr, ids, oov = encode_sentences(model, [[w for w, _ in s] for s in small])
    assert log_likelihood(model, ptr, ids, oov) / ids.size == pytest.approx(held[3], rel=1e-9)


def test_a_corpus_save_that_fails_half_way_is_refused_by_load(tmp_path, monkeypatch):
    """corpus.json is removed first and written last: a save over an old corpus that dies
    half-way leaves a folder load refuses, not a mixture of the two corpora."""
    from fsmlearn.errors import ModelFormatError
    import importlib
    em_module = importlib.import_module("fsmlearn.tag.em")
    old = encode_corpus([["a", "b"], ["b"]])
    old.save(tmp_path / "corp")
    new = encode_corpus([["x", "y", "z"]])
    calls = []
    real = em_module.atomic_write

    def dying(path, write):
        calls.append(path.name)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real(path, write)
    monkeypatch.setattr(em_module, "atomic_write", dying)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path / "corp")
    with pytest.raises(ModelFormatError, match="corpus"):
        Corpus.load(tmp_path / "corp")
    assert not [p for p in (tmp_path / "corp").iterdir() if "tmp" in p.name]

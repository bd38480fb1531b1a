"""Tagging lattices (fsmlearn.tag.lattice) = compositions.

The tagging lattice built by the numba kernel is checked against the
engine's ``compose`` of the sentence acceptor with ``tagger_transducer()``
and against pynini's composition of the same two machines (same language
and weights: total weight, best path weight, posteriors per (position,
tag)).
"""

from __future__ import annotations

import numpy as np
import pynini
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsmlearn import Machine, MachineBatch
from fsmlearn.algo import best_path, compose, forward_backward, total_weight
from fsmlearn.errors import ArgumentError, ModelError
from fsmlearn.tag import HMM, encode_sentences, lattice, sentence_lattice
from fsmlearn.testing import openfst_distances
from tag_common import brute_force, position_posteriors_of, random_hmm, random_sentence


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
def test_batch_lattice_is_the_sentences_side_by_side(order):
    rng = np.random.default_rng(3)
    hmm = random_hmm(rng, T=3, V=5, order=order)
    sents = [random_sentence(rng, hmm, int(rng.integers(0, 6))) for _ in range(7)]
    ptr, ids, oov = encode_sentences(hmm, sents)
    nonempty = [s for s in sents if s]
    for sr in ("log", "real"):
        lat = lattice(hmm, ptr, ids, oov_words=oov, semiring=sr)
        b = lat.batch
        assert len(b) == len(nonempty)
        MachineBatch(b.machine, b.state_ptr, b.starts)     # the trusted layout passes the checks
        m = b.machine
        assert np.all(m.dst > m.arc_src)                      # topologically numbered
        fb = forward_backward(b)
        P = lat.position_posteriors(fb.posteriors)
        k = 0
        for i, s in enumerate(sents):
            if not s:
                continue
            single = sentence_lattice(hmm, s)
            fs = forward_backward(single.machine)
            assert -fb.cost[k] == pytest.approx(fs.log_partition, rel=1e-12, abs=1e-12)
            np.testing.assert_allclose(P[ptr[i]:ptr[i + 1]],
                                       single.position_posteriors(fs.posteriors), atol=1e-12)
            # the batch's machine k is sentence i's lattice
            assert np.array_equal(b[k].dst, single.machine.dst)
            assert total_weight(b[k]) == pytest.approx(total_weight(single.machine), rel=1e-12, abs=1e-12)
            k += 1
        # expected transition counts: the </s> final weights carry one count per non-empty sentence
        tc = lat.transition_counts(fb.posteriors, fb.final_posteriors, hmm.trans.size).reshape(hmm.trans.shape)
        assert tc[..., hmm.T].sum() == pytest.approx(len(nonempty), rel=1e-12)
        # and every sentence's best tagging from one call, as each sentence's own
        tags = lat.path_tags(best_path(b))
        for i, s in enumerate(sents):
            if s:
                one = sentence_lattice(hmm, s)
                assert np.array_equal(tags[ptr[i]:ptr[i + 1]], one.path_tags(best_path(one.machine)))
        with pytest.raises(ArgumentError, match="lat.batch"):
            lat.machine


def test_lattice_input_errors():
    rng = np.random.default_rng(0)
    hmm = random_hmm(rng)
    with pytest.raises(ArgumentError, match="offsets"):
        lattice(hmm, [0, 3], np.array([0, 1], np.int32))
    with pytest.raises(ArgumentError, match="word ids"):
        lattice(hmm, [0, 1], np.array([hmm.V + 1], np.int32))
    # a word no tag may emit
    le = hmm.log_emit.copy()
    le[:, 0] = -np.inf
    le = le - np.logaddexp.reduce(le, axis=1, keepdims=True)
    h2 = HMM(hmm.tags, hmm.vocab, hmm.log_trans, le)
    with pytest.raises(ModelError, match="'w0'.*no possible tag"):
        lattice(h2, [0, 2], np.array([1, 0], np.int32))


def test_path_tags_of_a_batch_needs_every_sentence():
    rng = np.random.default_rng(5)
    hmm = random_hmm(rng, T=3, V=5, order=2)
    sents = [random_sentence(rng, hmm, 3) for _ in range(3)]
    ptr, ids, oov = encode_sentences(hmm, sents)
    lat = lattice(hmm, ptr, ids, oov_words=oov)
    paths = best_path(lat.batch)
    with pytest.raises(ArgumentError, match="pass the list"):
        lat.path_tags(paths[1])
    with pytest.raises(ArgumentError, match="2 paths for a lattice of 3"):
        lat.path_tags(paths[:2])
    tags = lat.path_tags([paths[0], None, paths[2]])
    assert np.all(tags[ptr[1]:ptr[2]] == -1) and np.all(tags[:ptr[1]] >= 0)


@pytest.mark.parametrize("seed", range(4))
def test_bigram_chains_are_the_lattice(seed):
    """build_chains writes no arc, but its materialise() is build_lattice's batch: the same
    states, arcs (output labels, weights, the transition each arc uses) and final weights;
    the input labels are the chains' row numbers (word id + 1, except for unknown words with
    rows of their own); the schedule's answers are the lattice's."""
    from fsmlearn.algo.chain import chain_best_paths, chain_forward_backward
    from fsmlearn.tag.lattice import build_chains, build_lattice, unknown_rows
    rng = np.random.default_rng(50 + seed)
    hmm = random_hmm(rng, T=3, V=5, order=2)
    sents = [random_sentence(rng, hmm, int(rng.integers(0, 6))) for _ in range(6)] + [["zzz-unseen", "qq"]]
    ptr, ids, oov = encode_sentences(hmm, sents)
    csr = hmm.emission_csr()
    for sr in ("log", "real"):
        extra = unknown_rows(hmm, ids, oov)
        lat = build_lattice(hmm, ptr, ids, csr, extra=extra, semiring=sr)
        cb = build_chains(hmm, ptr, ids, csr, extra=extra, semiring=sr)
        mb, arc_trans, _, final_trans = cb.materialise()
        a, b = lat.batch.machine, mb.machine
        assert np.array_equal(lat.batch.state_ptr, mb.state_ptr)
        assert np.array_equal(a.src_start, b.src_start) and np.array_equal(a.dst, b.dst)
        assert np.array_equal(a.olabel, b.olabel) and np.array_equal(arc_trans, lat.arc_trans)
        np.testing.assert_allclose(a.weight, b.weight, rtol=1e-15)
        np.testing.assert_allclose(a.final, b.final, rtol=1e-15)
        assert np.array_equal(final_trans[lat.final_state], lat.final_trans)
        known = ids[lat.state_tok[a.dst]] < hmm.V
        assert np.array_equal(a.ilabel[known], b.ilabel[known])
        fb, res = forward_backward(lat.batch), chain_forward_backward(cb)
        np.testing.assert_allclose(res.cost, fb.cost, rtol=1e-12)
        np.testing.assert_allclose(res.node_posteriors, lat.state_posteriors(fb.posteriors)[lat.state_tok >= 0],
                                   atol=1e-12)
        tags = chain_best_paths(cb).labels
        assert np.array_equal(tags, lat.path_tags(best_path(lat.batch)))

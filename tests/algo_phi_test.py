"""Failure (phi) arcs: exact semantics against the phi-free expansion."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from conftest import backoff_machine
from fsmlearn import PHI, Machine
from fsmlearn.algo import (arc_posteriors, backward, compose, expectation, forward_backward,
                           phi_expand, sample_paths, score_sequences, shortest_distance, total_weight)
from fsmlearn.errors import MachineError, SemiringError
from fsmlearn.testing import chi2_sf


def string_acceptor(seq):
    n = len(seq)
    return Machine.from_arcs(n + 1, 0, {n: 0.0}, np.arange(n), np.arange(1, n + 1), seq, weight=np.zeros(n))


@pytest.mark.parametrize("seed", range(6))
def test_string_weights_equal_those_of_the_expansion(seed):
    rng = np.random.default_rng(seed)
    m = backoff_machine(rng, V=4, order=3 + seed % 2, normalised=bool(seed % 2))
    e = phi_expand(m)
    seqs = [rng.integers(1, 5, rng.integers(0, 7)) for _ in range(80)]
    ptr = np.concatenate([[0], np.cumsum([len(s) for s in seqs])])
    labels = np.concatenate(seqs).astype(np.int32)
    walk = score_sequences(m, ptr, labels).weight
    walk_e = score_sequences(e, ptr, labels).weight
    assert np.array_equal(np.isfinite(walk), np.isfinite(walk_e))
    assert np.allclose(walk[np.isfinite(walk)], walk_e[np.isfinite(walk_e)], atol=1e-12)
    for s, w in zip(seqs[:25], walk[:25]):
        c1 = compose(string_acceptor(s), m)      # phi-intersection
        c2 = compose(string_acceptor(s), e)      # the phi-free machine
        t1 = total_weight(c1) if c1.start >= 0 else math.inf
        t2 = total_weight(c2) if c2.start >= 0 else math.inf
        assert t1 == pytest.approx(t2, abs=1e-12) and t1 == pytest.approx(w, abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("phi_final", [True, False])
def test_backward_values_and_totals_equal_the_expansion(seed, phi_final):
    rng = np.random.default_rng(100 + seed)
    m = backoff_machine(rng, V=4, order=3, normalised=True)
    e = phi_expand(m, phi_final=phi_final)
    b = backward(m, phi_final=phi_final)
    be = backward(e)
    assert np.allclose(b, be, atol=1e-10)
    if phi_final:
        assert total_weight(m) == pytest.approx(0.0, abs=1e-9)   # a normalised model sums to 1


def test_total_probability_by_enumeration_over_strings():
    rng = np.random.default_rng(7)
    m = backoff_machine(rng, V=3, order=3, normalised=True, p_final=0.5)
    total = 0.0
    for L in range(0, 12):
        seqs = list(itertools.product(range(1, 4), repeat=L))
        ptr = np.arange(len(seqs) + 1) * L
        labels = np.array(seqs, dtype=np.int32).ravel()
        total += np.exp(-score_sequences(m, ptr, labels).weight).sum()
    z = math.exp(-total_weight(m))
    assert z == pytest.approx(1.0, abs=1e-9)
    # strings longer than 11 carry at most 0.5**12 of the mass (every history stops with 0.5)
    assert z - 0.5**12 - 1e-9 <= total <= z + 1e-9


def test_expectations_and_posteriors_follow_failure_semantics():
    rng = np.random.default_rng(3)
    m = backoff_machine(rng, V=4, order=3)
    e = phi_expand(m)
    # expected length: every non-phi arc counts one word
    words = (m.ilabel != PHI).astype(float)
    assert expectation(m, words)[0] == pytest.approx(expectation(e, np.ones(e.num_arcs))[0], rel=1e-9)
    # expected number of uses of each (state, label) event agrees with the expansion's
    fb = forward_backward(m)
    fe = forward_backward(e)
    label_mass = np.bincount(m.ilabel[m.ilabel != PHI], fb.posteriors[m.ilabel != PHI])
    label_mass_e = np.bincount(e.ilabel, fe.posteriors, minlength=label_mass.size)
    assert np.allclose(label_mass, label_mass_e[:label_mass.size], rtol=1e-9, atol=1e-12)
    # every posterior is a real (non-negative) expected count
    assert fb.posteriors.min() > -1e-12
    assert fb.final_posteriors.sum() == pytest.approx(1.0, abs=1e-9)


def _top_strings_chi2_sf(m, strings, floor=-math.inf):
    """The chi-square p-value of the 40 most frequent of ``strings`` (label tuples), plus "other"
    (its expected mass at least ``floor``), against their exact probabilities under ``m``."""
    counts = {}
    for k in strings:
        counts[k] = counts.get(k, 0) + 1
    top = sorted(counts, key=counts.get, reverse=True)[:40]
    ptr = np.concatenate([[0], np.cumsum([len(k) for k in top])])
    lab = np.array([x for k in top for x in k], dtype=np.int32)
    p = np.exp(-score_sequences(m, ptr, lab).weight)
    obs = np.array([counts[k] for k in top] + [len(strings) - sum(counts[k] for k in top)], float)
    exp_ = np.concatenate([p, [max(1 - p.sum(), floor)]]) * len(strings)
    stat = float(((obs - exp_) ** 2 / exp_).sum())
    return chi2_sf(stat, len(obs) - 1)


@pytest.mark.parametrize("normalised,threads", [(False, 1), (True, 1), (True, 2)])
def test_sampling_reproduces_string_probabilities(normalised, threads):
    # normalised=True skips the backward solve (the machine is its own process)
    rng = np.random.default_rng(11)
    m = backoff_machine(rng, V=3, order=3, normalised=True)
    S = sample_paths(m, 60000, seed=5, normalised=normalised, threads=threads)
    strings = [tuple(int(x) for x in s) for s in S.label_sequences(m)]
    assert _top_strings_chi2_sf(m, strings) > 1e-3


def test_sampling_catches_a_wrong_distribution():
    # the same test must fail when the sampler is fed the phi-as-epsilon machine
    # (backoff weights are the leftover mass here, so that machine is proper)
    rng = np.random.default_rng(11)
    m = backoff_machine(rng, V=3, order=3, normalised=False)
    eps = m.replace(ilabel=np.where(m.ilabel == PHI, 0, m.ilabel))  # phi treated as epsilon
    S = sample_paths(eps, 60000, seed=5)
    strings = [tuple(int(x) for x in s if x != 0) for s in S.label_sequences(eps)]
    assert _top_strings_chi2_sf(m, strings, floor=1e-12) < 1e-6


def test_epsilon_approximation_double_counts():
    # backoff weight = leftover mass: with phi as epsilon every state's events
    # sum to 1 (total 1); with failure semantics the shadowed labels are lost
    rng = np.random.default_rng(2)
    m = backoff_machine(rng, V=4, order=3, normalised=False)
    exact = total_weight(m)
    approx = total_weight(m, phi="epsilon")
    assert approx == pytest.approx(0.0, abs=1e-9)
    assert exact > approx + 1e-3      # less mass than the epsilon version, which counts paths twice


def test_phi_errors():
    two = Machine.from_arcs(3, 0, {2: 0.0}, [0, 0, 1], [1, 2, 2], [PHI, PHI, 1], weight=[0.1, 0.2, 0.0])
    with pytest.raises(MachineError, match="state 0 has more than one phi"):
        total_weight(two)
    cyc = Machine.from_arcs(2, 0, {1: 0.0}, [0, 1, 0], [1, 0, 1], [PHI, PHI, 1], weight=[0.1, 0.1, 0.0])
    with pytest.raises(MachineError, match="form a cycle"):
        total_weight(cyc)
    ok = Machine.from_arcs(2, 0, {0: 0.0}, [1], [0], [PHI], weight=[0.1])
    with pytest.raises(SemiringError, match="phi_expand"):
        shortest_distance(ok, "tropical")


def test_expectation_on_a_real_backoff_lm_matches_the_dense_expansion():
    # once diverged: Aitken's step overshot on the second components (k * r^k tails)
    from fsmlearn.algo import expectation
    m, e, alpha, beta = _lm_and_dense([])
    v = (m.ilabel != PHI).astype(float)
    length = (alpha[e.arc_src] * np.exp(-e.weight) * beta[e.dst]).sum() / beta[e.start]
    assert expectation(m, v)[0] == pytest.approx(length, rel=1e-9)



def _lm_and_dense(extra):
    """A 3-gram LM of 25 WSJ-small sentences plus ``extra`` ones, its phi-free
    expansion, and the expansion's dense forward and backward values."""
    from fsmlearn.algo import phi_expand
    from fsmlearn.data import iter_sentences
    from fsmlearn.lm.counts import count_ngrams
    from fsmlearn.lm.estimate import estimate
    from fsmlearn.lm.model import compile_lm
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:25] + extra
    m = compile_lm(estimate(count_ngrams(sents, 3), discount_fallback=(0.5, 1.0, 1.5))).machine
    e = phi_expand(m)
    N = e.num_states
    W = np.zeros((N, N))
    np.add.at(W, (e.arc_src, e.dst), np.exp(-e.weight))
    beta = np.linalg.solve(np.eye(N) - W, np.exp(-e.final))
    b = np.zeros(N)
    b[e.start] = 1
    alpha = np.linalg.solve(np.eye(N) - W.T, b)
    return m, e, alpha, beta


def _check_against_dense(m, alpha, beta, max_sweeps, rtol):
    """Forward and backward values within ``max_sweeps`` against the dense ones;
    returns the two SolveInfos.  The expansion keeps the machine's states first;
    forward values of backoff states also count the flow through phi arcs, so
    those are not compared."""
    from fsmlearn.algo.shortest import solve_values
    plain = np.ones(m.num_states, bool)
    plain[m.dst[m.ilabel == PHI]] = False
    infos = []
    for reverse, want, sel in ((False, alpha, plain), (True, beta, np.ones(m.num_states, bool))):
        _, V, info, _ = solve_values(m, "real", reverse=reverse, tol=1e-12, max_sweeps=max_sweeps)
        got = V[:, 0] * np.exp2(V[:, 1]) if V.shape[1] > 1 else V[:, 0]
        assert info.sweeps < max_sweeps
        assert np.allclose(got[:m.num_states][sel], want[:m.num_states][sel], rtol=rtol, atol=0)
        infos.append(info)
    return infos


def test_heavy_self_loops_are_solved_exactly():
    """A backoff LM whose text has a run of 3,000 '/' tokens: the state '/ /' keeps
    '/' with probability ~0.999.  Iterating that loop would need ~20,000 sweeps;
    the phi solver applies own self-loops exactly, so 300 sweeps are plenty in both
    directions, and the expectation semiring agrees too, against the dense expansion."""
    from fsmlearn.algo import expectation
    m, e, alpha, beta = _lm_and_dense([["/"] * 3000])
    src = np.repeat(np.arange(m.num_states), np.diff(m.src_start))
    assert np.exp(-m.weight[src == m.dst]).max() > 0.998
    _check_against_dense(m, alpha, beta, 300, 1e-8)
    v = (m.ilabel != PHI).astype(float)
    length = (alpha[e.arc_src] * np.exp(-e.weight) * beta[e.dst]).sum() / beta[e.start]
    # the expectation semiring has no extrapolation (k r^k tails): more sweeps, still far
    # fewer than the ~10^5 the loop would need if iterated
    assert expectation(m, v, max_sweeps=3000)[0] == pytest.approx(length, rel=1e-9)


def test_slow_cycles_switch_to_gmres_and_agree_with_the_dense_expansion():
    """Runs of '= -' and 'a b c' make 2- and 3-cycles that keep their mass with
    probability ~0.999 (Jacobi would need thousands of sweeps): plain phi systems
    switch to GMRES on the fixed-point map after a few sweeps, and the result is
    the dense solution."""
    m, _, alpha, beta = _lm_and_dense([["=", "-"] * 1500, ["a", "b", "c"] * 800])
    infos = _check_against_dense(m, alpha, beta, 1000, 1e-9)
    assert all(info.krylov > 0 for info in infos)

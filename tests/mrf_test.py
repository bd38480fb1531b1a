"""The MRF language model (fsmlearn.mrf): the cyclic model by the engine against brute force,
the lifted bound against the exact log-partition, star BP against brute force, gradients
against finite differences, Algorithm 1 and Algorithm 2 at toy scale."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError, FsmError, ModelError
from fsmlearn.mrf import (SEP, MRFModel, TightenState, collect_moments, conditional_log_likelihood,
                          corpus_sequence, cycle_machine, exact_log_partition, exact_moments, lifted_bound,
                          star_bp, tighten, train_exact, train_lifted)
from fsmlearn.mrf.exact import CycleStructure, separator_mask
from fsmlearn.mrf.lifted import star_potentials


def all_sequences(C, N, allowed=None):
    ys = np.array(list(itertools.product(range(C), repeat=N)))
    if allowed is not None:
        ys = ys[np.all(np.asarray(allowed)[np.arange(N), ys], axis=1)]
    return ys


def brute_scores(model, ys):
    s = model.theta0[ys].sum(axis=1)
    for l in range(1, model.K + 1):
        s = s + model.pairwise(l)[ys, np.roll(ys, -l, axis=1)].sum(axis=1)
    return s


def logsumexp(s):
    m = s.max()
    return m + np.log(np.exp(s - m).sum())


def random_model(rng, C, K, rank=None, scale=1.0):
    if rank is None:
        return MRFModel(rng.normal(0, scale, C), pair=rng.normal(0, scale, (K, C, C)))
    return MRFModel(rng.normal(0, scale, C), U=rng.normal(0, scale, (C, rank)), W=rng.normal(0, scale, (K, C, rank)))


CASES = [(2, 1, 4), (3, 1, 6), (2, 2, 6), (3, 2, 6), (2, 3, 8)]


# ----------------------------------------------------------------- the engine's cycle sum
@pytest.mark.parametrize("C, K, N", CASES + [(3, 1, 5), (2, 2, 5)])
def test_engine_log_partition_is_the_brute_force_cycle_sum(C, K, N):
    rng = np.random.default_rng(C * 100 + K * 10 + N)
    for rank in (None, 2):
        m = random_model(rng, C, K, rank)
        assert exact_log_partition(m, N) == pytest.approx(logsumexp(brute_scores(m, all_sequences(C, N))), abs=1e-9)


def test_engine_log_partition_with_allowed_symbols_and_expected_moments():
    rng = np.random.default_rng(5)
    C, K, N = 3, 2, 6
    m = random_model(rng, C, K)
    allowed = rng.random((N, C)) < 0.7
    allowed[:, 0] = True
    ys = all_sequences(C, N, allowed)
    s = brute_scores(m, ys)
    assert exact_log_partition(m, N, allowed) == pytest.approx(logsumexp(s), abs=1e-9)
    p = np.exp(s - logsumexp(s))
    mu0, mup = exact_moments(m, N, allowed)
    want0 = np.zeros(C)
    for y, w in zip(ys, p):
        np.add.at(want0, y, w / N)
    np.testing.assert_allclose(mu0, want0, atol=1e-10)
    for l in range(1, K + 1):
        want = np.zeros((C, C))
        for y, w in zip(ys, p):
            np.add.at(want, (y, np.roll(y, -l)), w / N)
        np.testing.assert_allclose(mup[l - 1], want, atol=1e-10)


def test_cycle_machine_is_an_engine_machine_and_rejects_short_cycles():
    m = random_model(np.random.default_rng(0), 2, 2)
    mach = cycle_machine(m, 6)
    assert mach.semiring == "log" and mach.num_arcs > 0
    with pytest.raises(ArgumentError):
        CycleStructure(2, 2, 3)
    with pytest.raises(ArgumentError):
        CycleStructure(50, 3, 100)             # too large to unroll


# --------------------------------------------------------------------------- star BP
def brute_star(pot, delta):
    """log Z and marginals of the star of Figure 4 by enumerating its C^(K+1) states."""
    K, C = pot.K, pot.C
    E = [np.log(pot.E[l].astype(np.float64)) + pot.shift[l] for l in range(K)]
    ys = np.array(list(itertools.product(range(C), repeat=K + 1)))
    s = (pot.theta0 - delta.sum(axis=0))[ys[:, 0]]
    for l in range(K):
        s = s + (pot.theta0 + delta[l])[ys[:, l + 1]] + E[l][ys[:, 0], ys[:, l + 1]]
    lz = logsumexp(s)
    p = np.exp(s - lz)
    mu = np.stack([np.bincount(ys[:, j], p, minlength=C) for j in range(K + 1)])
    edges = []
    for l in range(K):
        e = np.zeros((C, C))
        np.add.at(e, (ys[:, 0], ys[:, l + 1]), p)
        edges.append(e)
    return lz, mu, edges


@pytest.mark.parametrize("C, K", [(2, 1), (3, 2), (4, 2), (2, 3)])
def test_star_bp_marginals_equal_brute_force(C, K):
    rng = np.random.default_rng(C + 7 * K)
    pot = star_potentials(random_model(rng, C, K, scale=2.0))
    for _ in range(3):
        delta = rng.normal(0, 3, (K, C))
        r = star_bp(pot, delta)
        lz, mu, edges = brute_star(pot, delta)
        assert r.log_partition == pytest.approx(lz, abs=1e-10)
        np.testing.assert_allclose(r.mu, mu, atol=1e-12)
        for l in range(1, K + 1):
            np.testing.assert_allclose(r.edge_marginal(pot, l), edges[l - 1], atol=1e-12)


def test_star_bp_stays_finite_and_exact_for_extreme_potentials():
    """Potentials and duals hundreds of nats apart (a wild line-search trial) underflow nothing
    that matters: logs for the vectors, scaled products for the matrices."""
    rng = np.random.default_rng(21)
    C, K = 3, 2
    pot = star_potentials(random_model(rng, C, K, scale=60.0))
    delta = rng.normal(0, 400, (K, C))
    r = star_bp(pot, delta)
    lz, mu, _ = brute_star(pot, delta)
    assert r.log_partition == pytest.approx(lz, rel=1e-12)
    np.testing.assert_allclose(r.mu, mu, atol=1e-12)
    # float32 potentials lose edge entries more than ~87 nats below their maximum: they hold
    # for potentials and duals tens of nats apart
    m = random_model(rng, 40, K, rank=4, scale=2.0)
    delta = rng.normal(0, 10, (K, 40))
    r32, r64 = star_bp(star_potentials(m, np.float32), delta), star_bp(star_potentials(m), delta)
    assert np.isfinite(r32.a).all() and r32.log_partition == pytest.approx(r64.log_partition, rel=1e-6)
    np.testing.assert_allclose(r32.mu, r64.mu, atol=1e-5)


def test_float32_potentials_agree_with_float64():
    rng = np.random.default_rng(3)
    m = random_model(rng, 6, 2, rank=3)
    delta = rng.normal(0, 1, (2, 6))
    a = star_bp(star_potentials(m, np.float64), delta)
    b = star_bp(star_potentials(m, np.float32), delta)
    assert b.log_partition == pytest.approx(a.log_partition, abs=1e-5)
    np.testing.assert_allclose(b.mu, a.mu, atol=1e-6)
    with pytest.raises(ArgumentError):
        star_potentials(m, np.int32)


# -------------------------------------------------------------------- the lifted bound
@pytest.mark.parametrize("C, K, N", CASES)
def test_bound_is_above_the_exact_log_partition_for_every_delta(C, K, N):
    rng = np.random.default_rng(11 * C + K + N)
    x = rng.integers(0, C, N)
    for rank in (None, 1):
        for scale in (0.3, 2.0):
            m = random_model(rng, C, K, rank, scale)
            exact = exact_log_partition(m, N)
            mom = collect_moments(x, C, K)
            deltas = [np.zeros((K, C))] + [rng.normal(0, s, (K, C)) for s in (0.1, 1.0, 5.0, 30.0)]
            for d in deltas:
                lb = lifted_bound(m, mom, d, gradient=False)
                assert lb.log_partition >= exact - 1e-9
                # and so the per-position bound is below the exact log-likelihood
                assert lb.value * N <= m.score(x) - exact + 1e-9
            st = TightenState.zeros(K, C)
            best = tighten(star_potentials(m), st, max_iter=300, tol=1e-9, method="lbfgs")
            assert N * best.log_partition / (K + 1) >= exact - 1e-9


def test_bound_is_exact_without_pairwise_potentials():
    """With theta^l = 0 the model is independent and the tightened bound is A exactly."""
    rng = np.random.default_rng(2)
    C, K, N = 3, 2, 6
    m = MRFModel(rng.normal(size=C), pair=np.zeros((K, C, C)))
    mom = collect_moments(rng.integers(0, C, N), C, K)
    best = tighten(star_potentials(m), TightenState.zeros(K, C), tol=1e-10, max_iter=500)
    assert N * best.log_partition / (K + 1) == pytest.approx(exact_log_partition(m, N), abs=1e-8)
    assert lifted_bound(m, mom, best.delta).log_partition == pytest.approx(N * best.log_partition / (K + 1))


def _fd(f, v, eps=1e-6):
    g = np.empty_like(v)
    for i in range(v.size):
        e = np.zeros_like(v)
        e[i] = eps
        g[i] = (f(v + e) - f(v - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("rank", [None, 2])
def test_gradient_of_the_bound_equals_finite_differences(rank):
    rng = np.random.default_rng(4 if rank else 5)
    C, K, N = 3, 2, 9
    m = random_model(rng, C, K, rank, 0.7)
    mom = collect_moments(rng.integers(0, C, N), C, K)
    delta = rng.normal(0, 0.5, (K, C))
    lb = lifted_bound(m, mom, delta)
    fd = _fd(lambda v: lifted_bound(m.with_vector(v), mom, delta, gradient=False).value, m.to_vector())
    np.testing.assert_allclose(lb.grad, fd, atol=1e-7)
    # the dual gradient of eq. 16: d logZ_star / d delta^l = mu^l - mu^0
    pot = star_potentials(m)
    fdd = _fd(lambda d: star_bp(pot, d.reshape(K, C)).log_partition, delta.ravel())
    np.testing.assert_allclose((lb.star.mu[1:] - lb.star.mu[0]).ravel(), fdd, atol=1e-7)


def test_gradient_at_the_tightened_delta_is_the_gradient_of_the_tightened_bound():
    """Danskin: at delta*(theta) the fixed-delta gradient (eq. 18) is that of max_delta L."""
    rng = np.random.default_rng(8)
    C, K, N = 3, 1, 8
    m = random_model(rng, C, K, None, 0.8)
    mom = collect_moments(rng.integers(0, C, N), C, K)

    def tight(v):
        mm = m.with_vector(v)
        pot = star_potentials(mm)
        r = tighten(pot, TightenState.zeros(K, C), max_iter=500, tol=1e-12, method="lbfgs")
        return lifted_bound(mm, mom, pot=pot, star=r)

    g = tight(m.to_vector()).grad
    fd = _fd(lambda v: tight(v).value, m.to_vector(), eps=1e-5)
    np.testing.assert_allclose(g, fd, atol=1e-5)


# --------------------------------------------------------------------- Algorithm 1
@pytest.mark.parametrize("method", ["subgradient", "lbfgs"])
def test_tighten_decreases_the_dual_and_warm_starts(method):
    rng = np.random.default_rng(9)
    C, K = 4, 2
    m = random_model(rng, C, K, scale=1.0)
    pot = star_potentials(m)
    st = TightenState.zeros(K, C)
    start = star_bp(pot, st.delta).log_partition
    r = tighten(pot, st, max_iter=400, tol=1e-6, method=method)
    assert r.log_partition < start and r.gap <= 1e-6
    np.testing.assert_array_equal(st.delta, r.delta)
    used = st.iterations
    m2 = m.with_vector(m.to_vector() + 1e-3 * rng.normal(size=m.num_params))
    r2 = tighten(star_potentials(m2), st, max_iter=400, tol=1e-6, method=method)
    cold = TightenState.zeros(K, C)
    tighten(star_potentials(m2), cold, max_iter=400, tol=1e-6, method=method)
    assert r2.gap <= 1e-6 and st.iterations - used < cold.iterations
    with pytest.raises(ArgumentError):
        tighten(pot, st, method="newton")


# ---------------------------------------------------------------- corpus and moments
def test_corpus_sequence_pads_to_a_multiple_of_k_plus_one():
    index = {SEP: 0, "a": 1, "b": 2, "<unk>": 3}
    x = corpus_sequence([["a", "b"], ["b", "zz", "a"]], index, K=2, unk="<unk>")
    assert x.tolist() == [0, 0, 1, 2, 0, 0, 2, 3, 1]        # the cycle closes with the first K <S>
    assert corpus_sequence([["a", "b"]], index, K=2).tolist() == [0, 0, 1, 2, 0, 0]   # one filler
    with pytest.raises(ArgumentError, match="sentence 1, token 1: 'zz'"):
        corpus_sequence([["a"], ["b", "zz"]], index, K=1)
    with pytest.raises(ArgumentError):
        corpus_sequence([["a"]], {"a": 0}, K=1)
    with pytest.raises(ArgumentError):
        corpus_sequence([["a"]], index, K=0)


def test_moments_give_the_score_per_position():
    rng = np.random.default_rng(1)
    C, K = 5, 3
    x = rng.integers(0, C, 40)
    mom = collect_moments(x, C, K)
    assert mom.N == 40 and mom.unary.sum() == 40 and all(p.sum() == 40 for p in mom.pairs)
    for rank in (None, 2):
        m = random_model(rng, C, K, rank)
        assert mom.dot(m) == pytest.approx(m.score(x) / 40)
    with pytest.raises(ArgumentError):
        collect_moments([0, 1, 7], 3, 1)
    with pytest.raises(ArgumentError):
        collect_moments([0, 1, 2, 0], 3, 2)


def test_model_validation_and_parameter_vector():
    m = MRFModel.init(4, 2, rank=3, seed=1)
    assert m.rank == 3 and m.K == 2 and m.num_params == 4 + 4 * 3 * 3
    v = m.to_vector()
    np.testing.assert_array_equal(m.with_vector(v).to_vector(), v)
    with pytest.raises(ModelError, match=r"theta0\[2\]"):
        MRFModel(np.array([0.0, 1.0, np.nan]), pair=np.zeros((1, 3, 3)))
    with pytest.raises(ModelError):
        MRFModel(np.zeros(3), pair=np.zeros((1, 3, 2)))
    with pytest.raises(ModelError):
        MRFModel(np.zeros(3))
    with pytest.raises(FsmError):
        MRFModel.init(3, 0)
    with pytest.raises(ArgumentError):
        m.with_vector(np.zeros(3))


# ------------------------------------------------------------------ training
def test_conditional_likelihood_and_its_gradient():
    rng = np.random.default_rng(6)
    C, K = 3, 1
    x = np.array([0, 1, 2, 1, 0, 2, 2, 1])           # separators (0) at positions 0 and 4
    for rank in (None, 2):
        m = random_model(rng, C, K, rank, 0.5)
        allowed = separator_mask(x, C, 0)
        ys = all_sequences(C, x.size, allowed)
        want = m.score(x) - logsumexp(brute_scores(m, ys))
        ll, g = conditional_log_likelihood(m, x, 0, gradient=True)
        assert ll == pytest.approx(want, abs=1e-9)
        fd = _fd(lambda v: conditional_log_likelihood(m.with_vector(v), x, 0), m.to_vector())
        np.testing.assert_allclose(g, fd, atol=1e-6)


def test_lifted_training_raises_the_bound_and_stays_below_the_exact_likelihood():
    rng = np.random.default_rng(12)
    C, K = 3, 1
    x = np.array([0] + list(rng.integers(1, C, 7)))
    mom = collect_moments(x, C, K)
    seen = []
    res = train_lifted(MRFModel.init(C, K), mom, max_iter=15, tighten_iter=300, tighten_tol=1e-7,
                       on_iteration=lambda m, e: seen.append(e["bound"]) and False)
    assert len(res.history) == len(seen) >= 3
    assert res.history[-1]["bound"] > res.history[0]["bound"]
    m = res.model
    exact = (m.score(x) - exact_log_partition(m, x.size)) / x.size
    assert res.history[-1]["bound"] <= exact + 1e-9
    assert conditional_log_likelihood(m, x, 0) / x.size >= exact - 1e-12
    ex = train_exact(MRFModel.init(C, K), x, 0, max_iter=30)
    assert ex.history[-1]["log_likelihood"] > ex.history[0]["log_likelihood"]
    stop = train_lifted(MRFModel.init(C, K, rank=2), mom, max_iter=20, on_iteration=lambda m, e: True)
    assert len(stop.history) == 1 and stop.message == "stopped by on_iteration"


def test_the_bound_sees_the_corpus_only_through_its_moments():
    """A corpus repeated twice has the same moments per position, so the same per-position bound
    and gradient: a training step costs the same whatever the corpus length."""
    rng = np.random.default_rng(30)
    C, K = 4, 2
    x = rng.integers(0, C, 30)
    m = random_model(rng, C, K, rank=2)
    d = rng.normal(0, 0.5, (K, C))
    a = lifted_bound(m, collect_moments(x, C, K), d)
    b = lifted_bound(m, collect_moments(np.concatenate([x, x]), C, K), d)
    assert a.value == pytest.approx(b.value, abs=1e-12) and b.log_partition == pytest.approx(2 * a.log_partition)
    np.testing.assert_allclose(a.grad, b.grad, atol=1e-12)

"""Layer 3: forward and backward values against OpenFst and brute force."""

from __future__ import annotations

import math

import numpy as np
import pynini
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import random_machine, tiny_machines
from fsmlearn import Machine
from fsmlearn.algo import backward, forward, shortest_distance, total_weight
from fsmlearn.algo.schedule import graph_is_forward_ordered
from fsmlearn.errors import DivergenceError, NotConvergedError, SemiringError
from fsmlearn.semiring import Expectation, Log, Real, Tropical
from fsmlearn.testing import enumerate_paths, openfst_distances, pynini_distances


def rel_err(a, b):
    fin = np.isfinite(b)
    assert np.array_equal(fin, np.isfinite(a)), "finite entries differ"
    if not fin.any():
        return 0.0
    return float(np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin]))))


@pytest.mark.parametrize("cyclic", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_log64_agrees_with_openfst_to_1e9(rng, cyclic, reverse):
    for n, E in ((40, 160), (300, 2400), (2000, 20000)):
        m = random_machine(rng, n, E, cyclic=cyclic)
        f = m.to_pynini("log64")
        ours = shortest_distance(m, "log", reverse=reverse)
        assert rel_err(ours, openfst_distances(f, reverse, delta=1e-12)) < 1e-9
        # pynini.shortestdistance itself only returns 9 significant digits
        assert rel_err(ours, pynini_distances(f, reverse)) < 1e-8


@pytest.mark.parametrize("cyclic", [False, True])
def test_log_float32_agrees_within_float32_precision(rng, cyclic):
    m = random_machine(rng, 500, 4000, cyclic=cyclic, arc_type="log")
    f = m.to_pynini("log")
    m32 = Machine.from_pynini(f)   # the float32 weights, exactly
    for reverse in (False, True):
        ours = shortest_distance(m32, "log", reverse=reverse)
        ref = openfst_distances(f, reverse, delta=1e-6)
        fin = np.isfinite(ref)
        # OpenFst accumulates in float32 and stops at delta: its values drift
        # (measured in the issue: up to 5e-4 in -ln on 1M-state machines)
        assert np.max(np.abs(ours[fin] - ref[fin])) < 5e-4


@pytest.mark.parametrize("cyclic", [False, True])
def test_tropical_agrees_with_openfst(rng, cyclic):
    m = random_machine(rng, 300, 2000, cyclic=cyclic, semiring="tropical", arc_type="log64")
    for reverse in (False, True):
        ours = shortest_distance(m, "tropical", reverse=reverse)
        g = m.to_pynini("log64")
        # OpenFst's tropical distances on the same float64 weights: a log64 copy
        # under the tropical semiring is not available in pynini, so compare
        # with the standard (float32) machine at float32 precision
        ref = pynini_distances(m.to_pynini("standard"), reverse)
        fin = np.isfinite(ref)
        assert np.array_equal(fin, np.isfinite(ours))
        assert np.max(np.abs(ours[fin] - ref[fin]) / np.maximum(1, np.abs(ref[fin]))) < 1e-5
        del g


def brute_force(m, semiring, values=None, min_weight=1e-12, limit=2_000_000, pruned=None):
    """Totals by enumerating paths (fails past ``limit`` paths).  The paths' weights are
    summed exactly (``math.fsum``), so what rounding is left is each path's own (its
    product, and for ``r`` the sum of its values):
    a naive running sum of 10**5 paths can be off by more than 1e-12 of the total, and the
    tests' bounds below are tight (a machine can reach its mass bound exactly)."""
    w, f = m.neglog_weights()
    best = math.inf
    zs = []
    rs = []
    count = 0
    for arcs, p in enumerate_paths(m, max_len=200, min_weight=min_weight, pruned=pruned):
        count += 1
        assert count <= limit, "too many paths to enumerate"
        if semiring == "tropical":
            best = min(best, sum(w[a] for a in arcs) + f[m.dst[arcs[-1]] if arcs else m.start])
        zs.append(p)
        if values is not None:
            rs.append(p * sum(values[a] for a in arcs))
    z = math.fsum(zs)
    r = math.fsum(rs)
    if semiring == "tropical":
        return best
    if semiring == "real":
        return z
    if semiring == "log":
        return -math.log(z) if z > 0 else math.inf
    return z, r


@given(tiny_machines(cyclic=False))
def test_acyclic_totals_equal_enumeration_in_every_semiring(m):
    for sr in ("real", "log", "tropical"):
        ref = brute_force(m, sr, min_weight=0.0)
        got = total_weight(m, sr)
        if math.isinf(ref):
            assert got == ref
        else:
            assert math.isclose(got, ref, rel_tol=1e-12, abs_tol=1e-300 if sr == "real" else 1e-12)
    v = np.arange(m.num_arcs, dtype=float) % 3 - 0.5
    z, r = brute_force(m, "expectation", v, min_weight=0.0)
    got = total_weight(m, "expectation", arc_values=v)
    if z > 0:
        assert math.isclose(got[0], -math.log(z), rel_tol=1e-12, abs_tol=1e-12)
        assert math.isclose(got[1], r / z, rel_tol=1e-10, abs_tol=1e-12)


@given(tiny_machines(cyclic=True))
def test_cyclic_totals_equal_enumeration_in_every_semiring(m):
    # Enumeration gives a lower bound; what it leaves out is at most the
    # weight of the pruned prefixes times the largest continuation mass, which
    # is <= 0.9 / (1 - 0.5) = 1.8 here (final weights <= 0.9, <= 0.5 of arc
    # mass per state).
    pruned = [0.0]
    z = brute_force(m, "real", min_weight=1e-9, pruned=pruned)
    bound = 1.8 * pruned[0]
    for sr in ("real", "log"):
        got = total_weight(m, sr)
        zz = got if sr == "real" else math.exp(-got)
        assert z * (1 - 1e-12) <= zz <= z + bound + 1e-12
    assert total_weight(m, "tropical") == pytest.approx(brute_force(m, "tropical", min_weight=1e-9),
                                                        rel=1e-12, abs=1e-12)
    v = (np.arange(m.num_arcs, dtype=float) % 3) - 0.5
    z2, r = brute_force(m, "expectation", v, min_weight=1e-9)
    got = total_weight(m, "expectation", arc_values=v)
    if z2 > 1e-3:
        # each pruned prefix carries |sum v| <= 0.5 * (its length <= 40) plus
        # an expected remaining |sum v| <= 0.5 * 2 / (1 - 0.5)
        assert abs(got[1] * math.exp(-got[0]) - r) <= bound * 22 + 1e-9


def test_semiring_instances_and_names_agree(rng):
    m = random_machine(rng, 50, 300)
    for name, inst in (("log", Log()), ("real", Real()), ("tropical", Tropical())):
        assert np.array_equal(shortest_distance(m, name), shortest_distance(m, inst))
    real = shortest_distance(m, "real")
    assert np.allclose(-np.log(real), shortest_distance(m, "log"), rtol=0, atol=1e-12)
    v = rng.normal(size=(m.num_arcs, 2))
    e = shortest_distance(m, Expectation(2), arc_values=v)
    assert e.shape == (50, 3) and np.allclose(e[:, 0], shortest_distance(m, "log"), atol=1e-12)


@pytest.mark.parametrize("semiring", ["log", "real"])
@pytest.mark.parametrize("reverse", [False, True])
def test_topologically_numbered_pass_equals_the_scheduled_solve(rng, semiring, reverse):
    # a machine whose arcs all go up in state number takes one fused pass over
    # its CSR arcs; relabelling its states makes the same machine go through
    # Tarjan's schedule instead.  Zero-weight arcs, states the start does not
    # reach and states that reach no final state included.
    n, E = 400, 3000
    m = random_machine(rng, n, E, cyclic=False)
    w = m.weight.copy()
    w[rng.random(w.size) < 0.1] = np.inf
    fin = m.final.copy()
    fin[rng.random(n) < 0.3] = np.inf
    fin[n - 30:] = np.inf          # the last states reach no final state
    src = m.arc_src.astype(np.int64)
    m = Machine.from_arcs(n, 0, fin, src, m.dst, m.ilabel, weight=w)
    assert graph_is_forward_ordered(m.arc_src, m.dst)
    perm = rng.permutation(n)
    perm[perm == 0], perm[0] = perm[0], 0   # keep the start state
    p = Machine.from_arcs(n, 0, dict(zip(perm.tolist(), fin.tolist())), perm[src], perm[m.dst], m.ilabel, weight=w)
    assert not graph_is_forward_ordered(p.arc_src, p.dst)
    a = shortest_distance(m, semiring, reverse=reverse)
    b = shortest_distance(p, semiring, reverse=reverse)[perm]
    if semiring == "real":
        with np.errstate(divide="ignore"):
            a, b = -np.log(a), -np.log(b)
    assert np.isinf(a).sum() > 0
    assert rel_err(a, b) < 1e-12
    assert rel_err(a, openfst_distances(m.to_pynini("log64"), reverse, delta=1e-12)) < 1e-9


@pytest.mark.parametrize("n", [0, 1, (1 << 16) - 1, 1 << 16, 3 * (1 << 16) + 5])
def test_the_threaded_gather_is_fancy_indexing(n):
    from fsmlearn.algo.solve_linear import gather_par
    rng = np.random.default_rng(n)
    a = rng.standard_normal(1000)
    a.setflags(write=False)
    for idx in (rng.integers(0, 1000, n), rng.integers(0, 1000, n).astype(np.int32)):
        got = gather_par(a, idx)
        assert got.dtype == a.dtype and np.array_equal(got, a[idx])


@pytest.mark.parametrize("E", [0, 5, 16 * 2048, 16 * 2048 * 3 + 77])
def test_the_threaded_weight_conversion_is_the_one_thread_one(E):
    # tasks of 16 windows: the same rows bit for bit, at every boundary and for +inf
    from fsmlearn.semiring.ops import neglog_to_scaled, neglog_to_scaled_par
    rng = np.random.default_rng(E)
    w = rng.random(E) * 1400 - 700
    w[::97] = np.inf
    for sign in (1.0, -1.0):
        want = np.full((E, 3), 7.0)
        got = np.full((E, 3), 7.0)
        neglog_to_scaled(w, want, 0, 2, sign)
        neglog_to_scaled_par(w, got, 0, 2, sign)
        assert np.array_equal(got, want)                 # the middle column untouched in both


def test_the_log_semirings_arc_rows_of_a_long_machine_are_the_short_ones(monkeypatch):
    import fsmlearn.semiring as S
    rng = np.random.default_rng(3)
    w = rng.random(70_000) * 40 - 5
    sr = S.get_semiring("log")
    want = sr.arc_rows(w, "log")
    monkeypatch.setattr(S, "PAR_ROWS", 1000)              # the threaded conversion from 1,000 weights
    calls = []
    par = S.neglog_to_scaled_par
    monkeypatch.setattr(S, "neglog_to_scaled_par", lambda *a: calls.append(1) or par(*a))
    assert np.array_equal(sr.arc_rows(w, "log"), want) and calls == [1]


@pytest.mark.parametrize("E", [0, 5, 16 * 2048, 16 * 2048 * 3 + 77])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_gathered_weight_conversion_is_the_conversion_of_the_gathered_weights(E, dtype):
    # each task gathers windows of NEGLOG_BLOCK weights in their own type: the same rows as
    # converting w[idx], bit for bit, at every boundary and for +inf
    from fsmlearn.semiring.ops import neglog_to_scaled, neglog_to_scaled_at_par
    rng = np.random.default_rng(E + 1)
    w = (rng.random(E + 3000) * 1400 - 700).astype(dtype)
    w[::97] = np.inf
    for idx in (rng.integers(0, w.size, E), rng.permutation(w.size)[:E].astype(np.int32)):
        for sign in (1.0, -1.0):
            want = np.full((E, 3), 7.0)
            got = np.full((E, 3), 7.0)
            neglog_to_scaled(w[idx], want, 0, 2, sign)
            neglog_to_scaled_at_par(w, idx, got, 0, 2, sign)
            assert np.array_equal(got, want)             # the middle column untouched in both


@pytest.mark.parametrize("name", ["log", "real", "expectation"])
@pytest.mark.parametrize("convention", ["log", "real"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_linear_semirings_rows_at_some_arcs_are_the_rows_of_those_arcs(name, convention, dtype, monkeypatch):
    import fsmlearn.semiring as S
    rng = np.random.default_rng(4)
    w = (rng.random(70_000) * 40 - 5 if convention == "log" else rng.random(70_000)).astype(dtype)
    idx = rng.integers(0, w.size, 50_000)
    sr = S.get_semiring(name, np.zeros((1, 2))) if name == "expectation" else S.get_semiring(name)
    want = sr.arc_rows(w[idx], convention)
    assert np.array_equal(sr.arc_rows_at(w, idx, convention), want)
    monkeypatch.setattr(S, "PAR_ROWS", 1000)              # one pass from 1,000 arcs
    calls = []
    at = S.neglog_to_scaled_at_par
    monkeypatch.setattr(S, "neglog_to_scaled_at_par", lambda *a: calls.append(1) or at(*a))
    assert np.array_equal(sr.arc_rows_at(w, idx, convention), want)
    assert calls == ([1] if convention == "log" else [])


def test_weight_conversion_is_exact_to_a_few_ulps():
    # the vectorised -ln -> (p, k) conversion behind every log-semiring solve,
    # against long-double arithmetic: -ln(p 2**k) recovers w to 2e-16 relative,
    # across blocks, for tiny, large and negative weights, and +inf is zero
    from fsmlearn.semiring.ops import EXP_UNSET, NEGLOG_BLOCK, neglog_to_scaled
    rng = np.random.default_rng(5)
    w = np.concatenate([rng.random(3 * NEGLOG_BLOCK + 17) * 30, rng.random(5000) * 1400 - 700,
                        [0.0, 1e-300, -1e-300, 1e-12, np.inf, 745.0, 1e6], np.arange(-20, 20, 1 / 64)])
    out = np.empty((w.size, 3))
    neglog_to_scaled(w, out, 0, 2, -1.0)
    fin = np.isfinite(w)
    assert np.all(out[~fin, 0] == 0.0) and np.all(out[~fin, 2] == EXP_UNSET)
    p = -out[fin, 0].astype(np.longdouble)
    got = -(np.log(p) + out[fin, 2].astype(np.longdouble) * np.log(np.longdouble(2)))
    err = np.abs(got - w[fin].astype(np.longdouble)) / np.maximum(1.0, np.abs(w[fin]))
    assert float(err.max()) < 4e-16
    small = fin & (np.abs(w) < 1)
    assert np.allclose(np.ldexp(out[small, 0], out[small, 2].astype(int)), -np.exp(-w[small]), rtol=1e-15, atol=0)


def test_long_paths_do_not_underflow():
    # a chain of 3000 arcs of weight e^-1: the real semiring value is e^-3000
    n = 3001
    m = Machine.from_arcs(n, 0, {n - 1: 0.0}, np.arange(n - 1), np.arange(1, n), np.ones(n - 1, int),
                          weight=np.ones(n - 1))
    a = forward(m)
    assert a[-1] == pytest.approx(3000.0, abs=1e-9)
    assert total_weight(m) == pytest.approx(3000.0, abs=1e-9)
    # and inside a cycle: close the chain with a back arc of tiny weight
    m2 = Machine.from_arcs(n, 0, {n - 1: 0.0}, np.r_[np.arange(n - 1), n - 1], np.r_[np.arange(1, n), 0],
                           np.ones(n, int), weight=np.r_[np.ones(n - 1), 5.0])
    z = total_weight(m2)
    # geometric series: Z = e^-3000 / (1 - e^-3005)
    assert z == pytest.approx(3000.0 + math.log1p(-math.exp(-3005.0)), abs=1e-9)
    assert np.all(np.isfinite(forward(m2))) and np.all(np.isfinite(backward(m2)))


def _skip_chain(n, back):
    # i -> i+1 and i -> i+2, each of weight e^-1, every state final with e^-1: forward values
    # decay like 0.82^i, so over 4100 states they span e^-825, past float64's range
    src = np.r_[np.arange(n - 1), np.arange(n - 2)]
    dst = np.r_[np.arange(1, n), np.arange(2, n)]
    w = np.ones(src.size)
    if back:   # close it into one cycle with an arc of weight e^-5
        src, dst, w = np.r_[src, n - 1], np.r_[dst, 0], np.r_[w, 5.0]
    return Machine.from_arcs(n, 0, {q: 1.0 for q in range(n)}, src, dst, np.ones(src.size, int), weight=w)


@pytest.mark.parametrize("reverse", [False, True])
def test_values_below_the_float64_range_inside_a_cycle(reverse):
    # Gauss-Seidel's first sweep leaves the tail of such a chain at a few subnormal ulps
    # (rounding keeps them from decaying to 0); rescaling those rows must not overflow
    m = _skip_chain(4100, back=True)
    got = shortest_distance(m, "log", reverse=reverse)
    ref = openfst_distances(m.to_pynini(), reverse=reverse)
    if not reverse:
        assert ref.max() > 800.0
    assert rel_err(got, ref) < 1e-9
    # the expectation semiring's rows (an additive value per arc) take the same path
    v = np.arange(m.num_arcs, dtype=float) % 3
    e_cyc = shortest_distance(m, "expectation", reverse=reverse, arc_values=v)
    assert np.all(np.isfinite(e_cyc)) and rel_err(e_cyc[:, 0], ref) < 1e-9
    if not reverse:
        # forward, the back arc adds e^-830 relative mass: the chain without it (solved by
        # the acyclic pass) agrees to rounding
        a = _skip_chain(4100, back=False)
        e_acyc = shortest_distance(a, "expectation", arc_values=v[:a.num_arcs])
        assert rel_err(e_cyc[:, 0], e_acyc[:, 0]) < 1e-9
        assert np.allclose(e_cyc[:, 1], e_acyc[:, 1], rtol=1e-9, atol=1e-9)


def test_plain_to_scaled_keeps_subnormal_values():
    from fsmlearn.algo.shortest import _plain_to_scaled
    X = np.array([[5e-324], [3e-310], [1.5], [0.0]])
    V = np.empty((4, 2))
    _plain_to_scaled(X, V)
    assert np.all(np.isfinite(V[:3])) and V[3, 0] == 0.0
    back = [math.ldexp(V[i, 0], int(V[i, 1])) for i in range(3)]
    assert back == [5e-324, 3e-310, 1.5]


@pytest.mark.parametrize("off", [1000.0, -1000.0, 2500.0, -2500.0])
def test_a_wildly_wrong_warm_start_still_converges(off):
    # one state's warm value off by e^1000 or more: its arcs' factors under the warm potentials
    # would overflow float64; they are capped and the potentials rebuilt, not reported as divergence
    m = _skip_chain(300, back=True)
    ref = openfst_distances(m.to_pynini())
    init = ref.copy()
    init[150] += off
    assert rel_err(forward(m, init=init), ref) < 1e-9
    v = np.arange(m.num_arcs, dtype=float) % 3
    e_ref = shortest_distance(m, "expectation", arc_values=v)
    e_init = e_ref.copy()
    e_init[150, 0] += off
    got = shortest_distance(m, "expectation", arc_values=v, init=e_init)
    assert rel_err(got[:, 0], ref) < 1e-9 and np.allclose(got[:, 1], e_ref[:, 1], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_warm_start_off_further_along_a_chain_still_converges(reverse):
    # warm values off by e^800 more at each of 100 consecutive states: every arc between
    # them is capped, and plain values along the chain would compound past float64
    m = _skip_chain(300, back=True)
    ref = openfst_distances(m.to_pynini(), reverse=reverse)
    init = ref.copy()
    init[100:200] += np.arange(100) * 800.0
    assert rel_err(shortest_distance(m, "log", reverse=reverse, init=init), ref) < 1e-9
    v = np.arange(m.num_arcs, dtype=float) % 3
    e_ref = shortest_distance(m, "expectation", reverse=reverse, arc_values=v)
    e_init = e_ref.copy()
    e_init[100:200, 0] = init[100:200]
    got = shortest_distance(m, "expectation", reverse=reverse, arc_values=v, init=e_init)
    assert rel_err(got[:, 0], ref) < 1e-9 and np.allclose(got[:, 1], e_ref[:, 1], rtol=1e-9, atol=1e-9)


def test_divergence_raises():
    # a self-loop of weight 1.2 on a reached state
    m = Machine.from_arcs(2, 0, {1: 0.0}, [0, 0], [0, 1], [1, 2], weight=[-math.log(1.2), 0.0])
    with pytest.raises(DivergenceError, match="state 0 has self-loops of total weight >= 1"):
        total_weight(m)
    # a two-state cycle of total weight > 1
    m = Machine.from_arcs(3, 0, {2: 0.0}, [0, 1, 0], [1, 0, 2], [1, 1, 2], weight=[-math.log(1.5), 0.0, 0.0])
    with pytest.raises(DivergenceError, match="diverge"):
        forward(m)
    with pytest.raises(DivergenceError):
        backward(m)
    # a negative cycle in the tropical semiring
    with pytest.raises(DivergenceError, match="negative cycle"):
        shortest_distance(m, "tropical")


def test_divergent_cycle_unreachable_from_start_is_harmless():
    m = Machine.from_arcs(3, 0, {1: 0.0}, [0, 2], [1, 2], [1, 1], weight=[0.0, -math.log(2.0)])
    a = forward(m)
    assert a[2] == math.inf and a[1] == 0.0


def test_not_converged_raises_and_tolerance_is_honoured(rng):
    m = random_machine(rng, 200, 2000, mass=0.999)
    with pytest.raises(NotConvergedError, match="within 3 sweeps"):
        forward(m, max_sweeps=3)
    tight = forward(m, tol=1e-13)
    for tol in (1e-4, 1e-8):
        loose = forward(m, tol=tol)
        assert np.max(np.abs(loose - tight)) < 10 * tol


def test_warm_start_gives_the_same_answer_in_fewer_sweeps(rng):
    m = random_machine(rng, 3000, 30000, mass=0.95)
    a, info = forward(m, return_info=True)
    m2 = m.replace(weight=m.weight + rng.normal(0, 1e-3, m.num_arcs))
    cold, ic = forward(m2, return_info=True)
    warm, iw = forward(m2, init=a, return_info=True)
    assert np.max(np.abs(cold - warm)) < 1e-9
    assert iw.sweeps < ic.sweeps


def test_bad_arguments():
    m = Machine.from_arcs(2, 0, {1: 0.0}, [0], [1], [1], weight=[0.0])
    with pytest.raises(SemiringError, match="unknown semiring"):
        shortest_distance(m, "boolean")
    with pytest.raises(SemiringError, match="arc_values"):
        shortest_distance(m, "expectation")
    with pytest.raises(SemiringError, match="shape"):
        shortest_distance(m, "expectation", arc_values=np.zeros(5))
    with pytest.raises(SemiringError, match="tol"):
        shortest_distance(m, tol=-1)


def test_empty_machine():
    m = Machine(start=-1, final=[], src_start=[0], dst=[], ilabel=[], weight=[])
    assert total_weight(m) == math.inf
    assert forward(m).shape == (0,)


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_gather_is_fancy_indexing(n):
    """The numba gather that permutes weights into a schedule's order is a[idx]."""
    from fsmlearn.algo.solve_linear import gather
    rng = np.random.default_rng(n)
    a = rng.standard_normal(max(n, 1))
    a.setflags(write=False)                          # as a machine's weights are
    for idx in (rng.integers(0, a.shape[0], n), rng.integers(0, a.shape[0], n).astype(np.int32)):
        got = gather(a, idx)
        assert got.dtype == a.dtype and got.flags.writeable and np.array_equal(got, a[idx])

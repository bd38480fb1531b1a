"""The engine over a MachineBatch against the same routines machine by machine.

Every batch result must equal the per-machine result: exactly where the
arithmetic is the same (acyclic machines: one pass in the same order), to the
solver's tolerance on cyclic machines (each machine is solved to the batch's
stopping rule, relative change 1e-11 or less).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import backoff_machine, random_machine, tiny_machines
from fsmlearn import Machine, MachineBatch
from fsmlearn.algo import (arc_posteriors, backward, best_path, entropy, expectation, final_posteriors, forward,
                           forward_backward, sample_paths, total_weight)
from fsmlearn.algo.batch import batch_best_paths
from fsmlearn.errors import ArgumentError, NoAcceptingPathError
from fsmlearn.testing import enumerate_paths

RTOL = 1e-9        # cyclic machines: both sides stop at relative change <= 1e-11, so values and
ATOL = 1e-9        # costs (-ln Z near 0) and posteriors (of order one) differ by about 1e-11 at most


def _close(a, b, rtol=RTOL):
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    both_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    ok = both_inf | np.isclose(a, b, rtol=rtol, atol=ATOL)
    assert ok.all(), (a[~ok][:5], b[~ok][:5])


def _machines(rng, k, cyclic, semiring="log"):
    out = []
    for i in range(k):
        n = int(rng.integers(2, 12))
        E = int(rng.integers(0, 3 * n))
        out.append(random_machine(rng, n, E, cyclic=cyclic, semiring=semiring))
    return out


@pytest.mark.parametrize("cyclic", [False, True])
def test_values_totals_and_posteriors_equal_per_machine(cyclic):
    rng = np.random.default_rng(7 + cyclic)
    ms = _machines(rng, 25, cyclic)
    b = MachineBatch.from_machines(ms)
    assert len(b) == 25 and b.num_states == sum(m.num_states for m in ms)
    fw = b.split(forward(b))
    bw = b.split(backward(b))
    tw = total_weight(b)
    for i, m in enumerate(ms):
        _close(fw[i], forward(m))
        _close(bw[i], backward(m))
        _close(tw[i], total_weight(m))
    fb = forward_backward(b, allow_empty=True)
    post = b.split(fb.posteriors, "arcs")
    fpost = b.split(fb.final_posteriors)
    for i, m in enumerate(ms):
        one = forward_backward(m, allow_empty=True)
        _close(fb.cost[i], one.cost)
        _close(post[i], one.posteriors)
        _close(fpost[i], one.final_posteriors)
    _close(b.split(arc_posteriors(b, allow_empty=True), "arcs")[0], arc_posteriors(ms[0], allow_empty=True))
    _close(b.split(final_posteriors(b, allow_empty=True))[0], final_posteriors(ms[0], allow_empty=True))


@pytest.mark.parametrize("semiring", ["real", "tropical"])
def test_other_semirings(semiring):
    rng = np.random.default_rng(3)
    ms = _machines(rng, 12, True)
    b = MachineBatch.from_machines(ms)
    fw = b.split(forward(b, semiring))
    tw = total_weight(b, semiring)
    for i, m in enumerate(ms):
        _close(fw[i], forward(m, semiring))
        _close(tw[i], total_weight(m, semiring))


def test_machines_of_very_different_mass_keep_their_own_normalisers():
    """A machine whose Z is e^-2000 next to one whose Z is about 1: each arc's posterior is
    divided by its own machine's Z, so neither underflows."""
    chain = Machine.from_arcs(301, 0, np.r_[np.full(300, np.inf), 0.0], np.arange(300), np.arange(1, 301),
                              np.ones(300, int), weight=np.full(300, 2000.0 / 300), semiring="log")
    small = Machine.from_arcs(2, 0, [np.inf, 0.0], [0, 0], [1, 1], [1, 2], weight=[0.1, 0.2], semiring="log")
    b = MachineBatch.from_machines([chain, small])
    fb = forward_backward(b)
    _close(fb.cost, [total_weight(chain), total_weight(small)])
    assert fb.cost[0] == pytest.approx(2000.0)
    pc, ps = b.split(fb.posteriors, "arcs")
    _close(pc, np.ones(300))
    _close(ps, arc_posteriors(small))


@settings(max_examples=30)
@given(st.lists(tiny_machines(cyclic=True), min_size=1, max_size=4))
def test_tiny_batches_against_enumeration(ms):
    """Each machine's total from the batch lies between the enumerated paths' sum and that
    sum plus what the pruned prefixes can still carry: at most 1.8 times their weight, since
    tiny_machines gives every state at most 0.5 of arc mass and final weights under 0.9
    (so every backward value is at most 0.9 / (1 - 0.5))."""
    b = MachineBatch.from_machines(ms)
    tw = total_weight(b, "real")
    for i, m in enumerate(ms):
        pruned = [0.0]
        Z = sum(p for _, p in enumerate_paths(m, min_weight=1e-9, pruned=pruned))
        assert Z * (1 - 1e-9) - 1e-15 <= tw[i] <= (Z + 1.8 * pruned[0]) * (1 + 1e-9) + 1e-15


def test_expectation_and_entropy_per_machine():
    rng = np.random.default_rng(11)
    ms = _machines(rng, 15, True)
    ms = [m for m in ms if math.isfinite(total_weight(m))]
    b = MachineBatch.from_machines(ms)
    vals = rng.normal(size=(b.num_arcs, 2))
    fvals = rng.normal(size=(b.num_states, 2))
    ex = expectation(b, vals, fvals)
    H = entropy(b)
    va = b.split(vals, "arcs")
    vf = b.split(fvals)
    assert ex.shape == (len(ms), 2) and H.shape == (len(ms),)
    for i, m in enumerate(ms):
        _close(ex[i], expectation(m, va[i], vf[i]))
        _close(H[i], entropy(m))


def test_best_paths_are_each_machines_best():
    rng = np.random.default_rng(5)
    ms = [m for m in _machines(rng, 30, True) if math.isfinite(total_weight(m, "tropical"))]
    b = MachineBatch.from_machines(ms)
    paths = best_path(b)
    ptr, arcs, cost = batch_best_paths(b)
    for i, m in enumerate(ms):
        one = best_path(m)
        p = paths[i]
        assert p.weight == pytest.approx(one.weight, rel=1e-12, abs=1e-12)
        # the path is a real path of machine i from its start to a final state, of that weight
        assert p.states[0] == m.start
        w, f = m.neglog_weights()
        assert np.array_equal(m.arc_src[p.arcs], p.states[:-1]) and np.array_equal(m.dst[p.arcs], p.states[1:])
        assert w[p.arcs].sum() + f[p.states[-1]] == pytest.approx(p.weight, rel=1e-12, abs=1e-12)
        assert cost[i] == pytest.approx(p.weight)


def test_sampling_per_machine():
    rng = np.random.default_rng(9)
    ms = [m for m in _machines(rng, 10, False) if math.isfinite(total_weight(m))]
    b = MachineBatch.from_machines(ms)
    out = sample_paths(b, 50, seed=3)
    again = sample_paths(b, 50, seed=3)
    assert len(out) == len(ms)
    for i, m in enumerate(ms):
        s = out[i]
        assert len(s) == 50
        assert np.array_equal(s.arcs, again[i].arcs)
        _, f = m.neglog_weights()
        for k in range(len(s)):
            a = s.path(k)
            st_ = np.concatenate([[m.start], m.dst[a]])
            assert np.array_equal(m.arc_src[a], st_[:-1])
            assert np.isfinite(f[st_[-1]])
        # acyclic machines: the same kernel on the same probabilities with machine i's seed
        seed_i = (3 * 2654435761 + 97 * (i + 1)) & 0xFFFFFFFF
        single = sample_paths(m, 50, seed=seed_i)
        assert np.array_equal(single.arcs, s.arcs) and np.array_equal(single.ptr, s.ptr)


def test_sampling_frequencies_match_path_probabilities():
    """Two machines, 20,000 draws each: every path's frequency within 5 standard errors of
    its probability."""
    rng = np.random.default_rng(21)
    ms = []
    while len(ms) < 2:
        m = random_machine(rng, 5, 7, cyclic=False)
        if math.isfinite(total_weight(m)):
            ms.append(m)
    b = MachineBatch.from_machines(ms)
    N = 20_000
    out = sample_paths(b, N, seed=1)
    for i, m in enumerate(ms):
        Z = math.exp(-total_weight(m))
        probs = {tuple(int(a) for a in arcs): p / Z for arcs, p in enumerate_paths(m)}
        assert sum(probs.values()) == pytest.approx(1.0, rel=1e-9)
        counts = {}
        for k in range(N):
            key = tuple(int(a) for a in out[i].path(k))
            assert key in probs
            counts[key] = counts.get(key, 0) + 1
        for key, p in probs.items():
            se = math.sqrt(p * (1 - p) / N)
            assert abs(counts.get(key, 0) / N - p) <= 5 * se + 1e-9


def test_phi_batches():
    rng = np.random.default_rng(4)
    ms = [backoff_machine(rng, V=4, order=3) for _ in range(5)]
    b = MachineBatch.from_machines(ms)
    tw = total_weight(b)
    fb = forward_backward(b)
    post = b.split(fb.posteriors, "arcs")
    for i, m in enumerate(ms):
        _close(tw[i], total_weight(m))
        one = forward_backward(m)
        _close(fb.cost[i], one.cost)
        _close(post[i], one.posteriors)


def test_empty_machines_are_named_or_allowed():
    ok = Machine.from_arcs(2, 0, [0.0, 1.0], [0], [1], [1], weight=[0.5], semiring="real")
    dead = Machine.from_arcs(2, 0, [0.0, 0.0], [0], [1], [1], weight=[0.5], semiring="real")
    b = MachineBatch.from_machines([ok, dead, ok])
    with pytest.raises(NoAcceptingPathError, match="machine 1 of the batch"):
        forward_backward(b)
    fb = forward_backward(b, allow_empty=True)
    assert math.isinf(fb.cost[1]) and fb.cost[0] == pytest.approx(fb.cost[2])
    assert np.all(b.split(fb.posteriors, "arcs")[1] == 0.0)
    with pytest.raises(NoAcceptingPathError, match="machine 1"):
        best_path(b)
    with pytest.raises(NoAcceptingPathError, match="machine 1"):
        entropy(b)
    with pytest.raises(NoAcceptingPathError, match="machine 1"):
        sample_paths(b, 3)
    ptr, arcs, cost = batch_best_paths(b, allow_empty=True)
    assert math.isinf(cost[1]) and ptr[2] == ptr[1]


def test_batch_round_trip_and_checks():
    rng = np.random.default_rng(2)
    ms = _machines(rng, 6, True)
    b = MachineBatch.from_machines(ms)
    for i, m in enumerate(ms):
        mi = b[i]
        assert mi.start == m.start and np.array_equal(mi.dst, m.dst) and np.array_equal(mi.weight, m.weight)
        assert np.array_equal(mi.src_start, m.src_start) and np.array_equal(mi.final, m.final)
    assert np.array_equal(b.machine_of_arcs(), np.repeat(np.arange(6), np.diff(b.arc_ptr)))
    u = b.machine
    with pytest.raises(ArgumentError, match="start state"):
        MachineBatch(u, b.state_ptr, np.r_[b.starts[1:], 0])
    with pytest.raises(ArgumentError, match="state_ptr"):
        MachineBatch(u, b.state_ptr[:-1], b.starts[:-1])
    # a two-state machine with an arc 0 -> 1 cut into two one-state machines: the arc leaves machine 0
    two = Machine.from_arcs(2, 0, [np.inf, 0.0], [0], [1], [1], weight=[0.5], semiring="log")
    with pytest.raises(ArgumentError, match="arc 0 from state 0 .machine 0. goes to state 1, outside machine 0"):
        MachineBatch(two, [0, 1, 2], [0, 1])
    with pytest.raises(ArgumentError, match="weights"):
        MachineBatch.from_machines([ms[0], Machine.from_arcs(1, 0, [1.0], [], [], [], weight=[], semiring="real")])


@pytest.mark.parametrize("cyclic", [False, True])
def test_cuda_path_equals_cpu(cyclic):
    """device="cuda" (numba's simulator under make test, a GPU with NUMBA_ENABLE_CUDASIM=0)."""
    rng = np.random.default_rng(31 + cyclic)
    ms = _machines(rng, 5, cyclic)
    b = MachineBatch.from_machines(ms)
    _close(forward(b, device="cuda"), forward(b))
    _close(total_weight(b, device="cuda"), total_weight(b))
    g = forward_backward(b, device="cuda", allow_empty=True)
    c = forward_backward(b, allow_empty=True)
    _close(g.cost, c.cost)
    _close(g.posteriors, c.posteriors)
    _close(g.final_posteriors, c.final_posteriors)


def test_cuda_phi_batch_equals_cpu():
    rng = np.random.default_rng(8)
    b = MachineBatch.from_machines([backoff_machine(rng, V=3, order=2) for _ in range(3)])
    g = forward_backward(b, device="cuda")
    c = forward_backward(b)
    _close(g.cost, c.cost)
    _close(g.posteriors, c.posteriors)


def test_a_first_machine_without_start_or_states_does_not_hide_the_others():
    """The union's backward solve needs no start of its own: a batch whose first machine has
    no start (or no states) still answers for the rest."""
    ok = Machine.from_arcs(2, 0, [0.0, 1.0], [0], [1], [1], weight=[0.5], semiring="real")
    nostart = Machine.from_arcs(2, -1, [0.0, 1.0], [0], [1], [1], weight=[0.5], semiring="real")
    nothing = Machine.from_arcs(0, -1, [], [], [], [], weight=[], semiring="real")
    for first in (nostart, nothing):
        b = MachineBatch.from_machines([first, ok, ok])
        tw = total_weight(b, "real")
        assert tw[0] == 0.0 and tw[1] == pytest.approx(0.5) and tw[2] == pytest.approx(0.5)
        fb = forward_backward(b, allow_empty=True)
        assert math.isinf(fb.cost[0]) and fb.cost[1] == pytest.approx(-math.log(0.5))
        _close(b.split(fb.posteriors, "arcs")[2], arc_posteriors(ok))
        # a union whose own start is -1, built by hand
        u = b.machine.replace(start=-1)
        _close(total_weight(MachineBatch(u, b.state_ptr, b.starts), "real"), tw)
    assert len(MachineBatch.from_machines([])) == 0
    with pytest.raises(NoAcceptingPathError, match="machine 0"):
        sample_paths(MachineBatch.from_machines([nothing]), 2)


def test_routines_without_batches_say_so():
    from fsmlearn.algo import k_best_paths
    from fsmlearn.errors import NotAMachineError
    ok = Machine.from_arcs(2, 0, [np.inf, 0.0], [0], [1], [1], weight=[0.5], semiring="log")
    b = MachineBatch.from_machines([ok, ok])
    with pytest.raises(NotAMachineError, match="does not take a MachineBatch.*batch\\[b\\]"):
        k_best_paths(b, 2)

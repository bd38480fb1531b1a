"""The acyclic one-pass kernels: the plain pass (one exponent per block of states) against
the scaled pass and OpenFst, and the cases where it must decline."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import random_machine
from fsmlearn import Machine
from fsmlearn.algo import shortest_distance
from fsmlearn.algo.solve_acyclic import acyclic_neglog, acyclic_neglog_plain, neglog_plain
from fsmlearn.semiring import get_semiring
from fsmlearn.testing import openfst_distances

LOG = get_semiring("log")


def _init(m, reverse, starts=None):
    if reverse:
        return LOG.final_rows(m.final, m.semiring)
    V = LOG.zero_rows(m.num_states)
    V[m.start if starts is None else starts] = LOG.one_row()
    return V


def _neglog(V):
    with np.errstate(divide="ignore"):
        return -(np.log(V[:, 0]) + V[:, 1] * np.log(2.0))


def _both(m, reverse, starts=None):
    """(accepted, plain values, scaled values) as -log."""
    w = np.ascontiguousarray(m.weight, np.float64)
    Q = np.empty_like(w)
    assert neglog_plain(w, Q)
    V1 = _init(m, reverse, starts)
    ok = acyclic_neglog_plain(V1, m.src_start, m.dst, Q, reverse)
    V2 = _init(m, reverse, starts)
    acyclic_neglog(V2, m.src_start, m.dst, w, reverse)
    return ok, _neglog(V1), _neglog(V2)


def _spread(rng, n, E, span, decay=0.0, zero=0.1, mass=0.9):
    """A topologically numbered machine: arcs from each state to 1..span states ahead,
    each state's arcs weighing ``mass`` in all (times e^-decay each: forward values fall
    by about that per state), some arcs of weight zero (+inf), every state final."""
    src = np.sort(rng.integers(0, n - 1, E))
    dst = np.minimum(src + rng.integers(1, span + 1, E), n - 1)
    p = rng.random(E) * 0.95 + 0.05
    p *= mass / np.bincount(src, p, minlength=n)[src]
    w = -np.log(p) + decay
    w[rng.random(E) < zero] = np.inf
    fin = -np.log(rng.random(n) * 0.9 + 0.1)
    return Machine.from_arcs(n, 0, fin, src, dst, np.ones(E, int), weight=w)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("span,decay", [(3, 0.0), (3, 1.0), (100, 0.0), (100, 25.0), (700, 0.0), (700, 30.0)])
def test_plain_pass_is_the_scaled_pass(reverse, span, decay):
    # blocks of 256 states: spans of 100 stay within a block and the next one, 700 reach
    # blocks further on (the scaled path between exponents); the decays take forward values
    # far below float64's range (e^-745) over 3000 states (spans 3 and 100)
    rng = np.random.default_rng(span + int(decay))
    m = _spread(rng, 3000, 20000, span, decay)
    ok, a, b = _both(m, reverse)
    assert ok
    fin = np.isfinite(b)
    assert np.array_equal(fin, np.isfinite(a))
    assert np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin]))) < 1e-13
    if decay and not reverse and span <= 100:
        assert b[fin].max() > 800           # values past float64's range were reached


def test_values_falling_steeply_within_a_block_decline():
    # e^-20 an arc, about e^-13 a state: forward values fall far more than 2^500 within a
    # block of 256 states, past what one exponent per block holds; the plain pass declines
    # and the solver gives the scaled pass's values (and remembers to go straight there)
    rng = np.random.default_rng(5)
    m = _spread(rng, 3000, 20000, 3, 20.0)
    ok, _, b = _both(m, False)
    assert not ok
    got = shortest_distance(m, "log")
    fin = np.isfinite(b)
    assert np.array_equal(fin, np.isfinite(got)) and np.allclose(got[fin], b[fin], rtol=1e-14, atol=0)
    assert m.cached("plain_declined", dict) == {False: True}
    assert np.array_equal(shortest_distance(m, "log"), got)


def test_plain_pass_with_several_start_states():
    rng = np.random.default_rng(3)
    m = _spread(rng, 1500, 8000, 300)
    starts = np.array([0, 17, 600, 1400])
    ok, a, b = _both(m, False, starts)
    assert ok
    fin = np.isfinite(b)
    assert np.array_equal(fin, np.isfinite(a)) and np.allclose(a[fin], b[fin], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("reverse", [False, True])
def test_solver_results_against_openfst(rng, reverse):
    m = random_machine(rng, 600, 4000, cyclic=False)
    got = shortest_distance(m, "log", reverse=reverse)
    want = openfst_distances(m.to_pynini("log64"), reverse, delta=1e-12)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got))
    assert np.max(np.abs(got[fin] - want[fin]) / np.maximum(1.0, np.abs(want[fin]))) < 1e-9


def test_weights_out_of_range_keep_the_scaled_pass():
    # e^-400 < 2^-500: neglog_plain refuses, shortest_distance takes the scaled pass
    n = 600
    src = np.arange(n - 1)
    w = np.ones(n - 1)
    w[300] = 400.0
    m = Machine.from_arcs(n, 0, {n - 1: 0.0}, src, src + 1, np.ones(n - 1, int), weight=w)
    Q = np.empty(n - 1)
    assert not neglog_plain(np.ascontiguousarray(m.weight), Q)
    assert shortest_distance(m, "log")[-1] == pytest.approx(n - 2 + 400.0, abs=1e-9)
    assert m.cached("plain_weights", lambda: None) is False


@pytest.mark.parametrize("reverse", [False, True])
def test_a_value_far_below_its_block_declines(reverse):
    # states 1 and 3 sit in one block; 3 is reached only through two arcs of e^-300 each
    # (forward, its value e^-601 is under 2^-500 of the block's scale; backward, state 2's
    # value is e^-300 under its block's, below 2^-400): the plain pass declines, leaves V as
    # it was, and the solver's answer is the scaled pass's
    n = 8
    src = np.array([0, 0, 1, 2, 3, 4, 5, 6])
    dst = np.array([1, 2, 4, 3, 4, 5, 6, 7])
    w = np.array([1.0, 300.0, 1.0, 300.0, 1.0, 1.0, 1.0, 1.0])
    m = Machine.from_arcs(n, 0, {7: 0.0, 3: 0.0}, src, dst, np.ones(8, int), weight=w)
    Q = np.empty(8)
    assert neglog_plain(np.ascontiguousarray(m.weight), Q)
    V = _init(m, reverse)
    before = V.copy()
    assert not acyclic_neglog_plain(V, m.src_start, m.dst, Q, reverse)
    assert np.array_equal(V, before)
    got = shortest_distance(m, "log", reverse=reverse)
    V2 = _init(m, reverse)
    acyclic_neglog(V2, m.src_start, m.dst, np.ascontiguousarray(m.weight), reverse)
    assert np.allclose(got, _neglog(V2), rtol=1e-14, atol=0)
    want = openfst_distances(m.to_pynini("log64"), reverse, delta=1e-12)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got))
    assert np.allclose(got[fin], want[fin], rtol=1e-9, atol=1e-9)


def _csr_machine(n, arcs, final):
    """A machine from (src, dst, -log weight) triples (sorted into CSR order)."""
    arcs = sorted(arcs)
    src = np.array([a[0] for a in arcs])
    dst = np.array([a[1] for a in arcs])
    w = np.array([a[2] for a in arcs], float)
    return Machine.from_arcs(n, 0, final, src, dst, np.ones(len(arcs), int), weight=w)


LN2 = np.log(2.0)


@pytest.mark.parametrize("case", ["forward-subnormal-term", "backward-rescaled-twice"])
def test_a_value_that_lost_bits_is_never_returned(case):
    # (a reviewer's cases) forward: state 513's only term crosses block exponents and is
    # subnormal (2^-1070 or so), then its block is rescaled up: accepting it was 10% off.
    # Backward: a rescaling while state 299's block was being pulled and another at its end
    # took state 300's value to about 2^-600; state 255 reads it through a weight of 2^-490,
    # the product underflows to zero, and it came back as unreached.  Either way the plain
    # pass must decline (or agree with the scaled pass to rounding)
    if case == "forward-subnormal-term":
        n, reverse = 700, False
        arcs = [(0, 1, 490 * LN2 + 0.123), (1, 256, 490 * LN2 + 0.377), (1, 600, 100 * LN2),
                (256, 513, 90 * LN2 + 0.291)]
        final = {513: 0.0}
    else:
        n, reverse = 512, True
        arcs = [(300, 511, 398.5 * LN2), (299, 511, -100.5 * LN2), (298, 299, -100 * LN2),
                (255, 300, 490 * LN2)]
        final = {511: 0.0}
    m = _csr_machine(n, arcs, final)
    ok, a, b = _both(m, reverse)
    fin = np.isfinite(b)
    assert fin.sum() >= 2
    if ok:
        assert np.array_equal(fin, np.isfinite(a))
        assert np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin]))) < 1e-13
    got = shortest_distance(m, "log", reverse=reverse)
    assert np.array_equal(fin, np.isfinite(got))
    assert np.allclose(got[fin], b[fin], rtol=1e-13, atol=0)

"""The acyclic one-pass kernels: the plain pass (one exponent per block of states) against
the scaled pass and OpenFst, the cases where it must decline, its check of the numbering,
and its in-pass conversion of the weights."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import random_machine
from fsmlearn import Machine
from fsmlearn.algo import shortest_distance
import numba

import fsmlearn.algo.shortest as shortest_module
from fsmlearn.algo.solve_acyclic import (NOT_ORDERED, PLAIN_DECLINED, PLAIN_DONE, PLAIN_WEIGHTS, acyclic_neglog,
                                         acyclic_neglog_piped, acyclic_neglog_plain, neglog_plain)
from fsmlearn.semiring.ops import NEGLOG_BLOCK, neglog_block, neglog_plain_block
from fsmlearn.semiring import get_semiring
from fsmlearn.testing import openfst_distances

LOG = get_semiring("log")
NONE = np.empty(0)          # no converted copy: the plain pass converts in windows


def _init(m, reverse, starts=None):
    if reverse:
        return LOG.final_rows(m.final, m.semiring)
    V = LOG.zero_rows(m.num_states)
    V[m.start if starts is None else starts] = LOG.one_row()
    return V


NO_ROWS = np.empty((0, 2))


def _inputs(V, reverse):
    """The kernels' inputs from rows made by ``_init``: the final rows backward, the start
    states (those of non-zero rows, each of value one) forward."""
    if reverse:
        return V, np.zeros(0, np.int64)
    return NO_ROWS, np.flatnonzero(V[:, 0]).astype(np.int64)


def _plain(V, src_start, dst, w, Q, reverse, out=NONE):
    """acyclic_neglog_plain from ``_init``'s rows ``V`` into ``V`` (or -ln into ``out``)."""
    F, starts = _inputs(V, reverse)
    return acyclic_neglog_plain(V, out, F, starts, src_start, dst, w, Q, reverse)


def _piped(V, src_start, dst, w, Qout, reverse, chunk, out=NONE):
    """acyclic_neglog_piped from ``_init``'s rows ``V`` into ``V`` (or -ln into ``out``)."""
    F, starts = _inputs(V, reverse)
    return acyclic_neglog_piped(V, out, F, starts, src_start, dst, w, Qout, reverse, chunk)


def _neglog(V):
    with np.errstate(divide="ignore"):
        return -(np.log(V[:, 0]) + V[:, 1] * np.log(2.0))


#: chunks of the two-thread pass in these tests: a few rows each, and a few windows each
CHUNKS = (64, 997, 3 * NEGLOG_BLOCK + 5)


def _output_check(run, m, reverse, starts, status, V):
    """``run(V, out)`` (a plain pass into ``out``) gives ``status`` and, when done, the
    output of the rows ``V`` bit for bit, without touching the rows; otherwise it leaves
    ``out`` untouched."""
    rows = _init(m, reverse, starts)
    before = rows.copy()
    out = np.full(m.num_states, -1.0)
    assert run(rows, out) == status
    assert np.array_equal(rows, before)
    if status == PLAIN_DONE:
        assert np.array_equal(out.view(np.int64), LOG.output(V).view(np.int64))     # -0.0 too
    else:
        assert (out == -1.0).all()


def _piped_statuses(m, reverse, want, starts=None, want_V=None):
    """Run the two-thread plain pass over several chunk sizes, with and without a copy
    made on the way; each must return ``want`` (a status or a set of them), leave V
    untouched unless it is done, and give ``want_V`` (the one-thread pass's rows) bit for
    bit when both are done; into an output instead of rows, the same status and the rows'
    output (``_output_check``).  Returns the statuses and their rows."""
    w = np.ascontiguousarray(m.weight, np.float64)
    Q = np.empty_like(w)
    all_in = neglog_plain(w, Q)
    out = []
    for chunk in CHUNKS:
        for copy in (False, True):
            V = _init(m, reverse, starts)
            before = V.copy()
            Qp = np.full_like(w, np.nan) if copy else NONE
            status, converted = _piped(V, m.src_start, m.dst, w, Qp, reverse, chunk)
            assert status in (want if isinstance(want, set) else {want}), (chunk, copy, status)
            if status != PLAIN_DONE:
                assert np.array_equal(V, before)
            else:
                assert converted == all_in
                if copy and converted:
                    assert np.array_equal(Qp, Q)       # the copy made on the way
                if want_V is not None:
                    assert np.array_equal(V, want_V)
            if not copy:
                _output_check(lambda rows, o: _piped(rows, m.src_start, m.dst, w, NONE, reverse, chunk, o)[0],
                              m, reverse, starts, status, V)
            out.append((status, V))
    return out


def _both(m, reverse, starts=None):
    """(plain pass's status, plain values, scaled values) as -log; the plain pass from a
    converted copy and on two threads must give the same status and values."""
    w = np.ascontiguousarray(m.weight, np.float64)
    V1 = _init(m, reverse, starts)
    status = _plain(V1, m.src_start, m.dst, w, NONE, reverse)
    _output_check(lambda rows, o: _plain(rows, m.src_start, m.dst, w, NONE, reverse, o), m, reverse, starts,
                  status, V1)
    Q = np.empty_like(w)
    V2 = _init(m, reverse, starts)
    acyclic_neglog(V2, m.src_start, m.dst, w, reverse)
    if neglog_plain(w, Q):
        # from a converted copy: the same values in the same order, so the same result
        V3 = _init(m, reverse, starts)
        assert _plain(V3, m.src_start, m.dst, w, Q, reverse) == status
        assert status != PLAIN_DONE or np.array_equal(V3, V1)
        _piped_statuses(m, reverse, status, starts, V1 if status == PLAIN_DONE else None)
    else:
        # a weight out of range: the two-thread pass converts the chunks that hold one
        # in windows of its own, so it may meet that weight where one thread does not,
        # or not meet it; where it is done, it is the scaled pass to rounding
        for st, V in _piped_statuses(m, reverse, {status, PLAIN_DONE, PLAIN_WEIGHTS}, starts,
                                     V1 if status == PLAIN_DONE else None):
            if st == PLAIN_DONE:
                a, b = _neglog(V), _neglog(V2)
                fin = np.isfinite(b)
                assert np.array_equal(fin, np.isfinite(a))
                assert np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin])), initial=0) < 1e-13
    return status, _neglog(V1), _neglog(V2)


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
    status, a, b = _both(m, reverse)
    assert status == PLAIN_DONE
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
    status, _, b = _both(m, False)
    assert status == PLAIN_DECLINED
    got = shortest_distance(m, "log")
    fin = np.isfinite(b)
    assert np.array_equal(fin, np.isfinite(got)) and np.allclose(got[fin], b[fin], rtol=1e-14, atol=0)
    assert m.cached("plain_declined", dict) == {False: True}
    assert np.array_equal(shortest_distance(m, "log"), got)


def test_plain_pass_with_several_start_states():
    rng = np.random.default_rng(3)
    m = _spread(rng, 1500, 8000, 300)
    starts = np.array([0, 17, 600, 1400])
    status, a, b = _both(m, False, starts)
    assert status == PLAIN_DONE
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


@pytest.mark.parametrize("reverse", [False, True])
def test_weights_out_of_range_keep_the_scaled_pass(reverse):
    # e^-400 < 2^-500: the plain pass refuses the weight, leaves V as it was, and
    # shortest_distance takes the scaled pass (and remembers to go straight there)
    n = 600
    src = np.arange(n - 1)
    w = np.ones(n - 1)
    w[300] = 400.0
    m = Machine.from_arcs(n, 0, {n - 1: 0.0}, src, src + 1, np.ones(n - 1, int), weight=w)
    V = _init(m, reverse)
    before = V.copy()
    assert _plain(V, m.src_start, m.dst, np.ascontiguousarray(m.weight), NONE, reverse) == PLAIN_WEIGHTS
    assert np.array_equal(V, before)
    # on two threads the chunk that holds the weight is met later (the chunks before it are
    # converted whole, ahead): backward, the values falling e^-1 a state decline first
    _piped_statuses(m, reverse, {PLAIN_WEIGHTS, PLAIN_DECLINED})
    got = shortest_distance(m, "log", reverse=reverse)
    assert got[-1 if not reverse else 0] == pytest.approx(n - 2 + 400.0, abs=1e-9)
    assert m.cached("plain_declined", dict) == {reverse: True}
    assert m.cached_value("forward_ordered") is True


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
    V = _init(m, reverse)
    before = V.copy()
    assert _plain(V, m.src_start, m.dst, np.ascontiguousarray(m.weight), NONE, reverse) == PLAIN_DECLINED
    assert np.array_equal(V, before)
    _piped_statuses(m, reverse, PLAIN_DECLINED)
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
    status, a, b = _both(m, reverse)
    fin = np.isfinite(b)
    assert fin.sum() >= 2
    assert status in (PLAIN_DONE, PLAIN_DECLINED)
    if status == PLAIN_DONE:
        assert np.array_equal(fin, np.isfinite(a))
        assert np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin]))) < 1e-13
    got = shortest_distance(m, "log", reverse=reverse)
    assert np.array_equal(fin, np.isfinite(got))
    assert np.allclose(got[fin], b[fin], rtol=1e-13, atol=0)


def _openfst_check(m, reverse):
    got = shortest_distance(m, "log", reverse=reverse)
    want = openfst_distances(m.to_pynini("log64"), reverse, delta=1e-12)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got))
    assert np.allclose(got[fin], want[fin], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("case", ["back-arc-late", "self-loop", "back-arc-of-unreached-state",
                                  "back-arc-of-weight-zero"])
def test_the_plain_pass_finds_a_numbering_that_is_not_topological(reverse, case):
    # the plain pass is the solver's only check of the numbering: an arc to the state
    # itself or a lower one, wherever it is (the last states; a state of value zero,
    # which pushes nothing forward), stops it with V untouched, and the solver falls
    # through to the schedule (and remembers)
    rng = np.random.default_rng(11)
    m0 = _spread(rng, 2000, 12000, 50)
    src, dst, w = m0.arc_src.copy(), m0.dst.copy(), m0.weight.copy()
    if case == "back-arc-late":
        extra = [(1990, 1700, 2.0)]
    elif case == "self-loop":
        extra = [(1500, 1500, 3.0)]
    elif case == "back-arc-of-weight-zero":
        extra = [(1200, 300, np.inf)]               # it changes no value, but it is an arc
    else:
        # state 1999 is reached by no arc (forward value zero); its arc goes back
        keep = dst != 1999
        src, dst, w = src[keep], dst[keep], w[keep]
        extra = [(1999, 10, 1.0)]
    src = np.concatenate([src, [e[0] for e in extra]])
    dst = np.concatenate([dst, [e[1] for e in extra]])
    w = np.concatenate([w, [e[2] for e in extra]])
    order = np.argsort(src, kind="stable")
    m = Machine.from_arcs(2000, 0, m0.final, src[order], dst[order], np.ones(len(src), int), weight=w[order])
    V = _init(m, reverse)
    before = V.copy()
    assert _plain(V, m.src_start, m.dst, np.ascontiguousarray(m.weight), NONE, reverse) == NOT_ORDERED
    assert np.array_equal(V, before)
    _piped_statuses(m, reverse, NOT_ORDERED)
    _openfst_check(m, reverse)
    assert m.cached_value("forward_ordered") is False
    assert m.replace(weight=m.weight + 0.25).cached_value("forward_ordered") is False


@pytest.mark.parametrize("reverse", [False, True])
def test_a_pass_that_declines_early_still_checks_the_numbering(reverse):
    # the plain pass declines around states 2 and 3 (test_a_value_far_below_its_block_declines)
    # before it reaches a back arc (forward: 6 -> 5; backward, which goes from the last state
    # down: 1 -> 0): the solver must not take the scaled one-pass kernel
    n = 8
    back = (1, 0) if reverse else (6, 5)
    arcs = [(0, 1, 1.0), (0, 2, 300.0), (1, 4, 1.0), (2, 3, 300.0), (3, 4, 1.0), (4, 5, 1.0), (5, 6, 1.0),
            (6, 7, 1.0), (back[0], back[1], 2.0)]
    m = _csr_machine(n, arcs, {7: 0.0, 3: 0.0})
    V = _init(m, reverse)
    assert _plain(V, m.src_start, m.dst, np.ascontiguousarray(m.weight), NONE, reverse) == PLAIN_DECLINED
    _piped_statuses(m, reverse, PLAIN_DECLINED)
    _openfst_check(m, reverse)
    assert m.cached_value("forward_ordered") is False
    assert m.cached("plain_declined", dict) == {}


def test_a_re_weighted_copy_keeps_the_numbering_check():
    rng = np.random.default_rng(4)
    m = _spread(rng, 900, 5000, 40)
    shortest_distance(m, "log")
    assert m.cached_value("forward_ordered") is True
    m2 = m.replace(weight=m.weight + 0.5)
    assert m2.cached_value("forward_ordered") is True
    _openfst_check(m2, False)


@pytest.mark.parametrize("reverse", [False, True])
def test_rows_longer_than_a_conversion_window(reverse):
    # a state with 3 windows of arcs, and rows that straddle windows: the plain pass
    # converts the weights a window at a time (forward from a row's start, backward from
    # its end)
    rng = np.random.default_rng(8)
    n = 9000
    big = 3 * NEGLOG_BLOCK + 17
    src = np.concatenate([np.zeros(big, int), np.sort(rng.integers(1, n - 1, 20000))])
    dst = np.concatenate([1 + rng.choice(n - 1, big, replace=False), np.zeros(20000, int)])
    dst[big:] = np.minimum(src[big:] + rng.integers(1, 30, 20000), n - 1)
    p = rng.random(len(src)) * 0.9 + 0.05
    p *= 0.9 / np.bincount(src, p, minlength=n)[src]
    m = Machine.from_arcs(n, 0, -np.log(rng.random(n) * 0.9 + 0.1), src, dst, np.ones(len(src), int),
                          weight=-np.log(p))
    status, a, b = _both(m, reverse)
    assert status == PLAIN_DONE
    fin = np.isfinite(b)
    assert np.array_equal(fin, np.isfinite(a))
    assert np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin]))) < 1e-13
    _openfst_check(m, reverse)


def test_the_vectorised_conversion_is_neglog_blocks_bit_for_bit():
    # exp(-w) as P * 2**K (neglog_block) and as one plain number (neglog_plain_block):
    # the same float64, every weight inside the +-500 binary exponents; outside them,
    # -inf and NaN are counted; +inf is a zero weight
    rng = np.random.default_rng(2)
    ln2 = np.log(2.0)
    w = np.concatenate([rng.normal(0, 30, 3000), rng.uniform(-500.4, 500.4, 1000) * ln2,
                        [0.0, -0.0, np.inf, -500.49 * ln2, 500.49 * ln2, 1e-300, -1e-300]])
    n = len(w)
    P, K, Q, T = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    neglog_block(w, 0, n, P, K)
    assert neglog_plain_block(w, 0, n, Q, T) == 0
    want = np.where(P == 0.0, 0.0, np.ldexp(P, np.where(P == 0.0, 0, K).astype(int)))
    assert np.array_equal(Q, want)
    # exp(-w) has condition number |w|: rounding -w / ln 2 costs up to about |w| ulps
    x = w[:-7]
    assert np.all(np.abs(Q[:-7] / np.exp(-x) - 1.0) <= (4.0 + 2.0 * np.abs(x)) * np.finfo(float).eps)
    assert Q[n - 5] == 0.0
    bad = np.array([-500.51 * ln2, 500.51 * ln2, 400.0 * 2, -np.inf, np.nan, 2.0])
    assert neglog_plain_block(bad, 0, 6, Q, T) == 5
    assert neglog_plain_block(bad, 5, 6, Q, T) == 0
    assert abs(Q[0] / np.exp(-2.0) - 1.0) < 4 * np.finfo(float).eps


@pytest.mark.parametrize("two_threads", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_machine_solved_again_reads_a_converted_copy(monkeypatch, reverse, two_threads):
    # the first solve converts as it goes and keeps nothing; the second converts the arcs
    # once into a cached copy (over numba's threads; on two threads, as it goes: the
    # machine is then as large as _PIPE_MIN_ARCS, lowered here) and later ones read it on
    # one thread: the copy is neglog_block's weights, and the values are the same each time
    calls = _force_two_threads(monkeypatch) if two_threads else []
    rng = np.random.default_rng(6)
    m = _spread(rng, 5000, 40000, 100, 0.5)
    first = shortest_distance(m, "log", reverse=reverse)
    assert m.cached_value("plain_weights") is None
    second = shortest_distance(m, "log", reverse=reverse)
    Q = m.cached_value("plain_weights")
    assert Q is not None and Q is not False and Q.shape == m.weight.shape
    P, K = np.empty_like(Q), np.empty_like(Q)
    neglog_block(np.ascontiguousarray(m.weight), 0, len(Q), P, K)
    assert np.array_equal(Q, np.where(P == 0.0, 0.0, np.ldexp(P, np.where(P == 0.0, 0, K).astype(int))))
    third = shortest_distance(m, "log", reverse=reverse)
    assert calls == ([True, True] if two_threads else [])
    assert np.array_equal(first, second) and np.array_equal(first, third)
    with monkeypatch.context() as mp:
        mp.setattr(shortest_module, "_PIPE_MIN_ARCS", 1 << 62)     # the one-thread pass
        assert np.array_equal(shortest_distance(m.replace(weight=m.weight.copy()), "log", reverse=reverse), first)
    assert np.array_equal(shortest_distance(m, "log", reverse=not reverse),
                          shortest_distance(m.replace(weight=m.weight.copy()), "log", reverse=not reverse))
    _openfst_check(m, reverse)


def test_a_copy_refused_for_its_weights_leaves_the_windowed_pass():
    # a weight out of the plain range on an arc the forward pass never converts (states
    # 3000-5999 are unreachable, and its arc lies past the last window of the reachable
    # ones): the first forward solve never meets it; the copy of the second is refused
    # (cached as False), and that solve and later ones convert in windows as the first did,
    # to the same values
    n = 6000
    arcs = [(s, s + 1, 1.0) for s in range(2999)] + [(s, s + 1, 1.0) for s in range(3000, n - 1)]
    arcs[5500 - 1] = (5500, 5501, 400.0)
    m = _csr_machine(n, arcs, {2999: 0.0, n - 1: 0.0})
    first = shortest_distance(m, "log")
    assert m.cached("plain_declined", dict) == {}
    second = shortest_distance(m, "log")
    assert m.cached_value("plain_weights") is False
    third = shortest_distance(m, "log")
    assert m.cached("plain_declined", dict) == {}
    assert np.array_equal(first, second) and np.array_equal(first, third)
    assert second[2999] == pytest.approx(2999.0, abs=1e-9) and np.isinf(second[3000:]).all()
    # the scaled pass, which the backward solve needs (it meets the weight), agrees
    back = shortest_distance(m, "log", reverse=True)
    assert m.cached("plain_declined", dict) == {True: True}
    assert back[5500] == pytest.approx(400.0 + 498.0, rel=1e-14)


def test_the_parallel_conversion_is_the_windowed_one():
    rng = np.random.default_rng(9)
    w = np.concatenate([rng.normal(2, 20, 3 * NEGLOG_BLOCK + 5), [np.inf]])
    Q = np.empty_like(w)
    assert neglog_plain(w, Q)
    want = np.empty_like(w)
    T = np.empty_like(w)
    assert neglog_plain_block(w, 0, len(w), want, T) == 0
    assert np.array_equal(Q, want)
    w[NEGLOG_BLOCK + 3] = -np.inf
    assert not neglog_plain(w, Q)


def _force_two_threads(monkeypatch):
    """Send the solver's first and second solves of any machine of 1,000 arcs or more to
    the two-thread pass (whatever numba's threads), in chunks of 997 arcs (many chunks
    on a small machine); returns a list that gets an entry per call."""
    calls = []

    def small_chunks(V, out, F, starts, src_start, dst, w, Qout, backward, chunk):
        calls.append(True)
        return acyclic_neglog_piped(V, out, F, starts, src_start, dst, w, Qout, backward, 997)

    monkeypatch.setattr(shortest_module, "_PIPE_MIN_ARCS", 1000)
    monkeypatch.setattr(shortest_module, "_PIPE_MIN_THREADS", 1)
    monkeypatch.setattr(shortest_module, "acyclic_neglog_piped", small_chunks)
    return calls


def test_the_solver_on_two_threads_refuses_a_copy_for_its_weights(monkeypatch):
    # test_a_copy_refused_for_its_weights_leaves_the_windowed_pass, with the two-thread
    # pass: the weight of 400 lies on an arc of an unreached state in a chunk of its own
    calls = _force_two_threads(monkeypatch)
    n = 6000
    arcs = [(s, s + 1, 1.0) for s in range(2999)] + [(s, s + 1, 1.0) for s in range(3000, n - 1)]
    arcs[5500 - 1] = (5500, 5501, 400.0)
    m = _csr_machine(n, arcs, {2999: 0.0, n - 1: 0.0})
    first = shortest_distance(m, "log")
    second = shortest_distance(m, "log")
    assert m.cached_value("plain_weights") is False
    third = shortest_distance(m, "log")
    assert len(calls) == 3                      # no copy: every solve converts as it goes
    assert m.cached("plain_declined", dict) == {}
    assert np.array_equal(first, second) and np.array_equal(first, third)
    assert first[2999] == pytest.approx(2999.0, abs=1e-9) and np.isinf(first[3000:]).all()


def test_a_second_solve_that_declines_keeps_no_copy(monkeypatch):
    # the forward pass declines on its values (test_a_value_far_below_its_block_declines,
    # longer): the first solve takes the scaled pass and remembers; the second goes straight
    # there, so no copy is made; the backward solve, which the plain pass can do, makes it
    calls = _force_two_threads(monkeypatch)
    n = 3000
    arcs = [(0, 1, 1.0), (0, 2, 300.0), (1, 4, 1.0), (2, 3, 300.0), (3, 4, 1.0)] + [
        (s, s + 1, 0.01) for s in range(4, n - 1)]
    m = _csr_machine(n, arcs, {n - 1: 0.0, 3: 0.0})
    first = shortest_distance(m, "log")
    assert m.cached("plain_declined", dict) == {False: True} and len(calls) == 1
    assert np.array_equal(shortest_distance(m, "log"), first)
    assert m.cached_value("plain_weights") is None and len(calls) == 1
    back = shortest_distance(m, "log", reverse=True)
    assert len(calls) == 2 and m.cached_value("plain_weights") is not None
    _openfst_check(m, False)
    assert np.array_equal(shortest_distance(m, "log", reverse=True), back)


@pytest.mark.parametrize("reverse", [False, True])
def test_the_two_thread_pass_on_one_thread_is_the_same(reverse):
    # the two steps of each chunk run in turn on one thread: the same values and copy
    rng = np.random.default_rng(13)
    m = _spread(rng, 20000, 150000, 80, 0.1)
    w = np.ascontiguousarray(m.weight)
    got = []
    threads = numba.get_num_threads()
    try:
        for k in (1, threads):
            numba.set_num_threads(k)
            V = _init(m, reverse)
            Q = np.empty_like(w)
            assert _piped(V, m.src_start, m.dst, w, Q, reverse, 2 * NEGLOG_BLOCK) == (PLAIN_DONE, True)
            got.append((V, Q))
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(got[0][0], got[1][0]) and np.array_equal(got[0][1], got[1][1])
    V = _init(m, reverse)
    assert _plain(V, m.src_start, m.dst, w, NONE, reverse) == PLAIN_DONE
    assert np.array_equal(V, got[0][0])


@pytest.mark.parametrize("reverse", [False, True])
def test_the_two_threads_share_each_chunks_conversion_without_a_gap(reverse):
    # each chunk's conversion is shared: one thread from its start, the other (after its
    # pass) from its end, meeting wherever the timing puts them; over many chunks and runs
    # every weight of the copy must be converted, to neglog_plain's values
    rng = np.random.default_rng(14)
    m = _spread(rng, 60000, 600000, 60, 0.05)
    w = np.ascontiguousarray(m.weight)
    want = np.empty_like(w)
    assert neglog_plain(w, want)
    V0 = _init(m, reverse)
    assert _plain(V0, m.src_start, m.dst, w, NONE, reverse) == PLAIN_DONE
    for chunk in (NEGLOG_BLOCK // 2, 3 * NEGLOG_BLOCK, 8 * NEGLOG_BLOCK + 7):
        for _ in range(3):
            V = _init(m, reverse)
            Q = np.full_like(w, np.nan)
            assert _piped(V, m.src_start, m.dst, w, Q, reverse, chunk) == (PLAIN_DONE, True)
            assert np.array_equal(Q, want) and np.array_equal(V, V0)


@pytest.mark.parametrize("reverse", [False, True])
def test_the_two_thread_pass_on_empty_and_late_starting_machines(reverse):
    # no arcs (one state; states without arcs), and a start state in the last chunk
    for n, arcs in ((1, []), (5, [])):
        m = _csr_machine(n, arcs, {n - 1: 0.5}) if arcs else Machine.from_arcs(
            n, 0, {n - 1: 0.5}, np.zeros(0, int), np.zeros(0, int), np.zeros(0, int), weight=np.zeros(0))
        V = _init(m, reverse)
        want = V.copy()
        assert _plain(want, m.src_start, m.dst, np.ascontiguousarray(m.weight), NONE,
                                    reverse) == PLAIN_DONE
        assert _piped(V, m.src_start, m.dst, np.ascontiguousarray(m.weight), NONE,
                                    reverse, 64)[0] == PLAIN_DONE
        assert np.array_equal(V, want)
    rng = np.random.default_rng(15)
    m = _spread(rng, 4000, 30000, 40, 0.05)
    starts = np.array([3900])
    status, a, b = _both(m, reverse, None if reverse else starts)
    assert status == PLAIN_DONE


def test_the_threaded_neglog_of_rows_is_the_one_thread_one():
    from fsmlearn.semiring.ops import scaled_to_neglog, scaled_to_neglog_par
    rng = np.random.default_rng(16)
    V = np.stack([rng.random(10001) + 0.5, rng.integers(-900, 900, 10001).astype(float)], axis=1)
    V[::7, 0] = 0.0
    V[5, 0] = -1.0
    a, b = np.empty(10001), np.empty(10001)
    scaled_to_neglog(V, a)
    scaled_to_neglog_par(V, b)
    assert np.array_equal(a, b, equal_nan=True) and np.isnan(a[5]) and np.isinf(a[7])


@pytest.mark.parametrize("reverse", [False, True])
def test_the_solver_writes_the_output_of_its_rows(reverse):
    # shortest_distance and a batch's values take the plain pass's output without rows:
    # the same values, bit for bit, as the output of the rows the solver gives
    # forward_backward and the real semiring
    from fsmlearn.algo.shortest import solve_values
    from fsmlearn.fsm import MachineBatch
    rng = np.random.default_rng(21)
    m0 = _spread(rng, 3000, 20000, 100, 0.5)

    def fresh():
        return Machine(start=m0.start, final=m0.final.copy(), src_start=m0.src_start.copy(), dst=m0.dst.copy(),
                       ilabel=m0.ilabel.copy(), weight=m0.weight.copy(), arc_type=m0.arc_type)
    sr, V, _, extra = solve_values(fresh(), "log", reverse)
    assert V is not None and "output" not in extra
    want = sr.output(V).view(np.int64)
    m = fresh()
    for _ in range(3):                          # converting as it goes, making the copy, from it
        got = shortest_distance(m, "log", reverse=reverse)
        assert np.array_equal(got.view(np.int64), want)
    assert m.cached_value("plain_weights") is not None
    _, none, _, extra = solve_values(m, "log", reverse, output=True)
    assert none is None and np.array_equal(extra["output"], got)
    real, R, _, extra = solve_values(m, "real", reverse, output=True)
    assert "output" not in extra
    assert np.allclose(real.output(R), np.exp(-got), rtol=1e-13, atol=0)
    batch = MachineBatch.from_machines([m, _spread(rng, 500, 3000, 20)])
    _, U, _, _ = solve_values(batch.machine, "log", reverse, starts=None if reverse else batch.starts)
    assert np.array_equal(shortest_distance(batch, "log", reverse=reverse).view(np.int64), sr.output(U).view(np.int64))


def test_a_start_state_past_the_machine_is_refused():
    # the plain pass indexes its values by the start states unchecked
    from fsmlearn.algo.shortest import solve_values
    from fsmlearn.errors import ArgumentError
    m = _spread(np.random.default_rng(22), 300, 2000, 10)
    with pytest.raises(ArgumentError, match="start state 300 of a machine of 300 states"):
        solve_values(m, "log", False, starts=np.array([0, 300]), output=True)
    V = solve_values(m, "log", False, starts=np.array([-1, 0]))[1]       # -1: a machine without a start
    assert np.array_equal(LOG.output(V), shortest_distance(m, "log"))

"""Layer 3: cache bands (fsmlearn.algo.bands): the layout, the banded sweep, and the solver with bands.

The solver bands only components of at least 2**18 states (bands.BAND_MIN_STATES); the fixture ``small_bands``
lowers the band width and that threshold so that small machines take the banded path,
and every result is checked against OpenFst, a sparse direct solve or the flat sweep.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from conftest import assert_sweep_stats, random_machine
from fsmlearn import Machine
from fsmlearn.algo import bands as B
from fsmlearn.algo import forward, shortest_distance
from fsmlearn.algo.schedule import schedule_for
from fsmlearn.algo.solve_linear import plain_sweep_kernel
from fsmlearn.errors import DivergenceError, NotConvergedError
from fsmlearn.testing import openfst_distances


def rel_err(a, b):
    fin = np.isfinite(b)
    assert np.array_equal(fin, np.isfinite(a)), "finite entries differ"
    return float(np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin])))) if fin.any() else 0.0


@pytest.fixture
def small_bands(monkeypatch):
    """Bands of 2**4 rows for every component of at least 32 states."""
    monkeypatch.setattr(B, "BAND_BITS", 4)
    monkeypatch.setattr(B, "BAND_MIN_STATES", 32)


def _banded_components(m, reverse):
    """The band layout the solver cached for m (the small_bands fixture's)."""
    return m._cache[("bands", reverse, B.BAND_BITS, B.BAND_MIN_STATES)][0]


def _largest(m, reverse, S, least=2):
    s = schedule_for(m, reverse)
    c = int(np.argmax(np.diff(s.comp_ptr)))
    bits, bptr, goff, gptr, perm, bh, bt, code = B.band_layout(s.int_head, s.int_tail, s.int_ptr, s.comp_ptr,
                                                               s.trivial, S, least)
    a0, a1 = int(s.int_ptr[c]), int(s.int_ptr[c + 1])
    n = int(s.comp_ptr[c + 1] - s.comp_ptr[c])
    p0, p1 = bptr[c], bptr[c + 1]
    return (s, c, a0, a1, n, int(bits[c]), perm[p0:p1], bh[p0:p1], bt[p0:p1], gptr[goff[c]:goff[c + 1]],
            code[s.comp_ptr[c]:s.comp_ptr[c + 1]])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("S", [1, 3, 5, 12])
def test_the_layout_lists_each_components_arcs_once_grouped_by_head_band_then_tail_band(rng, reverse, S):
    m = random_machine(rng, 700, 4000, cyclic=True)
    s = schedule_for(m, reverse)
    bits, bptr, goff, gptr, perm, bh, bt, code = B.band_layout(s.int_head, s.int_tail, s.int_ptr, s.comp_ptr,
                                                               s.trivial, S, 40)
    sizes = np.diff(s.comp_ptr)
    assert (bits >= 0).any()
    for c in range(s.num_components):
        a0, a1 = s.int_ptr[c], s.int_ptr[c + 1]
        if s.trivial[c] or sizes[c] < 40 or a1 == a0:
            assert bits[c] == -1 and bptr[c + 1] == bptr[c] and goff[c + 1] == goff[c]
            continue
        Sc = int(bits[c])
        nb = -(-int(sizes[c]) // (1 << Sc))
        assert Sc >= S and nb <= 256 and (Sc == S or -(-int(sizes[c]) // (1 << (Sc - 1))) > 256)
        p = perm[bptr[c]:bptr[c + 1]].astype(np.int64)
        assert np.array_equal(np.sort(p), np.arange(a1 - a0))                       # each arc once
        h, t = bh[bptr[c]:bptr[c + 1]].astype(np.int64), bt[bptr[c]:bptr[c + 1]].astype(np.int64)
        assert np.array_equal(h, s.int_head[a0 + p]) and np.array_equal(t, s.int_tail[a0 + p])
        g = gptr[goff[c]:goff[c + 1]]
        sb = B.sub_bits(nb, Sc)
        assert g.size == (nb * nb << sb) + 1 and g[0] == 0 and g[-1] == a1 - a0
        for k in range(nb * nb):
            sl = slice(g[k << sb], g[(k + 1) << sb])
            assert np.all(h[sl] >> Sc == k // nb) and np.all(t[sl] >> Sc == k % nb)
            if k // nb == k % nb:
                # the band's own group: the head-grouped order (stable), one block
                assert np.all(np.diff(p[sl]) > 0) and g[(k << sb) + 1] == g[(k + 1) << sb]
                continue
            # another band's arcs: by tail block, each block in the head-grouped order
            blk = (t[sl] & ((1 << Sc) - 1)) >> (Sc - sb)
            assert np.all(np.diff(blk) >= 0)
            for j in range(1 << sb):
                bl = slice(g[(k << sb) + j], g[(k << sb) + j + 1])
                assert np.all(blk[bl.start - sl.start:bl.stop - sl.start] == j)
                assert np.all(np.diff(p[bl]) > 0)
        want = np.zeros(sizes[c], np.uint8)
        own = (h >> Sc) == (t >> Sc)
        want[h[~own]] = 1
        want[h[own]] = 2
        assert np.array_equal(code[s.comp_ptr[c]:s.comp_ptr[c + 1]], want)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("heavy", [False, True])
def test_the_layout_is_the_same_whatever_the_runs_its_arcs_are_sorted_in(rng, reverse, heavy):
    # the arcs are counted and scattered in runs of whole rows, one a thread: more runs than
    # threads, more runs than rows, and (heavy) two rows of 6000 arcs each, so that cuts meet
    m = random_machine(rng, 600, 3000, cyclic=True)
    if heavy:
        # state 7 the tail of 6000 more arcs (a row of the backward layout), state 11 the head
        # of 6000 (a row of the forward one)
        src = np.concatenate([m.arc_src, np.full(6000, 7), rng.integers(0, 600, 6000)])
        dst = np.concatenate([m.dst, rng.integers(0, 600, 6000), np.full(6000, 11)])
        m = Machine.from_arcs(600, m.start, m.final, src, dst, np.ones(src.size, np.int64),
                              weight=np.full(src.size, 3.0))
    s = schedule_for(m, reverse)
    one = B._layout(s.int_head, s.int_tail, s.int_ptr, s.comp_ptr, s.trivial, 3, 40, s.int_arc, parts=1)
    assert (one[0][0] >= 0).any()
    for parts in (2, 3, 7, 50):
        got = B._layout(s.int_head, s.int_tail, s.int_ptr, s.comp_ptr, s.trivial, 3, 40, s.int_arc, parts=parts)
        for a, b in zip(one[0], got[0]):
            assert np.array_equal(a, b)
        assert np.array_equal(one[1], got[1])
    # the runs are whole rows: every cut at a row's start, none inside a row
    for c in np.flatnonzero(one[0][0] >= 0):
        a0, a1 = int(s.int_ptr[c]), int(s.int_ptr[c + 1])
        for parts in (1, 2, 3, 7, 50, 10**6):
            cuts = B._row_cuts(s.int_head, a0, a1, parts)
            assert cuts[0] == a0 and cuts[-1] == a1 and np.all(np.diff(cuts) >= 0)
            inner = cuts[(cuts > a0) & (cuts < a1)]
            assert np.all(s.int_head[inner] != s.int_head[inner - 1])
            if parts > 1 and not heavy:
                assert inner.size > 0


@pytest.mark.parametrize("m", [0, 1, 2, 3, 1001])
@pytest.mark.parametrize("capped_at", [None, 0, -1])
def test_the_plain_factors_in_band_order_are_each_arcs_formula(rng, m, capped_at):
    # two halves of the stream on two prange iterations: every factor the formula's, and a
    # capped factor in either half reported
    n = 50
    a0 = 7
    Wint = np.column_stack([rng.random(a0 + m) + 0.5, rng.integers(-30, 30, a0 + m).astype(float)])
    bh = rng.integers(0, n, m).astype(np.uint32)
    bt = rng.integers(0, n, m).astype(np.uint32)
    pot = rng.integers(-20, 20, n).astype(float)
    star = rng.random((n, 1)) + 1.0
    if capped_at is not None and m:
        Wint[a0 + (capped_at % m), 1] = 5000.0                  # past the cap of 2**1000
    Wp = np.full(m, np.nan)
    capped = B.build_plain_banded(Wint, a0, bh, bt, pot, star, Wp)
    h, t = bh.astype(np.int64), bt.astype(np.int64)
    expo = np.minimum(Wint[a0:, 1] - (pot[h] - pot[t]), 1000.0)
    assert np.array_equal(Wp, Wint[a0:, 0] * np.ldexp(1.0, expo.astype(int)) * star[h, 0])
    assert capped == (capped_at is not None and m > 0)


def test_a_component_of_more_than_256_bands_widens_its_own():
    n = 3000
    src = np.arange(n)
    m = Machine.from_arcs(n, 0, {q: 1.0 for q in range(n)}, src, (src + 1) % n, np.ones(n, int),
                          weight=np.full(n, 0.5))
    s = schedule_for(m, False)
    bits = B.band_layout(s.int_head, s.int_tail, s.int_ptr, s.comp_ptr, s.trivial, 2, 2)[0]
    assert bits.tolist() == [4]          # 3000 rows: 2**3 would make 375 bands, 2**4 makes 188
    # tail blocks: 8 bits of them, fewer in narrow bands or where the groups would pass 2**20
    assert [B.sub_bits(4, 18), B.sub_bits(1, 3), B.sub_bits(188, 4), B.sub_bits(256, 19)] == [8, 3, 4, 4]
    with pytest.raises(ValueError, match="1 to 31 bits"):
        B.band_layout(s.int_head, s.int_tail, s.int_ptr, s.comp_ptr, s.trivial, 0, 2)


def _reference_banded_sweep(y, b, W, h, t, g, S, code):
    """The four steps of the bands module's docstring, one arc at a time in Python."""
    n = y.size
    nb = -(-n // (1 << S))
    sb = B.sub_bits(nb, S)
    for hb in range(nb):
        lo, hi = hb << S, min(n, (hb + 1) << S)
        acc = b[lo:hi].copy()
        for tb in range(nb):
            if tb != hb:
                k = hb * nb + tb
                for e in range(g[k << sb], g[(k + 1) << sb]):
                    acc[h[e] - lo] += y[t[e]] * W[e]
        for r in range(lo, hi):
            if code[r] == 1:
                y[r] = acc[r - lo]
        prev = -1
        run = 0.0
        k = hb * nb + hb
        for e in range(g[k << sb], g[(k + 1) << sb]):
            run = (acc[h[e] - lo] if h[e] != prev else run) + y[t[e]] * W[e]
            y[h[e]] = run
            prev = h[e]
    return y


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("two_threads", [False, True])
def test_the_banded_sweep_is_its_four_steps_and_one_band_is_the_flat_sweep(rng, reverse, two_threads):
    # (with a scratch of four bands the sweep runs as the two-thread pipeline, whose bands
    # here have too few arcs from other bands to split them: the first thread adds them all)
    m = random_machine(rng, 500, 3000, cyclic=True)
    one_band = 0
    for S in (3, 6, 9):
        s, c, a0, a1, n, Sc, perm, bh, bt, gptr, code = _largest(m, reverse, S)
        Wp = rng.random(a1 - a0) * 0.2
        Wb = Wp[perm]
        b = rng.random(n) * (code > 0)
        y0 = rng.random(n)
        y, yold, st_b = y0.copy(), np.empty(n), np.empty(5)
        B.banded_sweep1(y, yold, b, Wb, bh, bt, gptr, Sc, code, B.sweep_scratch(Sc, two_threads), st_b)
        assert np.array_equal(yold, y0)
        want = _reference_banded_sweep(y0.copy(), b, Wb, bh.astype(np.int64), bt.astype(np.int64), gptr, Sc, code)
        np.testing.assert_allclose(y, want, rtol=1e-13, atol=0)
        # the statistics, taken band by band, are those of the whole sweep's rows
        hasrow = code > 0
        assert_sweep_stats(st_b, y, yold, hasrow)
        if (n - 1) >> Sc == 0:
            # one band: the flat sweep's order exactly, and the same statistics
            yf, yfo, st_f = y0.copy(), np.empty(n), np.empty(5)
            plain_sweep_kernel(0)(yf, yfo, b, Wp, s.int_head.view(np.uint32), s.int_tail.view(np.uint32),
                                  a0, a1, hasrow, st_f)
            assert np.array_equal(y, yf) and np.array_equal(yold, yfo)
            # the same figures; the L1 change is summed in the order the compiler's vectors
            # give, which may differ between the bool and uint8 versions of the loop
            assert np.array_equal(st_b[[0, 2, 3, 4]], st_f[[0, 2, 3, 4]])
            np.testing.assert_allclose(st_b[1], st_f[1], rtol=n * 2.0**-52, atol=0)
            one_band += 1
    assert one_band == 1            # bands of 2**9 hold the whole component of at most 500 rows


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("two_threads", [False, True])
def test_the_banded_sweeps_fixed_point_is_the_systems_solution(rng, reverse, two_threads):
    m = random_machine(rng, 600, 4000, cyclic=True, mass=0.9)
    s, c, a0, a1, n, Sc, perm, bh, bt, gptr, code = _largest(m, reverse, 4)
    Wp = np.exp(-m.weight[s.int_arc[a0:a1]])
    b = np.where(code > 0, 1.0, 0.0)
    A = sp.csr_matrix((Wp, (s.int_head[a0:a1], s.int_tail[a0:a1])), shape=(n, n))
    x = sla.spsolve((sp.eye(n) - A).tocsc(), b)
    y, yold, acc, st = np.zeros(n), np.empty(n), B.sweep_scratch(Sc, two_threads), np.empty(5)
    Wb = Wp[perm]
    for _ in range(400):
        B.banded_sweep1(y, yold, b, Wb, bh, bt, gptr, Sc, code, acc, st)
    assert np.max(np.abs(y - x) / np.maximum(x, 1e-300)) < 1e-10


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("semiring", ["log", "real"])
def test_the_solver_with_bands_agrees_with_openfst(rng, small_bands, reverse, semiring):
    for n, E in ((300, 2400), (2000, 20000)):
        m = random_machine(rng, n, E, cyclic=True, arc_type="log64")
        got, info = shortest_distance(m, semiring, reverse=reverse, return_info=True)
        assert _banded_components(m, reverse)[0].max() >= 4        # the solver took the banded path
        ref = openfst_distances(m.to_pynini("log64"), reverse, delta=1e-12)
        if semiring == "real":
            with np.errstate(divide="ignore"):
                got = -np.log(got)
        assert rel_err(got, ref) < 1e-9


def test_the_solver_with_and_without_bands_agree_within_the_tolerance(rng, monkeypatch):
    m = random_machine(rng, 3000, 30000, cyclic=True, mass=0.97)
    for reverse in (False, True):
        flat, fi = shortest_distance(m, "log", reverse=reverse, return_info=True, tol=1e-10)
        monkeypatch.setattr(B, "BAND_BITS", 7)
        monkeypatch.setattr(B, "BAND_MIN_STATES", 256)
        banded, bi = shortest_distance(m, "log", reverse=reverse, return_info=True, tol=1e-10)
        monkeypatch.undo()
        assert m._cache[("bands", reverse, 7, 256)][0][0].max() == 7
        # both stop when their error estimate is below 1e-10 (relative, per state)
        fin = np.isfinite(flat)
        assert np.array_equal(fin, np.isfinite(banded))
        # the banded sweeps ran: the same sums in another order round differently somewhere
        assert not np.array_equal(flat, banded)
        assert np.max(np.abs(np.expm1(flat[fin] - banded[fin]))) < 1e-8
        assert abs(bi.sweeps - fi.sweeps) <= max(3, fi.sweeps // 4)


@pytest.mark.parametrize("hb,total,before", [(0, 0, 0), (1, 1, 0), (1, 1, 1), (3, 7, 7), (1, 7, 3),
                                             (0, 1000, 0), (1, 1000, 499), (1, 1000, 500), (1, 1000, 501),
                                             (2, 1000, 137), (3, 1000, 1000)])
def test_a_band_s_arcs_cut_between_two_accumulators_add_the_same_terms(rng, hb, total, before):
    # the arcs a band's two threads add lie before and after a group left out (its own, or
    # its own and the one from the band before); they are cut by count wherever the cut
    # falls, before, inside or after the gap
    n, w, own = 4 * 64, 64, 5
    m = total + own
    lo = hb * w
    bh = (lo + rng.integers(0, w, m)).astype(np.uint32)
    bt = rng.integers(0, n, m).astype(np.uint32)
    Wp = rng.random(m)
    y = rng.random(n)
    i0, own0, own1, i1 = 0, before, before + own, m
    want = np.zeros(w)
    ext = np.r_[np.arange(i0, own0), np.arange(own1, i1)].astype(np.int64)
    np.add.at(want, bh[ext].astype(np.int64) - lo, y[bt[ext]] * Wp[ext])
    for cut in sorted({0, 1, before, before + 1, total // 2, total - 1, total} & set(range(total + 1))):
        first, second = np.zeros(w), np.zeros(w)
        B._scatter_part(first, y, Wp, bh, bt, i0, own0, own1, i1, 0, cut, np.uint64(lo))
        B._scatter_part(second, y, Wp, bh, bt, i0, own0, own1, i1, cut, total, np.uint64(lo))
        np.testing.assert_allclose(first + second, want, rtol=1e-14, atol=0)
        # each half alone: the terms of its own arcs, counted across the gap
        got = np.zeros(w)
        half = ext[:cut]
        np.add.at(got, bh[half].astype(np.int64) - lo, y[bt[half]] * Wp[half])
        np.testing.assert_allclose(first, got, rtol=1e-14, atol=0)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("short", [7192, 2000])
def test_bands_whose_arcs_from_other_bands_are_added_on_two_threads(rng, monkeypatch, reverse, short):
    # four bands of 2**13 rows, the last one of ``short`` rows.  Each full band has more than
    # PAIR_MIN_ARCS arcs from other bands, which the pipeline splits between its two threads
    # and two accumulators; so has the last band of 7,192 rows.  The last band of 2,000 rows
    # has fewer: the first thread adds them all, and the second accumulator's row, which
    # still holds the sums of band 1, is neither zeroed nor summed
    n = (3 << 13) + short
    m = random_machine(rng, n, 14 * n, cyclic=True, mass=0.97)
    flat = shortest_distance(m, "log", reverse=reverse, tol=1e-10)
    monkeypatch.setattr(B, "BAND_BITS", 13)
    monkeypatch.setattr(B, "BAND_MIN_STATES", 1 << 14)
    banded = shortest_distance(m, "log", reverse=reverse, tol=1e-10)
    s = schedule_for(m, reverse)
    bits, bptr, goff, gptr, perm, bh, bt, code = B.bands_for(m, s)
    c = int(np.argmax(bits))
    g = gptr[goff[c]:goff[c + 1]]
    nb, sb = 4, B.sub_bits(4, 13)
    # each band's arcs from other bands: before its own group and after it
    ext = [(g[(hb * nb + hb) << sb] - g[(hb * nb) << sb]) + (g[((hb + 1) * nb) << sb] - g[(hb * nb + hb + 1) << sb])
           for hb in range(nb)]
    nc = int(s.comp_ptr[c + 1] - s.comp_ptr[c])
    assert bits[c] == 13 and (nc - 1) >> 13 == 3
    paired = [e >= max(B.PAIR_MIN_ARCS, 2 * (min(nc, (hb + 1) << 13) - (hb << 13))) for hb, e in enumerate(ext)]
    assert paired == [True, True, True, short > 4000]
    fin = np.isfinite(flat)
    assert np.array_equal(fin, np.isfinite(banded))
    assert not np.array_equal(flat, banded)
    assert np.max(np.abs(np.expm1(flat[fin] - banded[fin]))) < 1e-8
    # one sweep of that component against the steps written out
    p0, p1 = bptr[c], bptr[c + 1]
    Wb = rng.random(p1 - p0) * 0.08
    cc = code[s.comp_ptr[c]:s.comp_ptr[c + 1]]
    b = rng.random(nc) * (cc > 0)
    y0 = rng.random(nc)
    # two sweeps with one scratch, which starts as NaN: every accumulator is started (from
    # b, or zeroed) before it is added to, and none is summed where it was not started
    y, yold, st = y0.copy(), np.empty(nc), np.empty(5)
    scratch = np.full(4 << 13, np.nan)
    assert scratch.shape == B.sweep_scratch(13, True).shape
    want = y0.copy()
    for sweep in range(2):
        y_in = want.copy()
        B.banded_sweep1(y, yold, b, Wb, bh[p0:p1], bt[p0:p1], g, 13, cc, scratch, st)
        want = _reference_banded_sweep(want, b, Wb, bh[p0:p1].astype(np.int64), bt[p0:p1].astype(np.int64), g, 13,
                                       cc)
        np.testing.assert_allclose(y, want, rtol=1e-13, atol=0)
        # the copy and the statistics, taken on the pipeline's second thread (the last
        # band's after the last step)
        np.testing.assert_allclose(yold, y_in, rtol=1e-13, atol=0)
        assert_sweep_stats(st, y, yold, cc > 0)
        if sweep == 0:
            first = y.copy(), yold.copy(), st.copy(), want.copy()
    y, yold, st, want = first
    # each paired band's arcs from bands other than the one before are split between the
    # threads: the first also adds the arcs from the band before and finishes that band,
    # so it takes half of all that, less what it has already, plus a quarter of the rows
    # (none where what it has already passes that: in the smaller component, where the
    # band before holds a larger part of a band's arcs, some bands give it none)
    shares = []
    for hb in range(nb):
        i0, g0, own0, own1, i1 = B._around(g, hb, nb, sb)
        rest = (g0 - i0) + (i1 - own1)
        rows = min(nc, (hb + 1) << 13) - (hb << 13)
        share = B._first_share(g, hb, nb, sb, rows)
        if not paired[hb]:
            assert share == rest
            continue
        mine = (own0 - g0) + (B._around(g, hb - 1, nb, sb)[3] - B._around(g, hb - 1, nb, sb)[2] if hb else 0)
        assert share == max(0, min(rest, (rest + mine) // 2 - mine + rows // 4)) and share < rest
        shares.append(share)
    assert shares[0] > 0 and (min(shares) > 0) == (short > 4000)
    # the pipeline's two threads are independent: on one thread the same work, in turn,
    # gives the same values, statistics included, bit for bit
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        y1, yold1, st1 = y0.copy(), np.empty(nc), np.empty(5)
        B.banded_sweep1(y1, yold1, b, Wb, bh[p0:p1], bt[p0:p1], g, 13, cc, B.sweep_scratch(13, True), st1)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(y1, y) and np.array_equal(yold1, yold) and np.array_equal(st1, st)
    # a scratch of one band: the one-thread sweep, the same terms summed in another order
    y1, yold1, st1 = y0.copy(), np.empty(nc), np.empty(5)
    B.banded_sweep1(y1, yold1, b, Wb, bh[p0:p1], bt[p0:p1], g, 13, cc, B.sweep_scratch(13, False), st1)
    np.testing.assert_allclose(y1, want, rtol=1e-13, atol=0)
    assert not np.array_equal(y1, y)
    assert np.array_equal(yold1, y0)
    assert_sweep_stats(st1, y1, y0, cc > 0)
    # values that are not finite, in band 0 and in band 2: the last row they make bad is
    # named, by the pipeline's second thread or after the last band
    yb = y0.copy()
    yb[100] = np.nan
    yb[(2 << 13) + 5] = np.inf
    for two_threads in (True, False):
        y2, yold2, st2 = yb.copy(), np.empty(nc), np.empty(5)
        with np.errstate(invalid="ignore"):
            B.banded_sweep1(y2, yold2, b, Wb, bh[p0:p1], bt[p0:p1], g, 13, cc, B.sweep_scratch(13, two_threads), st2)
        assert st2[4] >= (2 << 13)
        assert_sweep_stats(st2, y2, yb, cc > 0)


def _skip_chain(n, back):
    # as in algo_shortest_test: values spanning e^-825 around one cycle of n states
    src = np.r_[np.arange(n - 1), np.arange(n - 2)]
    dst = np.r_[np.arange(1, n), np.arange(2, n)]
    w = np.ones(src.size)
    if back:
        src, dst, w = np.r_[src, n - 1], np.r_[dst, 0], np.r_[w, 5.0]
    return Machine.from_arcs(n, 0, {q: 1.0 for q in range(n)}, src, dst, np.ones(src.size, int), weight=w)


@pytest.mark.parametrize("reverse", [False, True])
def test_band_order_puts_each_banded_components_arc_ids_in_band_order(rng, small_bands, reverse):
    # two cyclic blocks, of 700 states (banded) and of 20 (too small), and a path between
    a = random_machine(rng, 700, 4000, cyclic=True)
    b = random_machine(rng, 20, 60, cyclic=True)
    m = Machine.from_arcs(720, 0, np.r_[a.final, b.final], np.r_[a.arc_src, b.arc_src + 700, 5],
                          np.r_[a.dst, b.dst + 700, 700], np.ones(a.num_arcs + b.num_arcs + 1, int),
                          weight=np.r_[a.weight, b.weight, 1.0])
    s = schedule_for(m, reverse)
    bits, bptr, goff, gptr, perm, bh, bt, code = B.bands_for(m, s)
    ids = B.band_order(m, s)
    assert ids.dtype == s.int_arc.dtype and (bits >= 0).sum() == 1 and (bits < 0).sum() >= 1
    assert B.band_order(m, s) is ids                        # cached with the layout
    head_of, tail_of = (m.arc_src, m.dst) if reverse else (m.dst, m.arc_src)
    for c in range(s.num_components):
        a0, a1 = s.int_ptr[c], s.int_ptr[c + 1]
        if bits[c] < 0:
            assert np.array_equal(ids[a0:a1], s.int_arc[a0:a1])
            continue
        # the arc at band position p is the one whose local head and tail the layout lists there
        states = s.comp_states[s.comp_ptr[c]:s.comp_ptr[c + 1]]
        assert np.array_equal(head_of[ids[a0:a1]], states[bh[bptr[c]:bptr[c + 1]]])
        assert np.array_equal(tail_of[ids[a0:a1]], states[bt[bptr[c]:bptr[c + 1]]])
        assert np.array_equal(ids[a0:a1], s.int_arc[a0 + perm[bptr[c]:bptr[c + 1]].astype(np.int64)])
    acyclic = random_machine(rng, 100, 300, cyclic=False)
    s = schedule_for(acyclic, reverse)
    assert B.band_order(acyclic, s) is s.int_arc


@pytest.mark.parametrize("reverse", [False, True])
def test_one_machine_under_two_band_widths_reads_each_layouts_own_order(rng, monkeypatch, reverse):
    # the converted rows are cached in band order: a second layout must not read the first's
    m = random_machine(rng, 600, 5000, cyclic=True)
    ref = openfst_distances(m.to_pynini("log64"), reverse, delta=1e-12)
    for bits in (4, 6, 4):
        monkeypatch.setattr(B, "BAND_BITS", bits)
        monkeypatch.setattr(B, "BAND_MIN_STATES", 64)
        assert rel_err(shortest_distance(m, "log", reverse=reverse), ref) < 1e-9
        assert _banded_components(m, reverse)[0].max() == bits


def test_the_scaled_sweep_reads_band_ordered_rows_through_the_inverse_of_perm(rng):
    # the solver's scaled sweeps (a capped warm start, the verification) walk the arcs by
    # head; a banded component's rows are in band order, found through _rows_at
    from fsmlearn.algo.solve_linear import _rows_at, scaled_sweep
    from fsmlearn.semiring import get_semiring
    m = random_machine(rng, 600, 5000, cyclic=True)
    s, c, a0, a1, n, Sc, perm, bh, bt, gptr, code = _largest(m, False, 4)
    assert Sc >= 0
    sr = get_semiring("log")
    Wh = sr.arc_rows(m.weight[s.int_arc], "log")            # head order, as without bands
    Wb = Wh.copy()
    Wb[a0:a1] = Wh[a0 + perm.astype(np.int64)]               # band order, as the solver gets them
    wpos = _rows_at(np.empty(0, np.uint32), perm, Sc)
    assert np.array_equal(perm[wpos], np.arange(a1 - a0))
    assert _rows_at(wpos, perm, Sc) is wpos and _rows_at(wpos[:0], perm, -1).size == 0
    Vl = sr.arc_rows(rng.random(n) * 5.0, "log")
    Bv = sr.arc_rows(np.where(rng.random(n) < 0.2, 1.0, np.inf), "log")
    S = np.ones((n, 1))
    ih, it = s.int_head, s.int_tail
    want = Vl.copy()
    scaled_sweep(want, Bv, S, Wh, ih, it, a0, a1, np.zeros(1), wpos[:0])
    got = Vl.copy()
    scaled_sweep(got, Bv, S, Wb, ih, it, a0, a1, np.zeros(1), wpos)
    assert np.array_equal(got, want)
    wrong = Vl.copy()
    scaled_sweep(wrong, Bv, S, Wb, ih, it, a0, a1, np.zeros(1), wpos[:0])
    assert not np.array_equal(wrong, want)                  # (the rows' order matters)


@pytest.mark.parametrize("reverse", [False, True])
def test_values_below_the_float64_range_with_bands(small_bands, reverse):
    m = _skip_chain(4100, back=True)
    got, info = shortest_distance(m, "log", reverse=reverse, return_info=True)
    assert _banded_components(m, reverse)[0].max() >= 4
    ref = openfst_distances(m.to_pynini(), reverse=reverse)
    assert rel_err(got, ref) < 1e-9
    if not reverse:
        assert ref.max() > 800.0 and info.repotentials > 0   # the potentials were rebuilt on the way


@pytest.mark.parametrize("off", [1000.0, -2500.0])
def test_a_wildly_wrong_warm_start_converges_with_bands(small_bands, off):
    m = _skip_chain(300, back=True)
    ref = openfst_distances(m.to_pynini())
    init = ref.copy()
    init[100:200] += np.arange(100) * off
    got, info = forward(m, init=init, return_info=True)
    assert rel_err(got, ref) < 1e-9
    assert _banded_components(m, False)[0].max() >= 4
    assert info.repotentials > 0          # the capped factors were replaced by new potentials


@pytest.mark.parametrize("reverse", [False, True])
def test_a_divergent_self_loop_on_a_state_no_mass_reaches_is_harmless_with_bands(rng, small_bands, reverse):
    # state h of a banded component has a self-loop of weight 1.5 and its arcs in (forward;
    # out, backward) all of weight zero: no mass reaches it, so the solve must not diverge.
    # The check reads those arcs' rows, which are in band order (through perm's inverse).
    m = random_machine(rng, 600, 5000, cyclic=True)
    h = 77
    into = (m.dst if not reverse else m.arc_src) == h
    w = np.where(into, np.inf, m.weight)
    final = m.final.copy()
    if reverse:
        final[h] = np.inf                                           # (its own input backward)
    loop = Machine.from_arcs(600, 0, final, np.r_[m.arc_src, h], np.r_[m.dst, h], np.r_[m.ilabel, 1],
                             weight=np.r_[w, -math.log(1.5)])
    plain = Machine.from_arcs(600, 0, final, m.arc_src, m.dst, m.ilabel, weight=w)
    got = shortest_distance(loop, "log", reverse=reverse)
    s = schedule_for(loop, reverse)
    c = int(np.searchsorted(s.comp_ptr, np.flatnonzero(s.comp_states == h)[0], side="right")) - 1
    assert _banded_components(loop, reverse)[0][c] >= 0           # h's component is banded
    assert np.isinf(got[h])
    assert rel_err(got, openfst_distances(plain.to_pynini("log64"), reverse, delta=1e-12)) < 1e-9
    # and where mass does reach it, the solve diverges
    reached = Machine.from_arcs(600, 0, m.final, np.r_[m.arc_src, h], np.r_[m.dst, h], np.r_[m.ilabel, 1],
                                weight=np.r_[m.weight, -math.log(1.5)])
    with pytest.raises(DivergenceError, match=f"state {h} has self-loops"):
        shortest_distance(reached, "log", reverse=reverse)


def test_divergence_and_the_sweep_limit_with_bands(rng, small_bands):
    m = random_machine(rng, 400, 4000, cyclic=True, mass=0.9)
    m = m.replace(weight=m.weight - 0.4)            # each state's arcs now carry 0.9 e^0.4 = 1.34
    with pytest.raises(DivergenceError):
        forward(m)
    m = random_machine(rng, 400, 4000, cyclic=True, mass=0.999)
    with pytest.raises(NotConvergedError, match="within 3 sweeps"):
        forward(m, max_sweeps=3)


def test_expectation_rows_take_the_flat_sweep(rng, small_bands):
    # bands are for one-column rows; the expectation semiring's solve is unchanged by them
    m = random_machine(rng, 500, 4000, cyclic=True)
    v = rng.random(m.num_arcs)
    got = shortest_distance(m, "expectation", arc_values=v)
    ref = openfst_distances(m.to_pynini("log64"), False, delta=1e-12)
    assert rel_err(got[:, 0], ref) < 1e-9
    assert not any(isinstance(k, tuple) and k[0] == "bands" for k in m._cache)


@pytest.mark.parametrize("reverse", [False, True])
def test_two_banded_components_and_the_rest_of_the_schedule(rng, small_bands, reverse):
    # two random cyclic blocks of 300 and 500 states, joined by arcs one way only, and a
    # tail of 40 acyclic states: two banded components with their own offsets
    a = random_machine(rng, 300, 2400, cyclic=True)
    b = random_machine(rng, 500, 4000, cyclic=True)
    src = np.r_[a.arc_src, b.arc_src + 300, np.arange(0, 300, 10), np.arange(800, 839), [300, 500]]
    dst = np.r_[a.dst, b.dst + 300, np.arange(300, 600, 10), np.arange(801, 840), [800, 820]]
    w = np.r_[a.weight, b.weight, np.full(30, 2.0), np.full(39, 0.3), [1.0, 1.0]]
    final = np.r_[a.final, b.final, np.full(40, 0.5)]
    m = Machine.from_arcs(840, 0, final, src, dst, np.ones(src.size, int), weight=w)
    got = shortest_distance(m, "log", reverse=reverse)
    bits = _banded_components(m, reverse)[0]
    assert (bits >= 0).sum() == 2
    assert rel_err(got, openfst_distances(m.to_pynini("log64"), reverse, delta=1e-12)) < 1e-9
    # a re-weighted copy shares the layout (it depends on the topology only)
    m2 = m.replace(weight=w * 1.01)
    key = ("bands", reverse, B.BAND_BITS, B.BAND_MIN_STATES)
    assert m2._cache[key] is m._cache[key]
    got2 = shortest_distance(m2, "log", reverse=reverse)
    assert rel_err(got2, openfst_distances(m2.to_pynini("log64"), reverse, delta=1e-12)) < 1e-9

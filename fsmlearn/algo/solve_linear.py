"""The relaxation solver of the linear semirings: the algebraic path problem over a schedule.

For a graph with arc values ``W`` and initial values ``b`` the solvers compute
the least solution of ``x = b (+) (+)_{arcs t->h} x_t (x) W_a`` (Mohri 2002):
forward or backward values, depending on the schedule's direction.

Linear semirings (real, log, expectation) work on scaled rows (see
:mod:`fsmlearn.semiring.ops`).  Runs of trivial components (acyclic stretches)
take one flat pass over their external arcs.  Each cyclic component is solved
by relaxation (Eisner 2002, section 5):

1. each state's power-of-two potential is the exponent of its current value
   (its input, or the warm start); states without one yet take the
   component's largest, flagged as a guess;
2. the component is rescaled by those potentials into plain float64 rows and plain Gauss-Seidel sweeps run (one flat loop over
   the arcs, accumulators in registers; on a component of one-column rows too large for
   the cache, the arcs in cache-sized bands, :mod:`fsmlearn.algo.bands`) until the estimated error is below
   ``tol``.  The error is dominated by one real eigenvalue of the
   non-negative iteration matrix (Perron-Frobenius), so once the ratio ``lam``
   of successive L1 changes settles (to 1e-3) the iterate is extrapolated by
   ``lam / (1 - lam)`` times the last change (Aitken's delta-squared in
   vector form, as Kamvar et al. 2003 do for PageRank).  The stopping rule is
   ``change * r / (1 - r) <= tol`` with ``change`` the largest relative change
   of any state in the last sweep and ``r`` the largest settled rate seen: an
   estimate of the remaining relative error;
3. where plain arithmetic could have lost a value (a state whose potential
   was a guess ends at zero or out of range, or the system has negative arcs,
   as phi systems do), a sweep in scaled arithmetic verifies the fixed point
   exactly and restarts step 2 with fresh potentials if it fails.

Values leaving the plain range trigger new potentials.  An arc whose factor
under the potentials would overflow (more than 2**1000: a warm start far from
the solution) is capped, and instead of plain sweeps the component takes one
sweep in scaled arithmetic, which puts every row next to its inputs, and new
potentials.  Divergence (a settled
rate above 1, non-finite values, a reached self-loop of weight >= 1, or
potentials that grow without bound) returns status 1; the sweep limit
returns status 2.

The stopping rule, status and reason codes are :mod:`fsmlearn.algo.convergence`'s.
The acyclic one-pass kernel is :mod:`.solve_acyclic`, Bellman-Ford
:mod:`.solve_tropical`, the phi systems' Jacobi solver :mod:`.solve_phi`.

Public names: linear_solver, solve_linear, plain_sweep_kernel, gather, gather_par, gather_rows.

The kernels are module-level and read the row width from their arrays (a scaled row has
R + 2 columns, a plain row R + 1), so each is compiled once per argument type and cached
on disk; none is built at call time.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numba as nb
import numpy as np

from .._memory import huge_pages
from ..semiring.ops import EXP_UNSET, P2, fma, pow2_capped, from_plain, star_plain, times_plain, times_scaled, to_plain
from .convergence import (FACTOR, RATE_EXTRAPOLATE, STATUS_DIVERGED, STATUS_NOT_CONVERGED, STATUS_OK,
                          STATUS_REPOTENTIAL, WHY_NONFINITE, WHY_POTENTIAL, WHY_STAR, new_rate_state,
                          rate_step, stop_status, sweep_stats_rows, sweep_stats_start)
from .bands import banded_sweep1, build_plain_banded
from .schedule import trivial_run_end

__all__ = ["linear_solver", "solve_linear", "plain_sweep_kernel", "gather", "gather_par", "gather_rows"]

_RANGE_HI = 2.0**600
_RANGE_LO = 2.0**-600
_HI = 2.0**64
_LO = 2.0**-64
_MAX_REPOT = 60
_CAP = 1000.0     # largest power of two an arc's plain factor may take (see build_plain)
_MAX_ROUNDS = 8


@nb.njit(cache=True)
def gather(a, idx):
    """a[idx] for a 1-D array and valid indices, in numba: one loop of independent loads,
    about twice as fast as numpy's fancy indexing on the 10M random internal arcs of the
    engine benchmark (127-142 against 265-269 ms, docs/bench-engine.md); no bounds check."""
    out = huge_pages(np.empty(idx.shape[0], a.dtype))
    for i in range(idx.shape[0]):
        out[i] = a[idx[i]]
    return out


@nb.njit(cache=True, parallel=True)
def gather_par(a, idx):
    """:func:`gather` over numba's threads, 2**16 indices a task (the same array)."""
    n = idx.shape[0]
    out = huge_pages(np.empty(n, a.dtype))
    B = 1 << 16
    for j in nb.prange((n + B - 1) // B):
        for i in range(j * B, min(n, (j + 1) * B)):
            out[i] = a[idx[i]]
    return out


@nb.njit(cache=True)
def gather_rows(W, idx):
    """W[idx] for a 2-D array (rows), in numba."""
    K = W.shape[1]
    out = huge_pages(np.empty((idx.shape[0], K), W.dtype))
    if K == 2:
        for i in range(idx.shape[0]):
            r = idx[i]
            out[i, 0] = W[r, 0]
            out[i, 1] = W[r, 1]
    else:
        for i in range(idx.shape[0]):
            r = idx[i]
            for j in range(K):
                out[i, j] = W[r, j]
    return out


def linear_solver(R: int = 0):
    """The relaxation solver for linear semirings (any R): :func:`solve_linear`.

    One module-level kernel for every R (the row width comes from the arrays), so it is
    compiled once per argument type and cached on disk; its parts are in ``.kernels``.
    """
    return solve_linear


@nb.njit(cache=True)
def push_range(V, W, tail, head, e0, e1):
    for e in range(e0, e1):
        fma(V, head[e], V, tail[e], W, e)


@nb.njit(cache=True)
def row_nonzero(V, i):
    KE = V.shape[1] - 1
    for j in range(KE):
        if V[i, j] != 0.0:
            return True
    return False


@nb.njit(cache=True)
def scaled_sweep(Vl, B, S, W, ih, it, a0, a1, accr, wpos):
    """Vl[t] = (B[t] + sum Vl[s] W[e]) S[t] for every row with arcs (scaled).

    The arcs ``a0:a1`` are taken grouped by head (``ih``, ``it``); arc e's row is W[e], or
    W[a0 + wpos[e - a0]] where ``wpos`` is not empty (a banded component, whose rows are
    in band order: ``wpos`` is the inverse of the layout's ``perm``).
    """
    KE = Vl.shape[1] - 1
    prev = -1
    am = 0.0
    ak = EXP_UNSET
    moved = wpos.shape[0] > 0
    for e in range(a0, a1):
        t = ih[e]
        s = it[e]
        we = a0 + np.int64(wpos[e - a0]) if moved else e
        pu = Vl[s, 0]
        pw = W[we, 0]
        k = Vl[s, KE] + W[we, KE]
        if t != prev:
            am = B[t, 0]
            ak = B[t, KE]
            for j in range(1, KE):
                accr[j] = B[t, j]
        kn = max(k, ak)
        f1 = P2[min(int(kn - ak), 1100)]
        f2 = P2[min(int(kn - k), 1100)]
        am = am * f1 + pu * pw * f2
        for j in range(1, KE):
            accr[j] = accr[j] * f1 + (pu * W[we, j] + Vl[s, j] * pw) * f2
        ak = kn
        m = abs(am)
        for j in range(1, KE):
            m = max(m, abs(accr[j]))
        if m >= _HI or (m < _LO and m > 0.0):
            _, ex = math.frexp(m)
            am = math.ldexp(am, -ex)   # (a factor 2**-ex would overflow for a subnormal m)
            for j in range(1, KE):
                accr[j] = math.ldexp(accr[j], -ex)
            ak += ex
        sp = S[t, 0]
        Vl[t, 0] = am * sp
        for j in range(1, KE):
            Vl[t, j] = am * S[t, j] + accr[j] * sp
        Vl[t, KE] = ak
        prev = t


@nb.njit(inline="always")
def finish_row(t, acc, accr, yold, st):
    """Fold row t's change into st = [dn, sd, ymax, ymin, bad, sd0] (sd0, the first
    column's L1 change, where st has a sixth entry)."""
    KE = yold.shape[1]
    m = abs(acc)
    d = abs(acc - yold[t, 0])
    sd = d
    if st.shape[0] > 5:
        st[5] += d
    for j in range(1, KE):
        m = max(m, abs(accr[j]))
        dj = abs(accr[j] - yold[t, j])
        d = max(d, dj)
        sd += dj
    st[1] += sd
    if m > 0.0:
        if m > st[2]:
            st[2] = m
        if m < st[3]:
            st[3] = m
        r = d / m
        if r > st[0]:
            st[0] = r
    elif d > 0.0:
        st[0] = max(st[0], 1.0)
    if not (m < np.inf) or d != d:
        st[4] = t


@nb.njit(cache=True)
def plain_sweep(y, yold, b, Wp, ih, it, a0, a1, accr, st):
    """One Gauss-Seidel sweep over plain rows, measuring the change on the way.

    y[t] = b[t] + sum y[s] Wp[e] for every row with arcs; the row's old
    value is saved in ``yold`` when the row starts and its change is
    folded into ``st`` = [largest relative change of a row, L1 norm of
    the change, largest and smallest non-zero row magnitude, index of a
    non-finite row or -1, and where ``st`` has a sixth entry the first column's L1
    change] when it ends, so no extra pass is needed.
    """
    KE = y.shape[1]
    st[0] = 0.0
    st[1] = 0.0
    st[2] = 0.0
    st[3] = np.inf
    st[4] = -1.0
    if st.shape[0] > 5:
        st[5] = 0.0
    prev = -1
    acc = 0.0
    for e in range(a0, a1):
        t = ih[e]
        s = it[e]
        ys = y[s, 0]
        w0 = Wp[e - a0, 0]
        v = ys * w0
        if t != prev:
            if prev >= 0:
                finish_row(prev, acc, accr, yold, st)
            yold[t, 0] = y[t, 0]
            acc = b[t, 0] + v
            for j in range(1, KE):
                yold[t, j] = y[t, j]
                accr[j] = b[t, j] + ys * Wp[e - a0, j] + y[s, j] * w0
        else:
            acc = acc + v
            for j in range(1, KE):
                accr[j] += ys * Wp[e - a0, j] + y[s, j] * w0
        y[t, 0] = acc
        for j in range(1, KE):
            y[t, j] = accr[j]
        prev = t
    if prev >= 0:
        finish_row(prev, acc, accr, yold, st)


@nb.njit(cache=True)
def plain_sweep1(y, yold, b, Wp, ih, it, a0, a1, hasrow, st):
    """plain_sweep for one-column rows (real and log): 1-D values, unsigned indices.

    ``y``, ``yold``, ``b``: float64 [n]; ``Wp``: float64 [a1 - a0];
    ``ih``, ``it``: uint32 views of the head and tail arrays; ``hasrow``:
    bool [n], the rows with arcs in a0:a1.  The same sweep and the same
    ``st`` as :func:`plain_sweep` (its L1 change summed in another order), in three
    flat loops:

    1. ``yold = y`` (the component's values before the sweep);
    2. one loop over the arcs without a branch: each arc adds its term to
       the running sum of its head's row, which starts again from ``b``
       where the head changes (a select, not a jump), and the sum is stored
       in ``y`` after every arc, so a later row reads the row's newest value
       as Gauss-Seidel does.  Rows of varying length no longer cost a
       mispredicted jump each (about a third of the sweep on a machine with
       Poisson in-degrees; docs/bench-engine.md);
    3. the statistics over the rows with arcs, from ``y`` and ``yold``
       (:func:`sweep_stats`).

    Without the per-access negative-index checks of signed indices.
    """
    n = y.shape[0]
    for i in range(n):
        yold[i] = y[i]
    one = np.uint64(1)
    e = np.uint64(a0)
    end = np.uint64(a1)
    w = np.uint64(0)
    prev = np.uint32(0xFFFFFFFF)   # no row: local indices are below 2**32 - 1
    acc = 0.0
    while e < end:
        t = ih[e]
        base = b[t] if t != prev else acc
        acc = base + y[it[e]] * Wp[w]
        y[t] = acc
        prev = t
        e += one
        w += one
    sweep_stats(y, yold, hasrow, a1 > a0, st)


@nb.njit(cache=True)
def sweep_stats(y, yold, hasrow, any_arcs, st):
    """The statistics of a one-column sweep from the values after and before it (the rows
    with arcs): ``st`` = [largest relative change, L1 change, largest and smallest non-zero
    magnitude, the last non-finite row or -1]
    (:func:`fsmlearn.algo.convergence.sweep_stats_rows` over every row)."""
    sweep_stats_start(st)
    if any_arcs:
        sweep_stats_rows(y, yold, hasrow, 0, y.shape[0], st)


@nb.njit(cache=True)
def set_potentials(Vl, pot, fallback):
    """Potentials = exponents of the rows; zero rows get the largest (flagged)."""
    KE = Vl.shape[1] - 1
    n = Vl.shape[0]
    have = False
    best = 0.0
    any_fb = False
    for i in range(n):
        if row_nonzero(Vl, i):
            pot[i] = Vl[i, KE]
            fallback[i] = False
            if not have or pot[i] > best:
                best = pot[i]
            have = True
        else:
            fallback[i] = True
            any_fb = True
    for i in range(n):
        if fallback[i]:
            pot[i] = best
    return any_fb


@nb.njit(cache=True)
def build_plain(Vl, B, pot, S, hasrow, Wint, ih, it, a0, a1, y, b, Wp, bS, bh, bt):
    """Plain rows and arcs under the potentials; True when an arc's factor was capped.

    With bands (``bS >= 0``, one-column rows, ``Wint[a0:a1]`` in band order) the arcs'
    factors are written in band order (:func:`fsmlearn.algo.bands.build_plain_banded`),
    otherwise in head order.

    An arc whose value relative to its head's potential exceeds 2**_CAP
    (potentials far from consistent, e.g. a warm start off by e^1000) is
    capped there instead of overflowing to inf; the caller then takes one
    sweep in scaled arithmetic and new potentials instead of plain sweeps.
    """
    KE = y.shape[1]
    n = Vl.shape[0]
    capped = False
    for i in range(n):
        to_plain(y, i, Vl, i, pot[i])
        to_plain(b, i, B, i, pot[i])
        times_plain(b, i, b, i, S, i)
        if not hasrow[i]:
            for j in range(KE):
                y[i, j] = b[i, j]
    if KE == 1 and bS >= 0:
        return build_plain_banded(Wint, a0, bh, bt, pot, S, Wp.reshape(Wp.shape[0]))
    if KE == 1:
        # the same conversion with unsigned indices (no negative-index checks)
        ihu = ih.view(np.uint32)
        itu = it.view(np.uint32)
        one = np.uint64(1)
        e = np.uint64(a0)
        w = np.uint64(0)
        end = np.uint64(a1)
        while e < end:
            h = ihu[e]
            f, cap = pow2_capped(Wint[e, 1] - (pot[h] - pot[itu[e]]), _CAP)
            capped |= cap
            Wp[w, 0] = Wint[e, 0] * f * S[h, 0]
            e += one
            w += one
        return capped
    for e in range(a0, a1):
        h = ih[e]
        t = it[e]
        d = pot[h] - pot[t]
        if Wint[e, KE] - d > _CAP:
            d = Wint[e, KE] - _CAP
            capped = True
        to_plain(Wp, e - a0, Wint, e, d)
        times_plain(Wp, e - a0, S, h, Wp, e - a0)
    return capped


@nb.njit(cache=True)
def rel_change_scaled(Vl, Vo):
    """Largest relative change between two scaled row arrays (0 -> x counts 1)."""
    KE = Vl.shape[1] - 1
    dn = 0.0
    for i in range(Vl.shape[0]):
        ka = Vl[i, KE]
        kb = Vo[i, KE]
        za = not row_nonzero(Vl, i)
        zb = not row_nonzero(Vo, i)
        if za and zb:
            continue
        if za or zb:
            return 1.0
        kn = max(ka, kb)
        fa = P2[min(int(kn - ka), 1100)]
        fb = P2[min(int(kn - kb), 1100)]
        m = 0.0
        d = 0.0
        for j in range(KE):
            x = Vl[i, j] * fa
            z = Vo[i, j] * fb
            m = max(m, abs(x), abs(z))
            d = max(d, abs(x - z))
        if m > 0.0:
            dn = max(dn, d / m)
    return dn


@nb.njit(cache=True)
def plain_phase(y, yold, b, Wp, ih, it, a0, a1, hasrow, accr, tol, max_sweeps, stats, fstats,
                bS, bh, bt, gptr, code, bacc):
    """Plain Gauss-Seidel with extrapolation; returns status (3: needs new potentials).

    Rows without internal arcs are constants and do not count; after a
    sweep ``yold`` holds the previous values of the rows with arcs.  With bands
    (``bS >= 0``; one-column rows, ``Wp`` in band order) each sweep is
    :func:`fsmlearn.algo.bands.banded_sweep1`.
    """
    KE = y.shape[1]
    rs = new_rate_state(fstats[3])
    st = np.zeros(6)
    if KE == 1:
        y1 = y.reshape(y.shape[0])
        yold1 = yold.reshape(yold.shape[0])
        b1 = b.reshape(b.shape[0])
        Wp1 = Wp.reshape(Wp.shape[0])
        ihu = ih.view(np.uint32)
        itu = it.view(np.uint32)
    while stats[0] < max_sweeps:
        if KE == 1 and bS >= 0:
            banded_sweep1(y1, yold1, b1, Wp1, bh, bt, gptr, bS, code, bacc, st)
        elif KE == 1:
            plain_sweep1(y1, yold1, b1, Wp1, ihu, itu, a0, a1, hasrow, st)
        else:
            plain_sweep(y, yold, b, Wp, ih, it, a0, a1, accr, st)
        dn = st[0]
        sd = st[1]
        if KE > 1 and st[5] > 0.0:
            # the rate from the first column: the expectation components' k lam^k tails
            # change by lam (1 + 1/k) a sweep, above 1 for long when lam is near 1
            sd = st[5]
        ymax = st[2]
        ymin = st[3]
        bad = int(st[4])
        stats[0] += 1
        if bad >= 0:
            stats[4] = WHY_NONFINITE
            stats[5] = bad
            return STATUS_DIVERGED
        fstats[0] = dn
        if ymax > _RANGE_HI or ymin < _RANGE_LO:
            return STATUS_REPOTENTIAL
        decision = rate_step(rs, dn, sd, tol, KE == 1, False, KE > 1, stats, fstats)
        if stop_status(decision) >= 0:
            return stop_status(decision)
        if decision == RATE_EXTRAPOLATE:
            c = rs[FACTOR]
            for t in range(y.shape[0]):
                if hasrow[t]:
                    for j in range(KE):
                        y[t, j] += (y[t, j] - yold[t, j]) * c
            stats[1] += 1
    return STATUS_NOT_CONVERGED


@nb.njit(cache=True)
def _rows_at(wpos, perm, bS):
    """Where each head-ordered internal arc's row lies in a banded component's band-ordered
    rows (the inverse of the layout's ``perm``), made once; empty without bands."""
    if bS < 0 or wpos.shape[0] == perm.shape[0]:
        return wpos
    out = np.empty(perm.shape[0], np.uint32)
    for p in range(perm.shape[0]):
        out[perm[p]] = np.uint32(p)
    return out


@nb.njit(cache=True)
def solve_scc(V, states, a0, a1, s0, s1, Wint, ih, it, Wself, sloc, warm, use_warm, signed,
              tol, max_sweeps, stats, fstats, bS, perm, bh, bt, gptr, code, two_threads):
    """Solve one cyclic component in place (steps 1-3 of the module docstring).

    V: float64 [N, K] scaled rows of every state (the component's rows hold their
    inputs on entry and the solution on exit); states: int32 [n] the component's
    states in row order; a0:a1 its internal arcs (Wint [*, K] scaled weights, ih / it
    int32 local head and tail, grouped by head), s0:s1 its self-loops (Wself, sloc
    local state); warm: float64 [N, K] a warm start (used with use_warm); signed: the
    system has negative arcs (verify in scaled arithmetic).  bS >= 0: the component's
    band width in bits, with its band layout (perm, bh, bt, gptr, code:
    :func:`fsmlearn.algo.bands.band_layout`), used for one-column rows, whose rows
    ``Wint[a0:a1]`` are then in band order (:func:`fsmlearn.algo.bands.band_order`; ih / it
    stay grouped by head); -1 for none.  two_threads: the banded sweep runs as its two-thread
    pipeline (numba has two; :func:`fsmlearn.algo.bands.banded_sweep1`).
    Returns a STATUS_* code and fills stats / fstats (:mod:`fsmlearn.algo.convergence`'s
    layout).
    """
    K = V.shape[1]
    KE = K - 1
    n = states.shape[0]
    fstats[3] = 0.0
    B = huge_pages(np.empty((n, K)))
    anyb = False
    for i in range(n):
        for j in range(K):
            B[i, j] = V[states[i], j]
        if row_nonzero(B, i):
            anyb = True
    if not anyb:
        return STATUS_OK  # no mass enters: the solution is zero (V already is)
    # Kleene stars of the self-loops (plain rows)
    S = huge_pages(np.empty((n, KE)))
    S[:] = 0.0
    S[:, 0] = 1.0
    bad = np.zeros(n, np.bool_)
    nbad = 0
    if s1 > s0:
        T = np.zeros((n, KE))
        tmp = np.empty((1, KE))
        seen = np.zeros(n, np.bool_)
        for e in range(s0, s1):
            h = sloc[e]
            to_plain(tmp, 0, Wself, e, 0.0)
            for j in range(KE):
                T[h, j] += tmp[0, j]
            seen[h] = True
        for h in range(n):
            if seen[h] and not star_plain(S, h, T, h):
                bad[h] = True
                nbad += 1
                for j in range(KE):
                    S[h, j] = 0.0
    Sc = huge_pages(np.empty((n, K)))
    for h in range(n):
        from_plain(Sc, h, S, h, 0.0)
    hasrow = np.zeros(n, np.bool_)
    for e in range(a0, a1):
        hasrow[ih[e]] = True
    Vl = huge_pages(np.empty((n, K)))
    for i in range(n):
        if use_warm and hasrow[i]:
            for j in range(K):
                Vl[i, j] = warm[states[i], j]
        else:
            times_scaled(Vl, i, B, i, Sc, i)
    accr = np.zeros(max(KE, 1))
    if KE != 1:
        bS = -1
    # (a scratch of four bands lets the banded sweep run on two threads: the rule of
    # bands.sweep_scratch, written out because a kernel cannot call that Python function)
    bacc = np.empty(((4 if two_threads else 1) << bS) if bS >= 0 else 0)
    # Rows that are still zero get the largest potential of the component
    # (flagged as a guess); the range checks and the final verification
    # catch a guess that was wrong.
    fallback = np.zeros(n, np.bool_)
    pot = huge_pages(np.empty(n))
    # (the large arrays in transparent huge pages: fresh, they are faulted in a 2 MiB
    # page at a time instead of 4 KiB; fsmlearn._memory)
    y = huge_pages(np.empty((n, KE)))
    yold = huge_pages(np.empty((n, KE)))
    b = huge_pages(np.empty((n, KE)))
    Wp = huge_pages(np.empty((a1 - a0, KE)))
    Vo = huge_pages(np.empty((n, K)))
    wpos = np.empty(0, np.uint32)   # where each head-ordered arc's row is (banded: made when first needed)
    status = STATUS_NOT_CONVERGED
    rounds = 0
    repots = 0
    while True:
        any_fb = set_potentials(Vl, pot, fallback)
        for i in range(n):
            if abs(pot[i]) > 1.0e7:
                stats[4] = WHY_POTENTIAL
                stats[5] = states[i]
                return STATUS_DIVERGED
        if build_plain(Vl, B, pot, S, hasrow, Wint, ih, it, a0, a1, y, b, Wp, bS, bh, bt):
            # Potentials far from consistent (a warm start far off): capped arcs
            # describe another system, and a chain of them could overflow plain
            # values.  One exact sweep in scaled arithmetic puts every row next to
            # its inputs; then new potentials.
            wpos = _rows_at(wpos, perm, bS)
            scaled_sweep(Vl, B, S, Wint, ih, it, a0, a1, accr, wpos)
            stats[0] += 1
            st = STATUS_REPOTENTIAL
        else:
            st = plain_phase(y, yold, b, Wp, ih, it, a0, a1, hasrow, accr, tol, max_sweeps, stats, fstats,
                             bS, bh, bt, gptr, code, bacc)
            for i in range(n):
                from_plain(Vl, i, y, i, pot[i])
        if st == STATUS_DIVERGED:
            if stats[4] == WHY_NONFINITE:
                stats[5] = states[stats[5]]
            return STATUS_DIVERGED
        if st == STATUS_REPOTENTIAL:
            repots += 1
            stats[2] += 1
            if repots > _MAX_REPOT:
                stats[4] = WHY_POTENTIAL
                return STATUS_DIVERGED
            continue
        if st == STATUS_NOT_CONVERGED:
            return STATUS_NOT_CONVERGED
        # Plain arithmetic is exact up to rounding when every potential came
        # from the row's own magnitude (values only grow from there in a
        # non-negative system, so no term that mattered can have
        # underflowed).  Otherwise verify with one sweep in scaled arithmetic.
        need = signed
        if not need and any_fb:
            for i in range(n):
                if fallback[i] and hasrow[i]:
                    m = 0.0
                    for j in range(KE):
                        m = max(m, abs(y[i, j]))
                    if m == 0.0 or m < 2.0**-500 or m > 2.0**500:
                        need = True
                        break
        if not need:
            status = STATUS_OK
            break
        for i in range(n):
            for j in range(K):
                Vo[i, j] = Vl[i, j]
        wpos = _rows_at(wpos, perm, bS)
        scaled_sweep(Vl, B, S, Wint, ih, it, a0, a1, accr, wpos)
        stats[0] += 1
        dn = rel_change_scaled(Vl, Vo)
        r = max(fstats[3], 0.5)
        if dn == 0.0 or (r < 1.0 and dn * r / (1.0 - r) <= tol) or dn <= tol * 1e-3:
            status = STATUS_OK
            break
        rounds += 1
        if rounds >= _MAX_ROUNDS or stats[0] >= max_sweeps:
            fstats[0] = dn
            return STATUS_NOT_CONVERGED
    if nbad:
        wpos = _rows_at(wpos, perm, bS)
        moved = wpos.shape[0] > 0
        for h in range(n):
            if not bad[h]:
                continue
            reached = row_nonzero(B, h)
            for e in range(a0, a1):
                we = a0 + np.int64(wpos[e - a0]) if moved else e
                if ih[e] == h and Wint[we, 0] != 0.0 and row_nonzero(Vl, it[e]):
                    reached = True
            if reached:
                stats[4] = WHY_STAR
                stats[5] = states[h]
                return STATUS_DIVERGED
    for i in range(n):
        for j in range(K):
            V[states[i], j] = Vl[i, j]
    return status


@nb.njit(cache=True)
def solve_linear(V, Wext, ext_tail, ext_head, ext_ptr, Wint, int_tail, int_head, int_ptr,
                 Wself, self_loc, self_ptr, comp_ptr, comp_states, trivial, warm, use_warm, signed, tol,
                 max_sweeps, stats, fstats, bands, two_threads):
    """Solve the schedule's components in order (the module docstring); ``bands`` is
    :func:`fsmlearn.algo.bands.band_layout`'s tuple (or :func:`~fsmlearn.algo.bands.no_bands`),
    and a banded component's internal rows in ``Wint`` are in band order
    (:func:`fsmlearn.algo.bands.band_order`); ``two_threads``: numba has two threads for
    the banded sweeps.
    Returns a STATUS_* code; stats[3] is the component that failed."""
    bits, bptr, goff, gptr, perm, bh, bt, code = bands
    C = trivial.shape[0]
    c = 0
    while c < C:
        if trivial[c]:
            c2 = trivial_run_end(trivial, c)
            push_range(V, Wext, ext_tail, ext_head, ext_ptr[c], ext_ptr[c2])
            c = c2
        else:
            bS = bits[c] if bits.shape[0] > 0 else -1
            if bS >= 0:
                p0, p1, g0, g1 = bptr[c], bptr[c + 1], goff[c], goff[c + 1]
                r0, r1 = comp_ptr[c], comp_ptr[c + 1]
            else:
                p0 = p1 = g0 = g1 = r0 = r1 = 0
            st = solve_scc(V, comp_states[comp_ptr[c]:comp_ptr[c + 1]], int_ptr[c], int_ptr[c + 1],
                           self_ptr[c], self_ptr[c + 1], Wint, int_head, int_tail, Wself, self_loc,
                           warm, use_warm, signed, tol, max_sweeps, stats, fstats,
                           bS, perm[p0:p1], bh[p0:p1], bt[p0:p1], gptr[g0:g1], code[r0:r1], two_threads)
            if st != STATUS_OK:
                stats[3] = c
                return st
            push_range(V, Wext, ext_tail, ext_head, ext_ptr[c], ext_ptr[c + 1])
            c += 1
    return STATUS_OK


solve_linear.kernels = SimpleNamespace(plain_sweep=plain_sweep, plain_sweep1=plain_sweep1,
                                       set_potentials=set_potentials, build_plain=build_plain,
                                       scaled_sweep=scaled_sweep, plain_phase=plain_phase, solve_scc=solve_scc,
                                       push_range=push_range)


def plain_sweep_kernel(R: int = 0):
    """The plain Gauss-Seidel sweep the linear solver runs over a cyclic component, for
    benchmarks that time one sweep.

    For ``R = 0`` (scalar rows) it is ``plain_sweep1(y, yold, b, Wp, ih, it, a0, a1, hasrow, st)``:
    y, yold, b float64 [n] (values, previous values, constants), Wp float64 [arcs] the
    arcs' plain weights, ih / it uint32 [arcs] head and tail (component-local states,
    arcs sorted by head), a0:a1 the component's arcs, hasrow bool [n] the rows with
    arcs there, st float64 [5] out (largest
    relative change, L1 change, largest and smallest value, the last bad row or -1).
    For R > 0 the row-valued ``plain_sweep`` (no ``hasrow``; an accumulator float64
    [R + 1] before ``st``).
    """
    k = solve_linear.kernels
    return k.plain_sweep1 if R == 0 else k.plain_sweep

"""Solver kernels: the single-source (algebraic path) problem over a schedule.

For a graph with arc values ``W`` and initial values ``b`` the solvers compute
the least solution of ``x = b (+) (+)_{arcs t->h} x_t (x) W_a`` (Mohri 2002),
i.e. forward or backward values depending on the schedule's direction.

Linear semirings (real, log, expectation) work on scaled rows (see
:mod:`fsmlearn.semiring.ops`).  Acyclic stretches take one pass over the
external arcs.  Each cyclic component is solved by relaxation (Eisner 2002,
section 5): a few scaled Gauss-Seidel sweeps fix each state's magnitude, the
component is rescaled by those per-state power-of-two potentials into plain
float64 rows, and plain Gauss-Seidel sweeps run until the estimated error is
below ``tol``.  The error of a sweep is dominated by one real eigenvalue
(Perron-Frobenius: the iteration matrix is non-negative for phi-free
machines), so when the ratio of successive changes settles at ``lam`` the
iterate is extrapolated by ``lam/(1-lam)`` times the last change (Aitken's
delta-squared, vector form; as in Kamvar et al. 2003 for PageRank); the
stopping rule is ``change * r / (1 - r) <= tol`` with ``r`` the largest settled
rate seen, an upper bound of the remaining relative error.  Divergence (a
settled rate of at least 1, non-finite values, a self-loop of weight >= 1 on a
reached state, or potentials that grow without bound) returns status 1; the
sweep limit returns status 2.

The tropical solver runs Bellman-Ford sweeps in the same order, recording
back-pointers; more than n+1 sweeps on an n-state component mean a negative
cycle (status 1).

Public names: linear_solver, tropical_solver, gather_rows, STATUS_OK,
STATUS_DIVERGED, STATUS_NOT_CONVERGED and the ``WHY_*`` reason codes.
"""

from __future__ import annotations

from functools import lru_cache

import numba as nb
import numpy as np

from ..semiring.ops import EXP_UNSET, scaled_ops, tropical_ops

STATUS_OK, STATUS_DIVERGED, STATUS_NOT_CONVERGED = 0, 1, 2
WHY_NONFINITE, WHY_RATE, WHY_STAR, WHY_POTENTIAL, WHY_NEGCYCLE = 1, 2, 3, 4, 5
# stats (int64): 0 sweeps, 1 extrapolations, 2 repotentials, 3 failing component, 4 reason,
#                5 failing state position
# fstats (float64): 0 last change, 1 last rate, 2 largest settled rate
_RANGE_HI = 2.0**600
_RANGE_LO = 2.0**-600
_MAX_REPOT = 60


@nb.njit(cache=True)
def gather_rows(W, idx):
    """W[idx] for a 2-D array (rows), in numba (no temporary per row)."""
    K = W.shape[1]
    out = np.empty((idx.shape[0], K), W.dtype)
    for i in range(idx.shape[0]):
        r = idx[i]
        for j in range(K):
            out[i, j] = W[r, j]
    return out


@lru_cache(maxsize=None)
def linear_solver(R: int):
    """The relaxation solver for linear semirings with R expectation components."""
    ops = scaled_ops(R)
    K = ops.K
    KE = K - 1
    fma = ops.fma
    fma_reset = ops.fma_reset
    to_plain = ops.to_plain
    from_plain = ops.from_plain
    times_plain = ops.times_plain
    star_plain = ops.star_plain
    times_scaled = ops.times_scaled

    @nb.njit(cache=True)
    def push_range(V, W, tail, head, e0, e1):
        for e in range(e0, e1):
            fma(V, head[e], V, tail[e], W, e)

    @nb.njit(cache=True)
    def row_nonzero(V, i):
        for j in range(KE):
            if V[i, j] != 0.0:
                return True
        return False

    @nb.njit(cache=True)
    def build_plain(V, lo, n, B, pot, star, Wint, int_tail, int_head, a0, a1, int_row, y, b, Wp):
        for i in range(n):
            to_plain(y, i, V, lo + i, pot[i])
            to_plain(b, i, B, i, pot[i])
            times_plain(b, i, b, i, star, i)
            if int_row[lo + i] == int_row[lo + i + 1]:
                for j in range(KE):
                    y[i, j] = b[i, j]
        for e in range(a0, a1):
            h = int_head[e] - lo
            t = int_tail[e] - lo
            to_plain(Wp, e - a0, Wint, e, pot[h] - pot[t])
            times_plain(Wp, e - a0, star, h, Wp, e - a0)

    @nb.njit(cache=True)
    def set_potentials(V, lo, n, pot):
        have = False
        best = 0.0
        for i in range(n):
            if row_nonzero(V, lo + i):
                pot[i] = V[lo + i, KE]
                if not have or pot[i] > best:
                    best = pot[i]
                have = True
            else:
                pot[i] = np.nan
        for i in range(n):
            if pot[i] != pot[i]:
                pot[i] = best
        return have

    @nb.njit(cache=True)
    def solve_scc(V, lo, hi, a0, a1, s0, s1, Wint, int_tail, int_head, int_row, Wself, self_pos,
                  warm, use_warm, tol, max_sweeps, stats, fstats):
        n = hi - lo
        B = V[lo:hi].copy()
        anyb = False
        for i in range(n):
            if row_nonzero(B, i):
                anyb = True
                break
        if not anyb:
            for i in range(n):
                for j in range(KE):
                    V[lo + i, j] = 0.0
                V[lo + i, KE] = EXP_UNSET
            return 0
        # Kleene stars of the self-loops (plain rows, exact values)
        star = np.zeros((n, KE))
        star[:, 0] = 1.0
        bad = np.zeros(n, np.bool_)
        nbad = 0
        if s1 > s0:
            S = np.zeros((n, KE))
            tmp = np.empty((1, KE))
            seen = np.zeros(n, np.bool_)
            for e in range(s0, s1):
                h = self_pos[e] - lo
                to_plain(tmp, 0, Wself, e, 0.0)
                for j in range(KE):
                    S[h, j] += tmp[0, j]
                seen[h] = True
            for h in range(n):
                if seen[h]:
                    if not star_plain(star, h, S, h):
                        bad[h] = True
                        nbad += 1
                        for j in range(KE):
                            star[h, j] = 0.0
        # star rows in scaled form, for the scaled sweeps
        Sc = np.empty((n, K))
        for h in range(n):
            from_plain(Sc, h, star, h, 0.0)
        T = np.empty((1, K))
        if use_warm:
            for i in range(n):
                for j in range(K):
                    V[lo + i, j] = warm[lo + i, j]
        else:
            for i in range(n):
                times_scaled(V, lo + i, B, i, Sc, i)
            for sweep in range(2):
                for p in range(lo, hi):
                    r0 = int_row[p]
                    r1 = int_row[p + 1]
                    for j in range(K):
                        T[0, j] = B[p - lo, j]
                    for e in range(r0, r1):
                        fma(T, 0, V, int_tail[e], Wint, e)
                    times_scaled(V, p, T, 0, Sc, p - lo)
            stats[0] += 2
        pot = np.empty(n)
        y = np.empty((n, KE))
        yold = np.empty((n, KE))
        b = np.empty((n, KE))
        Wp = np.empty((a1 - a0, KE))
        set_potentials(V, lo, n, pot)
        build_plain(V, lo, n, B, pot, star, Wint, int_tail, int_head, a0, a1, int_row, y, b, Wp)
        plain = 0
        dn_prev = 0.0
        lam_prev = -1.0
        rho = 0.0
        settled_ge1 = 0
        sweeps = 0
        repots = 0
        status = 2
        while sweeps < max_sweeps:
            for i in range(n):
                for j in range(KE):
                    yold[i, j] = y[i, j]
            prev = -1
            for e in range(a0, a1):
                t = int_head[e] - lo
                fma_reset(y, t, b, y, int_tail[e] - lo, Wp, e - a0, t != prev)
                prev = t
            sweeps += 1
            dn = 0.0
            ymax = 0.0
            ymin = np.inf
            finite = True
            for i in range(n):
                m = 0.0
                d = 0.0
                for j in range(KE):
                    m = max(m, abs(y[i, j]))
                    d = max(d, abs(y[i, j] - yold[i, j]))
                if not (m < np.inf) or d != d:
                    finite = False
                    stats[5] = lo + i
                    break
                if m > 0.0:
                    r = d / m
                    ymax = max(ymax, m)
                    ymin = min(ymin, m)
                else:
                    r = 1.0 if d > 0.0 else 0.0
                dn = max(dn, r)
            if not finite:
                stats[4] = 1
                status = 1
                break
            if ymax > _RANGE_HI or ymin < _RANGE_LO:
                repots += 1
                if repots > _MAX_REPOT:
                    stats[4] = 4
                    status = 1
                    break
                for i in range(n):
                    from_plain(V, lo + i, y, i, pot[i])
                set_potentials(V, lo, n, pot)
                for i in range(n):
                    if abs(pot[i]) > 1.0e7:
                        stats[4] = 4
                        stats[5] = lo + i
                        status = 1
                if status == 1:
                    break
                build_plain(V, lo, n, B, pot, star, Wint, int_tail, int_head, a0, a1, int_row, y, b, Wp)
                plain = 0
                dn_prev = 0.0
                lam_prev = -1.0
                continue
            plain += 1
            if dn == 0.0:
                status = 0
                break
            lam = dn / dn_prev if (plain >= 2 and dn_prev > 0.0) else -1.0
            settled = plain >= 3 and lam > 0.0 and abs(lam - lam_prev) <= 0.02 * lam
            if settled and lam >= 1.0 - 1e-12:
                settled_ge1 += 1
                if settled_ge1 >= 8 and dn > tol:
                    stats[4] = 2
                    fstats[1] = lam
                    status = 1
                    break
            else:
                settled_ge1 = 0
            if settled and lam < 1.0 - 1e-12:
                if lam > rho:
                    rho = lam
                if lam > 0.3:
                    c = lam / (1.0 - lam)
                    for i in range(n):
                        for j in range(KE):
                            y[i, j] += (y[i, j] - yold[i, j]) * c
                    stats[1] += 1
                    plain = 0
                    dn_prev = 0.0
                    lam_prev = -1.0
                    fstats[0] = dn
                    fstats[1] = lam
                    continue
            if plain >= 2 and 0.0 <= lam < 1.0:
                r = max(rho, lam)
                if dn * r / (1.0 - r) <= tol:
                    status = 0
                    fstats[0] = dn
                    fstats[1] = lam
                    break
            dn_prev = dn
            lam_prev = lam
            fstats[0] = dn
            fstats[1] = lam
        stats[0] += sweeps
        stats[2] += repots
        fstats[2] = max(fstats[2], rho)
        if status != 0:
            return status
        if nbad:
            for h in range(n):
                if not bad[h]:
                    continue
                reached = row_nonzero(B, h)
                for e in range(int_row[lo + h], int_row[lo + h + 1]):
                    t = int_tail[e] - lo
                    if Wint[e, 0] != 0.0:
                        for j in range(KE):
                            if y[t, j] != 0.0:
                                reached = True
                if reached:
                    stats[4] = 3
                    stats[5] = lo + h
                    return 1
        for i in range(n):
            from_plain(V, lo + i, y, i, pot[i])
        return 0

    @nb.njit(cache=True)
    def solve(V, Wext, ext_tail, ext_head, ext_ptr, Wint, int_tail, int_head, int_ptr, int_row,
              Wself, self_pos, self_ptr, scc_ptr, trivial, warm, use_warm, tol, max_sweeps,
              stats, fstats):
        C = trivial.shape[0]
        c = 0
        while c < C:
            if trivial[c]:
                c2 = c
                while c2 < C and trivial[c2]:
                    c2 += 1
                push_range(V, Wext, ext_tail, ext_head, ext_ptr[c], ext_ptr[c2])
                c = c2
            else:
                st = solve_scc(V, scc_ptr[c], scc_ptr[c + 1], int_ptr[c], int_ptr[c + 1],
                               self_ptr[c], self_ptr[c + 1], Wint, int_tail, int_head, int_row,
                               Wself, self_pos, warm, use_warm, tol, max_sweeps, stats, fstats)
                if st != 0:
                    stats[3] = c
                    return st
                push_range(V, Wext, ext_tail, ext_head, ext_ptr[c], ext_ptr[c + 1])
                c += 1
        return 0

    return solve


@lru_cache(maxsize=None)
def tropical_solver():
    """Bellman-Ford relaxation in the tropical semiring with back-pointers."""
    fma = tropical_ops().fma

    @nb.njit(cache=True)
    def solve(V, bp, Wext, ext_tail, ext_head, ext_arc, ext_ptr, Wint, int_tail, int_head, int_arc,
              int_ptr, Wself, self_pos, self_ptr, scc_ptr, trivial, max_sweeps, stats):
        C = trivial.shape[0]
        for c in range(C):
            if not trivial[c]:
                n = scc_ptr[c + 1] - scc_ptr[c]
                a0 = int_ptr[c]
                a1 = int_ptr[c + 1]
                sweeps = 0
                changed = True
                while changed:
                    changed = False
                    sweeps += 1
                    if sweeps > n + 1 or sweeps > max_sweeps:
                        stats[0] += sweeps
                        stats[3] = c
                        stats[4] = 5
                        return 1
                    for e in range(a0, a1):
                        if fma(V, int_head[e], V, int_tail[e], Wint, e):
                            bp[int_head[e]] = int_arc[e]
                            changed = True
                stats[0] += sweeps
                for e in range(self_ptr[c], self_ptr[c + 1]):
                    if Wself[e, 0] < 0.0 and V[self_pos[e], 0] < np.inf:
                        stats[3] = c
                        stats[4] = 5
                        stats[5] = self_pos[e]
                        return 1
            for e in range(ext_ptr[c], ext_ptr[c + 1]):
                if fma(V, ext_head[e], V, ext_tail[e], Wext, e):
                    bp[ext_head[e]] = ext_arc[e]
        return 0

    return solve

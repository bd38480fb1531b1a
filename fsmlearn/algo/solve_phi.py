"""Jacobi relaxation of phi (failure-arc) linear systems, equivalent to Jacobi on their
phi-free expansion (see :func:`phi_solver`), under the stopping rule of
:mod:`fsmlearn.algo.convergence`.

Public names: phi_solver, solve_phi, phi_step, phi_pass_down, gamma_from_alpha.

The kernels are module-level and read the row width (R + 1 plain columns) from their
arrays, so each is compiled once per argument type and cached on disk.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .convergence import (RATE_EXTRAPOLATE, STATUS_DIVERGED, STATUS_NOT_CONVERGED, STATUS_OK, WHY_STAR,
                          extrapolate, measure_change, new_rate_state, rate_step, stop_status)

__all__ = ["phi_solver", "solve_phi", "phi_step", "phi_pass_down", "gamma_from_alpha"]


class _PhiSolver:
    """The phi solver's kernels under the names the engine calls (the same for every R)."""

    __slots__ = ()

    def __call__(self, *args):
        return solve_phi(*args)

    @staticmethod
    def step(*args):
        return phi_step(*args)

    @staticmethod
    def gamma_from_alpha(*args):
        return gamma_from_alpha(*args)


_PHI_SOLVER = _PhiSolver()


def phi_solver(R: int = 0):
    """Jacobi relaxation of a phi system, equivalent to Jacobi on its phi-free expansion.

    With phi arcs Phi (a forest), own arcs A and exclusion arcs N (negative),
    backward values solve (I - Phi) beta = c + (A - N) beta.  The iteration

        beta <- (I - Phi)^{-1} (c + (A - N) beta)

    is computed as one pass over A - N and one pass down the phi forest
    (targets first), and (I - Phi)^{-1} (A - N) is exactly the non-negative
    matrix of the expanded machine: the iteration converges whenever the
    machine's weights do, with the expansion's rate, at the signed system's
    cost.  Forward values iterate gamma <- s + (A - N)^T (I - Phi^T)^{-1} gamma
    (the expansion's forward values) and return alpha = (I - Phi^T)^{-1} gamma,
    which counts flow through backoff states.  Plain float64 rows, Aitken
    extrapolation and the stopping rule of the relaxation solver.

    Own self-loops D (an LM state ``/ / / /`` whose word ``/`` returns to it
    with probability 0.9995, say) are applied exactly: the rows solve
    (1 - D) x = rest, x <- D* rest, instead of iterating the loop at its own
    rate (thousands of sweeps).  Exclusion arcs into their own state cancel
    the phi paths they shadow within one step, so they stay in the sweep.
    """
    return _PHI_SOLVER


@nb.njit(inline="always")
def _add_prod(Y, t, X, s, W, e):
    """Y[t] += X[s] (x) W[e] (plain rows)."""
    KE = Y.shape[1]
    px = X[s, 0]
    pw = W[e, 0]
    Y[t, 0] += px * pw
    for j in range(1, KE):
        Y[t, j] += px * W[e, j] + X[s, j] * pw


@nb.njit(cache=True)
def phi_pass_down(Z, order, phi_t, Wphi, forward):
    """backward: Z[q] += Wphi[q] Z[phi_t[q]] targets first; forward: Z[phi_t[q]] += Wphi[q] Z[q] sources first."""
    n = order.shape[0]
    for i in range(n):
        q = order[n - 1 - i] if forward else order[i]
        t = phi_t[q]
        if t < 0:
            continue
        if forward:
            _add_prod(Z, t, Z, q, Wphi, q)
        else:
            _add_prod(Z, q, Z, t, Wphi, q)


@nb.njit(inline="always")
def _times_star(Y, t, D):
    """Y[t] <- Y[t] (x) D[t]*  with D* = 1 / (1 - d0) and r-parts d_j / (1 - d0)^2."""
    KE = Y.shape[1]
    s0 = 1.0 / (1.0 - D[t, 0])
    y0 = Y[t, 0]
    Y[t, 0] = y0 * s0
    for j in range(1, KE):
        Y[t, j] = Y[t, j] * s0 + y0 * D[t, j] * s0 * s0


@nb.njit(cache=True)
def _phi_pass_down_star(Z, order, phi_t, Wphi, D, has_self):
    """backward pass (targets first) with each row's self-loop star applied once its phi term is in."""
    n = order.shape[0]
    for i in range(n):
        q = order[i]
        t = phi_t[q]
        if t >= 0:
            _add_prod(Z, q, Z, t, Wphi, q)
        if has_self[q]:
            _times_star(Z, q, D)


@nb.njit(cache=True)
def _self_rows(X, row_ptr, self_arc, W):
    """(D, has_self, bad): each row's own self-loop weight; bad = a row whose loop is >= 1, or -1."""
    n = X.shape[0]
    KE = X.shape[1]
    D = np.zeros_like(X)
    has_self = np.zeros(n, np.bool_)
    for t in range(n):
        for e in range(row_ptr[t], row_ptr[t + 1]):
            if self_arc[e]:
                has_self[t] = True
                for j in range(KE):
                    D[t, j] += W[e, j]
        if has_self[t] and not (D[t, 0] < 1.0):
            return D, has_self, t
    return D, has_self, -1


@nb.njit(cache=True)
def _sweep(X, Xn, Z, Dl, B, row_ptr, col, W, self_arc, D, has_self, order, phi_t, Wphi, forward):
    """One Jacobi step X -> Xn (Z, Dl: scratch)."""
    n = X.shape[0]
    KE = X.shape[1]
    if forward:
        for i in range(n):
            for j in range(KE):
                Z[i, j] = X[i, j]
        phi_pass_down(Z, order, phi_t, Wphi, True)
        src = Z
    else:
        src = X
    for t in range(n):
        for j in range(KE):
            Xn[t, j] = B[t, j]
        for e in range(row_ptr[t], row_ptr[t + 1]):
            if not self_arc[e]:
                _add_prod(Xn, t, src, col[e], W, e)
        if forward and has_self[t]:
            # gamma_t (1 - D) = s_t + other arcs + D (alpha_t - gamma_t)
            for j in range(KE):
                Dl[t, j] = Z[t, j] - X[t, j]
            _add_prod(Xn, t, Dl, t, D, t)
            _times_star(Xn, t, D)
    if not forward:
        _phi_pass_down_star(Xn, order, phi_t, Wphi, D, has_self)


@nb.njit(cache=True)
def phi_step(X, B, row_ptr, col, W, self_arc, order, phi_t, Wphi, forward):
    """The solver's fixed-point map once: new rows from X (gamma for forward)."""
    D, has_self, bad = _self_rows(X, row_ptr, self_arc, W)
    Xn = np.empty_like(X)
    _sweep(X, Xn, np.empty_like(X), np.empty_like(X), B, row_ptr, col, W, self_arc, D, has_self, order,
          phi_t, Wphi, forward)
    return Xn


@nb.njit(cache=True)
def solve_phi(X, B, row_ptr, col, W, self_arc, order, phi_t, Wphi, forward, tol, max_sweeps, stats, fstats):
    """X: initial plain rows (gamma for forward, beta for backward), overwritten with the result.
    ``self_arc``: the own self-loops among the arcs (applied exactly)."""
    KE = X.shape[1]
    Xn = np.empty_like(X)
    Z = np.empty_like(X)
    Dl = np.empty_like(X)
    D, has_self, bad_loop = _self_rows(X, row_ptr, self_arc, W)
    if bad_loop >= 0:
        stats[4] = WHY_STAR
        stats[5] = bad_loop
        return STATUS_DIVERGED
    rs = new_rate_state(0.0)
    status = STATUS_NOT_CONVERGED
    while stats[0] < max_sweeps:
        _sweep(X, Xn, Z, Dl, B, row_ptr, col, W, self_arc, D, has_self, order, phi_t, Wphi, forward)
        stats[0] += 1
        dn, sd, diverged = measure_change(X, Xn, Dl, stats)
        fstats[0] = dn
        if diverged:
            status = STATUS_DIVERGED
            break
        # Aitken's step assumes one geometric rate; the expectation
        # semiring's second components converge like k * lam^k (a Jordan
        # block), where the step overshoots: extrapolate only plain
        # (R = 0) systems, and bound their tails with one more 1 / (1 - r);
        # the signed system can have oscillating modes that the one-rate
        # model misses: the guard stops extrapolating once it hurts.  The rate is
        # read off the first column alone: the second components' k * lam^k tails
        # change by lam (1 + 1/k) a sweep, above 1 for hundreds of sweeps when lam
        # is near 1, which the rate test would take for divergence
        # (while the first column still moves; once it stands, all of them)
        if KE > 1:
            sd0 = 0.0
            for i in range(X.shape[0]):
                sd0 += abs(Dl[i, 0])
            if sd0 > 0.0:
                sd = sd0
        decision = rate_step(rs, dn, sd, tol, KE == 1, True, KE > 1, stats, fstats)
        if stop_status(decision) >= 0:
            status = stop_status(decision)
            break
        if decision == RATE_EXTRAPOLATE:
            extrapolate(X, Dl, rs, stats)
    if status == STATUS_OK and forward:
        phi_pass_down(X, order, phi_t, Wphi, True)   # alpha from gamma
    return status


@nb.njit(cache=True)
def gamma_from_alpha(X, order, phi_t, Wphi):
    """Invert the forward phi pass: gamma = (I - Phi^T) alpha (for warm starts)."""
    n = order.shape[0]
    KE = X.shape[1]
    G = X.copy()
    for q in range(n):
        t = phi_t[q]
        if t >= 0:
            px = X[q, 0]
            pw = Wphi[q, 0]
            G[t, 0] -= px * pw
            for j in range(1, KE):
                G[t, j] -= px * Wphi[q, j] + X[q, j] * pw
    return G

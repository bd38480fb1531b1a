"""The one stopping rule of every relaxation in fsmlearn, and the errors it ends in.

Every fixed point the package solves by sweeps (the linear semirings' cyclic
components, :mod:`fsmlearn.algo.solve_linear`; the phi systems, :mod:`fsmlearn.algo.solve_phi`; the block systems
of :mod:`fsmlearn.algo.product`) decides after each sweep with
:func:`rate_step`:

* ``lam``, the ratio of successive L1 changes, estimates the contraction rate
  (the dominant eigenvalue of the non-negative iteration matrix,
  Perron-Frobenius); it is *settled* when two successive values agree to
  :data:`SETTLE` (relative);
* a settled rate of 1 or more six sweeps running is divergence
  (:data:`WHY_RATE`);
* a settled rate above 0.3 triggers Aitken's extrapolation in vector form
  (Kamvar et al. 2003): the caller adds ``lam / (1 - lam)`` times the last
  change (:data:`RATE_EXTRAPOLATE`, factor in ``state[FACTOR]``);
* the solve has converged when the estimated remaining relative error of the
  geometric tail, ``change * r / (1 - r)`` with ``r`` the largest settled
  rate seen (divided once more by ``1 - r`` for ``k r^k`` tails, the
  expectation semiring's second components), is at most ``tol``.

:func:`raise_for_status` turns a solver's status and reason codes (the
``stats`` array every solver fills) into :class:`~fsmlearn.errors.DivergenceError`
or :class:`~fsmlearn.errors.NotConvergedError` naming the system.

Public names: STATUS_OK, STATUS_DIVERGED, STATUS_NOT_CONVERGED, STATUS_REPOTENTIAL,
WHY_NONFINITE, WHY_RATE, WHY_STAR, WHY_POTENTIAL, WHY_NEGCYCLE, RATE_CONTINUE,
RATE_CONVERGED, RATE_DIVERGED, RATE_EXTRAPOLATE, SETTLE, new_rate_state, rate_step,
stop_status, measure_change, sweep_stats_start, sweep_stats_rows, extrapolate, raise_for_status.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.core import types
from numba.core.extending import intrinsic

from ..errors import DivergenceError, NotConvergedError

__all__ = ["STATUS_OK", "STATUS_DIVERGED", "STATUS_NOT_CONVERGED", "STATUS_REPOTENTIAL",
           "WHY_NONFINITE", "WHY_RATE", "WHY_STAR", "WHY_POTENTIAL", "WHY_NEGCYCLE",
           "RATE_CONTINUE", "RATE_CONVERGED", "RATE_DIVERGED", "RATE_EXTRAPOLATE", "SETTLE",
           "new_rate_state", "rate_step", "stop_status", "measure_change", "sweep_stats_start", "sweep_stats_rows",
           "extrapolate", "raise_for_status"]

# a solver's result
STATUS_OK, STATUS_DIVERGED, STATUS_NOT_CONVERGED = 0, 1, 2
STATUS_REPOTENTIAL = 3          # the linear solver's plain phase: values left the range, new potentials
# why a solver diverged (stats[4]); stats[5] names the state where there is one
WHY_NONFINITE, WHY_RATE, WHY_STAR, WHY_POTENTIAL, WHY_NEGCYCLE = 1, 2, 3, 4, 5
# The arrays every solver fills:
#   stats (int64 [6]): 0 sweeps, 1 extrapolations, 2 repotentials, 3 failing component,
#                      4 reason (WHY_*), 5 failing state
#   fstats (float64 [4]): 0 last change, 1 last rate, 2 largest settled rate, 3 that of this component

# rate_step's decisions
RATE_CONTINUE, RATE_CONVERGED, RATE_DIVERGED, RATE_EXTRAPOLATE = 0, 1, 2, 3
SETTLE = 1e-3                   # successive rates agreeing to this (relative) are settled
_RATE_ONE = 1.0 - 1e-9
_EXTRAPOLATE_ABOVE = 0.3
_DIVERGED_AFTER = 6             # settled rates >= 1 in a row ...
_GROWN = 2.0                    # ... over which the L1 change grew this much
_AT_ROUNDING = 1e-3             # a largest relative change below tol * this is taken for converged
_STALLED_AFTER = 20             # sweeps without a new smallest change: the iterate is at its rounding floor

# the fields of a rate state (float64 [8])
PLAIN, S_PREV, LAM_PREV, RHO, GE1, LAM, FACTOR, EXTRAP_OK = range(8)
_JUST, _SD_BEFORE, _SD_GE1, _DN_MIN, _STALL = 8, 9, 10, 11, 12
_STATE_SIZE = 13


@nb.njit(cache=True)
def new_rate_state(rho):
    """A fresh rate state; ``rho``: the largest settled rate known so far (0 for none).

    Fields (float64): sweeps since the start or the last extrapolation, the
    previous L1 change, the previous rate, the largest settled rate, settled
    rates >= 1 in a row, the last rate, the last extrapolation factor,
    whether extrapolation is still allowed, and the guard's bookkeeping.
    """
    st = np.zeros(_STATE_SIZE)
    st[LAM_PREV] = -1.0
    st[RHO] = rho
    st[LAM] = -1.0
    st[EXTRAP_OK] = 1.0
    st[_DN_MIN] = np.inf
    return st


_UNBOUNDED = 2.0**1000          # a value this large means the iteration diverges
_JITTER = 16 * 2.0**-52          # a change below this times the largest value is rounding


@nb.njit(cache=True)
def measure_change(X, Y, D, stats):
    """Take a Jacobi sweep's result: X <- Y, D <- Y - X (old), all float64 [n, m].

    Returns:
        (dn, sd, diverged): the largest relative change of a row (its largest
        change over its largest value; 1 for a row leaving zero; a change below
        16 ulps of the largest value of all rows is rounding and left out), the L1
        change, and whether a value is not finite or beyond 2**1000 (then
        stats[4] = WHY_NONFINITE and stats[5] the first such row, or 0).
    """
    n, m = X.shape
    dn = 0.0
    sd = 0.0
    big = 0.0
    bad = -1
    for i in range(n):
        mx = 0.0
        d = 0.0
        nan = False
        for j in range(m):
            dj = Y[i, j] - X[i, j]
            D[i, j] = dj
            X[i, j] = Y[i, j]
            if dj != dj:
                nan = True              # max() would drop it
            mx = max(mx, abs(Y[i, j]))
            d = max(d, abs(dj))
            sd += abs(dj)
        if (nan or not (mx < np.inf)) and bad < 0:
            bad = i
        big = max(big, mx)
    # the largest relative change of a row, leaving out changes at the rounding level of
    # the largest value: plain signed arithmetic (a phi system cancels large terms) gives
    # a row whose value is zero, or far below the largest, no relative accuracy, and its
    # jitter (1e-17 on a zero) would keep the relative change near 1 for ever
    noise = _JITTER * big
    for i in range(n):
        mx = 0.0
        d = 0.0
        for j in range(m):
            mx = max(mx, abs(Y[i, j]))
            d = max(d, abs(D[i, j]))
        if d <= noise:
            continue
        if mx > 0.0:
            dn = max(dn, d / mx)
        else:
            dn = max(dn, 1.0)
    if bad >= 0 or big > _UNBOUNDED:
        stats[4] = WHY_NONFINITE
        stats[5] = max(bad, 0)
        return dn, sd, True
    return dn, sd, False


@intrinsic
def _bitcast(typingctx, x, like):
    """``x``'s 64 bits as a value of ``like``'s type (float64 to int64 or back; no conversion)."""
    to = types.unliteral(like)
    sig = to(x, like)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(to))
    return sig, codegen


_INF_BITS = 0x7FF0000000000000      # the bits of +inf
_ONE_BITS = 0x3FF0000000000000      # the bits of 1.0


@nb.njit(cache=True)
def sweep_stats_start(st):
    """Statistics of no rows yet, for :func:`sweep_stats_rows` to add rows to:
    ``st[:5] = [0, 0, 0, inf, -1]``."""
    st[0] = 0.0
    st[1] = 0.0
    st[2] = 0.0
    st[3] = np.inf
    st[4] = -1.0


@nb.njit(cache=True, fastmath={"reassoc"}, error_model="numpy")
def sweep_stats_rows(y, yold, has, lo, hi, st):
    """Add the rows ``lo:hi`` of a one-column sweep to its statistics ``st`` (float64 [5],
    from :func:`sweep_stats_start`), from the values after (``y``) and before (``yold``)
    it; only rows with ``has[i] != 0`` count (``has`` bool or uint8 [n]).

    With ``m = |y_i|`` and ``d = |y_i - yold_i|`` of each counted row, the statistics
    :func:`rate_step` takes (``st`` = [dn, sd, ymax, ymin, bad]):

    * ``dn``, the largest relative change: the largest ``d / m`` over rows with
      ``m > 0``, and at least 1 where a row with ``m = 0`` changed;
    * ``sd``, the L1 change: the sum of ``d``;
    * ``ymax``, ``ymin``: the largest and smallest non-zero ``m`` (``ymin`` inf where none);
    * ``bad``: the last row, of those added, whose value is not finite or whose change
      is NaN, or -1 (a solver stops on it; an infinite value also enters the others).

    The loop has no branches: the largest and smallest are taken on the values' bits
    (a non-negative float64's bits order as its value does), the quotients with
    numpy's division (no check for zero; a row with ``m = 0`` takes 1 or 0 instead).
    So it runs in vector registers. ``sd`` is summed in the order the compiler's
    vectors give it (``fastmath`` reassociation, whose only effect in this loop is on
    that sum): the same rows in the same call give the same sum bit for bit on one
    machine, and another machine's vector width may round it differently (it is a rate
    estimate: the ratio of two sweeps' sums). The other figures do not depend on the
    order. A row whose value is NaN counts only as ``bad`` (and in ``sd``). On rows of the
    engine benchmark in cache: 0.9-1.2 ns a row, against 2.2-2.8 ns for the loop with
    branches it replaces (docs/bench-engine.md). ``lo:hi`` must lie inside the arrays
    (the indices are not checked).
    """
    sd = 0.0
    mx = 0
    mn = _INF_BITS
    dn = 0
    bad = False
    i = np.uint64(lo)
    end = np.uint64(hi)
    while i < end:
        h = has[i] != 0
        m = abs(y[i])
        d = abs(y[i] - yold[i])
        sd += d if h else 0.0
        mb = _bitcast(m, 0)
        # a value above zero, inf included; not NaN (whose bits lie above inf's), which
        # counts only as a bad row, as a comparison with NaN leaves it out
        pos = h & (mb > 0) & (mb <= _INF_BITS)
        mx = max(mx, mb if pos else 0)
        mn = min(mn, mb if pos else _INF_BITS)
        q = _bitcast(d / m, 0)
        q = q if (pos & (q <= _INF_BITS)) else (_ONE_BITS if (h & (mb == 0) & (d > 0.0)) else 0)
        dn = max(dn, q)
        bad |= h & ((m == np.inf) | (d != d))
        i += np.uint64(1)
    st[0] = max(st[0], _bitcast(dn, 0.0))
    st[1] += sd
    st[2] = max(st[2], _bitcast(mx, 0.0))
    st[3] = min(st[3], _bitcast(mn, 0.0))
    if bad:
        # which row: the loop above only knows that one is
        for j in range(lo, hi):
            m = abs(y[j])
            d = abs(y[j] - yold[j])
            if has[j] != 0 and (not (m < np.inf) or d != d):
                st[4] = float(j)


@nb.njit(cache=True)
def extrapolate(X, D, st, stats):
    """Aitken's step after RATE_EXTRAPOLATE: X += st[FACTOR] * D (the last change); counts it in stats[1]."""
    c = st[FACTOR]
    n, m = X.shape
    for i in range(n):
        for j in range(m):
            X[i, j] += D[i, j] * c
    stats[1] += 1


@nb.njit(cache=True)
def rate_step(st, dn, sd, tol, extrapolate, guard, tail2, stats, fstats):
    """Decide after one sweep.

    Args:
        st: the rate state (:func:`new_rate_state`), updated.
        dn: the sweep's largest relative change (a row's change over its value).
        sd: the sweep's L1 change.
        tol: the tolerance on the estimated remaining relative error.
        extrapolate: whether Aitken extrapolation may be used at all.
        guard: stop extrapolating for good once a step made the next change
            larger (systems with oscillating modes the one-rate model misses).
        tail2: the iterate has ``k r^k`` tails (expectation rows): bound the
            remaining error with one more ``1 / (1 - r)``.
        stats, fstats: the solver's arrays: the last rate goes to fstats[1], the
            largest settled rate to fstats[2] (the largest over every call) and
            fstats[3] (this state's), the reason of a divergence to stats[4].

    Returns:
        RATE_CONVERGED, RATE_DIVERGED (the reason is :data:`WHY_RATE`),
        RATE_EXTRAPOLATE (add ``st[FACTOR]`` times the last change, then sweep
        on; the state is reset for the new run) or RATE_CONTINUE.
    """
    decision = _decide(st, dn, sd, tol, extrapolate, guard, tail2)
    fstats[1] = st[LAM]
    fstats[2] = max(fstats[2], st[RHO])
    fstats[3] = st[RHO]
    if decision == RATE_DIVERGED:
        stats[4] = WHY_RATE
    return decision


@nb.njit(cache=True)
def stop_status(decision):
    """The status a :func:`rate_step` decision ends a solver's sweeps with: STATUS_OK
    (converged), STATUS_DIVERGED, or -1 to sweep on (after the solver's own Aitken step
    where the decision is RATE_EXTRAPOLATE).  Every solver, CPU and device, stops by it."""
    if decision == RATE_CONVERGED:
        return STATUS_OK
    if decision == RATE_DIVERGED:
        return STATUS_DIVERGED
    return -1


@nb.njit(cache=True)
def _decide(st, dn, sd, tol, extrapolate, guard, tail2):
    """rate_step's decision, without the bookkeeping of the solver's arrays."""
    if st[_JUST] != 0.0:
        if sd > st[_SD_BEFORE]:
            st[EXTRAP_OK] = 0.0
        st[_JUST] = 0.0
    st[PLAIN] += 1.0
    plain = st[PLAIN]
    if dn == 0.0:
        return RATE_CONVERGED
    s_prev = st[S_PREV]
    lam_prev = st[LAM_PREV]
    lam = sd / s_prev if (plain >= 2.0 and s_prev > 0.0) else -1.0
    st[LAM] = lam
    settled = plain >= 3.0 and lam > 0.0 and lam_prev > 0.0 and abs(lam - lam_prev) <= SETTLE * lam
    # the iterate at its rounding floor: the changes (at most tol) have stopped shrinking
    # for _STALLED_AFTER sweeps (a signed phi system with large backoff weights jitters at
    # 1e-12 where its rates are noise, settled or not)
    if dn < st[_DN_MIN]:
        st[_DN_MIN] = dn
        st[_STALL] = 0.0
    else:
        st[_STALL] += 1.0
        if st[_STALL] >= _STALLED_AFTER and dn <= tol:
            return RATE_CONVERGED
    if dn <= tol * _AT_ROUNDING:
        # changes at the level of rounding (a fixed point reached, e.g. by GMRES, then
        # checked by sweeps): their ratios are noise, neither a rate below 1 nor growth;
        # the same test as the scaled verification of the cyclic solver
        return RATE_CONVERGED
    if settled and lam >= _RATE_ONE:
        if st[GE1] == 0.0:
            st[_SD_GE1] = s_prev
        st[GE1] += 1.0
        # divergence: the rate stays at or above 1 and the changes really grow; changes
        # that stand still below tol are the rounding jitter of a reached fixed point
        # (a phi system with backoff weights in the thousands cancels large terms)
        if st[GE1] >= _DIVERGED_AFTER:
            if sd >= _GROWN * st[_SD_GE1]:
                return RATE_DIVERGED
            if dn <= tol:
                return RATE_CONVERGED
    else:
        st[GE1] = 0.0
    if settled and lam < _RATE_ONE:
        if lam > st[RHO]:
            st[RHO] = lam
        if lam > _EXTRAPOLATE_ABOVE and extrapolate and st[EXTRAP_OK] != 0.0:
            st[FACTOR] = lam / (1.0 - lam)
            if guard:
                st[_JUST] = 1.0
                st[_SD_BEFORE] = sd
            st[PLAIN] = 0.0
            st[S_PREV] = 0.0
            st[LAM_PREV] = -1.0
            return RATE_EXTRAPOLATE
    if plain >= 2.0 and 0.0 <= lam < 1.0:
        # the previous rate too: modes of opposite sign make the rates alternate (0.58,
        # 0.007, 0.58, ... on a small phi system), and the small one alone stopped 30x early
        r = max(st[RHO], lam, lam_prev)
        if r >= 1.0:
            st[S_PREV] = sd
            st[LAM_PREV] = lam
            return RATE_CONTINUE
        left = dn * r / (1.0 - r)
        if tail2:
            left /= (1.0 - r)
        if left <= tol:
            return RATE_CONVERGED
    st[S_PREV] = sd
    st[LAM_PREV] = lam
    return RATE_CONTINUE


def raise_for_status(status: int, stats, fstats, *, what: str, where: str, tol: float, max_sweeps: int,
                     num_states: int | None = None) -> None:
    """Raise the error a solver's result stands for; nothing for STATUS_OK.

    Args:
        status: STATUS_OK, STATUS_DIVERGED or STATUS_NOT_CONVERGED.
        stats, fstats: the solver's arrays (see the module's layout).
        what: the quantity solved, first in the message ("forward", "alpha2").
        where: the system ("the phi machine", "the cycle through states 3, 4").
        tol, max_sweeps: the settings, for the message.
        num_states: where given, a failing state outside 0..num_states-1 is not named.

    Raises:
        DivergenceError: status STATUS_DIVERGED, with the reason of ``stats[4]``.
        NotConvergedError: status STATUS_NOT_CONVERGED.
    """
    if status == STATUS_OK:
        return
    if status == STATUS_DIVERGED:
        why = int(stats[4])
        state = int(stats[5])
        if num_states is not None and not 0 <= state < num_states:
            state = None
        if why == WHY_NEGCYCLE:
            raise DivergenceError(f"{what}: {where} has negative total weight (a negative cycle "
                                  "in the tropical semiring): no shortest path exists")
        if why == WHY_STAR:
            raise DivergenceError(f"{what}: state {state} has self-loops of total weight >= 1 and is "
                                  "reached: its weight is infinite")
        if why == WHY_RATE:
            raise DivergenceError(f"{what}: the weights of {where} diverge: the total mass grows "
                                  f"without bound (contraction rate estimate {fstats[1]:.6f} >= 1)")
        raise DivergenceError(f"{what}: the weights of {where} diverge: values became unbounded"
                              + (f" at state {state}" if state is not None else ""))
    raise NotConvergedError(f"{what}: relaxation over {where} did not reach tol={tol:g} within "
                            f"{max_sweeps} sweeps (last relative change {fstats[0]:.3g}, contraction "
                            f"rate {fstats[1]:.6f}); raise max_sweeps or tol")

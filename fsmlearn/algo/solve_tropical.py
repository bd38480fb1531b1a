"""Bellman-Ford relaxation in the tropical semiring with back-pointers.

The components of a schedule are swept in its order; more than n + 1 sweeps on
an n-state component mean a negative cycle (STATUS_DIVERGED, WHY_NEGCYCLE of
:mod:`fsmlearn.algo.convergence`).

Public names: tropical_solver, solve_tropical.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..semiring.ops import tropical_fma as fma
from .convergence import STATUS_DIVERGED, STATUS_OK, WHY_NEGCYCLE
from .schedule import trivial_run_end

__all__ = ["tropical_solver", "solve_tropical"]


def tropical_solver():
    """Bellman-Ford relaxation in the tropical semiring with back-pointers: :func:`solve_tropical`."""
    return solve_tropical


@nb.njit(cache=True)
def solve_tropical(V, bp, Wext, ext_tail, ext_head, ext_arc, ext_ptr, Wint, int_tail, int_head, int_arc,
                   int_ptr, Wself, self_loc, self_ptr, comp_ptr, comp_states, trivial, max_sweeps, stats):
    """Shortest distances V (float64 [n, 2], tropical rows, filled in place) and back-pointers
    bp (int64 [n], the arc each state's best value came through; -1 for none) over a
    :class:`~fsmlearn.algo.schedule.Schedule`'s arrays, with the arcs' tropical rows
    Wext / Wint / Wself in the schedule's order.  Trivial components take one pass over
    their external arcs; a cyclic one, Bellman-Ford sweeps over its internal arcs until
    nothing improves.  Returns a STATUS_* code (stats: 0 sweeps, 4 reason, 5 state)."""
    C = trivial.shape[0]
    c = 0
    while c < C:
        if trivial[c]:
            c2 = trivial_run_end(trivial, c)
            for e in range(ext_ptr[c], ext_ptr[c2]):
                if fma(V, ext_head[e], V, ext_tail[e], Wext, e):
                    bp[ext_head[e]] = ext_arc[e]
            c = c2
            continue
        lo = comp_ptr[c]
        n = comp_ptr[c + 1] - lo
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
                stats[4] = WHY_NEGCYCLE
                return STATUS_DIVERGED
            for e in range(a0, a1):
                h = comp_states[lo + int_head[e]]
                if fma(V, h, V, comp_states[lo + int_tail[e]], Wint, e):
                    bp[h] = int_arc[e]
                    changed = True
        stats[0] += sweeps
        for e in range(self_ptr[c], self_ptr[c + 1]):
            s = comp_states[lo + self_loc[e]]
            if Wself[e, 0] < 0.0 and V[s, 0] < np.inf:
                stats[3] = c
                stats[4] = WHY_NEGCYCLE
                stats[5] = s
                return STATUS_DIVERGED
        for e in range(ext_ptr[c], ext_ptr[c + 1]):
            if fma(V, ext_head[e], V, ext_tail[e], Wext, e):
                bp[ext_head[e]] = ext_arc[e]
        c += 1
    return STATUS_OK

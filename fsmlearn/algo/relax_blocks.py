"""Linear systems with matrix-valued rows over a phi forest, solved by relaxation.

The unknown ``X`` (float64 [n, m]) holds a vector of m values per state.  The
system is

    X = P (B + A X)                                         (forward)
    X = P^T (B + A^T X)                                     (transposed)

with ``B`` constant rows, ``A`` a sum of *block arcs* and ``P`` the pass over a
phi (failure) forest:

* a block arc e from state ``src[e]`` to ``dst[e]`` with scale ``k = scale[e]``
  uses block ``b = block[e]``, whose rows ``j`` in ``blk_ptr[b]:blk_ptr[b+1]``
  each carry an output column ``blk_col[j]`` and an input weight vector
  ``blk_w[blk_row0[b] + j, :]`` (length m).  Forward, the arc adds
  ``k * sum_t' X[src, t'] * w_j[t']`` to ``X[dst, blk_col[j]]``; transposed,
  it adds ``k * sum_j w_j[t'] * X[dst, blk_col[j]]`` to ``X[src, t']``;
* ``P`` adds each state's row, times ``phi_weight[q]``, to its forest parent
  ``phi_parent[q]`` (-1: a root), deepest states first (``order`` lists the
  states deepest first), so that a state receives its whole subtree's mass;
  ``P^T`` adds each state's parent's row to its own, shallowest first.

This is the shape of the n-gram EM's conditioned systems (Smith and Eisner,
footnote 7; :mod:`fsmlearn.tag.ngram.cond`): states of the LM machine, m = T + 1
previous tags, a block per arc whose tag distribution depends on the previous
tag.  Jacobi sweeps run under the engine's stopping rule
(:func:`fsmlearn.algo.convergence.rate_step`: settled contraction rate, Aitken
extrapolation, divergence detection), warm-startable, and end in the engine's
errors.

Public names: relax_block_system, phi_pass_rows.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..errors import SemiringError
from .convergence import (RATE_CONVERGED, RATE_DIVERGED, RATE_EXTRAPOLATE, STATUS_DIVERGED, STATUS_NOT_CONVERGED,
                          STATUS_OK, extrapolate, measure_change, new_rate_state, raise_for_status, rate_step)
from .shortest import DEFAULT_MAX_SWEEPS, DEFAULT_TOL, SolveInfo

__all__ = ["relax_block_system", "phi_pass_rows"]

@nb.njit(cache=True)
def phi_pass_rows(X, order, parent, weight, transpose):
    """In place, the phi forest's pass over matrix rows X [n, m]: ``P X`` (each row,
    times its weight, added to its parent's, deepest first: ``order`` lists the
    states deepest first) or, transposed, ``P^T X`` (each row receives its
    parent's, shallowest first)."""
    n = order.shape[0]
    m = X.shape[1]
    for i in range(n):
        q = order[n - 1 - i if transpose else i]
        r = parent[q]
        if r >= 0:
            k = weight[q]
            to, frm = (q, r) if transpose else (r, q)
            for t in range(m):
                X[to, t] += k * X[frm, t]


@nb.njit(cache=True)
def _apply_arcs(Y, X, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, transpose):
    """Y += A X (or A^T X) for the block arcs; X, Y float64 [n, m]."""
    m = X.shape[1]
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        k = scale[e]
        b = block[e]
        r0 = blk_row0[b]
        if not transpose:
            for tp in range(m):
                x = X[s, tp] * k
                if x == 0.0:
                    continue
                for j in range(blk_ptr[b], blk_ptr[b + 1]):
                    Y[d, blk_col[j]] += x * blk_w[r0 + j, tp]
        else:
            for tp in range(m):
                acc = 0.0
                for j in range(blk_ptr[b], blk_ptr[b + 1]):
                    w = blk_w[r0 + j, tp]
                    if w != 0.0:
                        acc += w * X[d, blk_col[j]]
                Y[s, tp] += k * acc


@nb.njit(cache=True)
def _relax(X, B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, parent, weight, order, transpose,
           tol, max_sweeps, stats, fstats):
    """Jacobi sweeps X <- P(B + A X) (or the transposed system) from X, in place, under
    :func:`~fsmlearn.algo.convergence.rate_step`; returns a STATUS_* code and fills
    ``stats`` / ``fstats`` (the engine's layout).

    X, B: float64 [n, m]; the arc, block and forest arrays as in the module docstring.
    """
    Y = np.empty_like(X)
    Dl = np.empty_like(X)
    rs = new_rate_state(0.0)
    while stats[0] < max_sweeps:
        Y[:] = B
        _apply_arcs(Y, X, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, transpose)
        phi_pass_rows(Y, order, parent, weight, transpose)
        stats[0] += 1
        dn, sd, diverged = measure_change(X, Y, Dl, stats)
        fstats[0] = dn
        if diverged:
            return STATUS_DIVERGED
        decision = rate_step(rs, dn, sd, tol, True, True, False, stats, fstats)
        if decision == RATE_CONVERGED:
            return STATUS_OK
        if decision == RATE_DIVERGED:
            return STATUS_DIVERGED
        if decision == RATE_EXTRAPOLATE:
            extrapolate(X, Dl, rs, stats)
    return STATUS_NOT_CONVERGED


def _arr(x, dtype, name, ndim=1):
    a = np.ascontiguousarray(x, dtype=dtype)
    if a.ndim != ndim:
        raise SemiringError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    return a


def relax_block_system(B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, phi_parent, phi_weight,
                       order, *, transpose: bool = False, tol: float = DEFAULT_TOL,
                       max_sweeps: int = DEFAULT_MAX_SWEEPS, init=None, what: str = "the block system"):
    """Solve X = P(B + A X), or X = P^T(B + A^T X) with ``transpose`` (module docstring).

    Args:
        B: float64 [n, m] the constant rows.
        src, dst: int [E] each block arc's states; scale: float64 [E]; block: int [E] its block.
        blk_ptr: int64 [nb + 1] each block's rows; blk_col: int [rows] each row's output column
            (0..m-1); blk_w: float64 [*, m] the rows' input weights, block b's row j at
            ``blk_w[blk_row0[b] + j]``; blk_row0: int64 [nb] (only the blocks that arcs use
            must point inside blk_w).
        phi_parent: int [n] forest parent (-1 for a root); phi_weight: float64 [n].
        order: int [n] the states, deepest in the forest first.
        transpose: solve the transposed system.
        tol, max_sweeps: the stopping rule's tolerance and the sweep limit.
        init: float64 [n, m] a warm start (default: zeros).
        what: the quantity's name in error messages.

    Returns:
        (X float64 [n, m], :class:`~fsmlearn.algo.SolveInfo`).

    Raises:
        SemiringError: arrays of the wrong shape or out of range.
        NotConvergedError: ``tol`` not reached within ``max_sweeps``.
        DivergenceError: the values grow without bound.
    """
    B = _arr(B, np.float64, "B", 2)
    n, m = B.shape
    src, dst = _arr(src, np.int64, "src"), _arr(dst, np.int64, "dst")
    scale, block = _arr(scale, np.float64, "scale"), _arr(block, np.int64, "block")
    blk_ptr, blk_col = _arr(blk_ptr, np.int64, "blk_ptr"), _arr(blk_col, np.int64, "blk_col")
    blk_w, blk_row0 = _arr(blk_w, np.float64, "blk_w", 2), _arr(blk_row0, np.int64, "blk_row0")
    parent, weight = _arr(phi_parent, np.int64, "phi_parent"), _arr(phi_weight, np.float64, "phi_weight")
    order = _arr(order, np.int64, "order")
    E = src.shape[0]
    nb_ = blk_ptr.shape[0] - 1
    if not (dst.shape[0] == scale.shape[0] == block.shape[0] == E):
        raise SemiringError(f"src, dst, scale and block must have one length, got {src.shape[0]}, "
                            f"{dst.shape[0]}, {scale.shape[0]}, {block.shape[0]}")
    if parent.shape[0] != n or weight.shape[0] != n or order.shape[0] != n:
        raise SemiringError(f"phi_parent, phi_weight and order need {n} entries (B's rows)")
    if E and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise SemiringError(f"arc states must lie in 0..{n - 1}")
    if E and (block.min() < 0 or block.max() >= nb_):
        raise SemiringError(f"blocks must lie in 0..{nb_ - 1}")
    if blk_row0.shape[0] != nb_ or blk_col.shape[0] < blk_ptr[-1] or \
            (blk_col.size and (blk_col.min() < 0 or blk_col.max() >= m)):
        raise SemiringError(f"blk_row0 needs {nb_} entries and blk_col columns in 0..{m - 1}")
    if blk_w.shape[1] != m:
        raise SemiringError(f"blk_w has {blk_w.shape[1]} columns, B has {m}")
    used = np.unique(block)
    if used.size and ((blk_row0[used] + blk_ptr[used]).min() < 0
                      or (blk_row0[used] + blk_ptr[used + 1]).max() > blk_w.shape[0]):
        raise SemiringError("a block's rows run outside blk_w")
    if parent.size and parent.max() >= n:
        raise SemiringError(f"phi_parent must lie in -1..{n - 1}")
    X = np.zeros((n, m)) if init is None else _arr(init, np.float64, "init", 2).copy()
    if X.shape != (n, m):
        raise SemiringError(f"init has shape {X.shape}, B has {(n, m)}")
    stats = np.zeros(6, np.int64)
    fstats = np.zeros(4)
    status = _relax(X, B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, parent, weight, order,
                    bool(transpose), float(tol), int(max_sweeps), stats, fstats)
    raise_for_status(status, stats, fstats, what=what, where="the block system", tol=tol, max_sweeps=max_sweeps,
                     num_states=n)
    return X, SolveInfo(sweeps=int(stats[0]), extrapolations=int(stats[1]), components=1, cyclic=True,
                        last_change=float(fstats[0]), rate=float(fstats[2]))

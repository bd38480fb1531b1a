"""The tagged product's block system on the device: the twin of
:func:`fsmlearn.algo.product.relax_block_system`.

Jacobi sweeps ``X <- P(B + A X)`` (or ``P^T(B + A^T X)``) with rows of m numbers
per state, as on the CPU: one launch applies the block arcs (one thread per arc,
its block's entries added atomically to the destination's row; with blocks
independent of the previous tag the rows are multiplied by the transition factor
once per state, before the arcs forward and after them transposed), one
level-synchronous pass applies the failure forest
(:func:`fsmlearn.algo.cuda.solve.forest_pass_rows`), and each row's change is
measured on the device.  The stopping rule is the engine's
(:func:`fsmlearn.algo.convergence.rate_step` on the host, the same rounding
floor as :func:`fsmlearn.algo.convergence.measure_change`), and so are the
errors.

The weight of an entry (its block weight for the previous tag, times the
transition factor) and a block arc's share of a sweep are plain functions,
:func:`fsmlearn.algo.product_entry.entry_weight_py` and
:func:`~fsmlearn.algo.product_entry.apply_arc_py`, compiled for both targets
(the arc's sums atomic on the device).

Public names: relax_block_system_cuda.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..convergence import STATUS_DIVERGED, STATUS_NOT_CONVERGED, new_rate_state
from ..flow_arith import retarget
from ..product_entry import apply_arc_py, entry_weight_py, row_times_py
from . import kernels as K
from .solve import change_rule, forest_levels, forest_pass_rows, launch, plain_sweep_decision

__all__ = ["relax_block_system_cuda"]

_entry_weight = cuda.jit(device=True)(entry_weight_py)


_apply_arc = cuda.jit(device=True)(retarget(apply_arc_py, _entry_weight=_entry_weight, _add2=K.atomic_add2))
#: a row times a matrix, the CPU's function (also the tied product's, :mod:`fsmlearn.algo.cuda.tied`)
row_times = cuda.jit(device=True)(row_times_py)
_row_times = row_times


@cuda.jit
def _times_trans_rows(X, trans, out):
    """out[q] = X[q] @ trans (an empty trans stands for all ones): one thread per row."""
    q = cuda.grid(1)
    if q < X.shape[0]:
        _row_times(X, q, trans, out, False, False)


@cuda.jit
def _untimes_trans_rows(Y, XT, trans):
    """Y[q, t'] += sum_c XT[q, c] trans[t', c] (an empty trans: all ones): one thread per row."""
    q = cuda.grid(1)
    if q < Y.shape[0]:
        _row_times(XT, q, trans, Y, True, True)


@cuda.jit
def _apply_arcs(Y, X, XT, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, transpose):
    """One thread per block arc e: :func:`fsmlearn.algo.product_entry.apply_arc_py`, its sums
    added atomically."""
    e = cuda.grid(1)
    if e < src.shape[0]:
        _apply_arc(e, Y, X, XT, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, transpose)


def relax_block_system_cuda(X0, B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, parent, weight,
                            transpose, tol, max_sweeps, stats, fstats):
    """Jacobi sweeps of the block system on the device from ``X0``; the arrays are the
    checked ones of :func:`fsmlearn.algo.product.relax_block_system` (``trans`` [0, 0]: none).
    Returns (STATUS_* code, X float64 [n, m] on the host); fills ``stats`` / ``fstats`` in the
    engine's layout."""
    n, m = B.shape
    E = src.shape[0]
    fo = forest_levels(parent)
    w_d = cuda.to_device(np.ascontiguousarray(weight))
    arrs = [cuda.to_device(np.ascontiguousarray(a)) for a in
            (src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans)]
    B_d = cuda.to_device(np.ascontiguousarray(B))
    X = cuda.to_device(np.ascontiguousarray(X0))
    Y = cuda.device_array_like(X)
    XT = cuda.device_array_like(X)
    D = cuda.device_array_like(X)
    rows = cuda.device_array((n, 4))
    sep = blk_w.shape[1] == 1
    tr_d = arrs[8]
    rs = new_rate_state(0.0)
    status = STATUS_NOT_CONVERGED
    while stats[0] < max_sweeps:
        Y.copy_to_device(B_d)
        if sep and not transpose:
            launch(_times_trans_rows, n, X, tr_d, XT)
        elif sep:
            launch(K.zero_rows, n, XT)
        launch(_apply_arcs, E, Y, X, XT, *arrs, bool(transpose))
        if sep and transpose:
            launch(_untimes_trans_rows, n, Y, XT, tr_d)
        forest_pass_rows(Y, fo, w_d, bool(transpose))
        stats[0] += 1
        launch(K.row_changes, n, X, Y, D, rows)
        dn, sd, diverged = change_rule(rows.copy_to_host(), stats)
        fstats[0] = dn
        if diverged:
            status = STATUS_DIVERGED
            break
        stop = plain_sweep_decision(rs, dn, sd, tol, True, False, X, D, stats, fstats)
        if stop is not None:
            status = stop
            break
    return status, X.copy_to_host()

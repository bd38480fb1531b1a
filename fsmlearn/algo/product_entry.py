"""The arithmetic of a tagged product's entries and arcs, written once for both targets.

Plain Python functions compiled by :mod:`fsmlearn.algo.product` with numba's
``njit`` and by :mod:`fsmlearn.algo.cuda.product` with ``cuda.jit(device=True)``,
so a fix lands on both devices.  :func:`apply_arc_py` adds into rows that other
arcs' threads add into too, through ``_add2``: a plain ``+=`` on the CPU, an
atomic add on the device (:func:`~fsmlearn.algo.flow_arith.retarget`).

Public names: entry_weight_py, apply_arc_py, row_times_py.
"""

from __future__ import annotations

import numba as nb

from .flow_arith import add2_py

__all__ = ["entry_weight_py", "apply_arc_py", "row_times_py"]


def entry_weight_py(blk_w, row, tp, trans, c):
    """An entry's weight after previous tag t': its block weight (column 0 when the block is
    independent of the previous tag) times the transition factor H[t', c] (none when
    ``trans`` is empty)."""
    w = blk_w[row, 0] if blk_w.shape[1] == 1 else blk_w[row, tp]
    if trans.shape[0] > 0:
        w *= trans[tp, c]
    return w


_entry_weight = nb.njit(inline="always")(entry_weight_py)
_add2 = nb.njit(inline="always")(add2_py)


def apply_arc_py(e, Y, X, XT, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, transpose):
    """Block arc e's share of Y += A X (or A^T X): forward, Y[dst, c] += k sum_t' X[src, t']
    w_j(t') H[t', c] (separable blocks: k w_j XT[src, c], XT = X @ H); transposed,
    Y[src, t'] += k sum_j w_j(t') H[t', c_j] X[dst, c_j] (separable: XT[src, c] += k w_j
    X[dst, c], times H^T after)."""
    m = X.shape[1]
    sep = blk_w.shape[1] == 1
    s = src[e]
    d = dst[e]
    k = scale[e]
    b = block[e]
    r0 = blk_row0[b]
    if sep:
        for j in range(blk_ptr[b], blk_ptr[b + 1]):
            c = blk_col[j]
            w = k * blk_w[r0 + j, 0]
            if transpose:
                _add2(XT, s, c, w * X[d, c])
            else:
                _add2(Y, d, c, w * XT[s, c])
    elif not transpose:
        for tp in range(m):
            x = X[s, tp] * k
            if x == 0.0:
                continue
            for j in range(blk_ptr[b], blk_ptr[b + 1]):
                c = blk_col[j]
                _add2(Y, d, c, x * _entry_weight(blk_w, r0 + j, tp, trans, c))
    else:
        for tp in range(m):
            acc = 0.0
            for j in range(blk_ptr[b], blk_ptr[b + 1]):
                c = blk_col[j]
                w = _entry_weight(blk_w, r0 + j, tp, trans, c)
                if w != 0.0:
                    acc += w * X[d, c]
            if acc != 0.0:
                _add2(Y, s, tp, k * acc)


def row_times_py(X, q, M, out, transpose, add):
    """Row q times a matrix: ``out[q, t] (+)= sum_u X[q, u] M[u, t]`` (``M[t, u]`` when
    ``transpose``; an empty M stands for all ones), into ``out`` or, with ``add``, added to
    it.  Zero entries of X are skipped, so an infinite M entry (a log of zero) they would
    meet gives no NaN."""
    ones = M.shape[0] == 0
    for t in range(out.shape[1]):
        acc = 0.0
        for u in range(X.shape[1]):
            x = X[q, u]
            if x != 0.0:
                acc += x * (1.0 if ones else (M[t, u] if transpose else M[u, t]))
        if add:
            out[q, t] += acc
        else:
            out[q, t] = acc

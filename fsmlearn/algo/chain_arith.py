"""The dense-chain schedule's arithmetic, written once for both targets.

Plain Python functions for one chain of a :class:`~fsmlearn.fsm.ChainBatch`:
:func:`chain_forward_py` (the scaled forward recursion) and :func:`chain_fb_py`
(forward, then the backward recursion with every posterior added to the
tables' entries), in the recursions of :mod:`fsmlearn.algo.chain` (Rabiner 1989,
eq. 91-93 and 102-103).  :mod:`fsmlearn.algo.chain` compiles them with numba's
``njit`` (one chain after another, buffers in the chain's own numbering) and
:mod:`fsmlearn.algo.cuda.chain` with ``cuda.jit(device=True)`` (a thread per
chain, buffers in the batch's numbering), so a fix lands on both devices.

The sums over chains into the shared tables go through ``_add1`` and ``_add2``:
a plain ``+=`` here, an atomic add on the device, which compiles
:func:`chain_fb_py` with its own and with its own ``_forward`` and ``_cost``
(:func:`~fsmlearn.algo.flow_arith.retarget`).

Public names: chain_forward_py, chain_cost_py, chain_fb_py, retarget.
"""

from __future__ import annotations

import math

import numba as nb

from .flow_arith import add1_py, add2_py, retarget

__all__ = ["chain_forward_py", "chain_cost_py", "chain_fb_py", "retarget"]

_add1 = nb.njit(inline="always")(add1_py)
_add2 = nb.njit(inline="always")(add2_py)


def chain_forward_py(p0, p1, pos_row, row_ptr, row_label, row_p, Tp, node_ptr, A, a0, C, c0):
    """The scaled forward pass over the chain of positions p0..p1-1.

    Writes alpha-hat of node n at ``A[a0 + n - node_ptr[p0]]`` and c_i at ``C[c0 + i - p0]``;
    returns (sum of ln c_i, z = alpha-hat_L . t_end), z = 0 when the chain has no path (an
    empty chain: z = the start-to-end weight ``Tp[V, V]``).
    """
    V = Tp.shape[0] - 1
    lnc = 0.0
    prev_r = -1
    prev_n = 0
    nb0 = node_ptr[p0] - a0
    for i in range(p0, p1):
        r = pos_row[i]
        e0 = row_ptr[r]
        k = row_ptr[r + 1] - e0
        n0 = node_ptr[i] - nb0
        c = 0.0
        for j in range(k):
            y = row_label[e0 + j]
            if prev_r < 0:
                acc = Tp[V, y]
            else:
                acc = 0.0
                pe = row_ptr[prev_r]
                for q in range(row_ptr[prev_r + 1] - pe):
                    acc += A[prev_n + q] * Tp[row_label[pe + q], y]
            v = acc * row_p[e0 + j]
            A[n0 + j] = v
            c += v
        if not c > 0.0 or c == math.inf:
            return lnc, 0.0
        inv = 1.0 / c
        for j in range(k):
            A[n0 + j] *= inv
        C[c0 + i - p0] = c
        lnc += math.log(c)
        prev_r = r
        prev_n = n0
    if prev_r < 0:
        return lnc, Tp[V, V]
    z = 0.0
    pe = row_ptr[prev_r]
    for q in range(row_ptr[prev_r + 1] - pe):
        z += A[prev_n + q] * Tp[row_label[pe + q], V]
    return lnc, z


def chain_cost_py(p0, p1, pos_row, t_shift, row_shift, lnc, z):
    """-ln Z of the chain p0..p1-1 from its forward pass (:func:`chain_forward_py`'s sum of
    ln c_i and z) and the shifts taken out of its tables; inf when z is 0 (no path)."""
    if not z > 0.0 or z == math.inf:
        return math.inf
    shift = t_shift * (p1 - p0 + 1)
    for i in range(p0, p1):
        shift += row_shift[pos_row[i]]
    return shift - lnc - math.log(z)


def chain_fb_py(s, ptr, pos_row, row_ptr, row_label, row_p, Tp, t_shift, row_shift, node_ptr, want_nodes,
                cost, TP, EP, NP, TV, EV, X, A, a0, C, c0, B):
    """Forward-backward over chain s.

    Writes cost[s] = -ln Z (inf when the chain has no path, which then adds nothing and
    gets NaN values); adds its arc posteriors into TP [V+1, V+1] by transition entry and its
    node posteriors into EP [nnz] by row entry (and writes NP [nodes] when ``want_nodes``);
    with values (TV [(V+1)^2, R] per transition entry, EV [nnz, R] per row entry) adds to
    X[s] the posteriors times the values they are tied to.  A holds alpha-hat and B
    beta-hat at ``a0 + node - node_ptr[p0]``, C the scales at ``c0 + position - p0``.
    """
    R = X.shape[1]
    V1 = Tp.shape[0]
    V = V1 - 1
    p0 = ptr[s]
    p1 = ptr[s + 1]
    lnc, z = _forward(p0, p1, pos_row, row_ptr, row_label, row_p, Tp, node_ptr, A, a0, C, c0)
    cost[s] = _cost(p0, p1, pos_row, t_shift, row_shift, lnc, z)
    if cost[s] == math.inf:
        for x in range(R):
            X[s, x] = math.nan
        return
    if p1 == p0:
        _add2(TP, V, V, 1.0)
        for x in range(R):
            X[s, x] += TV[V * V1 + V, x]
        return
    nb0 = node_ptr[p0] - a0
    # the last position: beta-hat = t_end / z
    r = pos_row[p1 - 1]
    e0 = row_ptr[r]
    n0 = node_ptr[p1 - 1]
    invz = 1.0 / z
    for j in range(row_ptr[r + 1] - e0):
        y = row_label[e0 + j]
        b = Tp[y, V] * invz
        B[n0 - nb0 + j] = b
        pst = A[n0 - nb0 + j] * b
        _add2(TP, y, V, pst)
        _add1(EP, e0 + j, pst)
        if want_nodes:
            NP[n0 + j] = pst
        for x in range(R):
            X[s, x] += pst * (TV[y * V1 + V, x] + EV[e0 + j, x])
    for i in range(p1 - 1, p0, -1):
        # position i's beta-hat becomes g_j = u_i[j] beta-hat_i[j] / c_i (its posteriors are out);
        # then beta-hat_{i-1}[q] = sum_j T[q, j] g_j, and the arc q -> j has posterior alpha-hat[q] T[q, j] g_j
        r = pos_row[i]
        e0 = row_ptr[r]
        k = row_ptr[r + 1] - e0
        ni = node_ptr[i] - nb0
        inv = 1.0 / C[c0 + i - p0]
        for j in range(k):
            B[ni + j] = row_p[e0 + j] * B[ni + j] * inv
        pr = pos_row[i - 1]
        pe = row_ptr[pr]
        pn = node_ptr[i - 1]
        for q in range(row_ptr[pr + 1] - pe):
            yq = row_label[pe + q]
            aq = A[pn - nb0 + q]
            acc = 0.0
            for j in range(k):
                yj = row_label[e0 + j]
                t = Tp[yq, yj] * B[ni + j]
                acc += t
                _add2(TP, yq, yj, aq * t)
            if R > 0:
                for j in range(k):
                    yj = row_label[e0 + j]
                    t = aq * Tp[yq, yj] * B[ni + j]
                    for x in range(R):
                        X[s, x] += t * TV[yq * V1 + yj, x]
            B[pn - nb0 + q] = acc
            pst = aq * acc
            _add1(EP, pe + q, pst)
            if want_nodes:
                NP[pn + q] = pst
            for x in range(R):
                X[s, x] += pst * EV[pe + q, x]
    # the first position: the start's arcs carry its nodes' posteriors
    r = pos_row[p0]
    e0 = row_ptr[r]
    f0 = node_ptr[p0] - nb0
    for j in range(row_ptr[r + 1] - e0):
        pst = A[f0 + j] * B[f0 + j]
        _add2(TP, V, row_label[e0 + j], pst)
        for x in range(R):
            X[s, x] += pst * TV[V * V1 + row_label[e0 + j], x]


#: what :func:`chain_fb_py` calls as ``_forward`` and ``_cost`` on the CPU (the device binds its own)
_forward = nb.njit(cache=True)(chain_forward_py)
_cost = nb.njit(cache=True)(chain_cost_py)

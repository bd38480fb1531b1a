"""The dense-chain schedule: the engine's routines over a :class:`~fsmlearn.fsm.ChainBatch`.

A chain of label layers with tied weights (:mod:`fsmlearn.fsm.chain`) is a
layered acyclic machine whose arcs between two positions form a complete
bipartite block and whose weights are products of two small tables.  The
generic schedule would write its arcs out (L k^2 of them) and sweep them in a
topological order; this one sweeps the layers, reading the weights from the
tables, and never writes an arc:

- ``forward_backward`` (log and real semirings): the scaled forward recursion
  alpha_i = (alpha_{i-1} T) * u_i with one scale c_i per position, and the
  backward one beta_{i-1} = T (beta_i * u_i) / c_i with the same scales
  (Rabiner 1989, eq. 91-93 and 102-103), so that ln Z = sum_i ln c_i + ln(alpha_L .
  t_end) and every quantity stays in range however long the chain; the
  posterior of the arc y' -> y between positions i - 1 and i is
  xi = alpha_{i-1}[y'] T[y', y] u_i[y] beta_i[y] / c_i (Rabiner's eq. 37 in the
  scaled variables).  The arcs' posteriors are summed by the tables' entries
  they are tied to: the expected count of each transition and of each row entry
  (the gradient of ln Z with respect to the log of each table entry, which is
  what EM needs), and, on request, of each node (position, label).
- ``best_path`` (the tropical semiring): the Viterbi recursion delta_i[y] =
  min_y' (delta_{i-1}[y'] + T[y', y]) + u_i[y] over costs, with back-pointers.
- ``total_weight``: the forward recursion alone.
- ``expectation`` (the expectation semiring's r / Z) of additive values tied to the
  table entries, per chain: by linearity the posteriors above times the values,
  accumulated in the same pass; ``entropy`` is ln Z minus the expectation of the
  log weights (Li and Eisner 2009, section 4.1).

Log-semiring costs enter the real-valued recursions as exp(-(cost - shift)),
shifted by the least transition cost and by each row's least entry, the shifts
added back to ln Z; a weight more than e^700 below its row's best (or the
transition table's) counts as zero.  Each routine runs over all chains in one
call; :meth:`~fsmlearn.fsm.ChainBatch.materialise` gives the same machines arc
by arc, and the tests check each result against the generic engine on them.
The public routines ``forward_backward``, ``best_path``, ``total_weight``,
``expectation`` and ``entropy`` pick this schedule when given a ``ChainBatch``.

Public names: ChainForwardBackward, ChainPaths, chain_forward_backward,
chain_best_paths, chain_total_weight, chain_expectation, chain_entropy.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..errors import ArgumentError, NoAcceptingPathError, SemiringError
from ..fsm.chain import ChainBatch
from .chain_arith import chain_cost_py, chain_fb_py, chain_forward_py

__all__ = ["ChainForwardBackward", "ChainPaths", "chain_forward_backward", "chain_best_paths",
           "chain_total_weight", "chain_expectation", "chain_entropy"]


class ChainForwardBackward:
    """Forward-backward over a batch of chains (one result per chain, counts summed over all).

    Attributes:
        cost: float64 [S], -ln Z of each chain (inf: no path of nonzero weight).
        log_partition: float64 [S], ln Z (the property; minus ``cost``).
        transition_posteriors: float64 [V+1, V+1], the expected number of uses of each
            transition entry, summed over the chains (row V: starts, column V: ends).
        entry_posteriors: float64 [nnz], the expected number of uses of each row entry,
            summed over the chains.
        node_posteriors: float64 [num_nodes] (numbered by ``chains.node_ptr``): the
            probability of each (position, label) node, or None when not asked for.
    """

    __slots__ = ("cost", "transition_posteriors", "entry_posteriors", "node_posteriors")

    def __init__(self, cost, transition_posteriors, entry_posteriors, node_posteriors):
        self.cost = cost
        self.transition_posteriors = transition_posteriors
        self.entry_posteriors = entry_posteriors
        self.node_posteriors = node_posteriors

    @property
    def log_partition(self) -> np.ndarray:
        return -self.cost

    def __repr__(self) -> str:
        return f"ChainForwardBackward({self.cost.shape[0]} chains)"


class ChainPaths:
    """The best path of each chain.

    Attributes:
        cost: float64 [S], each best path's cost (-ln of its weight; inf: no path).
        labels: int32 [N], the label of each position on its chain's best path (-1 on a
            chain without a path).
        entries: int64 [N], the row entry each position takes (-1 likewise).
    """

    __slots__ = ("cost", "labels", "entries")

    def __init__(self, cost, labels, entries):
        self.cost = cost
        self.labels = labels
        self.entries = entries

    def __repr__(self) -> str:
        return f"ChainPaths({self.cost.shape[0]} chains)"


def _require(chains, func):
    if not isinstance(chains, ChainBatch):
        raise ArgumentError(f"{func}: expected a fsmlearn.fsm.ChainBatch, got {type(chains).__name__}")
    return chains


def _real_tables(chains: ChainBatch):
    """(T, row_p, t_shift, row_shift): the tables as real weights, and the ln-domain
    shifts taken out of them (zero for a real-semiring batch)."""
    if chains.semiring == "real":
        R = chains.row_ptr.shape[0] - 1
        return chains.transition, chains.row_weight, 0.0, np.zeros(R)
    T = chains.transition
    fin = T[np.isfinite(T)]
    t_shift = float(fin.min()) if fin.size else 0.0
    Tp = np.exp(-(T - t_shift))
    row_shift = _row_min(chains.row_ptr, chains.row_weight)
    row_p = _shifted_exp(chains.row_ptr, chains.row_weight, row_shift)
    return Tp, row_p, t_shift, row_shift


@nb.njit(cache=True)
def _row_min(row_ptr, w):
    R = row_ptr.shape[0] - 1
    out = np.zeros(R)
    for r in range(R):
        m = np.inf
        for e in range(row_ptr[r], row_ptr[r + 1]):
            m = min(m, w[e])
        out[r] = m if m < np.inf else 0.0
    return out


@nb.njit(cache=True)
def _shifted_exp(row_ptr, w, shift):
    out = np.empty(w.shape[0])
    for r in range(row_ptr.shape[0] - 1):
        for e in range(row_ptr[r], row_ptr[r + 1]):
            out[e] = math.exp(-(w[e] - shift[r]))
    return out


_forward = nb.njit(cache=True)(chain_forward_py)
_cost = nb.njit(cache=True)(chain_cost_py)
_chain_fb = nb.njit(cache=True)(chain_fb_py)


@nb.njit(cache=True)
def _longest(ptr, node_ptr):
    """(most positions, most nodes) of one chain."""
    lp = 1
    ln = 1
    for s in range(ptr.shape[0] - 1):
        lp = max(lp, ptr[s + 1] - ptr[s])
        ln = max(ln, node_ptr[ptr[s + 1]] - node_ptr[ptr[s]])
    return lp, ln


@nb.njit(cache=True)
def _fb_kernel(ptr, pos_row, row_ptr, row_label, row_p, Tp, t_shift, row_shift, node_ptr, want_nodes,
               cost, TP, EP, NP, TV, EV, X):
    """Forward-backward over every chain, one after another (:func:`~fsmlearn.algo.chain_arith.chain_fb_py`:
    costs, posteriors added by table entry, values), with the forward values, scales and
    backward values of one chain at a time in buffers of its own numbering (in cache)."""
    lp, ln = _longest(ptr, node_ptr)
    A = np.empty(ln)
    B = np.empty(ln)
    C = np.empty(lp)
    for s in range(ptr.shape[0] - 1):
        _chain_fb(s, ptr, pos_row, row_ptr, row_label, row_p, Tp, t_shift, row_shift, node_ptr, want_nodes,
                  cost, TP, EP, NP, TV, EV, X, A, 0, C, 0, B)


@nb.njit(cache=True)
def _total_kernel(ptr, pos_row, row_ptr, row_label, row_p, Tp, t_shift, row_shift, node_ptr, cost):
    lp, ln = _longest(ptr, node_ptr)
    A = np.empty(ln)
    C = np.empty(lp)
    for s in range(ptr.shape[0] - 1):
        p0 = ptr[s]
        p1 = ptr[s + 1]
        lnc, z = _forward(p0, p1, pos_row, row_ptr, row_label, row_p, Tp, node_ptr, A, 0, C, 0)
        cost[s] = _cost(p0, p1, pos_row, t_shift, row_shift, lnc, z)


@nb.njit(inline="always")
def _best_from(D, prev_n, row_ptr, row_label, prev_r, Tc, y):
    """(min over the labels q of row prev_r of D[prev_n + q] + Tc[label q, y], the first q
    that attains it, or -1 when every term is inf)."""
    best = np.inf
    arg = -1
    pe = row_ptr[prev_r]
    for q in range(row_ptr[prev_r + 1] - pe):
        v = D[prev_n + q] + Tc[row_label[pe + q], y]
        if v < best:
            best = v
            arg = q
    return best, arg


@nb.njit(cache=True)
def _viterbi_kernel(ptr, pos_row, row_ptr, row_label, row_c, Tc, node_ptr, cost, labels, entries):
    """Viterbi over every chain in costs (ties: the lowest entry of the earlier row)."""
    V = Tc.shape[0] - 1
    D = np.empty(node_ptr[-1])
    bp = np.empty(node_ptr[-1], np.int64)
    for s in range(ptr.shape[0] - 1):
        p0 = ptr[s]
        p1 = ptr[s + 1]
        prev_r = -1
        prev_n = 0
        for i in range(p0, p1):
            r = pos_row[i]
            e0 = row_ptr[r]
            n0 = node_ptr[i]
            for j in range(row_ptr[r + 1] - e0):
                y = row_label[e0 + j]
                if prev_r < 0:
                    best = Tc[V, y]
                    arg = -1
                else:
                    best, arg = _best_from(D, prev_n, row_ptr, row_label, prev_r, Tc, y)
                D[n0 + j] = best + row_c[e0 + j]
                bp[n0 + j] = arg
            prev_r = r
            prev_n = n0
        for i in range(p0, p1):
            labels[i] = -1
            entries[i] = -1
        if prev_r < 0:
            cost[s] = Tc[V, V]
            continue
        best, arg = _best_from(D, prev_n, row_ptr, row_label, prev_r, Tc, V)
        cost[s] = best
        if arg < 0 or best == np.inf:
            cost[s] = np.inf
            continue
        q = arg
        for i in range(p1 - 1, p0 - 1, -1):
            e = row_ptr[pos_row[i]] + q
            labels[i] = row_label[e]
            entries[i] = e
            q = bp[node_ptr[i] + q]


def _dead(cost, chains, func, allow_empty):
    if allow_empty:
        return
    bad = np.flatnonzero(cost == np.inf)
    if bad.size:
        s = int(bad[0])
        raise NoAcceptingPathError(f"{func}: chain {s} (positions {int(chains.ptr[s])}..{int(chains.ptr[s + 1]) - 1}) "
                                   f"has no path of nonzero weight" + (f" ({bad.size} chains have none)" if bad.size > 1
                                                                       else "")
                                   + "; pass allow_empty=True to get cost inf and zero posteriors for them")


def _run_fb(device, *args):
    """The forward-backward kernel on the CPU, or its twin on the CUDA device."""
    from .cuda import check_device
    if check_device(device) == "cuda":
        from .cuda.chain import chain_fb_device
        chain_fb_device(*args)
    else:
        _fb_kernel(*args)


def chain_forward_backward(chains: ChainBatch, *, node_posteriors: bool = True,
                           allow_empty: bool = False, add_to=None, device: str = "cpu") -> ChainForwardBackward:
    """Each chain's -ln Z and the expected use of every table entry (log and real semirings).

    The same quantities as :func:`fsmlearn.algo.forward_backward` on
    ``chains.materialise()`` (its arc posteriors summed by ``arc_trans``, ``arc_entry``
    and destination state), by the layered recursions of the module docstring in one
    pass over the positions each way.

    Args:
        chains: the batch.
        node_posteriors: also return each node's posterior.
        allow_empty: a chain without a path of nonzero weight gets cost inf and adds
            nothing, instead of raising.
        add_to: optional (transition float64 [V+1, V+1], entries float64 [nnz]) arrays that
            the expected uses are added into (and returned as the result's), so that EM
            sums over many batches without a table the size of the rows per batch.
        device: "cpu" (one chain after another) or "cuda" (a thread per chain, the same
            arithmetic: :mod:`fsmlearn.algo.cuda.chain`).

    Raises:
        NoAcceptingPathError: a chain has no path of nonzero weight (named), unless allow_empty.
        ArgumentError: ``add_to`` arrays of the wrong shape or dtype.
    """
    _require(chains, "chain_forward_backward")
    Tp, row_p, t_shift, row_shift = _real_tables(chains)
    V = chains.num_labels
    S = len(chains)
    cost = np.empty(S)
    nnz = chains.row_label.shape[0]
    if add_to is None:
        TP = np.zeros((V + 1, V + 1))
        EP = np.zeros(nnz)
    else:
        TP, EP = add_to
        for name, a, shape in (("transition", TP, (V + 1, V + 1)), ("entries", EP, (nnz,))):
            if not isinstance(a, np.ndarray) or a.dtype != np.float64 or a.shape != shape or \
                    not a.flags.c_contiguous or not a.flags.writeable:
                raise ArgumentError(f"chain_forward_backward: add_to's {name} must be a writable C-contiguous "
                                    f"float64 array {shape}, got {getattr(a, 'dtype', type(a))} "
                                    f"{getattr(a, 'shape', '')}")
    node_ptr = chains.node_ptr
    NP = np.zeros(node_ptr[-1] if node_posteriors else 0)
    if device == "cpu" and chains.full_rows:
        _full_fb(chains, row_p, Tp, t_shift, row_shift, cost, TP, EP, NP if node_posteriors else None)
        _dead(cost, chains, "forward_backward", allow_empty)
        return ChainForwardBackward(cost, TP, EP, NP if node_posteriors else None)
    _run_fb(device, chains.ptr, chains.pos_row, chains.row_ptr, chains.row_label, row_p, Tp, t_shift, row_shift,
            node_ptr, node_posteriors, cost, TP, EP, NP, _NO_VALUES, _NO_VALUES, np.zeros((S, 0)))
    _dead(cost, chains, "forward_backward", allow_empty)
    return ChainForwardBackward(cost, TP, EP, NP if node_posteriors else None)


_NO_VALUES = np.zeros((0, 0))


def _full_fb(chains: ChainBatch, row_p, Tp, t_shift, row_shift, cost, TP, EP, NP):
    """:func:`chain_fb_py`'s recursions for chains whose every row holds all V labels in
    order (``chains.full_rows``: the decipherment's), as matrix products over all chains of
    one length at a time, so that BLAS does the V^2 work per position: alpha_i = (alpha-hat_{i-1}
    T) * u_i scaled to sum 1, beta-hat_{i-1} = T (u_i beta-hat_i) / c_i, and the transition
    posteriors summed over positions as T * (sum_i alpha-hat_{i-1}^T g_i), g_i = u_i beta-hat_i / c_i."""
    V = chains.num_labels
    Tm, t0, t1 = Tp[:V, :V], Tp[V, :V], Tp[:V, V]
    U = row_p.reshape(-1, V)
    lens = np.diff(chains.ptr)
    acc = np.zeros((V, V))
    for L in np.unique(lens):
        ks = np.flatnonzero(lens == L)
        if L == 0:
            z = Tp[V, V]
            cost[ks] = t_shift - math.log(z) if z > 0 else math.inf
            if z > 0:
                TP[V, V] += ks.size
            continue
        P = chains.ptr[ks][:, None] + np.arange(L)                 # [N, L] positions
        rows = chains.pos_row[P]
        Ue = U[rows]                                               # [N, L, V]
        N = ks.size
        alpha = np.empty((N, L, V))
        logc = np.zeros((N, L))
        dead = np.zeros(N, bool)
        a = t0[None, :] * Ue[:, 0]
        for i in range(L):
            if i:
                a = (alpha[:, i - 1] @ Tm) * Ue[:, i]
            c = a.sum(axis=1)
            bad = ~(c > 0) | ~np.isfinite(c)
            dead |= bad
            c[bad] = 1.0
            alpha[:, i] = a / c[:, None]
            logc[:, i] = np.log(c)
        z = alpha[:, L - 1] @ t1
        dead |= ~(z > 0)
        zs = np.where(dead, 1.0, z)
        cost[ks] = np.where(dead, math.inf, t_shift * (L + 1) + row_shift[rows].sum(axis=1) - logc.sum(axis=1)
                            - np.log(zs))
        live = ~dead
        if not live.any():
            continue
        alpha, Ue, logc, zs, rows = alpha[live], Ue[live], logc[live], zs[live], rows[live]
        c_all = np.exp(logc)
        b = np.broadcast_to(t1, alpha[:, L - 1].shape) / zs[:, None]
        post = np.empty_like(alpha)
        post[:, L - 1] = alpha[:, L - 1] * b
        TP[:V, V] += post[:, L - 1].sum(axis=0)
        for i in range(L - 1, 0, -1):
            g = Ue[:, i] * b / c_all[:, i][:, None]
            acc += alpha[:, i - 1].T @ g
            b = g @ Tm.T
            post[:, i - 1] = alpha[:, i - 1] * b
        TP[V, :V] += post[:, 0].sum(axis=0)
        EP += np.bincount((rows[..., None] * V + np.arange(V)).ravel(), post.ravel(), minlength=EP.shape[0])
        if NP is not None:
            nodes = chains.node_ptr[P[live]][..., None] + np.arange(V)
            NP[nodes.ravel()] = post.ravel()
    TP[:V, :V] += Tm * acc


def _values(values, rows: int, what: str, R: int | None):
    v = np.asarray(values, np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2 or v.shape[0] != rows or v.shape[1] == 0 or (R is not None and v.shape[1] != R):
        raise SemiringError(f"{what} has shape {np.shape(values)}; expected ({rows},) or ({rows}, R)"
                            + (f" with R = {R}" if R is not None else ""))
    bad = np.flatnonzero(~np.isfinite(v).all(axis=1))
    if bad.size:
        raise SemiringError(f"{what} row {int(bad[0])} is not finite: {v[bad[0]]}")
    return np.ascontiguousarray(v)


def chain_expectation(chains: ChainBatch, transition_values, entry_values, *,
                      allow_empty: bool = False, device: str = "cpu") -> np.ndarray:
    """float64 [S, R]: each chain's expected sum of additive values along its path.

    A path's value is the sum of the values tied to the table entries its arcs use:
    ``transition_values`` [V+1, V+1] or [V+1, V+1, R] per transition entry (the start
    and end included) and ``entry_values`` [nnz] or [nnz, R] per row entry.  An
    expectation of a sum is the sum of the posteriors times the values (linearity; the
    quantity the expectation semiring's total <Z, r> gives as r / Z, Eisner 2002), so it
    comes from :func:`chain_forward_backward`'s own pass, per chain.

    Raises:
        SemiringError: values of the wrong shape, or not finite.
        NoAcceptingPathError: a chain has no path of nonzero weight, unless allow_empty
            (its row is then NaN).
    """
    _require(chains, "expectation")
    V1 = chains.num_labels + 1
    tv = np.asarray(transition_values, np.float64)
    if tv.shape[:2] != (V1, V1) or tv.ndim not in (2, 3):
        raise SemiringError(f"transition_values has shape {tv.shape}; expected ({V1}, {V1}) or ({V1}, {V1}, R)")
    TV = _values(tv.reshape(V1 * V1, -1), V1 * V1, "transition_values", None)
    EV = _values(entry_values, chains.row_label.shape[0], "entry_values", TV.shape[1])
    return _expect(chains, TV, EV, allow_empty, "expectation", device)[0]


def _expect(chains, TV, EV, allow_empty, func, device):
    Tp, row_p, t_shift, row_shift = _real_tables(chains)
    V = chains.num_labels
    S = len(chains)
    cost = np.empty(S)
    X = np.zeros((S, TV.shape[1]))
    _run_fb(device, chains.ptr, chains.pos_row, chains.row_ptr, chains.row_label, row_p, Tp, t_shift, row_shift,
            chains.node_ptr, False, cost, np.zeros((V + 1, V + 1)), np.zeros(chains.row_label.shape[0]),
            np.zeros(0), TV, EV, X)
    _dead(cost, chains, func, allow_empty)
    return X, cost


def chain_entropy(chains: ChainBatch, *, allow_empty: bool = False, device: str = "cpu") -> np.ndarray:
    """float64 [S]: the entropy in nats of each chain's distribution over its paths,
    H = ln Z - E[ln w(path)] (Li and Eisner 2009, section 4.1), the expectation of the
    log weights tied to each table entry (:func:`chain_expectation`).

    Raises:
        NoAcceptingPathError: a chain has no path of nonzero weight, unless allow_empty
            (its entropy is then NaN).
    """
    _require(chains, "entropy")
    with np.errstate(divide="ignore"):
        if chains.semiring == "real":
            lt, lw = np.log(chains.transition), np.log(chains.row_weight)
        else:
            lt, lw = -chains.transition, -chains.row_weight
    lt = np.where(np.isfinite(lt), lt, 0.0)          # a zero weight is never on a path
    lw = np.where(np.isfinite(lw), lw, 0.0)
    V1 = chains.num_labels + 1
    X, cost = _expect(chains, np.ascontiguousarray(lt.reshape(V1 * V1, 1)), np.ascontiguousarray(lw.reshape(-1, 1)),
                      allow_empty, "entropy", device)
    return -cost - X[:, 0]


def chain_total_weight(chains: ChainBatch) -> np.ndarray:
    """float64 [S]: each chain's total weight as a cost, -ln Z (inf: none), by the forward
    recursion alone."""
    _require(chains, "chain_total_weight")
    Tp, row_p, t_shift, row_shift = _real_tables(chains)
    cost = np.empty(len(chains))
    _total_kernel(chains.ptr, chains.pos_row, chains.row_ptr, chains.row_label, row_p, Tp, t_shift, row_shift,
                  chains.node_ptr, cost)
    return cost


def chain_best_paths(chains: ChainBatch, *, allow_empty: bool = False) -> ChainPaths:
    """The best path of every chain (the tropical semiring over the costs -ln w).

    Raises:
        NoAcceptingPathError: a chain has no path of nonzero weight (named), unless allow_empty.
    """
    _require(chains, "best_path")
    if chains.semiring == "real":
        with np.errstate(divide="ignore"):
            Tc = -np.log(chains.transition)
            row_c = -np.log(chains.row_weight)
    else:
        Tc, row_c = chains.transition, chains.row_weight
    N = chains.num_positions
    cost = np.empty(len(chains))
    labels = np.empty(N, np.int32)
    entries = np.empty(N, np.int64)
    _viterbi_kernel(chains.ptr, chains.pos_row, chains.row_ptr, chains.row_label, row_c, Tc, chains.node_ptr,
                    cost, labels, entries)
    _dead(cost, chains, "best_path", allow_empty)
    return ChainPaths(cost, labels, entries)

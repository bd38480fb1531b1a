"""The product of a failure-arc machine with a first-order tag factor, never materialised.

A *tagged product* P = m x (blocks, H) is the transducer whose states are pairs
(q, t') of a state q of the machine m and the last tag t' (tags 0..T-1, and T,
the boundary tag: the start, and the end).  Each labelled arc a of m (from s to
d, weight k_a) carries a *block* of entries j = blk_ptr[a] .. blk_ptr[a+1]-1,
each with a tag t_j and a weight w_j(t') >= 0 (``blk_w[j, 0]`` for every t' when
``blk_w`` has one column: a factor independent of the previous tag; ``blk_w[j, t']``
when it has T + 1).  P's arcs are then

    (s, t') --a--> (d, t_j)   with weight  k_a * w_j(t') * H[t', t_j]

for every t', with H the dense transition factor [T+1, T+1] (all ones when not
given); a failure (phi) arc s -> r of m becomes (s, t') -> (r, t') with its weight,
for every t', and keeps m's exact failure semantics (a label that s has is never
read through s's phi arc, whatever the tag); a final weight f(q) becomes
``f(q) * H[t', T]`` at (q, t').  P starts at (m.start, T).

This is the shape of a tagger's variational and joint machines: Smith and
Eisner's tagged approximate corpus c q_phi is m = c, the entries phi[a, t] and
H = 1 (n_q = 1; phi[a, t | t'] with n_q = 2), and c p_theta is the entries
theta(w_a | t) and H = theta(t | t') (:mod:`fsmlearn.tag.ngram`).  The
product has N (T+1) states and K (T+1) arcs (K the entries); nothing of that
size is built: every routine here runs over m's arcs and its *exclusion arcs*
(:func:`fsmlearn.algo.phi.phi_structure`: the signed arcs that give failure
arcs their exact semantics), with rows of T + 1 numbers per state.  Epsilon
arcs are not part of the shape (a tag-preserving arc would be): a machine with
them is refused.

Sums over P are linear in the real semiring, so (as for any phi machine in this
engine) forward and backward values are solutions of linear systems over m's
graph with vector-valued rows:

    alpha = P_phi (e_start + A alpha),     beta = P_phi^T (f + A^T beta)

where A applies the blocks (and H) along arcs and exclusion arcs and P_phi
pushes each row down the failure forest (:func:`phi_pass_rows`).  They are
solved by Jacobi relaxation under the engine's stopping rule
(:func:`fsmlearn.algo.convergence.rate_step`: settled contraction rate, Aitken
extrapolation, divergence detection) and end in the engine's errors;
:func:`relax_block_system` is that solver for any such system.  The log
semiring's totals are the logs of the real ones; the expectation semiring's
first-order values (Eisner 2002; Li and Eisner 2009, section 4) are sums over
the arcs of alpha * weight * value * beta (:func:`product_expectation`), and
their gradient needs the expectation semiring's second components, two more
solves with sources (:func:`product_expectation_gradient`).

The engine picks the schedule.  With blocks independent of the previous tag each
application of A costs O(K + N (T+1)^2) (the rows are multiplied by H once per
state), not O(K (T+1)); without H as well, the product's systems reduce to one
column: the forward values' row sums solve m's own system with each arc weighted
by its block's total, and one application of the blocks gives the rows (the
backward values are the same in every column, up to the final rows) -- Smith and
Eisner's Z_a construction (section 3.3), here for any such product.

Public names: TagProduct, tag_product, product_forward, product_backward,
product_total, product_posteriors, product_log_partition_gradient,
product_expectation, product_expectation_gradient, product_block_update,
relax_block_system, phi_pass_rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import MachineError, NoAcceptingPathError, SemiringError
from ..fsm.machine import EPSILON, PHI, Machine
from ._check import require_machine
from .cuda import check_device
from .convergence import (RATE_EXTRAPOLATE, STATUS_DIVERGED, STATUS_NOT_CONVERGED, extrapolate,
                          measure_change, new_rate_state, raise_for_status, rate_step, stop_status)
from .phi import phi_depths, phi_structure
from .product_entry import apply_arc_py, entry_weight_py, row_times_py
from .shortest import DEFAULT_MAX_SWEEPS, DEFAULT_TOL, SolveInfo

__all__ = ["TagProduct", "tag_product", "product_forward", "product_backward", "product_total",
           "product_posteriors", "product_log_partition_gradient", "product_expectation",
           "product_expectation_gradient", "product_block_update", "relax_block_system", "phi_pass_rows"]

_NO_TRANS = np.zeros((0, 0))


# ------------------------------------------------------------------ kernels

_entry_weight = nb.njit(cache=True, inline="always")(entry_weight_py)
_apply_arc = nb.njit(cache=True)(apply_arc_py)
_row_times = nb.njit(cache=True)(row_times_py)


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
def _times_trans(X, trans, out):
    """out = X @ trans (trans [m, m]; an empty trans stands for all ones)."""
    for q in range(X.shape[0]):
        _row_times(X, q, trans, out, False, False)


@nb.njit(cache=True)
def _apply_arcs(Y, X, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, XT, transpose):
    """Y += A X (or A^T X) for the block arcs; X, Y float64 [n, m].  A row j of block b
    weighs ``blk_w[blk_row0[b] + j, t']`` (column 0 for every t' when blk_w has one
    column) times ``trans[t', blk_col[j]]`` (1 when trans is empty).  ``XT`` is scratch
    [n, m]."""
    sep = blk_w.shape[1] == 1
    if sep and not transpose:
        _times_trans(X, trans, XT)          # the rows times H once per state
    elif sep:
        XT[:] = 0.0                         # sums by output column, times H^T at the end
    for e in range(src.shape[0]):
        _apply_arc(e, Y, X, XT, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, transpose)
    if sep and transpose:
        for q in range(X.shape[0]):
            _row_times(XT, q, trans, Y, True, True)          # Y[q, t'] += sum_c XT[q, c] H[t', c]


@nb.njit(cache=True)
def _relax(X, B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, parent, weight, order,
           transpose, tol, max_sweeps, stats, fstats):
    """Jacobi sweeps X <- P(B + A X) (or the transposed system) from X, in place, under
    :func:`~fsmlearn.algo.convergence.rate_step`; returns a STATUS_* code and fills
    ``stats`` / ``fstats`` (the engine's layout).

    X, B: float64 [n, m]; the arc, block and forest arrays as in :func:`relax_block_system`.
    """
    Y = np.empty_like(X)
    Dl = np.empty_like(X)
    XT = np.empty_like(X)
    rs = new_rate_state(0.0)
    while stats[0] < max_sweeps:
        Y[:] = B
        _apply_arcs(Y, X, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, trans, XT, transpose)
        phi_pass_rows(Y, order, parent, weight, transpose)
        stats[0] += 1
        dn, sd, diverged = measure_change(X, Y, Dl, stats)
        fstats[0] = dn
        if diverged:
            return STATUS_DIVERGED
        decision = rate_step(rs, dn, sd, tol, True, True, False, stats, fstats)
        if stop_status(decision) >= 0:
            return stop_status(decision)
        if decision == RATE_EXTRAPOLATE:
            extrapolate(X, Dl, rs, stats)
    return STATUS_NOT_CONVERGED


@nb.njit(cache=True)
def _arc_sums(alpha, beta, src, dst, scale, block, blk_ptr, blk_col, blk_w, trans, aT, by_prev, out):
    """out[j, t'] (``by_prev``) or out[j, 0] += sum over the arcs using entry j's block of
    alpha[src, t'] k w_j(t') H[t', t_j] beta[dst, t_j]; ``aT`` = alpha @ H (separable
    blocks without ``by_prev``)."""
    m = alpha.shape[1]
    sep = blk_w.shape[1] == 1
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        k = scale[e]
        b = block[e]
        for j in range(blk_ptr[b], blk_ptr[b + 1]):
            c = blk_col[j]
            bb = beta[d, c]
            if bb == 0.0:
                continue
            if sep and not by_prev:
                out[j, 0] += k * blk_w[j, 0] * aT[s, c] * bb
                continue
            for tp in range(m):
                v = k * alpha[s, tp] * _entry_weight(blk_w, j, tp, trans, c) * bb
                if by_prev:
                    out[j, tp] += v
                else:
                    out[j, 0] += v


# ------------------------------------------------------------------ the solver

def _arr(x, dtype, name, ndim=1):
    a = np.ascontiguousarray(x, dtype=dtype)
    if a.ndim != ndim:
        raise SemiringError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    return a


def _trans_arg(trans, m):
    if trans is None:
        return _NO_TRANS
    t = _arr(trans, np.float64, "trans", 2)
    if t.shape != (m, m):
        raise SemiringError(f"trans must have shape {(m, m)}, got {t.shape}")
    return t


def relax_block_system(B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, phi_parent, phi_weight,
                       order, *, trans=None, transpose: bool = False, tol: float = DEFAULT_TOL,
                       max_sweeps: int = DEFAULT_MAX_SWEEPS, init=None, what: str = "the block system",
                       device: str = "cpu"):
    """Solve X = P(B + A X), or X = P^T(B + A^T X) with ``transpose``: the forward (backward)
    values of a tagged product with source (final) rows B.

    The unknown X (float64 [n, m]) holds a row of m values per state.  A is a sum of
    *block arcs*: arc e from ``src[e]`` to ``dst[e]`` with scale ``k = scale[e]`` uses block
    ``b = block[e]``, whose rows j in ``blk_ptr[b]:blk_ptr[b+1]`` each carry an output column
    ``blk_col[j]`` and input weights ``w_j[t'] = blk_w[blk_row0[b] + j, t']`` (or column 0 for
    every t' when blk_w has one column), times ``trans[t', blk_col[j]]`` when ``trans`` is
    given.  Forward, the arc adds ``k * sum_t' X[src, t'] w_j[t'] trans[t', c]`` to
    ``X[dst, c]``; transposed, the reverse.  ``P`` adds each state's row, times
    ``phi_weight[q]``, to its forest parent ``phi_parent[q]`` (-1: a root), deepest states
    first (``order`` lists the states deepest first); ``P^T`` adds each state's parent's row
    to its own, shallowest first.

    Args:
        B: float64 [n, m] the constant rows.
        src, dst: int [E] each block arc's states; scale: float64 [E]; block: int [E] its block.
        blk_ptr: int64 [nb + 1] each block's rows; blk_col: int [rows] each row's output column
            (0..m-1); blk_w: float64 [*, m] or [*, 1] the rows' input weights; blk_row0: int64
            [nb] (only the blocks that arcs use must point inside blk_w).
        phi_parent: int [n] forest parent (-1 for a root); phi_weight: float64 [n].
        order: int [n] the states, deepest in the forest first.
        trans: float64 [m, m] a dense factor on (input column, output column), or None.
        transpose: solve the transposed system.
        tol, max_sweeps: the stopping rule's tolerance and the sweep limit.
        init: float64 [n, m] a warm start (default: zeros).
        what: the quantity's name in error messages.
        device: ``"cpu"`` or ``"cuda"`` (the sweeps on the device,
            :mod:`fsmlearn.algo.cuda.product`: the same stopping rule and errors).

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
    tr = _trans_arg(trans, m)
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
    if blk_w.shape[1] not in (1, m):
        raise SemiringError(f"blk_w has {blk_w.shape[1]} columns, B has {m} (or give 1)")
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
    if check_device(device) == "cuda":
        from .cuda.product import relax_block_system_cuda
        status, X = relax_block_system_cuda(X, B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, tr,
                                            parent, weight, bool(transpose), float(tol), int(max_sweeps), stats,
                                            fstats)
    else:
        status = _relax(X, B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, tr, parent, weight, order,
                        bool(transpose), float(tol), int(max_sweeps), stats, fstats)
    raise_for_status(status, stats, fstats, what=what, where="the block system", tol=tol, max_sweeps=max_sweeps,
                     num_states=n)
    return X, SolveInfo(sweeps=int(stats[0]), extrapolations=int(stats[1]), components=1, cyclic=True,
                        last_change=float(fstats[0]), rate=float(fstats[2]))


# ------------------------------------------------------------------ the product

@dataclass(eq=False)
class TagProduct:
    """A tagged product m x (blocks, H) (module docstring); make it with :func:`tag_product`.

    Attributes:
        machine: m.
        T: the number of tags; T + 1 columns (T: the boundary tag).
        blk_ptr: int64 [E + 1] each arc's entries (none for phi and epsilon arcs).
        blk_tag: int64 [K] each entry's tag (0..T-1).
        blk_w: float64 [K, 1] or [K, T + 1] the entries' weights (by previous tag); the
            gradients come in this shape.
        trans: float64 [T + 1, T + 1] H, or None (all ones).
        phi_final: whether final weights fail over (as in m's other routines).
        schedule: ``"auto"`` (the engine picks: without H and with blocks independent of
            the previous tag, a solve over m's states and one pass instead of a solve over
            the product's, as Smith and Eisner's Z_a construction, section 3.3) or
            ``"general"`` (always the product's system).
        device: ``"cpu"`` or ``"cuda"``: where the product's systems are solved (the
            forward and backward values under every routine; the sums over the arcs run on
            the host).
    """
    machine: Machine
    T: int
    blk_ptr: np.ndarray
    blk_tag: np.ndarray
    blk_w: np.ndarray
    trans: np.ndarray | None
    phi_final: bool
    schedule: str = "auto"
    device: str = "cpu"
    _sys: dict = field(default_factory=dict, repr=False)
    _values: dict = field(default_factory=dict, repr=False)

    @property
    def events(self):
        """(src, dst, scale, block) of the system's block arcs: m's labelled arcs with
        entries (block = the arc) and the exclusion arcs (scale = minus the weight of the
        failure chain times the shadowed arc's, block = the shadowed arc)."""
        return self._system()["events"]

    def _system(self):
        if self._sys:
            return self._sys
        m = self.machine
        w, f = m.neglog_weights()
        k = np.exp(-np.asarray(w, np.float64))
        fin = np.exp(-np.asarray(f, np.float64))
        st = phi_structure(m, self.phi_final)
        has = (np.diff(self.blk_ptr) > 0) & (m.ilabel != PHI)
        arcs = np.flatnonzero(has)
        X = st.neg_tail.shape[0]
        shadow = st.neg_chain[st.neg_ptr[1:] - 1] if X else np.zeros(0, np.int64)
        kx = np.empty(X)
        for i in range(X):
            ch = st.neg_chain[st.neg_ptr[i]:st.neg_ptr[i + 1]]
            kx[i] = -math.exp(-float(np.sum(w[ch])))
        src = np.concatenate([m.arc_src[arcs].astype(np.int64), st.neg_tail.astype(np.int64)])
        dst = np.concatenate([m.dst[arcs].astype(np.int64), st.neg_head.astype(np.int64)])
        scale = np.concatenate([k[arcs], kx])
        block = np.concatenate([arcs.astype(np.int64), shadow.astype(np.int64)])
        N = m.num_states
        parent = np.full(N, -1, np.int64)
        pw = np.zeros(N)
        q = np.flatnonzero(st.phi_arc >= 0)
        parent[q] = m.dst[st.phi_arc[q]]
        pw[q] = k[st.phi_arc[q]]
        _, by_depth = phi_depths(parent, N)
        order = np.ascontiguousarray(by_depth[::-1], np.int64)       # deepest first
        # signed final weights: (state whose row stops, weight, state whose final is used)
        own = np.flatnonzero(fin > 0)
        fs, fk, fu = [own], [fin[own]], [own]
        for i in range(st.nf_state.shape[0]):
            ch = st.nf_chain[st.nf_ptr[i]:st.nf_ptr[i + 1]]
            r = int(st.nf_final[i])
            fs.append(np.array([st.nf_state[i]]))
            fk.append(np.array([-math.exp(-float(np.sum(w[ch])) - float(f[r]))]))
            fu.append(np.array([r]))
        self._sys.update(events=(src, dst, scale, block), parent=parent, pw=pw, order=order,
                         fin=(np.concatenate(fs).astype(np.int64), np.concatenate(fk),
                              np.concatenate(fu).astype(np.int64)),
                         row0=np.zeros(m.num_arcs, np.int64))
        return self._sys

    def _solve(self, B, transpose, what, tol=DEFAULT_TOL, max_sweeps=DEFAULT_MAX_SWEEPS, blk_w=None, trans=None):
        bw = self.blk_w if blk_w is None else blk_w
        if self.schedule == "auto" and trans is None and self.trans is None and bw.shape[1] == 1:
            return self._solve_reduced(np.asarray(B, np.float64), transpose, what, tol, max_sweeps, bw)
        s = self._system()
        src, dst, scale, block = s["events"]
        return relax_block_system(B, src, dst, scale, block, self.blk_ptr, self.blk_tag,
                                  self.blk_w if blk_w is None else blk_w, s["row0"], s["parent"], s["pw"],
                                  s["order"], trans=self.trans if trans is None else trans, transpose=transpose,
                                  tol=tol, max_sweeps=max_sweeps, what=what, device=self.device)

    def _cached(self, key, solve):
        """The product's forward or backward values, solved once per tolerance (the product's
        arrays are its own copies: they do not change); copies, so a caller may write."""
        if key not in self._values:
            self._values[key] = solve()
        X, info = self._values[key]
        return X.copy(), info

    def _solve_reduced(self, B, transpose, what, tol, max_sweeps, bw):
        """The system without a transition factor and with blocks independent of the previous
        tag, by one solve over m's states (one column) and one application of the blocks.

        Forward, X = P(B + A X): A X depends on X only through its row sums x = X 1, which
        solve x = P(B 1 + A' x), A' the arcs with their blocks' total weights; then
        X = P(B + A x).  Transposed, X = P^T(B + A^T X): A^T X is the same in every column,
        so X = P^T B + v 1^T with v = P^T(c + A'^T v), c the first column of A^T P^T B."""
        s = self._system()
        src, dst, scale, block = s["events"]
        N, W = B.shape
        cum = np.concatenate([[0.0], np.cumsum(bw[:, 0])])
        tot = (cum[self.blk_ptr[1:]] - cum[self.blk_ptr[:-1]])[:, None]     # each arc's block total
        E = self.machine.num_arcs
        one = (np.arange(E + 1, dtype=np.int64), np.zeros(E, np.int64), np.ascontiguousarray(tot),
               np.zeros(E, np.int64))
        if not transpose:
            x, info = relax_block_system(B.sum(axis=1, keepdims=True), src, dst, scale, block, *one, s["parent"],
                                         s["pw"], s["order"], tol=tol, max_sweeps=max_sweeps, what=what,
                                         device=self.device)
            X1 = np.zeros((N, W))
            X1[:, 0] = x[:, 0]
            X = B + self._apply(X1, False, blk_w=bw)
            phi_pass_rows(X, s["order"], s["parent"], s["pw"], False)
            return X, info
        PB = B.copy()
        phi_pass_rows(PB, s["order"], s["parent"], s["pw"], True)
        c = np.ascontiguousarray(self._apply(PB, True, blk_w=bw)[:, :1])
        v, info = relax_block_system(c, src, dst, scale, block, *one, s["parent"], s["pw"], s["order"],
                                     transpose=True, tol=tol, max_sweeps=max_sweeps, what=what, device=self.device)
        return PB + v, info

    def _apply(self, X, transpose, blk_w=None, trans=None):
        """A X (or A^T X) once, with the given weights (default: the product's)."""
        s = self._system()
        src, dst, scale, block = s["events"]
        Y = np.zeros_like(X)
        _apply_arcs(Y, X, src, dst, scale, block, self.blk_ptr, self.blk_tag,
                    self.blk_w if blk_w is None else blk_w, s["row0"],
                    _trans_arg(self.trans if trans is None else trans, self.T + 1), np.empty_like(X),
                    bool(transpose))
        return Y

    def end(self, trans=None):
        """float64 [T + 1]: the end factor H[t', T] (ones without H)."""
        t = self.trans if trans is None else trans
        return np.ones(self.T + 1) if t is None else np.asarray(t)[:, self.T]


def tag_product(m: Machine, T: int, blk_ptr, blk_tag, blk_w, trans=None, phi_final: bool = True,
                schedule: str = "auto", device: str = "cpu") -> TagProduct:
    """The tagged product of m with blocks and a transition factor (module docstring).

    Args:
        m: a machine (failure arcs allowed); its weights are read as probabilities
            (``exp(-w)`` for negative-log weights).
        T: the number of tags (the boundary tag is T).
        blk_ptr: int [E + 1] each arc's entries; phi and epsilon arcs must have none.
        blk_tag: int [K] each entry's tag in 0..T-1.
        blk_w: float [K] or [K, 1] (independent of the previous tag) or [K, T + 1].
        trans: float [T + 1, T + 1] H[t', t] (column T: the end), or None (all ones).
        phi_final: whether final weights fail over.
        schedule: ``"auto"`` or ``"general"`` (:class:`TagProduct`).
        device: ``"cpu"`` or ``"cuda"`` (:class:`TagProduct`).

    Raises:
        SemiringError: arrays of the wrong shape, out of range or negative.
        MachineError: m has epsilon arcs.
        NotAMachineError: m is not a Machine.
        ArgumentError: a device other than "cpu" or "cuda".
        FsmError: device="cuda" without a CUDA device or numba's simulator.
    """
    require_machine(m, "tag_product", "m")
    device = check_device(device)
    lab = np.asarray(m.ilabel)
    if np.any(lab == EPSILON):
        raise MachineError(f"tag_product: arc {int(np.flatnonzero(lab == EPSILON)[0])} is an epsilon arc; the "
                           "product has labelled and failure arcs only (remove epsilons first)")
    T = int(T)
    bp = _arr(blk_ptr, np.int64, "blk_ptr")
    bt = _arr(blk_tag, np.int64, "blk_tag")
    bw = np.array(blk_w, np.float64)            # copies: the product does not alias the caller's arrays
    bw = np.ascontiguousarray(bw[:, None] if bw.ndim == 1 else bw)
    if bp.shape[0] != m.num_arcs + 1 or bp[0] != 0 or np.any(np.diff(bp) < 0):
        raise SemiringError(f"blk_ptr must be {m.num_arcs + 1} non-decreasing offsets from 0")
    K = int(bp[-1])
    if bt.shape[0] != K or bw.ndim != 2 or bw.shape[0] != K or bw.shape[1] not in (1, T + 1):
        raise SemiringError(f"blk_tag needs {K} entries and blk_w shape ({K},), ({K}, 1) or ({K}, {T + 1}); "
                            f"got {bt.shape} and {np.shape(blk_w)}")
    if K and (bt.min() < 0 or bt.max() >= T):
        raise SemiringError(f"blk_tag must lie in 0..{T - 1}")
    if not np.all(bw >= 0) or not np.all(np.isfinite(bw)):
        raise SemiringError("blk_w must be finite and non-negative (probabilities)")
    bad = (lab == PHI) & (np.diff(bp) > 0)
    if np.any(bad):
        raise SemiringError(f"arc {int(np.flatnonzero(bad)[0])} is a phi arc and cannot carry entries")
    tr = None if trans is None else _trans_arg(trans, T + 1).copy()
    if tr is not None and (not np.all(tr >= 0) or not np.all(np.isfinite(tr))):
        raise SemiringError("trans must be finite and non-negative (probabilities)")
    if schedule not in ("auto", "general"):
        raise SemiringError(f"schedule must be 'auto' or 'general', got {schedule!r}")
    return TagProduct(m, T, bp, bt, bw, tr, bool(phi_final), schedule, device)


def product_forward(p: TagProduct, tol: float = DEFAULT_TOL, max_sweeps: int = DEFAULT_MAX_SWEEPS):
    """(alpha float64 [N, T + 1], SolveInfo): the forward values of the product's states
    (q, t'), the total weight of the paths from (start, T) to them, failure arcs followed."""
    def solve():
        m = p.machine
        B = np.zeros((m.num_states, p.T + 1))
        if m.start >= 0:
            B[m.start, p.T] = 1.0
        return p._solve(B, False, "the product's forward values", tol, max_sweeps)
    return p._cached(("forward", float(tol), int(max_sweeps)), solve)


def _final_rows(p: TagProduct, trans=None, final_values=None):
    """B [N, T + 1]: each state's signed final weight times the end factor (times the
    value of the final weight used, with ``final_values``)."""
    fs, fk, fu = p._system()["fin"]
    f = np.zeros(p.machine.num_states)
    np.add.at(f, fs, fk if final_values is None else fk * np.asarray(final_values, np.float64)[fu])
    return f[:, None] * p.end(trans)[None, :]


def product_backward(p: TagProduct, tol: float = DEFAULT_TOL, max_sweeps: int = DEFAULT_MAX_SWEEPS):
    """(beta float64 [N, T + 1], SolveInfo): the backward values, the total weight of the
    paths from (q, t') to an end."""
    return p._cached(("backward", float(tol), int(max_sweeps)),
                     lambda: p._solve(_final_rows(p), True, "the product's backward values", tol, max_sweeps))


def product_total(p: TagProduct, alpha=None, **kw) -> float:
    """Z, the total weight of the product's accepting paths (the log semiring's is its log)."""
    a = product_forward(p, **kw)[0] if alpha is None else alpha
    return float(np.sum(a * _final_rows(p)))


def _z(p, alpha, func):
    Z = float(np.sum(alpha * _final_rows(p)))
    if not Z > 0.0:
        raise NoAcceptingPathError(f"{func}: the product has no accepting path (Z = {Z:g})")
    return Z


def product_posteriors(p: TagProduct, by_prev: bool = True, **kw):
    """The expected uses of the product's arcs and ends under its path distribution.

    Returns:
        (entries float64 [K, T + 1] (``by_prev``: entry j taken after tag t') or [K],
        transitions float64 [T + 1, T + 1] (t' then t; column T: the ends), ends by state
        float64 [N] (the paths that stop by state q's final weight, failed over or not)).
        An HMM's expected transition counts are ``transitions``; its emission counts are the
        entries' uses summed by (tag, word).

    Raises:
        NoAcceptingPathError: Z = 0.
    """
    alpha, _ = product_forward(p, **kw)
    beta, _ = product_backward(p, **kw)
    Z = _z(p, alpha, "product_posteriors")
    s = p._system()
    src, dst, scale, block = s["events"]
    K = p.blk_tag.shape[0]
    W = p.T + 1
    out = np.zeros((K, W))
    _arc_sums(alpha, beta, src, dst, scale, block, p.blk_ptr, p.blk_tag, p.blk_w,
              _trans_arg(p.trans, W), alpha, True, out)
    out /= Z
    trans = np.zeros((W, W))
    np.add.at(trans, (slice(None), p.blk_tag), out.T)
    fs, fk, fu = s["fin"]
    ends = (alpha * p.end()[None, :])[fs] * fk[:, None]      # [F, W] signed stops
    trans[:, p.T] += ends.sum(axis=0) / Z
    by_state = np.zeros(p.machine.num_states)
    np.add.at(by_state, fu, ends.sum(axis=1) / Z)
    return (out if by_prev else out.sum(axis=1)), trans, by_state


def product_log_partition_gradient(p: TagProduct, **kw):
    """(d ln Z / d blk_w (blk_w's shape), d ln Z / d trans [T + 1, T + 1] or None): the
    uses of each weight divided by the weight (0 where the weight is 0), as
    :func:`fsmlearn.algo.log_partition_gradient` gives for real weights."""
    post, trans, _ = product_posteriors(p, by_prev=p.blk_w.shape[1] > 1, **kw)
    post = post.reshape(p.blk_w.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        gw = np.where(p.blk_w > 0, post / np.where(p.blk_w > 0, p.blk_w, 1.0), 0.0)
        gt = None if p.trans is None else np.where(p.trans > 0, trans / np.where(p.trans > 0, p.trans, 1.0), 0.0)
    return gw, gt


def _values(p: TagProduct, entry_values, trans_values, final_values):
    W = p.T + 1
    K = p.blk_tag.shape[0]
    ev = None
    if entry_values is not None:
        ev = np.asarray(entry_values, np.float64)
        ev = ev[:, None] if ev.ndim == 1 else ev
        if ev.shape[0] != K or ev.shape[1] not in (1, W):
            raise SemiringError(f"entry_values must have shape ({K},) or ({K}, {W}), got {np.shape(entry_values)}")
    tv = None
    if trans_values is not None:
        tv = _arr(trans_values, np.float64, "trans_values", 2)
        if tv.shape != (W, W):
            raise SemiringError(f"trans_values must have shape {(W, W)}, got {tv.shape}")
    fv = None
    if final_values is not None:
        fv = _arr(final_values, np.float64, "final_values")
        if fv.shape[0] != p.machine.num_states:
            raise SemiringError(f"final_values needs {p.machine.num_states} entries, got {fv.shape[0]}")
    for name, v in (("entry_values", ev), ("trans_values", tv), ("final_values", fv)):
        if v is not None and not np.all(np.isfinite(v)):
            raise SemiringError(f"{name} must be finite")
    return ev, tv, fv


def _value_weights(p: TagProduct, ev, tv):
    """The two weightings whose applications give a row's value mass: entries w * v
    (with H), and entries w with H * tv; None where the values are absent."""
    W = p.T + 1
    H = np.ones((W, W)) if p.trans is None else p.trans
    wv = None if ev is None else np.ascontiguousarray(p.blk_w * ev)
    ht = None if tv is None else np.ascontiguousarray(H * tv)
    return wv, ht, H


def product_expectation(p: TagProduct, entry_values=None, trans_values=None, final_values=None,
                        normalised: bool = True, **kw) -> float:
    """E[sum of the values along the path] under the product's path distribution (the
    expectation semiring's <Z, r> gives r / Z; ``normalised=False`` gives r).

    A path's value adds ``entry_values[j]`` (or ``[j, t']``) for each entry it takes,
    ``trans_values[t', t]`` for each transition (and ``[t', T]`` at its end), and
    ``final_values[r]`` when it stops by state r's final weight.  Computed as the sum over
    the arcs (and exclusion arcs) of alpha * weight * value * beta (Li and Eisner 2009,
    section 4.2).

    Raises:
        NoAcceptingPathError: Z = 0.
        SemiringError: values of the wrong shape, or not finite.
    """
    ev, tv, fv = _values(p, entry_values, trans_values, final_values)
    alpha, _ = product_forward(p, **kw)
    beta, _ = product_backward(p, **kw)
    Z = _z(p, alpha, "product_expectation")
    r = _value_mass(p, alpha, beta, ev, tv, fv)
    return r / Z if normalised else r


def _value_mass(p, alpha, beta, ev, tv, fv) -> float:
    """sum over arcs of alpha * weight * value * beta, and over ends."""
    wv, ht, H = _value_weights(p, ev, tv)
    r = 0.0
    if wv is not None:
        r += float(np.sum(p._apply(alpha, False, blk_w=wv) * beta))
    if ht is not None:
        r += float(np.sum(p._apply(alpha, False, trans=ht) * beta))
        r += float(np.sum(alpha * _final_rows(p, trans=ht)))
    if fv is not None:
        r += float(np.sum(alpha * _final_rows(p, final_values=fv)))
    return r


def product_expectation_gradient(p: TagProduct, entry_values=None, trans_values=None, final_values=None, **kw):
    """d r / d blk_w, r the unnormalised expectation (``product_expectation(...,
    normalised=False)``) with the values held fixed: float64 of blk_w's shape.

    r = sum_e alpha_e w_e v_e beta_e, so its derivative in the weight of the arcs of entry
    j (after tag t') is the mass through them with the value of the rest of the path:
    alpha_r * H beta + alpha H (v + tv) beta + alpha H beta_r, where alpha_r and beta_r
    are the expectation semiring's second components (Li and Eisner 2009, section 4.3),
    each one more solve of the product's system with the value mass as its source.

    Raises:
        SemiringError: values of the wrong shape, or not finite.
        NotConvergedError, DivergenceError: a solve does not converge (as the forward values'
            would not).
    """
    ev, tv, fv = _values(p, entry_values, trans_values, final_values)
    W = p.T + 1
    alpha, _ = product_forward(p, **kw)
    beta, _ = product_backward(p, **kw)
    wv, ht, H = _value_weights(p, ev, tv)
    src_a = np.zeros_like(alpha)
    src_b = np.zeros_like(beta)
    if wv is not None:
        src_a += p._apply(alpha, False, blk_w=wv)
        src_b += p._apply(beta, True, blk_w=wv)
    if ht is not None:
        src_a += p._apply(alpha, False, trans=ht)
        src_b += p._apply(beta, True, trans=ht) + _final_rows(p, trans=ht)
    if fv is not None:
        src_b += _final_rows(p, final_values=fv)
    # alpha_r = P(A alpha_r + src_a): the pushdown of the source is part of the system
    s = p._system()
    alpha_r, _ = p._solve(src_a, False, "the product's expectation forward values", **kw) \
        if np.any(src_a) else (np.zeros_like(alpha), None)
    beta_r, _ = p._solve(src_b, True, "the product's expectation backward values", **kw) \
        if np.any(src_b) else (np.zeros_like(beta), None)
    src, dst, scale, block = s["events"]
    K = p.blk_tag.shape[0]
    by_prev = p.blk_w.shape[1] > 1
    tr = _trans_arg(p.trans, W)
    g = np.zeros((K, W if by_prev else 1))
    # d/dw of sum_e alpha_r w beta + alpha w beta_r: the arc sums with unit weights
    one = np.ones_like(p.blk_w)
    _arc_sums(alpha_r, beta, src, dst, scale, block, p.blk_ptr, p.blk_tag, one, tr,
              _times(alpha_r, tr), by_prev, g)
    _arc_sums(alpha, beta_r, src, dst, scale, block, p.blk_ptr, p.blk_tag, one, tr,
              _times(alpha, tr), by_prev, g)
    if ev is not None:
        gv = np.zeros((K, W if by_prev or ev.shape[1] > 1 else 1))
        _arc_sums(alpha, beta, src, dst, scale, block, p.blk_ptr, p.blk_tag, np.ascontiguousarray(ev), tr,
                  _times(alpha, tr), by_prev or ev.shape[1] > 1, gv)
        g += gv if gv.shape[1] == g.shape[1] else gv.sum(axis=1, keepdims=True)
    if ht is not None:
        _arc_sums(alpha, beta, src, dst, scale, block, p.blk_ptr, p.blk_tag, one, ht, _times(alpha, ht), by_prev, g)
    return g.reshape(p.blk_w.shape)


def product_block_update(p: TagProduct, entry_values=None, trans_values=None, final_values=None,
                         min_mass: float = 0.0, **kw) -> np.ndarray:
    """The parallel block update of a product's blocks: float64 [K], each block replaced by

        w'[j] = exp(g[j] / m_a) / sum_{j' in a} exp(g[j'] / m_a)

    where g = d r / d w is :func:`product_expectation_gradient` (r the unnormalised
    expectation of the values) and m_a the block's expected uses (its entries' posteriors
    times Z).  For blocks that are normalised and independent of the previous tag, on a
    machine whose backward values are 1 (a proper LM), this is each block's maximiser of
    ``E[values] + H`` over its simplex with the others held, linearised where a block
    feeds its own source (Smith and Eisner 2007, section 3.5, the E-step of variational
    EM: g differs from their B[a, t] by a constant per block, the values of the paths
    before the block, which the softmax ignores).  All blocks move at once.  A block with
    m_a <= ``min_mass`` (never used) is kept.

    Raises:
        SemiringError: blocks by previous tag, a transition factor, blocks that do not sum
            to 1, values of the wrong shape or not finite.
        NoAcceptingPathError: Z = 0.
    """
    if p.blk_w.shape[1] != 1:
        raise SemiringError("product_block_update needs blocks independent of the previous tag (one column)")
    if p.trans is not None:
        raise SemiringError("product_block_update needs a product without a transition factor (the blocks "
                            "times H would not be normalised); give its values as trans_values instead")
    w = p.blk_w[:, 0]
    nb_ = p.blk_ptr.shape[0] - 1
    arc_of = np.repeat(np.arange(nb_), np.diff(p.blk_ptr))
    tot = np.zeros(nb_)
    np.add.at(tot, arc_of, w)
    used = np.diff(p.blk_ptr) > 0
    if np.any(np.abs(tot[used] - 1.0) > 1e-9):
        a = int(np.flatnonzero(used & (np.abs(tot - 1.0) > 1e-9))[0])
        raise SemiringError(f"product_block_update needs normalised blocks: block {a} sums to {tot[a]!r}")
    g = product_expectation_gradient(p, entry_values, trans_values, final_values, **kw)[:, 0]
    post, _, _ = product_posteriors(p, by_prev=False, **kw)
    Z = product_total(p, **kw)
    mass = np.zeros(nb_)
    np.add.at(mass, arc_of, post * Z)
    x = g / np.where(mass > min_mass, mass, 1.0)[arc_of]
    mx = np.full(nb_, -np.inf)
    np.maximum.at(mx, arc_of, x)
    e = np.exp(x - mx[arc_of])
    z = np.zeros(nb_)
    np.add.at(z, arc_of, e)
    new = e / z[arc_of]
    return np.where((mass > min_mass)[arc_of], new, w)


def _times(X, trans):
    out = np.empty_like(X)
    _times_trans(X, trans, out)
    return out

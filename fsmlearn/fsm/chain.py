"""Chains of label layers with tied weights: :class:`ChainBatch`.

Many machines have one shape: a chain of positions, each position a layer of
labels (a sentence's allowed tags, a cipher token's candidate words), an arc
from every label of position i - 1 to every label of position i, and weights
*tied* to two small tables.  A :class:`ChainBatch` holds a batch of such
machines without their arcs:

* ``transition`` [V+1, V+1]: the weight of label y' followed by label y; row V
  is the start (the weight of y at a chain's first position) and column V the
  end (the final weight of y at its last position); ``transition[V, V]`` is
  the weight of an empty chain;
* label rows in CSR form (``row_ptr``, ``row_label``, ``row_weight``): row r
  lists the labels a position may take and a weight for each (an emission
  score); each position names its row (``pos_row``), so positions that see the
  same word share one row;
* ``ptr`` [S+1]: chain s holds the positions ``ptr[s]:ptr[s+1]``.

The arc from label y' (entry e' of position i - 1) to label y (entry e of
position i) weighs ``transition[y', y] (x) row_weight[e]``, the semiring's
product.  This is the machine an HMM gives a sentence (Rabiner 1989, section
III: the trellis) and the composition a tagging lattice writes out arc by arc;
:meth:`ChainBatch.materialise` writes it out as a
:class:`~fsmlearn.fsm.MachineBatch` (one machine per chain, its start state,
then each position's labels in row order) for the routines that need the
arcs and for checking the engine's dense-chain schedule
(:mod:`fsmlearn.algo.chain`) against the generic one.

Weights follow :class:`~fsmlearn.fsm.Machine`'s conventions: ``semiring="log"``
holds costs (-ln p, inf for no arc), ``"real"`` probabilities (0 for no arc).

Public names: ChainBatch.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..errors import ArgumentError
from .batch import MachineBatch
from .machine import Machine

__all__ = ["ChainBatch"]


def _as(a, dtype, what):
    try:
        return np.ascontiguousarray(a, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"ChainBatch: {what} must be an array of {np.dtype(dtype).name}: {e}") from None


class ChainBatch:
    """A batch of chains of label layers with tied weights (see the module docstring).

    Attributes:
        ptr: int64 [S+1] position offsets of the S chains.
        pos_row: int64 [N] the label row of each position.
        row_ptr: int64 [R+1], row_label: int32 [nnz], row_weight: float64 [nnz]: the
            label rows (labels 0..V-1; a label appears at most once per row).
        transition: float64 [V+1, V+1] (row and column V: start and end).
        semiring: "log" (costs) or "real" (probabilities).
        num_labels: V.
    """

    __slots__ = ("ptr", "pos_row", "row_ptr", "row_label", "row_weight", "transition", "semiring",
                 "num_labels", "_node_ptr", "_full")

    def __init__(self, ptr, pos_row, row_ptr, row_label, row_weight, transition, semiring: str = "log"):
        """Check and hold the arrays (copied only where a dtype or layout changes).

        Raises:
            ArgumentError: a semiring other than log or real; offsets that do not rise
                from 0 to their array's length; a position's row or a row's label out of
                range; a label twice in one row; a weight that is NaN, or not a weight of
                the semiring (a cost of -inf; a negative or infinite probability); a
                transition table that is not square [V+1, V+1].  The message names the
                offending index and value.
        """
        if semiring not in ("log", "real"):
            raise ArgumentError(f"ChainBatch: semiring must be 'log' or 'real', got {semiring!r}")
        ptr = _as(ptr, np.int64, "ptr")
        pos_row = _as(pos_row, np.int64, "pos_row")
        row_ptr = _as(row_ptr, np.int64, "row_ptr")
        row_label = _as(row_label, np.int32, "row_label")
        row_weight = _as(row_weight, np.float64, "row_weight")
        transition = _as(transition, np.float64, "transition")
        if transition.ndim != 2 or transition.shape[0] != transition.shape[1] or transition.shape[0] < 2:
            raise ArgumentError(f"ChainBatch: transition must be [V+1, V+1] with V >= 1, got {transition.shape}")
        V = transition.shape[0] - 1
        for name, p, n in (("ptr", ptr, pos_row.shape[0]), ("row_ptr", row_ptr, row_label.shape[0])):
            if p.ndim != 1 or p.size < 1 or p[0] != 0 or p[-1] != n:
                raise ArgumentError(f"ChainBatch: {name} must rise from 0 to {n}, got "
                                    f"{p[:1].tolist()}..{p[-1:].tolist()}")
            bad = np.flatnonzero(np.diff(p) < 0)
            if bad.size:
                raise ArgumentError(f"ChainBatch: {name} falls at {int(bad[0])}: {int(p[bad[0]])} then "
                                    f"{int(p[bad[0] + 1])}")
        if row_weight.shape != row_label.shape:
            raise ArgumentError(f"ChainBatch: row_weight has {row_weight.shape} entries, row_label {row_label.shape}")
        R = row_ptr.shape[0] - 1
        bad = np.flatnonzero((pos_row < 0) | (pos_row >= R))
        if bad.size:
            raise ArgumentError(f"ChainBatch: position {int(bad[0])} names row {int(pos_row[bad[0]])}, outside "
                                f"0..{R - 1}")
        bad = np.flatnonzero((row_label < 0) | (row_label >= V))
        if bad.size:
            raise ArgumentError(f"ChainBatch: row entry {int(bad[0])} has label {int(row_label[bad[0]])}, outside "
                                f"0..{V - 1}")
        e = _repeated_label(row_ptr, row_label, V)
        if e >= 0:
            raise ArgumentError(f"ChainBatch: row entry {e} repeats label {int(row_label[e])} within its row")
        for name, w in (("row_weight", row_weight), ("transition", transition.ravel())):
            bad = np.flatnonzero(np.isnan(w) | ((w == -np.inf) if semiring == "log" else ((w < 0) | (w == np.inf))))
            if bad.size:
                raise ArgumentError(f"ChainBatch: {name}[{int(bad[0])}] = {float(w[bad[0]])!r} is not a {semiring} weight"
                                    + (" (a cost of -inf)" if semiring == "log" else " (a probability >= 0)"))
        self._set(ptr, pos_row, row_ptr, row_label, row_weight, transition, semiring)

    def _set(self, ptr, pos_row, row_ptr, row_label, row_weight, transition, semiring):
        self.ptr, self.pos_row, self.row_ptr = ptr, pos_row, row_ptr
        self.row_label, self.row_weight, self.transition = row_label, row_weight, transition
        self.semiring = semiring
        self.num_labels = transition.shape[0] - 1
        self._node_ptr = None
        self._full = None

    @classmethod
    def trusted(cls, ptr, pos_row, row_ptr, row_label, row_weight, transition, semiring: str = "log"):
        """A batch from arrays a kernel wrote in the right dtypes and layout (no checks)."""
        self = cls.__new__(cls)
        self._set(ptr, pos_row, row_ptr, row_label, row_weight, transition, semiring)
        return self

    @classmethod
    def dense(cls, initial, transition, unaries, final=None) -> "ChainBatch":
        """Chains in which every position may take every label (natural-log *scores*, the
        negated costs): ``initial`` [V] the score of y at the first position,
        ``transition`` [V, V] of y' then y, ``unaries`` a list of [L_s, V] per-position
        scores (one chain each, each position its own row) and ``final`` [V] (default 0)
        at the last; an empty chain's weight is zero.  A log-semiring batch.

        Raises:
            ArgumentError: shapes that do not fit, or a score of NaN or +inf.
        """
        initial = _as(initial, np.float64, "initial")
        transition = _as(transition, np.float64, "transition")
        V = initial.size
        if initial.ndim != 1 or V == 0 or transition.shape != (V, V):
            raise ArgumentError(f"ChainBatch.dense: initial must be [V] and transition [V, V]; got "
                                f"{initial.shape} and {transition.shape}")
        final = np.zeros(V) if final is None else _as(final, np.float64, "final")
        if final.shape != (V,):
            raise ArgumentError(f"ChainBatch.dense: final must be [V] = [{V}]; got {final.shape}")
        us = []
        for k, u in enumerate(unaries):
            u = _as(u, np.float64, f"unary {k}")
            if u.ndim != 2 or u.shape[1] != V:
                raise ArgumentError(f"ChainBatch.dense: unary {k} has shape {u.shape}; expected [L, {V}]")
            us.append(u)
        for name, a in [("initial", initial), ("transition", transition), ("final", final)] + \
                [(f"unary {k}", u) for k, u in enumerate(us)]:
            if np.isnan(a).any() or (a == np.inf).any():
                raise ArgumentError(f"ChainBatch.dense: {name} holds NaN or +inf scores")
        T = np.full((V + 1, V + 1), np.inf)
        T[:V, :V] = -transition
        T[V, :V] = -initial
        T[:V, V] = -final
        lens = np.array([u.shape[0] for u in us], np.int64)
        ptr = np.zeros(lens.size + 1, np.int64)
        np.cumsum(lens, out=ptr[1:])
        N = int(ptr[-1])
        w = -np.concatenate(us).ravel() if N else np.zeros(0)
        return cls.trusted(ptr, np.arange(N, dtype=np.int64), np.arange(N + 1, dtype=np.int64) * V,
                           np.tile(np.arange(V, dtype=np.int32), N), w, T, "log")

    def __len__(self) -> int:
        return self.ptr.shape[0] - 1

    @property
    def num_positions(self) -> int:
        return self.pos_row.shape[0]

    @property
    def node_ptr(self) -> np.ndarray:
        """int64 [N+1]: position i's labels are the nodes ``node_ptr[i]:node_ptr[i+1]``
        (in its row's order); the routines' per-node results use this numbering."""
        if self._node_ptr is None:
            sizes = np.diff(self.row_ptr)[self.pos_row]
            p = np.zeros(sizes.size + 1, np.int64)
            np.cumsum(sizes, out=p[1:])
            self._node_ptr = p
        return self._node_ptr

    @property
    def full_rows(self) -> bool:
        """Whether every row holds all V labels in order 0..V-1 (every position may take
        every label: a dense chain)."""
        if self._full is None:
            V = self.num_labels
            R = self.row_ptr.shape[0] - 1
            self._full = bool(np.array_equal(self.row_ptr, np.arange(R + 1) * V) and
                              np.array_equal(self.row_label, np.tile(np.arange(V, dtype=np.int32), R)))
        return self._full

    @property
    def num_nodes(self) -> int:
        return int(self.node_ptr[-1])

    def __repr__(self) -> str:
        return (f"ChainBatch({len(self)} chains, {self.num_positions} positions, {self.num_nodes} nodes, "
                f"{self.num_labels} labels, semiring={self.semiring!r})")

    def materialise(self):
        """The chains written out arc by arc: (batch, arc_trans, arc_entry, final_trans).

        ``batch`` is a :class:`MachineBatch` with one machine per chain: its start state,
        then node n of position i as state ``start + 1 + (node_ptr[i] - node_ptr[ptr[s]])``;
        arcs labelled row + 1 : label + 1.  ``arc_trans`` [E] is each arc's flat index into
        ``transition`` and ``arc_entry`` [E] its row entry; ``final_trans`` [Q] the flat
        index of each state's final weight (-1 where it has none).
        """
        S = len(self)
        V = self.num_labels
        node_ptr = self.node_ptr
        n_arcs = _count_arcs(self.ptr, node_ptr)
        Q = S + self.num_nodes
        src_start = np.empty(Q + 1, np.int64)
        dst = np.empty(n_arcs, np.int32)
        il = np.empty(n_arcs, np.int32)
        ol = np.empty(n_arcs, np.int32)
        arc_trans = np.empty(n_arcs, np.int64)
        arc_entry = np.empty(n_arcs, np.int64)
        final_trans = np.full(Q, -1, np.int64)
        state_ptr = np.empty(S + 1, np.int64)
        _write(self.ptr, self.pos_row, self.row_ptr, self.row_label, node_ptr, V, src_start, dst, il, ol,
               arc_trans, arc_entry, final_trans, state_ptr)
        T = self.transition.ravel()
        real = self.semiring == "real"
        w = T[arc_trans] * self.row_weight[arc_entry] if real else T[arc_trans] + self.row_weight[arc_entry]
        final = np.full(Q, 0.0 if real else np.inf)
        has = final_trans >= 0
        final[has] = T[final_trans[has]]
        m = Machine(start=0 if Q else -1, final=final, src_start=src_start, dst=dst, ilabel=il, olabel=ol,
                    weight=w, semiring=self.semiring, check_symbols=False)
        return MachineBatch(m, state_ptr, state_ptr[:-1]), arc_trans, arc_entry, final_trans


@nb.njit(cache=True)
def _repeated_label(row_ptr, row_label, V):
    """The first row entry whose label already appeared in its row, or -1."""
    seen = np.full(V, -1, np.int64)
    for r in range(row_ptr.shape[0] - 1):
        for e in range(row_ptr[r], row_ptr[r + 1]):
            y = row_label[e]
            if seen[y] == r:
                return e
            seen[y] = r
    return -1


@nb.njit(cache=True)
def _count_arcs(ptr, node_ptr):
    n = 0
    for s in range(ptr.shape[0] - 1):
        prev = 1
        for i in range(ptr[s], ptr[s + 1]):
            k = node_ptr[i + 1] - node_ptr[i]
            n += prev * k
            prev = k
    return n


@nb.njit(cache=True)
def _write(ptr, pos_row, row_ptr, row_label, node_ptr, V, src_start, dst, il, ol, arc_trans, arc_entry,
           final_trans, state_ptr):
    """Write the chains' machines (see :meth:`ChainBatch.materialise`)."""
    V1 = V + 1
    a = 0
    q = 0
    for s in range(ptr.shape[0] - 1):
        state_ptr[s] = q
        start = q
        p0 = ptr[s]
        p1 = ptr[s + 1]
        # the previous layer: its first state, its size, its row (-1: the start state)
        prev_q = start
        prev_k = 1
        prev_r = -1
        for i in range(p0, p1):
            r = pos_row[i]
            e0 = row_ptr[r]
            k = node_ptr[i + 1] - node_ptr[i]
            base = start + 1 + node_ptr[i] - node_ptr[p0]
            for p in range(prev_k):
                src_start[prev_q + p] = a
                yp = V if prev_r < 0 else row_label[row_ptr[prev_r] + p]
                for j in range(k):
                    y = row_label[e0 + j]
                    dst[a] = base + j
                    il[a] = r + 1
                    ol[a] = y + 1
                    arc_trans[a] = yp * V1 + y
                    arc_entry[a] = e0 + j
                    a += 1
            prev_q = base
            prev_k = k
            prev_r = r
        for p in range(prev_k):                  # the last layer (or the start): final weights
            src_start[prev_q + p] = a
            yp = V if prev_r < 0 else row_label[row_ptr[prev_r] + p]
            final_trans[prev_q + p] = yp * V1 + V
        q = start + 1 + node_ptr[p1] - node_ptr[p0]
    state_ptr[ptr.shape[0] - 1] = q
    src_start[q] = a

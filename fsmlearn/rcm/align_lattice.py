"""The lattice of the contexts RCMS chose for one input (:class:`AlignLattice`), and the layered
acyclic machine it compiles into (one arc per source context and destination, the elements
that land in one root pooled: :class:`ArcPool`), with the kernels that score, pool and
restrict its arcs.  Built by :func:`fsmlearn.rcm.align.rcms_align`; every inference on it is the
engine's (Steinhardt and Liang 2015, section 6).

Public names: AlignLattice, ArcPool.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import ArgumentError
from ..fsm.machine import Machine
from .align_model import STAR, AlignRCM

__all__ = ["AlignLattice", "ArcPool"]

@nb.njit(cache=True)
def _arc_scores(arc_src, arc_lab, ctx_z, ctx_prev, ctx_root_out, ngs, edge_s, big_s, use_big, C, V, outside):
    E = arc_src.size
    out = np.empty(E)
    for a in range(E):
        k = arc_src[a]
        v = arc_lab[a]
        zk = ctx_z[k]
        s = ngs[k, v % C] + edge_s[zk * V + v]
        if use_big:
            s += big_s[(zk * (V + 2) + ctx_prev[k]) * V + v]
        if ctx_root_out[k]:
            s += outside
        out[a] = s
    return out


@nb.njit(cache=True)
def _weighted_length(p, arc_src, ctx_len):
    tot = 0.0
    acc = 0.0
    for a in range(p.size):
        tot += p[a]
        acc += p[a] * ctx_len[arc_src[a]]
    return acc / tot if tot > 0 else 0.0


@nb.njit(cache=True)
def _pool(score, arc, label, M, bounds):
    """Per machine arc, the largest score of its elements and the label of the first element
    that has it (elements of one arc come in label order; -1 where none is finite); and per
    element score - top[arc] (top 0 where -inf), the exponent of its share.  ``bounds`` cut the
    elements into blocks that no machine arc straddles (the positions), done one at a time
    while they are in cache."""
    top = np.full(M, -np.inf)
    arg = np.full(M, -1, np.int64)
    diff = np.empty(score.size)
    for blk in range(bounds.size - 1):
        a = bounds[blk]
        b = bounds[blk + 1]
        for j in range(a, b):
            g = arc[j]
            if score[j] > top[g]:
                top[g] = score[j]
                arg[g] = label[j]
        for j in range(a, b):
            t = top[arc[j]]
            diff[j] = score[j] - (t if t > -np.inf else 0.0)
    return top, arg, diff


@nb.njit(cache=True)
def _pool_total(arc, scale, M):
    """Per machine arc the sum of its elements' scale, in element order (np.bincount's sum)."""
    total = np.zeros(M)
    for j in range(arc.size):
        total[arc[j]] += scale[j]
    return total


def _src_start(gsrc, N):
    out = np.zeros(N + 1, np.int64)
    np.cumsum(np.bincount(gsrc, minlength=N), out=out[1:])
    return out


@nb.njit(cache=True)
def _restrict_groups(arc_group, elems, M):
    """The machine arcs that carry some of ``elems`` (ascending) and each element's arc among them."""
    used = np.zeros(M, np.bool_)
    for j in range(elems.size):
        used[arc_group[elems[j]]] = True
    renum = np.empty(M, np.int64)
    n = 0
    for g in range(M):
        if used[g]:
            renum[g] = n
            n += 1
    kept = np.empty(n, np.int64)
    for g in range(M):
        if used[g]:
            kept[renum[g]] = g
    arc = np.empty(elems.size, np.int64)
    for j in range(elems.size):
        arc[j] = renum[arc_group[elems[j]]]
    return kept, arc


@nb.njit(cache=True)
def _restrict_elems(arc_layer_start, arc_lab, allowed, L):
    """The arcs of positions 1..L whose label is allowed at their position, ascending."""
    out = np.empty(arc_layer_start[L + 1], np.int64)
    n = 0
    for i in range(1, L + 1):
        for a in range(arc_layer_start[i], arc_layer_start[i + 1]):
            if allowed[i - 1, arc_lab[a]]:
                out[n] = a
                n += 1
    return out[:n].copy()


# ----------------------------------------------------------------------------- the lattice
@dataclass
class ArcPool:
    """How a machine of an :class:`AlignLattice` carries the lattice's arcs (the elements).

    The machine has one arc per (source context, destination) pair: the elements of a context
    that land in the same root of the next layer (most of them under RCMS) are one arc, labelled
    0 and weighted -log sum exp(their scores); an element that lands in a selected context is an
    arc of its own, labelled label + 1.  Path sums are unchanged, so log Z and the final
    posteriors are the element machine's; an element's posterior is its arc's times its share
    exp(score - log-sum) (:meth:`element_posteriors`), and the best path is that of the same arcs
    weighted by each one's best element (:meth:`best_machine`).

    Attributes:
        num_lattice_arcs: E, the lattice's arcs.
        elements: int64 [E'], the lattice arcs in the machine (ascending), or None when it has
            all E of them (then E' = E, in the lattice's order).
        arc: int64 [E'], the machine arc that carries each.
        label: int32 [E'], each element's label (0-based).
        scale: float64 [E'], exp(score - top[arc]).
        top: float64 [M], per machine arc the largest score of its elements.
        total: float64 [M], per machine arc the sum of its elements' scale (its weight is
            -(top + log total)).
        best_label: int64 [M], the label of the first element with the largest score.
    """
    num_lattice_arcs: int
    elements: np.ndarray | None
    arc: np.ndarray
    label: np.ndarray
    scale: np.ndarray
    top: np.ndarray
    total: np.ndarray
    best_label: np.ndarray

    @property
    def num_machine_arcs(self) -> int:
        return int(self.top.size)

    def arc_factor(self, arc_posteriors) -> np.ndarray:
        """float64 [M]: arc posterior / total, the factor of each element's scale in its posterior."""
        p = np.asarray(arc_posteriors, np.float64)
        if p.shape != self.top.shape:
            raise ArgumentError(f"arc posteriors have shape {p.shape}; expected {self.top.shape}")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.total > 0, p / np.where(self.total > 0, self.total, 1.0), 0.0)

    def element_posteriors(self, arc_posteriors) -> np.ndarray:
        """float64 [E] over the lattice's arcs: each element's posterior (its machine arc's
        posterior times its share of the arc's weight; 0 for elements not in the machine)."""
        q = self.arc_factor(arc_posteriors)
        post = q[self.arc] * self.scale
        if self.elements is None:
            return post
        out = np.zeros(self.num_lattice_arcs)
        out[self.elements] = post
        return out

    def best_machine(self, machine: Machine) -> Machine:
        """The machine with each arc weighted by its best element and labelled with its label + 1
        (its best path is the best element path)."""
        if machine.num_arcs != self.top.size:
            raise ArgumentError(f"the machine has {machine.num_arcs} arcs; this pool has {self.top.size}")
        return machine.replace(weight=-self.top, ilabel=(self.best_label + 1).astype(np.int32))


@dataclass
class AlignLattice:
    """The contexts RCMS chose for one input, all positions, and their arcs.

    Contexts are numbered globally, position by position (``layer_start``), and within a
    position per z: the non-root contexts in sorted order, then the roots.

    Attributes:
        model: the :class:`AlignRCM` (its sizes and feature settings; scores take any theta).
        x: int64 [L'].
        max_len: the number of output positions.
        outside: the weight on leaving a root (0: RCMS; -inf: beam search).
        layer_start: int64 [max_len + 2], the first context of each position.
        ctx_z, ctx_g, ctx_len, ctx_parent, ctx_label, ctx_lcs: int64 [N] per context: z, the
            constraint bit g, the number of determined labels, the context it was expanded from
            (-1 for roots and the root pair's elements), its last label (-1 for roots), the lcs
            with the next context of its z list (0 for the last non-root and the roots).
        ctx_root: bool [N].
        ctx_hist: int64 [N, max(n, 1)]: the last labels (STAR, BOS where not determined).
        ctx_forward, ctx_forward_target: float64 [N], the forward masses (model; target when a
            target was given) that selected them.
        arc_src: int64 [E], arc_dst: int32 [E]; arc_label: int32 [E] (0-based labels; the
            properties arc_ilabel = label + 1 and arc_layer, int32 [E], the position i of each arc);
            arc_layer_start: int64 [max_len + 2], the first arc of each position; arcs are sorted by
            source, then label.  These are the *elements* (one per context and allowed label).
        arc_group: int64 [E], the arc of the machine (:meth:`machine`) that carries each element;
        group_src: int64 [M], group_dst: int32 [M], group_ilabel: int32 [M]: the machine's arcs,
            one per (source, destination) pair (sorted by source): label 0 where the destination
            is a root (the pooled elements), the element's label + 1 where it is a selected
            context (one element); see :class:`ArcPool`.
        target: bool [L, V] of the labels allowed at each position of the target, or None.
        elements: with ``keep_elements``, per position a dict of the expanded elements
            (z, label, parent, lens, lcs, mass, target_mass, valid, active, context).
        built: the score tables and arc scores of the theta the lattice was built with
            (rcms_align's; :meth:`scores` reuses the arc scores while the tables are the same).
    """
    model: AlignRCM
    x: np.ndarray
    max_len: int
    outside: float
    layer_start: np.ndarray
    ctx_z: np.ndarray
    ctx_g: np.ndarray
    ctx_root: np.ndarray
    ctx_len: np.ndarray
    ctx_parent: np.ndarray
    ctx_label: np.ndarray
    ctx_lcs: np.ndarray
    ctx_hist: np.ndarray
    ctx_forward: np.ndarray
    ctx_forward_target: np.ndarray
    arc_src: np.ndarray
    arc_dst: np.ndarray
    arc_label: np.ndarray
    arc_layer_start: np.ndarray
    arc_group: np.ndarray
    group_src: np.ndarray
    group_dst: np.ndarray
    group_ilabel: np.ndarray
    ng_ids: np.ndarray
    end_ids: np.ndarray
    edge_ids: np.ndarray
    big_ids: np.ndarray
    target: np.ndarray | None = None
    elements: list | None = None
    built: _BuildTables | None = field(default=None, repr=False)

    def __post_init__(self):
        self.arc_dst = self.arc_dst.astype(np.int32, copy=False)
        self.group_dst = self.group_dst.astype(np.int32, copy=False)
        self.group_ilabel = self.group_ilabel.astype(np.int32, copy=False)
        if self.built is not None:
            self.built.scores.setflags(write=False)
        self.ctx_prev_index = self.ctx_prev
        for a in (self.arc_src, self.arc_dst, self.arc_label, self.arc_layer_start, self.arc_group,
                  self.group_src, self.group_dst, self.group_ilabel):
            a.setflags(write=False)      # read-only: machines share them instead of copying

    @property
    def num_contexts(self) -> int:
        return int(self.ctx_z.size)

    @functools.cached_property
    def _src_start(self) -> np.ndarray:
        """The model machine's CSR starts (read-only)."""
        out = _src_start(self.group_src, self.num_contexts)
        out.setflags(write=False)
        return out

    @functools.cached_property
    def arc_ilabel(self) -> np.ndarray:
        """int32 [E]: arc_label + 1, the machine's labels (read-only)."""
        out = (self.arc_label + 1).astype(np.int32)
        out.setflags(write=False)
        return out

    @functools.cached_property
    def arc_layer(self) -> np.ndarray:
        """int32 [E]: the position i of each arc (read-only)."""
        out = np.repeat(np.arange(self.max_len + 1, dtype=np.int32), np.diff(self.arc_layer_start))
        out.setflags(write=False)
        return out

    @property
    def num_arcs(self) -> int:
        """The lattice's arcs (elements)."""
        return int(self.arc_src.size)

    @property
    def num_machine_arcs(self) -> int:
        """The arcs of the model's machine (one per source and destination)."""
        return int(self.group_src.size)

    @property
    def ctx_layer(self) -> np.ndarray:
        """int64 [N]: the position of each context."""
        return np.repeat(np.arange(self.max_len + 1), np.diff(self.layer_start))

    @property
    def ctx_prev(self) -> np.ndarray:
        """int64 [N]: the previous-label index of the edge bigram (a label, V for STAR, V+1 for BOS)."""
        h = self.ctx_hist[:, -1]
        V = self.model.num_labels
        return np.where(h >= 0, h, np.where(h == STAR, V, V + 1))

    def suffix(self, k: int) -> tuple:
        """The determined suffix of context k (labels, oldest first)."""
        out = []
        q = int(k)
        for _ in range(int(self.ctx_len[k])):
            out.append(int(self.ctx_label[q]))
            q = int(self.ctx_parent[q])
        return tuple(out[::-1])

    def _tables(self, theta):
        th = self.model.theta if theta is None else np.asarray(theta, np.float64)
        if th.shape != self.model.theta.shape:
            raise ArgumentError(f"theta has shape {th.shape}; expected {self.model.theta.shape}")
        ngs = th[self.ng_ids].sum(axis=2)
        edge_s = th[self.edge_ids].sum(axis=1)
        big_s = th[self.big_ids] if self.model.edge_bigram else np.zeros(1)
        ends = th[self.end_ids].sum(axis=1)
        return ngs, edge_s, big_s, ends

    def scores(self, theta=None):
        """(arc scores float64 [E], end scores float64 [N]): theta . phi of every arc (the outside
        weight included) and of stopping at every context (-inf where it may not stop: z < L',
        position 0, or a root under outside -inf)."""
        ngs, edge_s, big_s, ends = self._tables(theta)
        root_out = self.ctx_root & (self.ctx_layer >= 1)
        out = self.outside if np.isfinite(self.outside) else 0.0
        b = self.built
        if (b is not None and _same_bits(edge_s, b.edge_s) and _same_bits(big_s, b.big_s)
                and _same_bits(ngs[:b.ngs.shape[0]], b.ngs)):
            s = b.scores        # the same tables: the same scores (read-only)
        else:
            s = _arc_scores(self.arc_src, self.arc_label, self.ctx_z, self.ctx_prev_index, root_out, ngs, edge_s,
                            big_s, self.model.edge_bigram, self.model.num_chars, self.model.num_labels, out)
        fin = np.full(self.num_contexts, -np.inf)
        stop = (self.ctx_z == self.x.size) & (self.ctx_layer >= 1)
        fin[stop] = ends[stop] + np.where(root_out[stop], self.outside, 0.0)
        return s, fin

    def machine(self, theta=None, allowed=None, length: int | None = None, scores=None):
        """The layered acyclic machine of these contexts (log semiring, start 0): the model's, or
        with ``allowed`` (bool [length, V]) its restriction to the elements of positions
        i <= length whose label is allowed at i, final only at position ``length``.

        The machine has one arc per (source context, destination) pair of the elements it keeps:
        the kept elements of a context that land in one root are one arc (label 0, weight
        -log sum exp of their scores; under a restriction only the allowed ones are summed), one
        that lands in a selected context an arc of its own (label + 1, weight -score).  Every
        path sum is the element machine's (see :class:`ArcPool`).

        Returns:
            (Machine, :class:`ArcPool`: which lattice arcs each machine arc carries, and their
            shares).
        """
        s, fin = self.scores(theta) if scores is None else scores
        N = self.num_contexts
        if allowed is None:
            elems = None
            final = -fin
            arc = self.arc_group
            M = self.group_src.size
            gsrc, dst, ilabel = self.group_src, self.group_dst, self.group_ilabel
            es, lab = s, self.arc_label
        else:
            allowed = np.asarray(allowed, bool)
            L = int(length)
            if allowed.shape != (L, self.model.num_labels) or not 1 <= L <= self.max_len:
                raise ArgumentError(f"allowed has shape {allowed.shape}; expected ({L}, {self.model.num_labels}) "
                                    f"with 1 <= {L} <= max_len {self.max_len}")
            elems = _restrict_elems(self.arc_layer_start, self.arc_label, allowed, L)
            final = np.full(N, np.inf)
            a, b = self.layer_start[L], self.layer_start[L + 1]
            final[a:b] = -fin[a:b]
            kept, arc = _restrict_groups(self.arc_group, elems, self.group_src.size)   # renumbered in order
            M = kept.size
            gsrc, dst, ilabel = self.group_src[kept], self.group_dst[kept], self.group_ilabel[kept]
            es, lab = s[elems], self.arc_label[elems]
        bt = self.built
        if elems is None and bt is not None and s is bt.scores:
            if bt.pooled is None:       # the build's pool of these very scores: complete it once
                scale = np.exp(bt.diff)
                total = _pool_total(arc, scale, M)
                with np.errstate(divide="ignore"):
                    w = -(np.where(bt.top > -np.inf, bt.top, 0.0) + np.log(total))
                for arr in (scale, total, w, bt.top, bt.best):
                    arr.setflags(write=False)
                bt.pooled = (scale, total, w)
            top, best = bt.top, bt.best
            scale, total, w = bt.pooled
        else:
            bounds = self.arc_layer_start if elems is None else np.array([0, es.size], np.int64)
            top, best, scale = _pool(es, arc, lab, M, bounds)
            np.exp(scale, out=scale)
            total = _pool_total(arc, scale, M)
            safe = np.where(top > -np.inf, top, 0.0)
            with np.errstate(divide="ignore"):
                w = -(safe + np.log(total))
        src_start = self._src_start if elems is None else _src_start(gsrc, N)
        for arr in (src_start, dst, ilabel, w, final):
            arr.setflags(write=False)    # fresh or the lattice's: the machine may share them
        m = Machine(start=0, final=final, src_start=src_start, dst=dst, ilabel=ilabel, weight=w, semiring="log")
        return m, ArcPool(self.num_arcs, elems, arc, lab, scale, top, total, best)

    def element_machine(self, theta=None, scores=None) -> Machine:
        """The machine with one arc per element (lattice arc), labelled label + 1 and weighted
        -score, arcs in the lattice's order: every (y, z) of the contexts is one path of it (the
        pooled :meth:`machine` has the same path sums with fewer arcs; this one is what the k best
        paths need, since a pooled arc keeps only its best element's label)."""
        s, fin = self.scores(theta) if scores is None else scores
        src_start = _src_start(self.arc_src, self.num_contexts)
        return Machine(start=0, final=-fin, src_start=src_start, dst=self.arc_dst, ilabel=self.arc_ilabel,
                       weight=-s, semiring="log")

    def target_machine(self, theta=None, scores=None):
        """The machine restricted to the target the lattice was built with."""
        if self.target is None:
            raise ArgumentError("this lattice was built without a target (y)")
        return self.machine(theta, self.target, self.target.shape[0], scores=scores)

    def mean_context_length(self, posteriors, machine: Machine | None = None) -> float:
        """The average number of determined labels of c_{i-1}, weighted by the arc posteriors of
        a machine of this lattice over all arcs (the statistic of section 7); ``posteriors`` is
        float64 [E] over the lattice's arcs (element posteriors), or with ``machine`` (one of
        :meth:`machine`'s) over that machine's arcs (the same figure: an arc's elements share
        its source)."""
        p = np.asarray(posteriors, np.float64)
        src = self.arc_src if machine is None else machine.arc_src
        if p.shape != src.shape:
            raise ArgumentError(f"posteriors have shape {p.shape}; expected {src.shape}")
        if machine is not None and machine.num_states != self.num_contexts:
            raise ArgumentError(f"the machine has {machine.num_states} states; the lattice {self.num_contexts} "
                                f"contexts")
        return _weighted_length(p, src, self.ctx_len)


def _same_bits(a, b) -> bool:
    """Whether two float64 arrays are the same bit for bit (signed zeros and NaNs included)."""
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a).view(np.int64),
                                                 np.ascontiguousarray(b).view(np.int64))


@dataclass
class _BuildTables:
    """What the lattice's arc scores were made of when it was built (the n-gram score of every
    context below the last position, the edge and edge-bigram tables) and those scores:
    :meth:`AlignLattice.scores` returns them again when the tables it computes have the same
    bits (the scores are a function of the tables: bit for bit what it would compute).  With
    them the pool of the model's machine (:func:`_pool`'s top, best and exponents, made by
    _arcs), whose shares, sums and weights the first :meth:`AlignLattice.machine` on these
    scores completes (``pooled``) and later ones reuse."""
    ngs: np.ndarray
    edge_s: np.ndarray
    big_s: np.ndarray
    scores: np.ndarray
    top: np.ndarray
    best: np.ndarray
    diff: np.ndarray
    pooled: tuple | None = None

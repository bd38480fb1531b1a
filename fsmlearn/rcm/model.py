"""Reified context models with n-gram features, compiled to layered acyclic machines.

The model (Steinhardt and Liang 2015, section 3):

    p(y_{1:L}, c_{1:L-1}) ∝ exp(sum_i theta . phi_i(c_{i-1}, y_i)) * kappa(y, c)

with contexts chosen by RCMS (section 4, :mod:`fsmlearn.rcm.contexts`).  The
contexts of all positions form a layered acyclic machine: one state per
context of C_i (layer i), from each context c of C_{i-1} one arc per label y
to f_i(c, y), labelled y + 1 and weighted -(theta . phi_i(c, y)) (log
semiring, -ln), final weight 1 on the last layer.  Every quantity of the
model is then the engine's: log Z is the machine's total weight, label and
context marginals are arc posteriors, the best labelling its best path
(:mod:`fsmlearn.algo`).

Features (equation 6): the (n + 1)-gram sigma(c_{i-1}, y_i) over the extended
alphabet Y ∪ {★}: positions i - n .. i - 1 take the context's label where it
determines it, :data:`BOS` before the sequence, :data:`STAR` elsewhere;
theta maps such tuples to weights (absent: 0).  A per-position score
``unary[i, y]`` (an emission or input score) is added, and the weight
``outside`` on arcs leaving the root context at positions i >= 2 and on the
root context's final weight (the feature I[c_i = Y_{1:i}] of section 4.1, for
i = 1 .. L): -inf turns RCMS into beam search.

Public names: NGramRCM, RCMSResult, STAR, BOS, rcms, beam_search_contexts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ..algo import best_path, forward_backward
from ..errors import ArgumentError
from ..fsm.machine import Machine
from .contexts import ContextLayer, expand, merge, select_top

__all__ = ["NGramRCM", "RCMSResult", "STAR", "BOS", "rcms"]

STAR = -1   #: an undetermined position in a feature tuple
BOS = -2    #: a position before the sequence


@dataclass
class NGramRCM:
    """An RCM with (n + 1)-gram indicator features on the extended alphabet (equation 6).

    Attributes:
        num_labels: |Y|.
        n: the order (features look at y_{i-n:i}).
        theta: dict from (n + 1)-tuples over labels, :data:`STAR` and :data:`BOS` to weights.
        outside: weight of the feature I[c_{i-1} = Y_{1:i-1}] (0: plain RCMS; -inf: beam search).
    """
    num_labels: int
    n: int
    theta: dict
    outside: float = 0.0

    def __post_init__(self):
        if self.num_labels < 1 or self.n < 0:
            raise ArgumentError(f"num_labels must be >= 1 and n >= 0, got {self.num_labels} and {self.n}")

    def key(self, suffix: tuple, i: int, y: int) -> tuple:
        """sigma(c_{i-1}, y_i) restricted to positions i - n .. i (1-based i; ``suffix`` the
        context's determined labels ending at position i - 1)."""
        out = []
        for j in range(i - self.n, i):
            back = i - 1 - j                      # 0: position i - 1
            if j < 1:
                out.append(BOS)
            elif back < len(suffix):
                out.append(suffix[len(suffix) - 1 - back])
            else:
                out.append(STAR)
        out.append(y)
        return tuple(out)

    def scores(self, suffix: tuple, i: int, is_root: bool, unary_row) -> np.ndarray:
        """theta . phi_i(c, y) for every y (natural log weights)."""
        th = self.theta
        s = np.array([th.get(self.key(suffix, i, y), 0.0) for y in range(self.num_labels)])
        if unary_row is not None:
            s = s + unary_row
        if is_root and i >= 2 and self.outside != 0.0:
            s = s + self.outside
        return s


@dataclass
class RCMSResult:
    """The contexts RCMS chose for one sequence and the machine they make.

    The transitions of the model are the *elements* of C~_i (a context of C_{i-1}
    and a label, scored theta . phi_i(c, y)), each going to f_i(c, y).  The machine
    has one arc per element that lands in a selected context, labelled y + 1; the
    elements of one context that land in the root of the next layer (every label
    whose extension was merged away: most of them) are one arc labelled 0 whose
    weight is their log-sum.  That changes no path sum: the engine's forward-backward
    on it gives ln Z and the arc posteriors, and an element's posterior is its arc's
    times its share of the arc's weight.  The best labelling is the best path of
    the same arcs weighted by the best element of each group (:meth:`best`).

    Attributes:
        layers: C_0 .. C_L (:class:`ContextLayer`).
        machine: the layered acyclic machine (log semiring, weights -ln).
        layer_start: int64 [L + 2], the first state of each layer.
        arc_position: int64 [E], the position i (1-based) of each arc.
        el_offset: int64 [L + 1], element e of position i is ``el_offset[i - 1] + y * K + k``
            for the k-th context of C_{i-1} (K = |C_{i-1}|) and label y.
        el_src, el_dst: int64, each element's source and target state.
        el_label: int64, its label (0-based).
        el_score: float64, theta . phi_i(c, y) (-inf: no transition).
        el_arc: int64, the arc carrying it (-1 when its score is -inf).
    """
    layers: list
    machine: Machine
    layer_start: np.ndarray
    arc_position: np.ndarray
    el_offset: np.ndarray
    el_src: np.ndarray
    el_dst: np.ndarray
    el_label: np.ndarray
    el_score: np.ndarray
    el_arc: np.ndarray
    best_weight: np.ndarray
    best_label: np.ndarray
    _fb: object = None
    _post: object = None

    @property
    def length(self) -> int:
        return self.layer_start.size - 2

    def forward_backward(self):
        """The engine's forward-backward on the machine (computed once, then kept)."""
        if self._fb is None:
            self._fb = forward_backward(self.machine)
        return self._fb

    def log_partition(self) -> float:
        """ln Z of the model under these contexts (the machine's total weight)."""
        return -self.forward_backward().logz

    def _posteriors(self):
        if self._post is None:
            fb = self.forward_backward()
            Y = int(self.el_label.max()) + 1 if self.el_label.size else 0
            L = self.length
            post = np.zeros(self.el_score.size)
            ok = np.flatnonzero(self.el_arc >= 0)
            a = self.el_arc[ok]
            # an element's share of its arc: exp(its score - the arc's), numpy's exp
            post[ok] = fb.posteriors[a] * np.exp(self.el_score[ok] + self.machine.weight[a])
            pos = np.repeat(np.arange(L), np.diff(self.el_offset))
            marg = np.bincount(pos * Y + self.el_label, weights=post, minlength=L * Y).reshape(L, Y)
            self._post = post, marg
        return self._post

    def element_posteriors(self) -> np.ndarray:
        """float64 [elements]: the posterior of each transition (c_{i-1}, y_i): its arc's
        posterior times its share of the arc's weight."""
        return self._posteriors()[0]

    def marginals(self) -> np.ndarray:
        """float64 [L, |Y|], p(y_i = y) (element posteriors summed by position and label)."""
        return self._posteriors()[1]

    def mean_context_length(self) -> float:
        """The average length of c_{i-1} (its determined labels), weighted by its mass under
        the model, over positions i = 1 .. L (the statistic of section 7)."""
        fb = self.forward_backward()
        lens = np.concatenate([[len(s) for s in layer.suffixes] for layer in self.layers]).astype(float)
        return float((fb.posteriors * lens[self.machine.arc_src]).sum() / self.length)

    def element(self, i: int, state: int, y: int) -> int:
        """The element leaving ``state`` (a context of C_{i-1}) at position i with label y."""
        K = int(self.layer_start[i] - self.layer_start[i - 1])
        return int(self.el_offset[i - 1] + y * K + (state - self.layer_start[i - 1]))

    def best(self) -> tuple[np.ndarray, float]:
        """The best labelling (0-based labels) and its score (natural log): the best path of
        the machine with each arc weighted by its best element."""
        p = best_path(self.machine.replace(weight=self.best_weight, ilabel=self.best_label))
        return np.asarray(p.ilabels, np.int64) - 1, -float(p.weight)


def rcms(model: NGramRCM, length: int, B: int, unary=None, exact_order: int | None = None) -> RCMSResult:
    """Choose contexts by RCMS for a sequence of ``length`` positions and build their machine.

    Args:
        model: the features and weights (an :class:`NGramRCM` or any object with
            ``num_labels`` and ``scores(suffix, i, is_root, unary_row)``).
        length: L >= 1.
        B: the context size (contexts kept per position besides the root).
        unary: optional float64 [L, |Y|] per-position scores.
        exact_order: instead of the B heaviest, keep every context of at most this many
            labels: the exact k-th order model's states (``B`` is then ignored).

    Returns:
        :class:`RCMSResult`.
    """
    if length < 1 or B < 0 or (exact_order is not None and exact_order < 0):
        raise ArgumentError(f"length must be >= 1, B >= 0 and exact_order >= 0, got {length}, {B} and "
                            f"{exact_order}")
    Y = model.num_labels
    if unary is not None:
        unary = np.asarray(unary, np.float64)
        if unary.shape != (length, Y):
            raise ArgumentError(f"unary has shape {unary.shape}; expected ({length}, {Y})")
    layers = [ContextLayer.initial()]
    el_parent, el_owner, el_label, el_score = [], [], [], []
    for i in range(1, length + 1):
        prev = layers[-1]
        K = len(prev)
        S = np.empty((K, Y))
        for k, suf in enumerate(prev.suffixes):
            S[k] = model.scores(suf, i, k == K - 1, None if unary is None else unary[i - 1])
        parent, label, lens, lcs = expand(prev, Y)
        score = S.T.ravel()                               # S[parent, label] in the expanded order
        logf = prev.forward[parent] + score
        # exact order: every suffix of at most k labels, with or without mass (merge targets)
        active = select_top(logf, B) if exact_order is None else lens <= exact_order
        layer, owner = merge(prev, parent, label, lens, lcs, active, logf)
        el_parent.append(parent)
        el_owner.append(owner)
        el_label.append(label)
        el_score.append(score)
        layers.append(layer)
    return _build(model, layers, el_parent, el_owner, el_label, el_score)


@nb.njit(cache=True)
def _classify_kernel(start, el_offset, parent, owner, label, score):
    """Each element's source and target state; per source, how many of its elements are arcs of
    their own (landing in a selected context), and the best of those landing in the next root
    (its score and first label); which elements are pooled into the root."""
    L = el_offset.size - 1
    N = start[-1]
    nE = score.size
    top = np.full(N, -np.inf)
    arg = np.full(N, -1, np.int64)
    n_single = np.zeros(N, np.int64)
    el_src = np.empty(nE, np.int64)
    el_dst = np.empty(nE, np.int64)
    pooled = np.zeros(nE, np.bool_)
    for i in range(L):
        root_next = start[i + 2] - 1
        for e in range(el_offset[i], el_offset[i + 1]):
            s = start[i] + parent[e]
            d = start[i + 1] + owner[e]
            el_src[e] = s
            el_dst[e] = d
            if score[e] == -np.inf:
                continue
            if d != root_next:
                n_single[s] += 1
            else:
                pooled[e] = True
                if score[e] > top[s]:
                    top[s] = score[e]
                    arg[s] = label[e]
    return el_src, el_dst, n_single, top, arg, pooled


@nb.njit(cache=True)
def _fill_kernel(start, el_offset, label, score, el_src, el_dst, n_single, top, arg, lse):
    """The arcs in source order (CSR): an element landing in a selected context is its own arc;
    those of one source landing in the next root are one arc (label 0) weighted by their
    log-sum ``lse``, and for the best path by their best (its label the first best).  Returns
    (src_start, dst, ilabel, weight, best_weight, best_label, el_arc)."""
    L = el_offset.size - 1
    N = start[-1]
    nE = score.size
    src_start = np.zeros(N + 1, np.int64)
    for s in range(N):
        src_start[s + 1] = src_start[s] + n_single[s] + (1 if top[s] > -np.inf else 0)
    E = src_start[N]
    dst = np.empty(E, np.int32)
    ilabel = np.empty(E, np.int32)
    weight = np.empty(E)
    best_weight = np.empty(E)
    best_label = np.empty(E, np.int32)
    fill = src_start[:N].copy()
    pooled_arc = np.full(N, -1, np.int64)
    layer = 0
    for s in range(N):          # the pooled arc last among a source's arcs
        while s >= start[layer + 1]:
            layer += 1
        if top[s] > -np.inf:
            a = src_start[s + 1] - 1
            pooled_arc[s] = a
            dst[a] = start[layer + 2] - 1
            ilabel[a] = 0
            weight[a] = -lse[s]
            best_weight[a] = -top[s]
            best_label[a] = arg[s] + 1
    el_arc = np.full(nE, -1, np.int64)
    for i in range(L):
        root_next = start[i + 2] - 1
        for e in range(el_offset[i], el_offset[i + 1]):
            if score[e] == -np.inf:
                continue
            s = el_src[e]
            if el_dst[e] != root_next:
                a = fill[s]
                fill[s] += 1
                dst[a] = el_dst[e]
                ilabel[a] = label[e] + 1
                weight[a] = -score[e]
                best_weight[a] = -score[e]
                best_label[a] = label[e] + 1
                el_arc[e] = a
            else:
                el_arc[e] = pooled_arc[s]
    return src_start, dst, ilabel, weight, best_weight, best_label, el_arc


def _build(model, layers, el_parent, el_owner, el_label, el_score) -> RCMSResult:
    """The machine of the chosen contexts (see :class:`RCMSResult`)."""
    length = len(layers) - 1
    sizes = np.array([len(c) for c in layers], np.int64)
    start = np.zeros(length + 2, np.int64)
    np.cumsum(sizes, out=start[1:])
    counts = np.array([p.size for p in el_parent], np.int64)
    el_offset = np.zeros(length + 1, np.int64)
    np.cumsum(counts, out=el_offset[1:])
    lab = np.concatenate(el_label)
    score = np.concatenate(el_score)
    src, dst_el, n_single, top, arg, pooled = _classify_kernel(start, el_offset, np.concatenate(el_parent),
                                                               np.concatenate(el_owner), lab, score)
    # the log-sum of each source's pooled elements, relative to their best (numpy's exp)
    ps = src[pooled]
    lse = np.bincount(ps, weights=np.exp(score[pooled] - top[ps]), minlength=top.size)
    with np.errstate(divide="ignore"):
        lse = np.log(lse) + np.where(np.isfinite(top), top, 0.0)
    (src_start, dst, ilabel, weight, best_weight, best_label,
     el_arc) = _fill_kernel(start, el_offset, lab, score, src, dst_el, n_single, top, arg, lse)
    final = np.full(int(start[-1]), np.inf)
    final[start[length]:start[length + 1]] = 0.0
    # the outside feature also weighs the root context at the end (I[c_L = Y_{1:L}]), so that
    # with -inf the normaliser sums the final beam only, as beam search's does
    final[start[length + 1] - 1] = -model.outside if np.isfinite(model.outside) else np.inf
    m = Machine(start=0, final=final, src_start=src_start, dst=dst, ilabel=ilabel, weight=weight,
                semiring="log")
    position = np.searchsorted(start, m.arc_src, side="right")     # a source in layer i - 1: position i
    return RCMSResult(layers, m, start, position.astype(np.int64), el_offset, src, dst_el, lab, score, el_arc,
                      best_weight, best_label)

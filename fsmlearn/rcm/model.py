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

import numpy as np

from ..algo import best_path, forward_backward
from ..errors import ArgumentError
from ..fsm.machine import Machine
from .contexts import ContextLayer, merge_dense, select_top

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
class _Step:
    """What RCMS kept of position i: the scores S [K, |Y|] of C_{i-1} x Y, each element's
    context in C_i (``owner``, label-major: element e = y K + k; the root is len(C_i) - 1),
    the elements that are arcs of their own (``single``, label-major indices, and their arcs),
    and per source the pooled elements' scale ``top`` [K], ``EP`` = exp(S - top) on the pooled
    elements (0 elsewhere) [K, |Y|], its row sums ``R``, the pooled arc of each source (-1: none)
    and the first label of its best pooled element (``arg``)."""
    S: np.ndarray
    owner: np.ndarray
    single: np.ndarray
    single_arc: np.ndarray
    top: np.ndarray
    EP: np.ndarray
    R: np.ndarray
    pooled_arc: np.ndarray
    arg: np.ndarray


@dataclass
class RCMSResult:
    """The contexts RCMS chose for one sequence and the machine they make.

    The transitions of the model are the *elements* of C~_i (a context c of C_{i-1}
    and a label y, scored theta . phi_i(c, y)), each going to f_i(c, y).  The machine
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
        steps: per position, what the marginals and the elements are computed from.

    The element arrays (``el_offset``, ``el_src``, ``el_dst``, ``el_label``, ``el_score``,
    ``el_arc``; element e of position i is ``el_offset[i - 1] + y * K + k`` for the k-th
    context of C_{i-1}, K = |C_{i-1}|) are built when first asked for (learning needs
    them; log Z and the marginals do not).
    """
    layers: list
    machine: Machine
    layer_start: np.ndarray
    arc_position: np.ndarray
    steps: list
    _fb: object = None
    _marg: object = None
    _el: object = None

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

    def marginals(self) -> np.ndarray:
        """float64 [L, |Y|], p(y_i = y): the single arcs' posteriors at their labels, and each
        pooled arc's spread over its elements in proportion to their weights (one matrix product
        per position)."""
        if self._marg is None:
            post = self.forward_backward().posteriors
            Y = self.steps[0].S.shape[1]
            out = np.zeros((self.length, Y))
            for i, st in enumerate(self.steps):
                K = st.S.shape[0]
                has = st.pooled_arc >= 0
                w = np.zeros(K)
                w[has] = post[st.pooled_arc[has]] / st.R[has]
                out[i] = w @ st.EP
                np.add.at(out[i], st.single // K, post[st.single_arc])
            self._marg = out
        return self._marg

    def mean_context_length(self) -> float:
        """The average length of c_{i-1} (its determined labels), weighted by its mass under
        the model, over positions i = 1 .. L (the statistic of section 7)."""
        fb = self.forward_backward()
        lens = np.concatenate([[len(s) for s in layer.suffixes] for layer in self.layers]).astype(float)
        return float((fb.posteriors * lens[self.machine.arc_src]).sum() / self.length)

    # ------------------------------------------------------------------ elements (learning)
    def _elements(self):
        if self._el is None:
            off, src, dst, lab, score, arc = [0], [], [], [], [], []
            start = self.layer_start
            for i, st in enumerate(self.steps):
                K, Y = st.S.shape
                e = np.arange(K * Y)
                k = e % K
                src.append(start[i] + k)
                dst.append(start[i + 1] + st.owner)
                lab.append(e // K)
                sc = st.S.T.ravel()
                score.append(sc)
                a = np.where(np.isfinite(sc), st.pooled_arc[k], -1)
                a[st.single] = st.single_arc
                arc.append(a)
                off.append(off[-1] + K * Y)
            cat = lambda xs: np.concatenate(xs).astype(np.int64)
            self._el = (np.array(off, np.int64), cat(src), cat(dst), cat(lab), np.concatenate(score), cat(arc))
        return self._el

    el_offset = property(lambda self: self._elements()[0])
    el_src = property(lambda self: self._elements()[1])
    el_dst = property(lambda self: self._elements()[2])
    el_label = property(lambda self: self._elements()[3])
    el_score = property(lambda self: self._elements()[4])
    el_arc = property(lambda self: self._elements()[5])

    def element_posteriors(self) -> np.ndarray:
        """float64 [elements]: the posterior of each transition (c_{i-1}, y_i): its arc's
        posterior times its share of the arc's weight."""
        post = np.zeros(self.el_score.size)
        ok = np.flatnonzero(self.el_arc >= 0)
        a = self.el_arc[ok]
        post[ok] = self.forward_backward().posteriors[a] * np.exp(self.el_score[ok] + self.machine.weight[a])
        return post

    def element(self, i: int, state: int, y: int) -> int:
        """The element leaving ``state`` (a context of C_{i-1}) at position i with label y."""
        K = int(self.layer_start[i] - self.layer_start[i - 1])
        return int(self.el_offset[i - 1] + y * K + (state - self.layer_start[i - 1]))

    def best(self) -> tuple[np.ndarray, float]:
        """The best labelling (0-based labels) and its score (natural log): the best path of
        the machine with each pooled arc weighted by its best element."""
        w = self.machine.weight.copy()
        lab = self.machine.ilabel.copy()
        for st in self.steps:
            has = np.flatnonzero(st.pooled_arc >= 0)
            w[st.pooled_arc[has]] = -st.top[has]
            lab[st.pooled_arc[has]] = st.arg[has] + 1
        p = best_path(self.machine.replace(weight=w, ilabel=lab))
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
    plen = np.zeros(1, np.int64)
    raw = []
    for i in range(1, length + 1):
        prev = layers[-1]
        K = len(prev)
        S = np.empty((K, Y))
        for k, suf in enumerate(prev.suffixes):
            S[k] = model.scores(suf, i, k == K - 1, None if unary is None else unary[i - 1])
        logf = (prev.forward[None, :] + S.T).ravel()          # label-major: element e = y K + k
        # exact order: every suffix of at most k labels, with or without mass (merge targets)
        active = select_top(logf, B) if exact_order is None else np.tile(plen + 1 <= exact_order, Y)
        out_e, out_lcs, owner, single, pooled, top, arg = merge_dense(plen, prev.lcs, S, active)
        n = out_e.size                                        # selected; the root is C_i[n]
        with np.errstate(invalid="ignore"):
            EP = np.exp(S - np.where(np.isfinite(top), top, 0.0)[:, None])
        EP[~pooled] = 0.0
        R = EP.sum(axis=1)
        # forward masses of C_i: a selected context's is the log-sum of the singles it holds,
        # the root's the log-sum over sources of forward + log of its pooled row sum
        fwd = np.full(n + 1, -np.inf)
        if single.size:
            o = owner[single]
            big = np.full(n, -np.inf)
            np.maximum.at(big, o, logf[single])
            safe = np.where(np.isfinite(big), big, 0.0)
            acc = np.bincount(o, weights=np.exp(logf[single] - safe[o]), minlength=n)
            with np.errstate(divide="ignore"):
                fwd[:n] = np.where(np.isfinite(big), np.log(acc) + safe, -np.inf)
        has = R > 0
        if has.any():
            r = prev.forward[has] + top[has] + np.log(R[has])
            mx = r.max()
            fwd[n] = mx + np.log(np.exp(r - mx).sum()) if np.isfinite(mx) else -np.inf
        chosen = out_e[::-1]
        suffixes = [prev.suffixes[int(e % K)] + (int(e // K),) for e in chosen] + [()]
        lcs_out = np.zeros(n + 1, np.int64)
        if n:
            lcs_out[:n] = out_lcs[::-1]
            lcs_out[n - 1] = 0
        # owner as an index into C_i (selected contexts in order, then the root)
        owner = np.where(owner == n, n, n - 1 - owner)
        fwd = np.concatenate([fwd[:n][::-1], fwd[n:]])
        layers.append(ContextLayer(suffixes, lcs_out, fwd))
        plen = np.array([len(t) for t in suffixes], np.int64)
        raw.append((S, owner, single, top, EP, R, arg))
    return _build_dense(model, layers, raw)


def _build_dense(model, layers, raw) -> RCMSResult:
    """The machine of the chosen contexts (see :class:`RCMSResult`): per position its single
    arcs and one pooled arc per source with pooled mass, in source order."""
    length = len(layers) - 1
    sizes = np.array([len(c) for c in layers], np.int64)
    start = np.zeros(length + 2, np.int64)
    np.cumsum(sizes, out=start[1:])
    srcs, dsts, labs, wts, kinds = [], [], [], [], []
    for i, (S, owner, single, top, EP, R, arg) in enumerate(raw):
        K = S.shape[0]
        k = single % K
        srcs += [start[i] + k, start[i] + np.flatnonzero(R > 0)]
        dsts += [start[i + 1] + owner[single], np.full(int((R > 0).sum()), start[i + 2] - 1)]
        labs += [single // K + 1, np.zeros(int((R > 0).sum()), np.int64)]
        has = R > 0
        wts += [-S[k, single // K], -(top[has] + np.log(R[has]))]
    src = np.concatenate(srcs).astype(np.int64)
    order = np.argsort(src, kind="stable")
    arc_of = np.empty(order.size, np.int64)
    arc_of[order] = np.arange(order.size)
    N = int(start[-1])
    src_start = np.zeros(N + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=N), out=src_start[1:])
    final = np.full(N, np.inf)
    final[start[length]:start[length + 1]] = 0.0
    # the outside feature also weighs the root context at the end (I[c_L = Y_{1:L}]), so that
    # with -inf the normaliser sums the final beam only, as beam search's does
    final[start[length + 1] - 1] = -model.outside if np.isfinite(model.outside) else np.inf
    m = Machine(start=0, final=final, src_start=src_start, dst=np.concatenate(dsts)[order].astype(np.int32),
                ilabel=np.concatenate(labs)[order].astype(np.int32), weight=np.concatenate(wts)[order],
                semiring="log")
    steps = []
    j = 0
    for i, (S, owner, single, top, EP, R, arg) in enumerate(raw):
        K = S.shape[0]
        n_single, n_pool = single.size, int((R > 0).sum())
        pooled_arc = np.full(K, -1, np.int64)
        pooled_arc[R > 0] = arc_of[j + n_single:j + n_single + n_pool]
        steps.append(_Step(S, owner, single, arc_of[j:j + n_single], top, EP, R, pooled_arc, arg))
        j += n_single + n_pool
    position = np.searchsorted(start, m.arc_src, side="right")     # a source in layer i - 1: position i
    return RCMSResult(layers, m, start, position.astype(np.int64), steps)

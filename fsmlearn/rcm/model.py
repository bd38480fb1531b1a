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

Public names: NGramRCM, RCMSResult, STAR, BOS, rcms, scores_matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..algo import best_path, forward_backward
from ..errors import ArgumentError
from ..fsm.machine import Machine
from .contexts import ContextLayer, select_merge, unpack_merge

__all__ = ["NGramRCM", "RCMSResult", "STAR", "BOS", "rcms", "scores_matrix"]

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


class _Step:
    """What RCMS kept of position i: the scores S [K, |Y|] of C_{i-1} x Y (label-major elements
    e = y K + k), ``EP`` = exp(S - top) on the elements pooled into the root's arc of their
    source (0 elsewhere) [K, |Y|] and its row sums ``R``, the arcs of the single elements and
    each source's pooled arc (-1: none), and the merge's packed output (:func:`unpack_merge`),
    from which: the labels with a selected element (``blocks``) and the owner in C_i of each
    element of those blocks (``block_owner`` [blocks, K]; every other element lands in the root,
    C_i[n]), the elements that are arcs of their own (``single``, label-major indices), and per
    source the pooled elements' scale ``top`` [K] and the first label of its best one (``arg``)."""

    __slots__ = ("S", "EP", "R", "single_arc", "pooled_arc", "_ints", "_floats", "_un")

    def __init__(self, S, EP, R, ints, floats, single_arc, pooled_arc):
        self.S, self.EP, self.R, self._ints, self._floats = S, EP, R, ints, floats
        self.single_arc, self.pooled_arc = single_arc, pooled_arc
        self._un = None

    def _unpacked(self):
        if self._un is None:
            self._un = unpack_merge(self._ints, self._floats, self.EP)
        return self._un

    n = property(lambda self: int(self._ints[0]))
    blocks = property(lambda self: self._unpacked()[4])
    block_owner = property(lambda self: self._unpacked()[5])
    single = property(lambda self: self._unpacked()[6])
    top = property(lambda self: self._unpacked()[13])
    arg = property(lambda self: self._unpacked()[14])

    def owner(self) -> np.ndarray:
        """int64 [K |Y|], each element's context in C_i."""
        K, Y = self.S.shape
        out = np.full(K * Y, self.n, np.int64)
        out.reshape(Y, K)[self.blocks] = self.block_owner
        return out


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
    _raw: tuple            # per position: S, EP, R, the packed merge; the arcs of singles and sources
    _fb: object = None
    _marg: object = None
    _el: object = None
    _steps: object = None

    @property
    def length(self) -> int:
        return self.layer_start.size - 2

    @property
    def steps(self) -> list:
        """Per position, what the marginals and the elements are computed from (:class:`_Step`)."""
        if self._steps is None:
            Ss, EPs, Rs, intss, floatss, single_arc, pooled_arc, starts = self._raw[:8]
            self._steps, j = [], 0
            for i, ints in enumerate(intss):
                ns = int(ints[2])
                self._steps.append(_Step(Ss[i], EPs[i], Rs[i], ints, floatss[i], single_arc[j:j + ns],
                                         pooled_arc[starts[i]:starts[i + 1]]))
                j += ns
        return self._steps

    def forward_backward(self):
        """The engine's forward-backward on the machine (computed once, then kept; a machine
        with no path of nonzero weight gives ``log_partition`` -inf and zero posteriors)."""
        if self._fb is None:
            self._fb = forward_backward(self.machine, allow_empty=True)
        return self._fb

    def log_partition(self) -> float:
        """ln Z of the model under these contexts (the machine's total weight)."""
        return self.forward_backward().log_partition

    def marginals(self) -> np.ndarray:
        """float64 [L, |Y|], p(y_i = y): the single arcs' posteriors at their labels, and each
        pooled arc's spread over its elements in proportion to their weights (one matrix product
        per position)."""
        if self._marg is None:
            post = self.forward_backward().posteriors
            Ss, EPs, _, _, _, single_arc, pooled_arc, start, s_pos, s_lab, R = self._raw
            out = np.zeros((self.length, Ss[0].shape[1]))
            w = _pooled_shares(pooled_arc, post, R)
            for i, EP in enumerate(EPs):
                out[i] = w[start[i]:start[i + 1]] @ EP
            _add_singles(out, s_pos, s_lab, single_arc, post)
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
                dst.append(start[i + 1] + st.owner())
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


def scores_matrix(model, suffixes, i: int, unary_row=None) -> np.ndarray:
    """float64 [K, |Y|], theta . phi_i(c, y) for every context c of ``suffixes`` (C_{i-1}'s
    determined suffixes, the root last) and every label y: the model's own ``scores_matrix``
    when it has one, else its ``scores`` row by row."""
    own = getattr(model, "scores_matrix", None)
    if own is not None:
        return own(suffixes, i, unary_row)
    K = len(suffixes)
    S = np.empty((K, model.num_labels))
    for k, suf in enumerate(suffixes):
        S[k] = model.scores(suf, i, k == K - 1, unary_row)
    return S


def rcms(model: NGramRCM, length: int, B: int, unary=None, exact_order: int | None = None) -> RCMSResult:
    """Choose contexts by RCMS for a sequence of ``length`` positions and build their machine.

    Args:
        model: the features and weights (an :class:`NGramRCM` or any object with
            ``num_labels`` and ``scores(suffix, i, is_root, unary_row)``, and optionally
            ``scores_matrix(suffixes, i, unary_row)`` giving all of C_{i-1}'s rows at once,
            see :func:`scores_matrix`).
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
    own_scores = getattr(model, "scores_matrix", None)
    layers = [ContextLayer.initial()]
    plen = np.zeros(1, np.int64)
    starts = [0, 1]                                  # the first state of each layer
    Ss, EPs, Rs, log_rs, intss, floatss = [], [], [], [], [], []
    log, exp, add, maximum = np.log, np.exp, np.add.reduce, np.maximum.reduce
    for i in range(1, length + 1):
        prev = layers[-1]
        urow = None if unary is None else unary[i - 1]
        S = own_scores(prev.suffixes, i, urow) if own_scores is not None else \
            scores_matrix(model, prev.suffixes, i, urow)
        if S.dtype != np.float64 or not S.flags.c_contiguous:
            S = np.ascontiguousarray(S, np.float64)
        K = S.shape[0]
        # every suffix of at most k labels, with or without mass (merge targets), or the B heaviest
        sel = None if exact_order is None else np.flatnonzero(np.tile(plen + 1 <= exact_order, Y))
        ints, floats, EP = select_merge(plen, prev.lcs, S, prev.forward, B, sel)
        # the packed merge (unpack_merge): n selected (the root is C_i[n]), nblk blocks, ns singles
        n, nblk, ns, all_finite = ints[:4].tolist()
        pl = ints[4:4 + 2 * n].tolist()                       # each selected element's parent, label
        plen = ints[4 + 2 * n:5 + 3 * n]
        lcs_out = ints[5 + 3 * n:6 + 4 * n]
        o = 6 + 4 * n + nblk + ns
        s_owner = ints[o:o + ns]
        fwd_top = floats[2 * ns + n + K:]                     # forward + top per source
        exp(EP, out=EP)                                       # exp(S - top) on the pooled, else 0
        R = add(EP, axis=1)
        # forward masses of C_i: a selected context's is the log-sum of the singles it holds,
        # the root's the log-sum over sources of forward + log of its pooled row sum
        fwd = np.empty(n + 1)
        acc = np.bincount(s_owner, weights=exp(floats[ns + n:2 * ns + n]), minlength=n)
        shift = floats[ns:ns + n]
        if all_finite:
            fwd[:n] = log(acc) + shift
        else:
            finite = ints[o + ns + K:o + ns + K + n] != 0
            with np.errstate(divide="ignore"):
                fwd[:n] = np.where(finite, log(acc) + shift, -np.inf)
        has = R > 0
        log_r = log(R[has])
        if log_r.size:
            r = fwd_top[has] + log_r
            mx = maximum(r)
            fwd[n] = mx + log(add(exp(r - mx))) if math.isfinite(mx) else -np.inf
        else:
            fwd[n] = -np.inf
        ps = prev.suffixes
        suffixes = [ps[k] + (y,) for k, y in zip(pl[:n], pl[n:])]
        suffixes.append(())
        layers.append(ContextLayer(suffixes, lcs_out, fwd))
        starts.append(starts[-1] + n + 1)
        Ss.append(S)
        EPs.append(EP)
        Rs.append(R)
        log_rs.append(log_r)
        intss.append(ints)
        floatss.append(floats)
    return _build_dense(model, layers, starts, Ss, EPs, Rs, log_rs, intss, floatss)


@nb.njit(cache=True)
def _build_kernel(start, ints, floats, R, log_r):
    """The CSR arrays of the context machine (see :class:`RCMSResult`) from the packed merges
    of all positions (:func:`unpack_merge`, concatenated), the pooled row sums R (concatenated)
    and the logs of the positive ones: per source state its single arcs in label order, then
    its pooled arc if R > 0 (weight -(top + log R)); with each arc's position, each single's
    position, label and arc, and each source's pooled arc (-1: none)."""
    L = start.size - 2
    N = start[L + 1]
    src_start = np.zeros(N + 1, np.int64)
    n_single = 0
    b = 0
    for p in range(L):
        K = start[p + 1] - start[p]
        n, nblk, ns = ints[b], ints[b + 1], ints[b + 2]
        o = b + 6 + 4 * n + nblk
        for j in range(o, o + ns):
            src_start[start[p] + ints[j] % K + 1] += 1
        n_single += ns
        for s in range(start[p], start[p + 1]):
            if R[s] > 0:
                src_start[s + 1] += 1
        b += 6 + 5 * n + nblk + 2 * ns + K + nblk * K
    for s in range(N):
        src_start[s + 1] += src_start[s]
    E = src_start[N]
    cur = src_start[:N].copy()
    dst = np.empty(E, np.int32)
    ilabel = np.empty(E, np.int32)
    weight = np.empty(E)
    position = np.empty(E, np.int64)
    s_pos = np.empty(n_single, np.int64)
    s_lab = np.empty(n_single, np.int64)
    single_arc = np.empty(n_single, np.int64)
    pooled_arc = np.full(start[L], -1, np.int64)
    q = 0
    jj = 0
    b = 0
    f = 0
    for p in range(L):
        K = start[p + 1] - start[p]
        n, nblk, ns = ints[b], ints[b + 1], ints[b + 2]
        o = b + 6 + 4 * n + nblk
        for j in range(ns):
            e = ints[o + j]
            y = e // K
            s = start[p] + e - y * K
            a = cur[s]
            cur[s] += 1
            dst[a] = start[p + 1] + ints[o + ns + j]
            ilabel[a] = y + 1
            weight[a] = -floats[f + j]
            position[a] = p + 1
            s_pos[jj] = p
            s_lab[jj] = y
            single_arc[jj] = a
            jj += 1
        top = f + 2 * ns + n
        for s in range(start[p], start[p + 1]):
            if R[s] > 0:
                a = cur[s]
                cur[s] += 1
                dst[a] = start[p + 2] - 1
                ilabel[a] = 0
                weight[a] = -(floats[top + s - start[p]] + log_r[q])
                q += 1
                position[a] = p + 1
                pooled_arc[s] = a
        b += 6 + 5 * n + nblk + 2 * ns + K + nblk * K
        f += 2 * ns + n + 2 * K
    return src_start, dst, ilabel, weight, position, s_pos, s_lab, single_arc, pooled_arc


@nb.njit(cache=True)
def _pooled_shares(pooled_arc, post, R):
    """Per source, its pooled arc's posterior over the arc's row sum R (0 without one)."""
    w = np.zeros(pooled_arc.size)
    for s in range(pooled_arc.size):
        if pooled_arc[s] >= 0:
            w[s] = post[pooled_arc[s]] / R[s]
    return w


@nb.njit(cache=True)
def _add_singles(out, s_pos, s_lab, single_arc, post):
    """out[i, y] += the posterior of each single arc (position i + 1, label y), in order."""
    for j in range(s_pos.size):
        out[s_pos[j], s_lab[j]] += post[single_arc[j]]


def _build_dense(model, layers, starts, Ss, EPs, Rs, log_rs, intss, floatss) -> RCMSResult:
    """The machine of the chosen contexts (see :class:`RCMSResult`): per position its single
    arcs and one pooled arc per source with pooled mass, in source order."""
    start = np.array(starts, np.int64)
    cat = np.concatenate
    R = cat(Rs)
    (src_start, dst, ilabel, weight, position, s_pos, s_lab, single_arc, pooled_arc) = _build_kernel(
        start, cat(intss), cat(floatss), R, cat(log_rs))
    N = starts[-1]
    final = np.full(N, np.inf)
    final[starts[-2]:N] = 0.0
    # the outside feature also weighs the root context at the end (I[c_L = Y_{1:L}]), so that
    # with -inf the normaliser sums the final beam only, as beam search's does
    final[N - 1] = -model.outside if math.isfinite(model.outside) else np.inf
    for a in (final, src_start, dst, ilabel, weight):
        a.setflags(write=False)                  # the machine takes them without a copy
    m = Machine(start=0, final=final, src_start=src_start, dst=dst, ilabel=ilabel, weight=weight, semiring="log")
    return RCMSResult(layers, m, start, position,
                      (Ss, EPs, Rs, intss, floatss, single_arc, pooled_arc, starts, s_pos, s_lab, R))

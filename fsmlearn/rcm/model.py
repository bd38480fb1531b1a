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

    Attributes:
        layers: C_0 .. C_L (:class:`ContextLayer`).
        machine: the layered acyclic machine (log semiring; labels y + 1).
        layer_start: int64 [L + 2], the first state of each layer.
        arc_position: int64 [E], the position i (1-based) of each arc.
    """
    layers: list
    machine: Machine
    layer_start: np.ndarray
    arc_position: np.ndarray
    _fb: object = None

    def forward_backward(self):
        """The engine's forward-backward on the machine (computed once, then kept)."""
        if self._fb is None:
            self._fb = forward_backward(self.machine)
        return self._fb

    def log_partition(self) -> float:
        """ln Z of the model under these contexts (the machine's total weight)."""
        return -self.forward_backward().logz

    def marginals(self) -> np.ndarray:
        """float64 [L, |Y|], p(y_i = y) (arc posteriors summed by position and label)."""
        fb = self.forward_backward()
        L = self.layer_start.size - 2
        Y = int(self.machine.ilabel.max()) if self.machine.num_arcs else 0
        idx = (self.arc_position - 1) * Y + (self.machine.ilabel.astype(np.int64) - 1)
        return np.bincount(idx, weights=fb.posteriors, minlength=L * Y).reshape(L, Y)

    def mean_context_length(self) -> float:
        """The average length of c_{i-1} (its determined labels), weighted by its mass under
        the model, over positions i = 1 .. L (the statistic of section 7)."""
        fb = self.forward_backward()
        lens = np.concatenate([[len(s) for s in layer.suffixes] for layer in self.layers]).astype(float)
        L = self.layer_start.size - 2
        return float((fb.posteriors * lens[self.machine.arc_src]).sum() / L)

    def best(self) -> tuple[np.ndarray, float]:
        """The best labelling (0-based labels) and its score (natural log)."""
        p = best_path(self.machine)
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
    src, dst, lab, wt = [], [], [], []
    for i in range(1, length + 1):
        prev = layers[-1]
        K = len(prev)
        S = np.empty((K, Y))
        for k, suf in enumerate(prev.suffixes):
            S[k] = model.scores(suf, i, k == K - 1, None if unary is None else unary[i - 1])
        parent, label, lens, lcs = expand(prev, Y)
        logf = prev.forward[parent] + S[parent, label]
        # exact order: every suffix of at most k labels, with or without mass (merge targets)
        active = select_top(logf, B) if exact_order is None else lens <= exact_order
        layer, owner = merge(prev, parent, label, lens, lcs, active, logf)
        # arcs in source order (parent-major), so that building the machine sorts nothing
        pm = np.arange(parent.size).reshape(Y, K).T.ravel()
        s_pm = S.ravel()                                  # S[parent, label] in parent-major order
        keep = np.isfinite(s_pm)
        src.append(parent[pm][keep])
        dst.append(owner[pm][keep])
        lab.append(label[pm][keep] + 1)
        wt.append(-s_pm[keep])
        layers.append(layer)
    sizes = np.array([len(c) for c in layers], np.int64)
    start = np.zeros(length + 2, np.int64)
    np.cumsum(sizes, out=start[1:])
    src = np.concatenate([s + start[i] for i, s in enumerate(src)])
    dst = np.concatenate([d + start[i + 1] for i, d in enumerate(dst)])
    final = np.full(int(start[-1]), np.inf)
    final[start[length]:start[length + 1]] = 0.0
    # the outside feature also weighs the root context at the end (I[c_L = Y_{1:L}]), so that
    # with -inf the normaliser sums the final beam only, as beam search's does
    final[start[length + 1] - 1] = -model.outside if np.isfinite(model.outside) else np.inf
    m = Machine.from_arcs(int(start[-1]), 0, final, src, dst, np.concatenate(lab).astype(np.int32),
                          weight=np.concatenate(wt), semiring="log")
    position = np.searchsorted(start, m.arc_src, side="right")     # a source in layer i - 1: position i
    return RCMSResult(layers, m, start, position.astype(np.int64))

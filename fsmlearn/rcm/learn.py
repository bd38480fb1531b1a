"""Learning reified context models: the approximate log-likelihood, its gradient, AdaGrad.

For a labelled sequence y, RCMS chooses the contexts under the current theta
(:func:`fsmlearn.rcm.model.rcms`) and the approximate log-likelihood is

    log p(y) = sum_i theta . phi_i(c_{i-1}, y_i) - log Z,   c_i = f_i(c_{i-1}, y_i),

with gradient phi(y) - E[phi] (observed minus expected feature counts; the
expectations are the engine's arc posteriors times each arc's feature), the
contexts held fixed as the paper does.  AdaGrad (Duchi et al. 2010) with the
paper's step 0.2 and delta 1e-4 (section 6) updates theta and the outside
weight.

Public names: sequence_gradient, AdaGrad, train_supervised.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..algo import forward_backward
from ..errors import ArgumentError
from .model import NGramRCM, RCMSResult, rcms

__all__ = ["sequence_gradient", "AdaGrad", "train_supervised"]

OUTSIDE = "outside"   #: the gradient key of the outside-the-beam weight


def _element_features(model: NGramRCM, r: RCMSResult, elements):
    """Per element (an index of r.el_*): its theta key and whether it leaves the root at a
    position >= 2 (the outside feature)."""
    keys, root = [], np.zeros(len(elements), bool)
    for j, e in enumerate(elements):
        src = int(r.el_src[e])
        i = int(np.searchsorted(r.el_offset, e, side="right"))      # position of the element
        layer = r.layers[i - 1]
        k = src - int(r.layer_start[i - 1])
        keys.append(model.key(layer.suffixes[k], i, int(r.el_label[e])))
        root[j] = k == len(layer) - 1 and i >= 2
    return keys, root


def sequence_gradient(model: NGramRCM, labels, B: int, unary=None):
    """The approximate log-likelihood of one labelled sequence and its gradient.

    Args:
        model: the current model.
        labels: int sequence of 0-based labels (length L >= 1).
        B: the context size.
        unary: optional float64 [L, |Y|] per-position scores (not learned).

    Returns:
        (log-likelihood, gradient dict: theta key -> d/dtheta, and :data:`OUTSIDE` -> d/d outside).
    """
    y = np.asarray(labels, np.int64)
    if y.ndim != 1 or y.size == 0 or (y < 0).any() or (y >= model.num_labels).any():
        raise ArgumentError(f"labels must be a non-empty sequence of labels 0..{model.num_labels - 1}, "
                            f"got {list(labels)[:20]}")
    r = rcms(model, int(y.size), B, unary)
    m = r.machine
    fb = r.forward_backward()
    post = r.element_posteriors()
    live = np.flatnonzero(post > 0)
    keys, root = _element_features(model, r, live)
    grad: dict = defaultdict(float)
    for j, e in enumerate(live):
        grad[keys[j]] -= post[e]
        if root[j]:
            grad[OUTSIDE] -= post[e]
    last_root = m.num_states - 1
    grad[OUTSIDE] -= fb.final_posteriors[last_root]
    # the observed path
    state, score = m.start, 0.0
    path = []
    for i, yi in enumerate(y, 1):
        e = r.element(i, state, int(yi))
        if not np.isfinite(r.el_score[e]):   # weighted -inf (outside = -inf): probability 0
            return -np.inf, dict(grad)
        score += r.el_score[e]
        path.append(e)
        state = int(r.el_dst[e])
    keys, root = _element_features(model, r, path)
    for j in range(len(path)):
        grad[keys[j]] += 1.0
        if root[j]:
            grad[OUTSIDE] += 1.0
    score -= m.final[state]
    if not np.isfinite(score):
        return -np.inf, dict(grad)
    if state == last_root:
        grad[OUTSIDE] += 1.0
    return float(score - fb.log_partition), dict(grad)


@dataclass
class AdaGrad:
    """AdaGrad ascent: x += step * g / sqrt(delta + sum of g^2) per coordinate (section 6:
    step 0.2, delta 1e-4)."""
    step: float = 0.2
    delta: float = 1e-4
    sums: dict = field(default_factory=lambda: defaultdict(float))

    def update(self, model: NGramRCM, grad: dict, learn_outside: bool = True) -> None:
        for k, g in grad.items():
            if g == 0.0 or (k == OUTSIDE and not learn_outside):
                continue
            self.sums[k] += g * g
            d = self.step * g / np.sqrt(self.delta + self.sums[k])
            if k == OUTSIDE:
                if np.isfinite(model.outside):
                    model.outside += d
            else:
                model.theta[k] = model.theta.get(k, 0.0) + d


def train_supervised(model: NGramRCM, data, B: int, passes: int = 1, unary=None, seed: int = 0,
                     learn_outside: bool = True, progress=None) -> list[float]:
    """AdaGrad on the approximate log-likelihood of labelled sequences, one example at a time.

    Args:
        model: updated in place.
        data: list of label sequences.
        B: the context size.
        passes: passes over the data (shuffled by ``seed`` each pass).
        unary: optional list of per-sequence score arrays.
        progress: optional callable(str).

    Returns:
        The average log-likelihood per pass (before each example's update).
    """
    if passes < 1 or B < 0:
        raise ArgumentError(f"passes must be >= 1 and B >= 0, got {passes} and {B}")
    rng = np.random.default_rng(seed)
    opt = AdaGrad()
    out = []
    for p in range(passes):
        total = 0.0
        for j in rng.permutation(len(data)):
            ll, g = sequence_gradient(model, data[j], B, None if unary is None else unary[j])
            total += ll
            opt.update(model, g, learn_outside)
        out.append(total / max(len(data), 1))
        if progress:
            progress(f"pass {p + 1}/{passes}: log-likelihood {out[-1]:.4f} per sequence")
    return out

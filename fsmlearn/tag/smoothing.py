"""Transition estimates of HMM taggers: relative frequencies, add-a, deleted interpolation.

:func:`transition_probs` turns bigram or trigram tag counts into transition
probabilities; the interpolated estimate mixes the unigram, bigram (and
trigram) relative frequencies with TnT's deleted-interpolation weights
(Brants 2000, "TnT - a statistical part-of-speech tagger", section 2.2).

Public names: parse_smoothing, transition_probs.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ModelError

__all__ = ["parse_smoothing", "transition_probs"]


def parse_smoothing(smoothing) -> tuple[str, float]:
    """(kind, a) of a smoothing argument of :meth:`~fsmlearn.tag.hmm.HMM.from_counts`.

    Args:
        smoothing: None or ``"none"`` (relative frequencies), a number ``a``
            or ``"add:a"`` (add a to every possible transition), or
            ``"interpolate"`` (TnT's deleted interpolation).

    Returns:
        (``"ml"``, 0.0), (``"add"``, a) or (``"interp"``, 0.0).

    Raises:
        ModelError: an unknown smoothing or a negative or non-finite a.
    """
    if smoothing is None or smoothing == "none":
        return "ml", 0.0
    if smoothing in ("interpolate", "interpolation", "deleted-interpolation"):
        return "interp", 0.0
    if isinstance(smoothing, str) and smoothing.startswith("add:"):
        smoothing = smoothing[4:]
    try:
        a = float(smoothing)
    except (TypeError, ValueError):
        raise ModelError(f"unknown smoothing {smoothing!r}; expected None, 'none', a number, 'add:A' "
                         "or 'interpolate'") from None
    if not (a >= 0 and math.isfinite(a)):
        raise ModelError(f"additive smoothing must be a finite number >= 0, got {a!r}")
    return ("add", a) if a > 0 else ("ml", 0.0)


def _normalise_rows(c: np.ndarray, possible: np.ndarray) -> np.ndarray:
    """Rows of c over its last axis, uniform over the possible entries where a row is empty."""
    c = np.where(possible, c, 0.0)
    tot = c.sum(axis=-1, keepdims=True)
    uni = possible / possible.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), uni)


def _lambdas(counts_list, hist_list, n_total):
    """TnT's deleted interpolation weights.

    For each n-gram of the highest order with count f > 0, the order k whose
    leave-one-out estimate (f_k - 1) / (h_k - 1) is largest gets f; an order
    that gets nothing gets one count (or the smallest weight another got, if
    below one).
    counts_list[k] / hist_list[k] are the counts and history counts of order k
    (k = 0 unigram) broadcast to the highest order's shape.
    """
    top = counts_list[-1]
    f = top.ravel()
    pos = f > 0
    cases = []
    for k, (c, h) in enumerate(zip(counts_list, hist_list)):
        c = np.broadcast_to(c, top.shape).ravel()[pos]
        h = np.broadcast_to(h, top.shape).ravel()[pos]
        with np.errstate(divide="ignore", invalid="ignore"):
            cases.append(np.where(h > 1, (c - 1) / np.where(h > 1, h - 1, 1), 0.0))
    best = np.argmax(np.stack(cases[::-1]), axis=0)          # ties go to the higher order
    best = len(cases) - 1 - best
    lam = np.bincount(best, f[pos], minlength=len(cases))
    if lam.sum() <= 0:
        return np.full(len(cases), 1.0 / len(cases))
    # An order that no n-gram chose (on a small or repeated corpus the higher order wins every
    # n-gram) keeps the weight of one count, so that no transition between seen tags has
    # probability 0 and every sentence has a tagging.
    lam = np.where(lam > 0, lam, min(1.0, lam[lam > 0].min()))
    return lam / lam.sum()


def _trans_bigram(c2, c1, kind, add, T):
    possible = np.ones((T + 1, T + 1), bool)
    possible[T, T] = False
    if kind == "ml":
        return _normalise_rows(c2, possible)
    if kind == "add":
        return _normalise_rows(c2 + add, possible)
    p1 = _normalise_rows(c1, np.arange(T + 1) >= 0)                  # unigram over T tags + </s>
    h2 = c2.sum(axis=1, keepdims=True)
    p2 = _normalise_rows(c2, possible)
    lam = _lambdas([c1[None, :], c2], [np.full((1, 1), c1.sum()), h2], c1.sum())
    p = lam[0] * p1[None, :] + lam[1] * np.where(h2 > 0, p2, 0.0)
    p = np.where(h2 > 0, p, p1[None, :])
    return _normalise_rows(p, possible)


def _trans_trigram(c3, c2, c1, kind, add, T):
    possible = np.ones((T + 1, T + 1, T + 1), bool)
    possible[:, T, T] = False
    if kind == "ml":
        return _normalise_rows(c3, possible)
    if kind == "add":
        return _normalise_rows(c3 + add, possible)
    p1 = _normalise_rows(c1, np.ones(T + 1, bool))
    h2 = c2.sum(axis=1)                                               # [T+1] counts of b as history
    p2 = _normalise_rows(c2, possible[0])
    h3 = c3.sum(axis=2)                                               # [T+1, T+1]
    p3 = _normalise_rows(c3, possible)
    lam = _lambdas([c1[None, None, :], c2[None, :, :], c3],
                   [np.full((1, 1, 1), c1.sum()), h2[None, :, None], h3[:, :, None]], c1.sum())
    low = lam[0] * p1[None, None, :] + lam[1] * np.where(h2[None, :, None] > 0, p2[None, :, :], 0.0)
    low_w = lam[0] + lam[1] * (h2[None, :, None] > 0)
    p = np.where(h3[:, :, None] > 0, low + lam[2] * p3, low / low_w)
    return _normalise_rows(np.broadcast_to(p, possible.shape), possible)


def transition_probs(tc: np.ndarray, kind: str, add: float, T: int):
    """The transition probabilities of (expected or observed) transition counts.

    Args:
        tc: float64 [T+1, T+1] bigram counts (row = previous tag, T = ``<s>``
            / ``</s>``) or [T+1, T+1, T+1] trigram counts (their lower orders
            are their marginals).
        kind, add: from :func:`parse_smoothing`.
        T: the number of tags.

    Returns:
        (p2 float64 [T+1, T+1], p3 float64 [T+1, T+1, T+1] or None): rows
        sum to one; ``<s> -> </s>`` has probability 0.
    """
    if tc.ndim == 2:
        c2 = tc
        c1 = c2.sum(axis=0)
        return _trans_bigram(c2, c1, kind, add, T), None
    c3 = tc
    c2 = c3.sum(axis=0)
    c1 = c2.sum(axis=0)
    return _trans_bigram(c2, c1, kind, add, T), _trans_trigram(c3, c2, c1, kind, add, T)

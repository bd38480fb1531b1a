"""Decoding with the alignment-aware RCMS model: the best output, the k best outputs, the
posterior marginals of each output position, and the best alignment of a given pair.

Steinhardt and Liang (2015), section 6: the contexts of an input x (RCMS or beam,
:func:`~fsmlearn.rcm.align.rcms_align`) are the states of a layered acyclic machine whose paths
are the pairs (y, z) of an output and an alignment, weighted exp(theta . phi); everything here is
the engine's over that machine:

- the best output: the best path (:func:`~fsmlearn.algo.best_path`) of the pooled machine, its
  characters y, with p(y | x) = sum_z p(y, z | x) = exp(log Z_y - log Z), Z_y the total weight of
  the machine restricted to the labels that spell y (:meth:`AlignLattice.machine` with
  ``allowed``);
- the k best outputs: the cheapest paths of the element machine (one arc per (context, label),
  :meth:`AlignLattice.element_machine`; :func:`~fsmlearn.algo.k_best_paths`), taken in order
  until k distinct outputs have appeared (several alignments spell one y), each with its
  p(y | x).  They are the outputs of the k best (y, z) pairs, ranked by their best alignment:
  the y of largest p(y | x) is NP-hard in general (a sum over z inside a max over y);
- the posterior marginals: P(y_i = c | x) = sum of the posteriors of the elements of position i
  with character c (:func:`~fsmlearn.algo.forward_backward` on the pooled machine, each arc's
  posterior shared among its elements, :meth:`ArcPool.element_posteriors`); the row of position i
  sums to P(|y| >= i | x).

Public names: decode, decode_kbest, output_marginals, best_alignment.
"""

from __future__ import annotations

import math

import numpy as np

from ..algo import best_path, forward_backward, k_best_paths
from ..errors import ArgumentError
from .align import AlignRCM, allowed_labels, method_outside, rcms_align

__all__ = ["decode", "decode_kbest", "output_marginals", "best_alignment"]


def _lattice(model: AlignRCM, x, B: int, method: str, max_len: int | None):
    lat = rcms_align(model, x, B, outside=method_outside(method), max_len=max_len)
    sc = lat.scores()
    m, pool = lat.machine(scores=sc)
    return lat, sc, m, pool, forward_backward(m, allow_empty=True)


def _probability(model: AlignRCM, lat, sc, log_z: float, chars) -> float:
    """p(y | x) under the lattice's contexts: exp(log Z_y - log Z)."""
    mt, _ = lat.machine(allowed=allowed_labels(model, chars), length=chars.size, scores=sc)
    fbt = forward_backward(mt, allow_empty=True)
    return float(math.exp(min(0.0, fbt.log_partition - log_z)))


def decode(model: AlignRCM, x, B: int = 20, method: str = "rcms", max_len: int | None = None):
    """The best output for x and its probability.

    The best path of the machine (the engine's :func:`~fsmlearn.algo.best_path`) gives the best
    (y, z); its characters are the output, and the confidence is p(y | x) = sum_z p(y, z | x)
    under the same contexts: exp(log Z_y - log Z), log Z_y the total weight of the machine
    restricted to y.

    Args:
        model: the model.
        x: int [L'] phonemes.
        B: contexts per position and z.
        method: "rcms" (RCMS contexts) or "beam" (beam search: outside -inf).
        max_len: output positions (default :func:`~fsmlearn.rcm.align.default_max_len`).

    Returns:
        (characters int64 [L], confidence float); an empty output and 0.0 when nothing has mass.
    """
    lat, sc, m, pool, fb = _lattice(model, x, B, method, max_len)
    if not math.isfinite(fb.log_partition):
        return np.zeros(0, np.int64), 0.0
    p = best_path(pool.best_machine(m))
    chars = (np.asarray(p.ilabels, np.int64) - 1) % model.num_chars
    return chars, _probability(model, lat, sc, fb.log_partition, chars)


def decode_kbest(model: AlignRCM, x, k: int, B: int = 20, method: str = "rcms", max_len: int | None = None,
                 max_paths: int | None = None) -> list:
    """The k best distinct outputs for x, each with p(y | x): the outputs of the cheapest (y, z)
    paths of the element machine, in the order of each output's best path (the first is
    :func:`decode`'s).  Paths are taken k at a time, doubling, up to ``max_paths`` (default
    64 k) until k distinct outputs appear; fewer come back when the contexts hold fewer.

    Returns:
        list of (characters int64 [L], p(y | x) float, log p(y, z* | x) of its best alignment);
        empty when nothing has mass.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ArgumentError(f"k must be an integer >= 1, got {k!r}")
    lat, sc, _, _, fb = _lattice(model, x, B, method, max_len)
    if not math.isfinite(fb.log_partition):
        return []
    em = lat.element_machine(scores=sc)
    limit = max_paths if max_paths is not None else 64 * int(k)
    want = int(k)
    while True:
        paths = k_best_paths(em, want)
        seen: dict = {}
        for p in paths:
            chars = (np.asarray(p.ilabels, np.int64) - 1) % model.num_chars
            key = chars.tobytes()
            if key not in seen:
                seen[key] = (chars, -p.weight - fb.log_partition)
            if len(seen) == k:
                break
        if len(seen) == k or len(paths) < want or want >= limit:
            break
        want = min(2 * want, limit)
    return [(chars, _probability(model, lat, sc, fb.log_partition, chars), float(lp))
            for chars, lp in seen.values()]


def output_marginals(model: AlignRCM, x, B: int = 20, method: str = "rcms", max_len: int | None = None):
    """The posterior marginals of the output: P[i - 1, c] = P(y_i = c | x) for positions
    i = 1..max_len under the contexts (sum over outputs and alignments); row i - 1 sums to
    P(|y| >= i | x).  Returns float64 [max_len, C] (all zeros when nothing has mass)."""
    lat, _, m, pool, fb = _lattice(model, x, B, method, max_len)
    C = model.num_chars
    out = np.zeros((lat.max_len, C))
    if not math.isfinite(fb.log_partition):
        return out
    post = pool.element_posteriors(fb.posteriors)
    layer = np.asarray(lat.arc_layer, np.int64)
    char = np.asarray(lat.arc_label, np.int64) % C
    flat = np.bincount(layer * C + char, weights=post, minlength=(lat.max_len + 1) * C)
    return flat.reshape(lat.max_len + 1, C)[1:].copy()      # arcs of position i have layer i


def best_alignment(model: AlignRCM, x, y, B: int = 20, exact_order: int | None = None,
                   max_len: int | None = None) -> np.ndarray:
    """The best alignment of (x, y): the advances a_1..a_L of the best path of the machine
    restricted to y (contexts chosen by the target's mass; ``exact_order`` for exact contexts,
    e.g. 1 for a first-order model, with which the result is the exact Viterbi alignment).

    Raises:
        ArgumentError: bad arguments, or no alignment of y onto x with at most A phonemes per
            character.
    """
    ya = model.check_y(y)
    lat = rcms_align(model, x, B, y=ya, select="target", max_len=max_len, exact_order=exact_order,
                     target_only=True)
    m, pool = lat.target_machine()
    fb = forward_backward(m, allow_empty=True)
    if not math.isfinite(fb.log_partition):
        raise ArgumentError(f"no alignment of {ya.size} characters onto {lat.x.size} phonemes with at most "
                            f"{model.max_advance} phonemes per character")
    p = best_path(pool.best_machine(m))
    return (np.asarray(p.ilabels, np.int64) - 1) // model.num_chars

"""Tagging accuracy of an HMM tagger against gold tags.

Gold tags the model does not know (say UD's ``HYPH`` and ``NFP`` against a
model of the 45 Penn tags, or a file's own tags against a model trained on
other ones) are, by default, counted as errors of the model: the token is in
the totals and never right.  Their number and the tags themselves are in the
result (``unknown_gold_tokens``, ``unknown_gold_tags``), so a user sees how
much of the error they make; ``unknown_gold="raise"`` refuses them instead.
A model with the 17-tag set first maps every gold tag it does not have with
:func:`fsmlearn.data.tagsets.to_tag17` (Penn and UD XPOS tags); only a tag
with no image there is unknown.

Public names: accuracy, UNKNOWN_GOLD_POLICIES.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..data.tagsets import TAG17_TAGS, to_tag17
from ..errors import ArgumentError, TagError
from .decode import viterbi
from .hmm import HMM
from .lattice import encode_sentences

__all__ = ["accuracy", "UNKNOWN_GOLD_POLICIES"]

#: What :func:`accuracy` does with a gold tag the model does not know.
UNKNOWN_GOLD_POLICIES = ("wrong", "raise")


def _gold_index(hmm: HMM, gold_tags) -> dict:
    """Gold tag -> the model's tag id, or -1 for a tag the model does not know."""
    ti = hmm.tag_index
    tag17 = set(hmm.tags) == set(TAG17_TAGS)
    out = {}
    for t in gold_tags:
        k = ti.get(t)
        if k is None and tag17:
            try:
                k = ti.get(to_tag17(t))
            except TagError:
                k = None
        out[t] = -1 if k is None else k
    return out


def accuracy(hmm: HMM, tagged_sentences: Iterable[Sequence[tuple[str, str]]], *,
             unknown_gold: str = "wrong") -> dict:
    """Tagging accuracy against gold tags.

    Gold tags that are not the model's are mapped with
    :func:`fsmlearn.data.tagsets.to_tag17` when the model has the 17-tag set;
    a gold tag the model still does not know is an error of the model (see the
    module docstring), or raises with ``unknown_gold="raise"``.

    Args:
        hmm: the model.
        tagged_sentences: lists of (word, gold tag) pairs.
        unknown_gold: ``"wrong"`` (default: count such tokens as wrongly tagged)
            or ``"raise"``.

    Returns:
        dict with ``total``, ``known`` and ``unknown`` accuracies (fractions
        in [0, 1]; unknown = words outside ``hmm.vocab``; NaN when there are
        no such tokens), the token counts ``tokens``, ``known_tokens``,
        ``unknown_tokens``, ``unknown_gold_tokens`` (tokens whose gold tag the
        model does not know) and ``unknown_gold_tags`` (dict: such tag -> its
        token count, most frequent first).

    Raises:
        ArgumentError: an unknown policy, or with ``unknown_gold="raise"`` a gold
            tag the model does not know (the first few are named).
    """
    if unknown_gold not in UNKNOWN_GOLD_POLICIES:
        raise ArgumentError(f"unknown_gold must be one of {', '.join(UNKNOWN_GOLD_POLICIES)}, "
                            f"got {unknown_gold!r}")
    tagged = [list(s) for s in tagged_sentences]
    words = [[w for w, _ in s] for s in tagged]
    gold = [t for s in tagged for _, t in s]
    index = _gold_index(hmm, set(gold))
    gold_ids = np.fromiter((index[t] for t in gold), np.int32, count=len(gold))
    missing = Counter(t for t in gold if index[t] < 0)
    if missing and unknown_gold == "raise":
        shown = sorted(missing)[:5]
        raise ArgumentError(f"gold tags {shown} are not tags of the model and cannot be mapped to them")
    ptr, ids, oov = encode_sentences(hmm, words)
    pred = viterbi(hmm, ptr, ids, oov_words=oov)
    ok = pred == gold_ids
    unk = ids == hmm.V
    n, nu = ok.size, int(unk.sum())

    def frac(a, b):
        return float(a) / b if b else math.nan
    return {"total": frac(ok.sum(), n), "known": frac(ok[~unk].sum(), n - nu),
            "unknown": frac(ok[unk].sum(), nu), "tokens": int(n), "known_tokens": int(n - nu),
            "unknown_tokens": nu, "unknown_gold_tokens": int(sum(missing.values())),
            "unknown_gold_tags": dict(sorted(missing.items(), key=lambda kv: (-kv[1], kv[0])))}

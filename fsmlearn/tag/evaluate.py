"""Tagging accuracy of an HMM tagger against gold tags.

Public names: accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from ..data.tagsets import TAG17_TAGS, to_tag17
from ..errors import ArgumentError
from .decode import viterbi
from .hmm import HMM
from .lattice import encode_sentences

__all__ = ["accuracy"]


def _gold_mapper(hmm: HMM, gold_tags):
    tags = set(hmm.tags)
    if all(t in tags for t in gold_tags):
        return lambda t: t
    if tags == set(TAG17_TAGS):
        return to_tag17
    missing = sorted(t for t in gold_tags if t not in tags)[:5]
    raise ArgumentError(f"gold tags {missing} are not tags of the model and cannot be mapped to them")


def accuracy(hmm: HMM, tagged_sentences: Iterable[Sequence[tuple[str, str]]]) -> dict:
    """Tagging accuracy against gold tags.

    Gold tags that are not the model's are mapped with
    :func:`fsmlearn.data.tagsets.to_tag17` when the model has the 17-tag set.

    Args:
        hmm: the model.
        tagged_sentences: lists of (word, gold tag) pairs.

    Returns:
        dict with ``total``, ``known`` and ``unknown`` accuracies (fractions
        in [0, 1]; unknown = words outside ``hmm.vocab``; NaN when there are
        no such tokens) and the token counts ``tokens``, ``known_tokens``,
        ``unknown_tokens``.
    """
    tagged = [list(s) for s in tagged_sentences]
    words = [[w for w, _ in s] for s in tagged]
    gold = [t for s in tagged for _, t in s]
    conv = _gold_mapper(hmm, set(gold))
    ti = hmm.tag_index
    gold_ids = np.fromiter((ti[conv(t)] for t in gold), np.int32, count=len(gold))
    ptr, ids, oov = encode_sentences(hmm, words)
    pred = viterbi(hmm, ptr, ids, oov_words=oov)
    ok = pred == gold_ids
    unk = ids == hmm.V
    n, nu = ok.size, int(unk.sum())

    def frac(a, b):
        return float(a) / b if b else math.nan
    return {"total": frac(ok.sum(), n), "known": frac(ok[~unk].sum(), n - nu),
            "unknown": frac(ok[unk].sum(), nu), "tokens": int(n), "known_tokens": int(n - nu),
            "unknown_tokens": nu}

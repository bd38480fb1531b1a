"""Supervised training of HMM taggers from tagged text (TnT-style).

Brants (2000), "TnT - a statistical part-of-speech tagger", ANLP:

* transitions: relative frequencies of tag unigrams, bigrams (and trigrams),
  combined by deleted interpolation (section 2.2; the weights are found by
  leaving each n-gram out once, :meth:`HMM.from_counts` with
  ``smoothing="interpolate"``);  ``<s>`` and ``</s>`` are tags of their own;
* known words: relative frequencies ``c(w, t) / c(t)`` (discounted by the
  unknown-word mass below);
* unknown words (section 2.3): the HMM's column V holds
  ``p(<unk> | t) = n1(t) / (c(t) + n1(t))`` with ``n1(t)`` the number of
  tokens of tag t whose word occurs once in the training data (Good-Turing's
  estimate of the mass of unseen words, per tag; in a corpus where no word
  occurs once, the words of the lowest count stand in, so that unknown words
  can still be tagged), and a suffix model
  (:class:`~fsmlearn.tag.unknown.SuffixModel`: suffixes of up to 10 letters
  of the words seen at most 10 times, successive abstraction, separate
  tries for lower-case, capitalised, digit and hyphenated words) refines it
  for each unknown word.

Public names: count_tagged, train_supervised, TaggedCounts.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.tagsets import PENN_TAGS
from ..errors import ArgumentError
from .hmm import HMM
from .unknown import SuffixModel

__all__ = ["count_tagged", "train_supervised", "TaggedCounts"]


@dataclass
class TaggedCounts:
    """Counts of a tagged corpus.

    Attributes:
        tags: the T tag names.
        vocab: the V words, most frequent first (ties by string).
        word_counts: Counter word -> count.
        trans_counts: float64 [T+1, T+1] (order 2) or [T+1, T+1, T+1] (order 3).
        emit_counts: float64 [T, V+1] (column V zero).
        tokens: list of (word, tag id) of every token.
    """
    tags: tuple
    vocab: tuple
    word_counts: Counter
    trans_counts: np.ndarray
    emit_counts: np.ndarray
    tokens: list


def count_tagged(sentences: Iterable[Sequence[tuple[str, str]]], tags: Sequence[str], order: int = 2,
                 map_tag=None) -> TaggedCounts:
    """Transition and emission counts of tagged sentences.

    Args:
        sentences: lists of (word, tag) pairs.
        tags: the tag set (T names).
        order: 2 or 3.
        map_tag: optional function applied to each gold tag first.

    Returns:
        A :class:`TaggedCounts`.

    Raises:
        ArgumentError: an order other than 2 or 3, or a tag outside the tag set (named in
            the message).
    """
    if order not in (2, 3):
        raise ArgumentError(f"order must be 2 or 3, got {order!r}")
    tags = tuple(tags)
    T = len(tags)
    ti = {t: i for i, t in enumerate(tags)}
    tokens = []
    seqs = []
    for s in sentences:
        if not s:
            continue
        seq = []
        for w, t in s:
            if map_tag is not None:
                t = map_tag(t)
            k = ti.get(t)
            if k is None:
                raise ArgumentError(f"tag {t!r} (word {w!r}) is not in the tag set")
            tokens.append((w, k))
            seq.append(k)
        seqs.append(seq)
    word_counts = Counter(w for w, _ in tokens)
    vocab = tuple(sorted(word_counts, key=lambda w: (-word_counts[w], w)))
    wi = {w: i for i, w in enumerate(vocab)}
    V = len(vocab)
    wid = np.fromiter((wi[w] for w, _ in tokens), np.int64, count=len(tokens))
    tid = np.fromiter((k for _, k in tokens), np.int64, count=len(tokens))
    emit = np.bincount(tid * (V + 1) + wid, minlength=T * (V + 1)).astype(np.float64).reshape(T, V + 1)
    # tag sequences padded with <s> (order-1 times) and </s>
    lens = np.array([len(q) for q in seqs], np.int64)
    pad = order - 1
    L = lens + pad + 1
    flat = np.full(int(L.sum()), T, np.int64)
    starts = np.concatenate([[0], np.cumsum(L)[:-1]])
    pos = np.repeat(starts + pad, lens) + (np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens))
    flat[pos] = tid
    # n-grams ending at every real or </s> position
    ends = np.concatenate([np.arange(s + pad, s + l) for s, l in zip(starts, L)]) if len(seqs) else \
        np.zeros(0, np.int64)
    T1 = T + 1
    if order == 2:
        idx = flat[ends - 1] * T1 + flat[ends]
        trans = np.bincount(idx, minlength=T1 * T1).astype(np.float64).reshape(T1, T1)
    else:
        idx = (flat[ends - 2] * T1 + flat[ends - 1]) * T1 + flat[ends]
        trans = np.bincount(idx, minlength=T1 ** 3).astype(np.float64).reshape(T1, T1, T1)
    return TaggedCounts(tags, vocab, word_counts, trans, emit, tokens)


def train_supervised(sentences: Iterable[Sequence[tuple[str, str]]], tags: Sequence[str] | None = None,
                     order: int = 2, *, smoothing="interpolate", rare_max: int = 10, max_suffix: int = 10,
                     suffix_model: bool = True, theta="auto", map_tag=None, progress=None) -> HMM:
    """Train a TnT-style HMM tagger on tagged sentences.

    Args:
        sentences: lists of (word, tag) pairs.
        tags: the tag set; default the 45 Penn tags.
        order: 2 (bigram) or 3 (trigram).
        smoothing: transition smoothing (see :meth:`HMM.from_counts`).
        rare_max: words seen at most this often feed the suffix model.
        max_suffix: the suffix model's longest suffix.
        suffix_model: build the suffix model (else unknown words use column V only).
        theta: the suffix model's abstraction weight (see
            :meth:`~fsmlearn.tag.unknown.SuffixModel.train`).
        map_tag: optional function applied to each gold tag.
        progress: optional callable receiving progress lines.

    Returns:
        An :class:`~fsmlearn.tag.hmm.HMM`.
    """
    say = progress or (lambda msg: None)
    if tags is None:
        tags = PENN_TAGS
    t0 = time.time()
    c = count_tagged(sentences, tags, order, map_tag=map_tag)
    T, V = len(c.tags), len(c.vocab)
    say(f"counted {len(c.tokens):,} tokens, {V:,} words, {T} tags in {time.time() - t0:.1f} s")
    emit = c.emit_counts.copy()
    # n1(t): the unseen-word mass of each tag.  In a corpus without a word seen once (small, or
    # repeated) Good-Turing's estimate is 0 and no tag could emit an unknown word; the words of
    # the lowest count seen then stand for the unseen ones.
    rarest = min(c.word_counts.values()) if (V and 1 not in c.word_counts.values()) else 1
    once = np.array([c.word_counts[w] == rarest for w in c.vocab] + [False])
    emit[:, V] = emit[:, once].sum(axis=1)
    unknown = None
    if suffix_model:
        unknown = SuffixModel.train(c.tokens, c.word_counts, T, c.emit_counts.sum(axis=1),
                                    rare_max=rare_max, max_suffix=max_suffix, theta=theta)
        say(f"suffix model: {len(unknown.table):,} suffixes, theta {unknown.theta:.4f}")
    hmm = HMM.from_counts(c.tags, c.vocab, c.trans_counts, emit, smoothing=smoothing, unknown=unknown)
    say(f"trained order-{order} HMM in {time.time() - t0:.1f} s")
    return hmm

"""Sampling text and id corpora from a compiled LM."""

from __future__ import annotations

import io

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import compile_lm
from fsmlearn.lm.sample import sample_corpus, sample_text


def _lm():
    rng = np.random.default_rng(3)
    words = list("abcdefgh")
    sents = [list(rng.choice(words, size=rng.integers(1, 9))) for _ in range(400)]
    return compile_lm(estimate(count_ngrams(sents, 3)))


def test_sample_corpus_is_sample_text_as_ids():
    lm = _lm()
    for kw in ({"tokens": 5003}, {"sentences": 777}):
        buf = io.BytesIO()
        n_sent, n_tok = sample_text(lm, buf, seed=11, batch=100, **kw)
        ptr, ids = sample_corpus(lm, seed=11, batch=100, **kw)
        lines = buf.getvalue().decode().split("\n")[:-1]
        assert len(lines) == n_sent == ptr.size - 1 and ids.size == n_tok
        got = [" ".join(lm.vocab[i] for i in ids[ptr[s]:ptr[s + 1]]) for s in range(ptr.size - 1)]
        assert got == lines
    assert ids.dtype == np.int32 and ptr.dtype == np.int64
    ptr, ids = sample_corpus(lm, tokens=5003, seed=11, batch=100)
    # whole sentences: the last one crosses the budget
    assert 5003 <= ids.size < 5003 + np.diff(ptr).max()


def test_sampling_needs_exactly_one_budget():
    lm = _lm()
    for kw in ({}, {"tokens": 10, "sentences": 10}):
        with pytest.raises(ArgumentError, match="exactly one of tokens= and sentences="):
            sample_corpus(lm, **kw)
        with pytest.raises(ValueError):      # still a ValueError
            sample_text(lm, io.BytesIO(), **kw)


def test_sample_sentences_draws_vocabulary_words_reproducibly():
    from fsmlearn.lm.sample import sample_sentences
    lm = _lm()
    a = sample_sentences(lm, 20, seed=3)
    assert len(a) == 20 and a == sample_sentences(lm, 20, seed=3) and a != sample_sentences(lm, 20, seed=4)
    vocab = set(lm.vocab)
    assert all(w in vocab and w not in ("<s>", "</s>") for s in a for w in s)

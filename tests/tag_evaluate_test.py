"""Accuracy (fsmlearn.tag.evaluate): the fraction of Viterbi tags equal to the gold tags,
split by known and unknown words; gold tags the model cannot map raise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError, FsmError
from fsmlearn.tag import accuracy, encode_sentences, viterbi
from tag_common import random_hmm, random_sentence


def test_accuracy_counts_the_viterbi_tags_equal_to_gold():
    rng = np.random.default_rng(11)
    hmm = random_hmm(rng, T=3, V=5)
    sents = [random_sentence(rng, hmm, int(rng.integers(1, 6))) for _ in range(6)]
    ptr, ids, oov = encode_sentences(hmm, sents)
    pred = viterbi(hmm, ptr, ids, oov_words=oov)
    gold = rng.integers(0, hmm.T, ids.shape[0])
    gold[::2] = pred[::2]                               # about half right
    tagged = [[(w, hmm.tags[gold[ptr[i] + k]]) for k, w in enumerate(s)] for i, s in enumerate(sents)]
    a = accuracy(hmm, tagged)
    ok = pred == gold
    unk = ids == hmm.V
    assert a["tokens"] == ids.shape[0] and a["unknown_tokens"] == int(unk.sum())
    assert a["total"] == pytest.approx(ok.mean())
    assert a["known"] == pytest.approx(ok[~unk].mean())
    assert a["unknown"] == pytest.approx(ok[unk].mean()) if unk.any() else math.isnan(a["unknown"])


def test_gold_tags_outside_the_model_raise():
    hmm = random_hmm(np.random.default_rng(1))
    with pytest.raises(ArgumentError, match="not tags of the model") as e:
        accuracy(hmm, [[("w0", "NOT-A-TAG")]])
    assert isinstance(e.value, FsmError)

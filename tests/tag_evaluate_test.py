"""Accuracy (fsmlearn.tag.evaluate): the fraction of Viterbi tags equal to the gold tags,
split by known and unknown words; gold tags the model does not know are counted as errors
and reported (or raise, if asked); a 17-tag model maps Penn and UD XPOS gold tags first."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fsmlearn.data.tagsets import TAG17_TAGS
from fsmlearn.errors import ArgumentError, FsmError
from fsmlearn.tag import HMM, accuracy, encode_sentences, viterbi
from tag_common import random_hmm, random_sentence


def _random_sentences_tagged(seed, count, shortest):
    """(rng, hmm, sents, ptr, ids, Viterbi tags): a random 3-tag, 5-word HMM and ``count`` of its
    sentences of ``shortest`` to 5 words, encoded."""
    rng = np.random.default_rng(seed)
    hmm = random_hmm(rng, T=3, V=5)
    sents = [random_sentence(rng, hmm, int(rng.integers(shortest, 6))) for _ in range(count)]
    ptr, ids, oov = encode_sentences(hmm, sents)
    return rng, hmm, sents, ptr, ids, viterbi(hmm, ptr, ids, oov_words=oov)


def test_accuracy_counts_the_viterbi_tags_equal_to_gold():
    rng, hmm, sents, ptr, ids, pred = _random_sentences_tagged(11, 6, 1)
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


def test_gold_tags_outside_the_model_are_errors_of_the_model():
    _, hmm, sents, ptr, ids, pred = _random_sentences_tagged(5, 8, 2)
    gold = [hmm.tags[t] for t in pred]                  # all right ...
    for k in (0, 3, 7):
        gold[k] = "HYPH"                                # ... but three tokens the model cannot tag
    gold[5] = "NFP"
    tagged = [[(w, gold[ptr[i] + k]) for k, w in enumerate(s)] for i, s in enumerate(sents)]
    a = accuracy(hmm, tagged)
    n = ids.shape[0]
    assert a["tokens"] == n and a["total"] == pytest.approx((n - 4) / n)
    assert a["unknown_gold_tokens"] == 4 and a["unknown_gold_tags"] == {"HYPH": 3, "NFP": 1}
    unk = ids == hmm.V
    wrong = np.zeros(n, bool)
    wrong[[0, 3, 5, 7]] = True
    assert a["known"] == pytest.approx(1 - wrong[~unk].mean())
    none = accuracy(hmm, [[(w, hmm.tags[pred[ptr[i] + k]]) for k, w in enumerate(s)] for i, s in enumerate(sents)])
    assert none["total"] == 1.0 and none["unknown_gold_tokens"] == 0 and none["unknown_gold_tags"] == {}
    with pytest.raises(ArgumentError, match=r"gold tags \['HYPH', 'NFP'\] are not tags of the model") as e:
        accuracy(hmm, tagged, unknown_gold="raise")
    assert isinstance(e.value, FsmError)
    with pytest.raises(ArgumentError, match="unknown_gold must be one of wrong, raise"):
        accuracy(hmm, tagged, unknown_gold="skip")


def test_a_17_tag_model_maps_penn_and_ud_gold_tags():
    T, V = len(TAG17_TAGS), 2
    trans = np.ones((T + 1, T + 1))
    emit = np.ones((T, V + 1))
    emit[TAG17_TAGS.index("N"), 0] = 1000.0             # 'dog' is a noun
    emit[TAG17_TAGS.index("INPUNC"), 1] = 1000.0        # '-' is inner punctuation
    hmm = HMM.from_counts(TAG17_TAGS, ("dog", "-"), trans, emit, smoothing=0.1)
    a = accuracy(hmm, [[("dog", "NN"), ("-", "HYPH"), ("dog", "N"), ("dog", "NOUN"), ("-", "-NONE-")]])
    assert a["tokens"] == 5 and a["total"] == pytest.approx(3 / 5)
    assert a["unknown_gold_tags"] == {"-NONE-": 1, "NOUN": 1}

"""Supervised training (fsmlearn.tag.train) on WSJ: accuracy of the bigram and trigram
taggers on WSJ-small, the unknown-word model's features."""

from __future__ import annotations

import numpy as np

from fsmlearn.tag import accuracy, train_supervised
from tag_common import supervised, wsj  # noqa: F401 (fixtures)


def test_supervised_bigram_accuracy_on_wsj_small(wsj, supervised):
    hmm, seconds = supervised
    assert hmm.T == 45 and hmm.order == 2
    assert seconds < 60
    a = accuracy(hmm, wsj[1])
    # measured: total 95.33, known 96.12, unknown 83.50 (2,933 unknown tokens)
    assert a["tokens"] == 46461
    assert a["total"] >= 0.950
    assert a["known"] > 0.955 and a["unknown"] > 0.75
    assert a["known_tokens"] + a["unknown_tokens"] == a["tokens"]


def test_supervised_trigram_beats_bigram(wsj, supervised):
    h3 = train_supervised(wsj[0], order=3)
    a3 = accuracy(h3, wsj[1])
    a2 = accuracy(supervised[0], wsj[1])
    # measured: trigram 95.71 total
    assert a3["total"] > a2["total"] and a3["total"] >= 0.953


def test_unknown_word_model_features(supervised):
    hmm = supervised[0]
    ti = hmm.tag_index
    s = hmm.unknown_scores(["Frobnitz", "frobnicating", "1,234", "glorfed", "re-glorfed"])
    best = [hmm.tags[i] for i in np.argmax(s + np.log(np.exp(hmm.log_trans[ti["DT"], :hmm.T])), axis=1)]
    assert best[0] == "NNP" and best[1] == "VBG" and best[2] == "CD"
    assert np.isfinite(s).any(axis=1).all()


def test_a_small_repeated_corpus_still_tags_every_sentence():
    """No word seen once and every tag bigram seen often: Good-Turing's unseen mass and the
    unigram weight of deleted interpolation would be 0 (an unknown word or an unseen tag
    bigram would leave a sentence without a tagging); the rarest words and one count stand in."""
    from fsmlearn.tag import tag_sentences
    sents = [[("the", "DT"), ("dog", "NN"), ("barks", "VBZ")], [("I", "PRP"), ("sleep", "VBP")]] * 3
    for order in (2, 3):
        hmm = train_supervised(sents, ("DT", "NN", "PRP", "VBP", "VBZ"), order=order)
        assert np.isfinite(hmm.log_emit[:, hmm.V]).all()
        assert np.isfinite(hmm.log_trans[:, :hmm.T]).all()
        tags = tag_sentences(hmm, [["the", "sleep"], ["zzz", "dog", "qqq"], ["the", "dog", "barks"]])
        assert [len(t) for t in tags] == [2, 3, 3] and tags[2] == ["DT", "NN", "VBZ"]

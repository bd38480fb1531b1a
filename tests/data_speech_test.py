"""Layer 1 (data/): the speech and word tasks built from cmudict and Mixed-text.

The real corpora are read in place: the speech task is built through the
default path (Mixed-text and cmudict read by the builder, about 10 s), the
rest reuses Mixed-text's sentences and the lexicon, read once per module
(about 10 s), through the same functions.
The selection rules are checked exactly on invented sentences and an invented
lexicon.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from fsmlearn.data import iter_dataset_words
from fsmlearn.data.cmudict import PHONEMES, read_cmudict
from fsmlearn.data.speech import (SPEECH_TEST, SPEECH_TRAIN, WORD_TEST, WORD_TRAIN, TranscriptionTask,
                                  build_speech_task, build_word_task, spoken_words)
from fsmlearn.errors import ArgumentError, DatasetError

SPEAKABLE = re.compile(r"[a-z']*[a-z][a-z']*")


@pytest.fixture(scope="module")
def mixed():
    return list(iter_dataset_words("mixed-text"))


@pytest.fixture(scope="module")
def lexicon():
    return read_cmudict(lowercase=True)


@pytest.fixture(scope="module")
def speech():
    return build_speech_task()          # the real path: Mixed-text and cmudict read by the builder


@pytest.fixture(scope="module")
def words(mixed, lexicon):
    return build_word_task(mixed, lexicon)


def _check_consistent(task: TranscriptionTask, lexicon):
    """ids, strings, words and pronunciations agree; every word is speakable."""
    assert len(set(task.phonemes)) == len(task.phonemes) and set(task.phonemes) <= set(PHONEMES)
    assert list(task.chars) == sorted(set(task.chars))
    for part in (task.train, task.test):
        assert len(part.x) == len(part.y) == len(part.inputs) == len(part.outputs) == len(part.words) \
            == len(part.word_starts) == len(part)
        for x, y, inp, out, ws, starts in zip(part.x, part.y, part.inputs, part.outputs, part.words,
                                              part.word_starts):
            assert x.dtype == np.int32 and y.dtype == np.int32 and starts.dtype == np.int32
            assert tuple(task.phonemes[i] for i in x) == inp
            assert task.spell(y) == out == "_".join(ws)
            assert all(SPEAKABLE.fullmatch(w) for w in ws)
            prons = [tuple(lexicon[w][0]) for w in ws]      # the first pronunciation of each word
            assert sum(prons, ()) == inp
            assert starts.tolist() == np.cumsum([0] + [len(p) for p in prons[:-1]]).tolist()


# --------------------------------------------------------------------------- the speech task


def test_speech_task_sizes_disjoint_and_consistent(speech, lexicon):
    assert (len(speech.train), len(speech.test)) == (SPEECH_TRAIN, SPEECH_TEST) == (746, 253)
    assert not set(speech.train.outputs) & set(speech.test.outputs)
    assert len(set(speech.train.outputs)) == 746 and len(set(speech.test.outputs)) == 253
    _check_consistent(speech, lexicon)
    for part in (speech.train, speech.test):
        for x, ws, out in zip(part.x, part.words, part.outputs):
            assert 17 <= len(x) <= 37 and 3 <= len(ws) <= 10
            assert " " not in out and out.count("_") == len(ws) - 1


def test_speech_task_statistics(speech):
    st = speech.stats()
    assert st["task"] == "speech" and st["config"]["source"] == "mixed-text"
    assert st["pool"] > 10 * (746 + 253)
    for part in ("train", "test"):
        assert 24.0 < st[part]["mean_phonemes"] < 28.0          # the paper's 26
        assert 30.0 < st[part]["mean_chars"] < 45.0
        assert 17 <= st[part]["min_phonemes"] and st[part]["max_phonemes"] <= 37
    assert st["phonemes"] == 39 and st["chars"] == 28
    assert set(speech.chars) == set("abcdefghijklmnopqrstuvwxyz'_")
    assert st["chars_missing_from_train"] == []


def test_speech_task_deterministic_by_seed(speech, mixed, lexicon):
    again = build_speech_task(mixed, lexicon)                 # same seed (0), same data
    assert again.train.outputs == speech.train.outputs and again.test.outputs == speech.test.outputs
    assert all(np.array_equal(a, b) for a, b in zip(again.train.x, speech.train.x))
    assert again.phonemes == speech.phonemes and again.chars == speech.chars and again.pool == speech.pool
    other = build_speech_task(mixed, lexicon, seed=1)
    assert other.pool == speech.pool
    assert set(other.train.outputs) != set(speech.train.outputs)
    assert not set(other.train.outputs) & set(other.test.outputs)

# --------------------------------------------------------------------------- the word task


def test_word_task_sizes_disjoint_and_consistent(words, lexicon, mixed):
    assert (len(words.train), len(words.test)) == (WORD_TRAIN, WORD_TEST) == (6000, 1000)
    assert not set(words.train.outputs) & set(words.test.outputs)
    assert len(set(words.train.outputs)) == 6000
    _check_consistent(words, lexicon)
    in_text = {w for s in mixed for w in spoken_words(s)}
    for part in (words.train, words.test):
        for ws, out in zip(part.words, part.outputs):
            assert len(ws) == 1 and ws[0] == out and 2 <= len(out) <= 12 and out in in_text
    st = words.stats()
    assert st["phonemes"] == 39 and st["chars"] == 27 and "_" not in words.chars
    for part in ("train", "test"):
        assert 5.0 < st[part]["mean_phonemes"] < 8.0 and 6.0 < st[part]["mean_chars"] < 9.0
    assert st["chars_missing_from_train"] == []


def test_word_task_same_seed_same_split(words, mixed, lexicon):
    again = build_word_task(mixed, lexicon)
    assert again.train.outputs == words.train.outputs and again.test.outputs == words.test.outputs
    assert words.config == {"source": "given sentences", "seed": 0, "train": 6000, "test": 1000,
                            "min_length": 2, "max_length": 12, "pronunciation": "first"}


# --------------------------------------------------------------------------- the rules, on invented data


def test_spoken_words():
    assert spoken_words(["Do", "n't", "go", ",", "John", "'s", "DOG", "!", "--"]) == ["don't", "go", "john's", "dog"]
    assert spoken_words(["We", "ca", "n\u2019t", "\u2019s", "``", "'re"]) == ["we", "can't's're"]
    assert spoken_words(["'s", "x", "1990", "state-owned"]) == ["'s", "x", "1990", "state-owned"]
    assert spoken_words([".", "?"]) == []


LEX = {"the": [("DH", "AH"), ("DH", "IY")], "cat": [("K", "AE", "T")], "sat": [("S", "AE", "T")],
       "on": [("AA", "N")], "mat": [("M", "AE", "T")], "don't": [("D", "OW", "N", "T")],
       "it": [("IH", "T")], "state-owned": [("S", "T", "EY", "T", "OW", "N", "D")],
       "a": [("AH",)], "x2": [("EH", "K", "S")]}
SENTS = [
    ["The", "cat", "sat", "."],                     # the_cat_sat: 2+3+3 = 8 phonemes
    ["The", "cat", "sat", "on", "the", "mat"],      # 6 words, 15 phonemes
    ["the", "cat", "sat", "!"],                     # same spelling as the first: kept once
    ["Do", "n't", "sat", "it"],                     # don't_sat_it: 4+3+2 = 9
    ["the", "dog", "sat"],                          # dog is not in the lexicon
    ["a", "state-owned", "cat"],                    # a hyphen: not speakable
    ["x2", "sat", "it"],                            # a digit: not speakable
    ["cat", "sat"],                                 # 2 words
    ["mat", "on", "the", "cat"],                    # 3+2+2+3 = 10
]


def test_speech_selection_rules_on_invented_data():
    task = build_speech_task(SENTS, LEX, train=2, test=1, min_words=3, max_words=5, min_phonemes=8,
                             max_phonemes=10)
    assert task.pool == 3
    assert sorted(task.train.outputs + task.test.outputs) == ["don't_sat_it", "mat_on_the_cat", "the_cat_sat"]
    assert task.chars == tuple(sorted(set("don't_sat_itmat_on_the_catthe_cat_sat")))
    assert task.phonemes == ("AA", "AE", "AH", "D", "DH", "IH", "K", "M", "N", "OW", "S", "T")
    i = (task.train.outputs + task.test.outputs).index("the_cat_sat")
    part, j = (task.train, i) if i < 2 else (task.test, i - 2)
    assert part.inputs[j] == ("DH", "AH", "K", "AE", "T", "S", "AE", "T")      # the first pronunciation
    assert part.word_starts[j].tolist() == [0, 2, 5]
    wider = build_speech_task(SENTS, LEX, train=3, test=1, min_words=3, max_words=6, min_phonemes=8,
                              max_phonemes=15)
    assert wider.pool == 4 and "the_cat_sat_on_the_mat" in wider.train.outputs + wider.test.outputs
    with pytest.raises(DatasetError, match="only 3 sentences"):
        build_speech_task(SENTS, LEX, train=3, test=1, min_words=3, max_words=5, min_phonemes=8,
                          max_phonemes=10)


def test_word_selection_rules_on_invented_data():
    task = build_word_task(SENTS, LEX, train=5, test=2)
    assert task.pool == 7
    assert sorted(task.train.outputs + task.test.outputs) == ["cat", "don't", "it", "mat", "on", "sat", "the"]
    both = task.train.inputs + task.test.inputs
    assert both[(task.train.outputs + task.test.outputs).index("the")] == ("DH", "AH")
    assert build_word_task(SENTS, LEX, train=4, test=1, min_length=3).pool == 5      # not it, on
    seeds = [build_word_task(SENTS, LEX, train=5, test=2, seed=k) for k in (0, 0, 1, 2, 3)]
    assert seeds[0].train.outputs == seeds[1].train.outputs == task.train.outputs
    assert len({tuple(t.train.outputs) for t in seeds}) > 1
    with pytest.raises(DatasetError, match="only 7 words"):
        build_word_task(SENTS, LEX, train=7, test=1)


@pytest.mark.parametrize("kwargs, value", [
    ({"train": 0}, "0"), ({"test": -1}, "-1"), ({"seed": -1}, "-1"), ({"seed": 1.5}, "1.5"),
    ({"train": True}, "True"), ({"min_words": 4, "max_words": 3}, "words 4-3"),
    ({"min_phonemes": 9, "max_phonemes": 8}, "phonemes 9-8"),
])
def test_bad_speech_arguments_are_named(kwargs, value):
    with pytest.raises(ArgumentError, match=re.escape(value)):
        build_speech_task(SENTS, LEX, **kwargs)


def test_bad_word_arguments_are_named():
    with pytest.raises(ArgumentError, match="lengths 5-4"):
        build_word_task(SENTS, LEX, min_length=5, max_length=4)
    with pytest.raises(ArgumentError, match="mapping"):
        build_word_task(SENTS, [("cat", ["K AE T"])])

"""The decipherment experiment at toy scale: data preparation, runs, report and plot."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError
from fsmlearn.experiments.rcm_decipher import DecipherConfig, parse_runs, prepare_decipherment, run_decipher


def toy_sentences(seed=0, n=400):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(8)]
    T = rng.dirichlet(np.full(8, 0.2), size=8)
    out = []
    for _ in range(n):
        s, a = [], rng.integers(8)
        for _ in range(rng.integers(2, 7)):
            a = rng.choice(8, p=T[a])
            s.append(words[a])
        out.append(s)
    out.append(["rare", "words"])          # outside the kept vocabulary: dropped
    return out


def test_the_data_are_the_frequent_words_sentences_split_and_enciphered():
    d = prepare_decipherment(toy_sentences(), vocab=8, ciphertexts=100, seed=3)
    assert len(d["words"]) == 8 and d["sentences"] == 400 and len(d["cipher"]) == 100 and len(d["plain"]) == 300
    # deciphering with the truth gives back sentences made of the kept words
    plain_of = d["truth"]
    assert all(0 <= plain_of[x] < 8 for c in d["cipher"] for x in c)
    with pytest.raises(ArgumentError, match="only 400 sentences"):
        prepare_decipherment(toy_sentences(), vocab=8, ciphertexts=400, seed=3)


def test_runs_parse_and_bad_runs_are_named():
    assert parse_runs("exact:1,rcms:2:60") == [("exact", 1, 0), ("rcms", 2, 60)]
    for bad in ("rcms:2", "viterbi:1:3", "beam:x:3"):
        with pytest.raises(ArgumentError, match="bad run"):
            parse_runs(bad)


def test_a_small_run_writes_its_report_and_plot(tmp_path):
    cfg = DecipherConfig(vocab=8, ciphertexts=60, iterations=3, seed=1,
                         runs=parse_runs("exact:1,beam:2:4,rcms:2:4"), report=str(tmp_path / "r.json"))
    rep = run_decipher(cfg, sentences=toy_sentences())
    back = json.loads((tmp_path / "r.json").read_text())
    assert back["complete"] and [r["name"] for r in back["runs"]] == ["exact order 1", "beam order 2 size 4",
                                                                      "rcms order 2 size 4"]
    for r in rep["runs"]:
        assert len(r["iterations"]) == 3 and all(0 <= x["accuracy"] <= 1 for x in r["iterations"])
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.png"]


def test_hidden_plaintext_perplexity_by_hand_and_the_plaintext_limit(tmp_path):
    from fsmlearn.experiments.rcm_decipher import plaintext_perplexity
    from fsmlearn.rcm.decipher import AbsoluteDiscountLM
    plain = [[0, 1, 2], [1, 2], [0, 0, 1]]
    lm = AbsoluteDiscountLM(plain, 3, 1)
    hidden = [[0, 1], [2]]
    lp = lm.log_prob((-2,))[0] + lm.log_prob((0,))[1] + lm.log_prob((-2,))[2]
    assert abs(plaintext_perplexity(lm, hidden) - np.exp(-lp / 3)) < 1e-12
    lm0 = AbsoluteDiscountLM(plain, 3, 0)          # order 0: the unigram base, no history
    assert abs(plaintext_perplexity(lm0, hidden) - np.exp(-np.log(lm0.base[[0, 1, 2]]).sum() / 3)) < 1e-12
    cfg = DecipherConfig(vocab=8, ciphertexts=60, iterations=1, seed=1, runs=parse_runs("exact:1"), plaintext=50)
    rep = run_decipher(cfg, sentences=toy_sentences())
    assert rep["plaintext_sentences"] == 50 and set(rep["hidden_plaintext_perplexity"]) == {"1", "2"}
    assert all(p > 1 for p in rep["hidden_plaintext_perplexity"].values())
    full = run_decipher(DecipherConfig(vocab=8, ciphertexts=60, iterations=1, seed=1, runs=parse_runs("exact:1")),
                        sentences=toy_sentences())
    assert full["plaintext_sentences"] == 340      # more plaintext, a better first-order LM
    assert full["hidden_plaintext_perplexity"]["1"] < rep["hidden_plaintext_perplexity"]["1"]
    other = run_decipher(DecipherConfig(vocab=8, ciphertexts=60, iterations=1, seed=1, runs=parse_runs("exact:1"),
                                        discount=0.75), sentences=toy_sentences())
    assert other["discount"] == 0.75 and other["hidden_plaintext_perplexity"] != full["hidden_plaintext_perplexity"]
    with pytest.raises(ArgumentError, match="--discount must be between 0 and 1"):
        run_decipher(DecipherConfig(vocab=8, ciphertexts=60, runs=parse_runs("exact:1"), discount=1.0),
                     sentences=toy_sentences())
    with pytest.raises(ArgumentError, match="--plaintext must be between 1 and the 340"):
        run_decipher(DecipherConfig(vocab=8, ciphertexts=60, runs=parse_runs("exact:1"), plaintext=341),
                     sentences=toy_sentences())


def test_the_command_line_names_a_bad_run():
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", "rcms", "decipher", "--runs", "rcms:0:5"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("fsmlearn: error: bad run 'rcms:0:5'")


def test_parallel_runs_equal_the_serial_ones_and_report_context_length(tmp_path):
    runs = parse_runs("exact:1,beam:2:3,rcms:2:3,rcms:1:2")
    reps = [run_decipher(DecipherConfig(vocab=8, ciphertexts=40, iterations=2, seed=2, runs=runs, jobs=j),
                         sentences=toy_sentences(1, 200)) for j in (1, 2)]
    strip = lambda rep: [[{k: v for k, v in x.items() if k != "seconds"} for x in r["iterations"]]
                         for r in rep["runs"]]
    assert strip(reps[0]) == strip(reps[1])
    assert [r["name"] for r in reps[1]["runs"]] == ["exact order 1", "beam order 2 size 3", "rcms order 2 size 3",
                                                    "rcms order 1 size 2"]
    for r in reps[0]["runs"]:
        for x in r["iterations"]:
            assert 0 <= x["context_length"] <= 6 and 0 <= x["token_accuracy"] <= 1
    with pytest.raises(ArgumentError, match="--jobs"):
        run_decipher(DecipherConfig(jobs=0), sentences=toy_sentences())


def test_clauses_split_at_punctuation_and_keep_runs_of_two_words():
    from fsmlearn.experiments.rcm_decipher import clauses
    assert clauses("the cat , he said : yes .".split()) == [["the", "cat"], ["he", "said"]]
    assert clauses(["a", "b", "“", "c", "d", "e", "”"]) == [["a", "b"], ["c", "d", "e"]]
    assert clauses([",", "a", "--", "b", "c"]) == [["b", "c"]]
    sents = [["a", "b", ",", "c", "d", "x"], ["a", "b", "."]] * 60
    d = prepare_decipherment(sents, vocab=4, ciphertexts=50, seed=0, segments="clauses")
    # "c d x" holds x (not among the 4 words: a b , c ... by frequency, ties by spelling)
    assert d["sentences"] == len(d["cipher"]) + len(d["plain"])
    assert all(len(s) >= 2 for s in d["plain"])
    with pytest.raises(ArgumentError, match="sentences or clauses"):
        prepare_decipherment(sents, vocab=4, ciphertexts=5, seed=0, segments="words")

"""The speech and word experiments of the RCM part at toy scale: runs, reports and plots."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from fsmlearn.data.speech import build_speech_task, build_word_task
from fsmlearn.errors import ArgumentError
from fsmlearn.experiments.rcm_speech import (SpeechConfig, WordsConfig, parse_word_runs, run_speech,
                                             run_words)

# an invented lexicon: letters spelled by phonemes with one one-to-two and one two-to-one case
SOUND = {"b": ("B",), "d": ("D",), "a": ("AE",), "o": ("OW",), "x": ("K", "S"), "t": ("T",)}


def pron(word):
    out = []
    for ch in word.replace("th", "\0"):
        out.extend(("TH",) if ch == "\0" else SOUND[ch])
    return tuple(out)


WORDS = ["".join(w) for n in (2, 3) for w in itertools.product("bdaoxt", repeat=n)][:140]
LEXICON = {w: [pron(w)] for w in WORDS}


def word_task(train=24, test=8):
    return build_word_task([[w] for w in WORDS], LEXICON, train=train, test=test, seed=1, min_length=2,
                           max_length=3)


def speech_task(train=10, test=4):
    rng = np.random.default_rng(0)
    sents = [list(rng.choice(WORDS, 3)) for _ in range(200)]
    return build_speech_task(sents, LEXICON, train=train, test=test, seed=1, min_words=3, max_words=3,
                             min_phonemes=6, max_phonemes=14)


def test_words_writes_its_report_and_curves(tmp_path):
    cfg = WordsConfig(runs=parse_word_runs("beam:2,rcms:2"), n=1, passes=1, hash_bits=12,
                      report=str(tmp_path / "w.json"), model_dir=str(tmp_path / "models"), length_every=5)
    task = word_task()
    rep = run_words(cfg, task=task)
    from fsmlearn.rcm.io import load_align_rcm
    m, chars, phon = load_align_rcm(rep["runs"][1]["model"])
    assert chars == list(task.chars) and phon == list(task.phonemes) and m.n == 1 and np.any(m.theta != 0)
    back = json.loads((tmp_path / "w.json").read_text())
    assert back["complete"] and [r["name"] for r in back["runs"]] == ["beam 2", "RCMS 2"]
    for r in rep["runs"]:
        conf, ok = np.array(r["confidence"]), np.array(r["correct"])
        assert conf.size == 8 and ((conf >= 0) & (conf <= 1)).all()
        assert r["accuracy"] == pytest.approx(ok.mean())
        assert 0 <= r["recall_at_precision"] <= 1
    for r in rep["runs"]:
        assert [c["updates"] for c in r["context_length"]] == [5, 10, 15, 20]
    for name in ("w.png", "w-context-length.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_speech_runs_every_strategy_and_the_orders(tmp_path):
    cfg = SpeechConfig(size=2, n=1, passes=2, orders=2, hash_bits=12, report=str(tmp_path / "s.json"),
                       length_every=5)
    rep = run_speech(cfg, task=speech_task())
    names = [(r["strategy"], r["order"]) for r in rep["runs"]]
    assert names == [(s, 0) for s in ("model", "target", "hybrid", "forced", "rcms")] + [("forced", 1), ("rcms", 1)]
    for r in rep["runs"]:
        assert [p["pass"] for p in r["passes"]] == [1, 2]
        for p in r["passes"]:
            assert 0 <= p["exact_match"] <= 1 and p["cer"] >= 0 and 0 <= p["train_signal"] <= 10
        assert r["context_length"] and r["context_length"][0]["updates"] == 5
    for name in ("s.png", "s-context-length.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_speech_resume_keeps_the_finished_runs_and_runs_the_rest(tmp_path):
    import json
    from fsmlearn.errors import FsmError
    path = tmp_path / "s.json"
    base = dict(size=2, n=1, passes=1, hash_bits=12, report=str(path), length_every=5)
    first = run_speech(SpeechConfig(strategies=("model", "rcms"), orders=1, **base), task=speech_task())
    stamp = {r["name"]: r["passes"][0]["train_seconds"] for r in first["runs"]}
    said = []
    rep = run_speech(SpeechConfig(strategies=("model", "rcms"), orders=2, resume=True, **base), task=speech_task(),
                     progress=said.append)
    assert [(r["strategy"], r["order"]) for r in rep["runs"]] == [("model", 0), ("rcms", 0), ("rcms", 1)]
    for r in rep["runs"][:2]:      # kept as they were, not rerun
        assert r["passes"][0]["train_seconds"] == stamp[r["name"]]
    assert any("2 of 3 runs already finished" in m for m in said)
    assert json.loads(path.read_text())["complete"] is True
    with pytest.raises(FsmError, match=r"s\.json: cannot resume: passes was 1, this run has 2"):
        run_speech(SpeechConfig(strategies=("model",), orders=1, resume=True, **{**base, "passes": 2}),
                   task=speech_task())
    path.write_text('{"runs": [')
    with pytest.raises(FsmError, match=r"s\.json: cannot resume from this report"):
        run_speech(SpeechConfig(strategies=("model",), orders=1, resume=True, **base), task=speech_task())


def test_imputed_alignments_are_kept_and_read_back(tmp_path):
    from fsmlearn.rcm.align_learn import impute_alignments
    task = speech_task()
    base = dict(strategies=("forced",), size=2, n=1, passes=1, orders=1, hash_bits=12,
                model_dir=str(tmp_path / "m"))
    said = []
    first = run_speech(SpeechConfig(**base), task=task, progress=said.append)
    assert first["impute_seconds"] > 0 and (tmp_path / "m" / "imputed-alignments.npz").exists()
    said.clear()
    again = run_speech(SpeechConfig(**base), task=task, progress=said.append)
    assert again["impute_seconds"] == 0.0 and any("imputed alignments read from" in m for m in said)
    assert again["runs"][0]["passes"][0]["cer"] == first["runs"][0]["passes"][0]["cer"]
    # what is read back is what the imputation gives
    from fsmlearn.experiments.rcm_speech import _imputed
    got, _ = _imputed(task, 0, str(tmp_path / "m"), lambda m: None)
    _, want = impute_alignments(list(zip(task.train.x, task.train.y)), len(task.chars), len(task.phonemes), seed=0)
    assert len(got) == len(want)
    assert all((g is None and w is None) or (g is not None and w is not None and np.array_equal(g, w))
               for g, w in zip(got, want))
    # another seed is another imputation
    said.clear()
    _imputed(task, 1, str(tmp_path / "m"), said.append)
    assert not any("read from" in m for m in said)


def test_words_resume_runs_only_the_missing_runs(tmp_path):
    path = tmp_path / "w.json"
    base = dict(n=1, passes=1, hash_bits=12, report=str(path), model_dir=str(tmp_path / "m"), length_every=5)
    first = run_words(WordsConfig(runs=parse_word_runs("beam:2"), **base), task=word_task())
    said = []
    rep = run_words(WordsConfig(runs=parse_word_runs("beam:2,rcms:2"), resume=True, **base), task=word_task(),
                    progress=said.append)
    assert [r["name"] for r in rep["runs"]] == ["beam 2", "RCMS 2"]
    assert rep["runs"][0]["passes"] == first["runs"][0]["passes"]       # kept, not rerun
    assert any("1 of 2 runs already finished" in m for m in said)
    assert any("imputed alignments read from" in m for m in said)
    assert json.loads(path.read_text())["complete"] and (tmp_path / "w.png").exists()


def test_progress_inside_a_pass_names_the_run_and_pass():
    from fsmlearn.experiments.rcm_speech import _within
    out = []
    f = _within(out.append, "RCMS order 1", 2, 5)
    f("pass 1/1: 250/746 utterances, 3.00/s, ETA 165 s")
    f("pass 1/1 (rcms, B=20): log-likelihood -3.1000 per utterance with signal (746/746), context length 1.2, 9 s")
    assert out == ["RCMS order 1: pass 2/5: 250/746 utterances, 3.00/s, ETA 165 s"]


def test_bad_options_are_named():
    with pytest.raises(ArgumentError, match="bad run"):
        parse_word_runs("viterbi:3")
    with pytest.raises(ArgumentError, match="strategies"):
        run_speech(SpeechConfig(strategies=("nope",)), task=speech_task())
    with pytest.raises(ArgumentError, match="--passes"):
        run_words(WordsConfig(passes=0), task=word_task())
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", "rcms", "words", "--runs", "beam:0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "bad run 'beam:0'" in r.stderr.strip().splitlines()[-1]

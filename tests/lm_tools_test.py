"""KenLM's command-line tools (built by ``make install``) and their wrappers."""

from __future__ import annotations

import math
import os
import random
import sys

import kenlm
import pytest

from fsmlearn.errors import FsmError, ToolNotFoundError
from fsmlearn.lm.tools import (TOOLS, ToolFailedError, ToolUsageError, find_tool,
                               run_build_binary, run_lmplz)

WORDS = ("the a cat dog bird sat ran flew on under over mat log tree and quickly slowly "
         "big small red").split()


def make_sentences(n=300, seed=0):
    """``n`` short deterministic sentences of 3 to 8 words."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]


SENTENCES = make_sentences()
PROBES = ["the cat sat on the mat", "a dog ran under the tree", "quickly red bird flew",
          "zebra unseen words here", "the the the"]


@pytest.fixture(scope="module")
def arpa(tmp_path_factory):
    """A 3-gram ARPA file estimated by lmplz from a file of SENTENCES."""
    d = tmp_path_factory.mktemp("lm")
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = run_lmplz(corpus, 3, d / "lm.arpa", memory="64M", extra_args=("-T", str(d) + "/"))
    assert out == d / "lm.arpa"
    return out


@pytest.mark.parametrize("name", TOOLS)
def test_tools_are_found_and_run(name):
    path = find_tool(name)
    assert os.path.isfile(path) and os.access(path, os.X_OK)
    assert os.path.basename(path) == name


def test_tools_are_looked_for_next_to_the_interpreter_first(monkeypatch, tmp_path):
    for d in ("venv", "path"):
        (tmp_path / d).mkdir()
        exe = tmp_path / d / "lmplz"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    assert find_tool("lmplz") == str(tmp_path / "venv" / "lmplz")
    (tmp_path / "venv" / "lmplz").unlink()
    assert find_tool("lmplz") == str(tmp_path / "path" / "lmplz")


def test_missing_tool_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in TOOLS:
        with pytest.raises(ToolNotFoundError, match="make install") as info:
            find_tool(name)
        assert isinstance(info.value, FsmError) and isinstance(info.value, OSError)
    with pytest.raises(ToolNotFoundError, match="make install"):
        run_lmplz(["a b c"], 2, tmp_path / "x.arpa")
    assert not list(tmp_path.iterdir())


def test_unknown_tool_name():
    with pytest.raises(ToolNotFoundError, match="unknown KenLM tool"):
        find_tool("fstcompile")


def test_lmplz_builds_a_trigram_that_kenlm_loads(arpa):
    text = arpa.read_text(encoding="utf-8")
    assert text.lstrip().startswith("\\data\\")
    assert "ngram 3=" in text and "\\3-grams:" in text and text.rstrip().endswith("\\end\\")
    model = kenlm.Model(str(arpa))
    assert model.order == 3
    for s in PROBES:
        score = model.score(s, bos=True, eos=True)
        assert math.isfinite(score) and score < 0
    # A corpus sentence is likelier than as many unseen words.
    s = SENTENCES[0]
    assert model.score(s) > model.score(" ".join(["zebra"] * len(s.split())))
    # No temporary files are left beside the model.
    assert sorted(p.name for p in arpa.parent.iterdir()) == ["corpus.txt", "lm.arpa"]
    assert (arpa.stat().st_mode & 0o777) == 0o644


def test_lmplz_from_an_iterable_matches_the_file(arpa, tmp_path):
    out = run_lmplz(iter(SENTENCES), 3, tmp_path / "it.arpa", memory=64 << 20,
                    extra_args=("-T", str(tmp_path) + "/"))
    assert out.read_text(encoding="utf-8") == arpa.read_text(encoding="utf-8")


def test_build_binary_gives_the_same_scores(arpa, tmp_path):
    binary = run_build_binary(arpa, tmp_path / "lm.bin")
    assert binary.read_bytes()[:4] != b"\\dat"  # not a copy of the ARPA text
    m_arpa = kenlm.Model(str(arpa))
    m_bin = kenlm.Model(str(binary))
    assert m_bin.order == 3
    for s in PROBES + SENTENCES[:50]:
        assert m_bin.score(s) == pytest.approx(m_arpa.score(s), abs=1e-5)
        full_a = [p for p, _, _ in m_arpa.full_scores(s)]
        full_b = [p for p, _, _ in m_bin.full_scores(s)]
        assert full_b == pytest.approx(full_a, abs=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.bin"]


def test_lmplz_prune(arpa, tmp_path):
    pruned = run_lmplz(SENTENCES, 3, tmp_path / "p.arpa", prune=(0, 0, 1), memory="64M",
                       extra_args=("-T", str(tmp_path) + "/"))

    def trigrams(path):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("ngram 3="):
                return int(line.split("=")[1])
        raise AssertionError(f"no trigram count in {path}")

    assert 0 < trigrams(pruned) < trigrams(arpa)
    kenlm.Model(str(pruned))


def test_lmplz_failure_carries_stderr_and_leaves_nothing(tmp_path):
    out = tmp_path / "bad.arpa"
    out.write_text("old contents\n")
    with pytest.raises(ToolFailedError, match="lmplz exited with status") as info:
        run_lmplz(SENTENCES, 3, out, extra_args=("--no_such_option",))
    err = info.value
    assert isinstance(err, FsmError)
    assert "no_such_option" in err.stderr_tail and "no_such_option" in str(err)
    assert err.returncode != 0 and err.tool == "lmplz"
    assert out.read_text() == "old contents\n"  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.arpa"]


def test_order_above_the_compiled_maximum_fails_clearly_in_build_binary(tmp_path):
    # lmplz has no order limit; the model code is built with KENLM_MAX_ORDER=6.
    arpa7 = run_lmplz(SENTENCES[:50], 7, tmp_path / "o7.arpa", memory="64M",
                      extra_args=("-T", str(tmp_path) + "/"))
    assert "ngram 7=" in arpa7.read_text(encoding="utf-8")
    with pytest.raises(ToolFailedError, match="order 7 but KenLM was compiled to support up to 6"):
        run_build_binary(arpa7, tmp_path / "o7.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o7.arpa"]


def test_build_binary_failure(tmp_path):
    bad = tmp_path / "bad.arpa"
    bad.write_text("this is not an ARPA file\n")
    with pytest.raises(ToolFailedError, match="build_binary") as info:
        run_build_binary(bad, tmp_path / "bad.bin")
    assert info.value.stderr_tail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.arpa"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(order=0), "order"),
    (dict(order=2.0), "order"),
    (dict(order=True), "order"),
    (dict(order=3, prune=(0, 2, 1)), "prune"),
    (dict(order=3, prune=(-1,)), "prune"),
    (dict(order=3, prune="0 0 1"), "prune"),
    (dict(order=3, memory=1.5), "memory"),
    (dict(order=3, extra_args="-T /tmp"), "extra_args"),
])
def test_lmplz_rejects_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(ToolUsageError, match=match) as info:
        run_lmplz(SENTENCES, arpa_out=tmp_path / "x.arpa", **kwargs)
    assert isinstance(info.value, ValueError)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("sentences, match", [
    (["a b", 3], "sentence 1 is not a str"),
    (["a b", "c\nd"], "sentence 1 spans several lines"),
])
def test_lmplz_rejects_bad_sentences(tmp_path, sentences, match):
    with pytest.raises(ToolUsageError, match=match):
        run_lmplz(sentences, 2, tmp_path / "x.arpa", memory="64M")
    assert not list(tmp_path.iterdir())


def test_missing_inputs(tmp_path):
    with pytest.raises(ToolUsageError, match="text file not found"):
        run_lmplz(tmp_path / "missing.txt", 2, tmp_path / "x.arpa")
    with pytest.raises(ToolUsageError, match="ARPA file not found"):
        run_build_binary(tmp_path / "missing.arpa", tmp_path / "x.bin")
    with pytest.raises(ToolUsageError, match="output directory does not exist"):
        run_lmplz(["a b"], 2, tmp_path / "no" / "x.arpa")

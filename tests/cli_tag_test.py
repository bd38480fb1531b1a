"""``fsmlearn tag``: train, tag, eval and em round trips through the command line."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from fsmlearn.cli.main import main


def subprocess_fsmlearn(*args, stdin=None):
    """The real command, in a new process."""
    return subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=600)


def fsmlearn(*args, stdin=None):
    """The command's main() in this process (numba's compiled kernels are reused between calls)."""
    out, err = io.StringIO(), io.StringIO()
    old_in = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main([str(a) for a in args])
            except SystemExit as e:          # argparse errors
                rc = e.code
    finally:
        sys.stdin = old_in
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_tag")
    r = subprocess_fsmlearn("tag", "train", "--data", "wsj-train", "-o", d / "bigram.hmm")
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr
    return d / "bigram.hmm"


def test_train_tag_eval_round_trip(model):
    text = "The stock market fell sharply on Friday .\n\nMr. Smith bought 300 shares of Frobnicorp yesterday .\n"
    r = subprocess_fsmlearn("tag", "tag", model, stdin=text)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")[:-1]
    assert len(lines) == 3
    assert lines[0].split() == ["DT", "NN", "NN", "VBD", "RB", "IN", "NNP", "."]
    assert lines[1] == ""
    tags = lines[2].split()
    assert len(tags) == 9 and tags[0] == "NNP" and tags[3] == "CD" and tags[-1] == "."
    r = fsmlearn("tag", "eval", model, "--data", "wsj-small")
    assert r.returncode == 0, r.stderr
    # measured: total 95.33% known 96.12% unknown 83.50%
    assert "total 95.33%" in r.stdout and "known 96.12%" in r.stdout and "unknown 83.50%" in r.stdout
    assert "tokens/s" in r.stderr


def test_em_writes_model_report_and_plot(tmp_path):
    rep = tmp_path / "rep" / "em.json"
    r = fsmlearn("tag", "em", "--data", "wsj-train", "--iterations", "2", "-o", tmp_path / "em.hmm",
                 "--report", rep, "--corpus", tmp_path / "corpus")
    assert r.returncode == 0, r.stderr
    assert "tokens/s" in r.stderr and "ETA" not in r.stdout
    data = json.loads(rep.read_text())
    its = data["iterations"]
    assert [x["iteration"] for x in its] == [0, 1, 2] and data["complete"]
    for x in its:
        assert set(x) >= {"iteration", "loglik", "heldout_loglik", "accuracy", "seconds"}
    assert its[0]["loglik"] < its[1]["loglik"] < its[2]["loglik"]
    assert its[2]["accuracy"] == pytest.approx(0.8255, abs=0.005)   # measured 82.55%
    png = rep.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the saved corpus is reused (memory-mapped) by a second run
    r = fsmlearn("tag", "em", "--corpus", tmp_path / "corpus", "--iterations", "0", "-o", tmp_path / "em0.hmm",
                 "--eval-data", "")
    assert r.returncode == 0, r.stderr
    assert "memory-mapped" in r.stderr
    # the EM model tags with the 17 tags and evaluates against mapped gold tags
    r = fsmlearn("tag", "tag", tmp_path / "em.hmm", stdin="The cat sat on the mat .\n")
    assert r.returncode == 0 and r.stdout.split()[0] == "DET" and r.stdout.split()[-1] == "ENDPUNC"
    r = fsmlearn("tag", "eval", tmp_path / "em.hmm")
    assert r.returncode == 0 and "total 82.55%" in r.stdout


def test_em_on_text_files(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat .\nthe dog ran .\n\na cat ran on the mat .\n" * 20)
    r = fsmlearn("tag", "em", "--text", text, "--iterations", "2", "-o", tmp_path / "t.hmm", "--eval-data", "",
                 "--report", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["tokens"] == 18 * 20                    # empty lines are dropped
    assert data["sentences"] == 60 and data["iterations"][2]["accuracy"] is None
    r = fsmlearn("tag", "tag", tmp_path / "t.hmm", stdin="the cat ran .\n")
    assert r.returncode == 0 and len(r.stdout.split()) == 4


def test_errors(tmp_path):
    bad = tmp_path / "bad.hmm"
    bad.write_text("nonsense")
    r = subprocess_fsmlearn("tag", "tag", bad, stdin="a b\n")
    assert r.returncode == 2 and "fsmlearn: error:" in r.stderr and str(bad) in r.stderr
    r = fsmlearn("tag", "eval", tmp_path / "missing.hmm")
    assert r.returncode == 2 and "no such file" in r.stderr
    r = fsmlearn("tag", "train", "--data", "mixed-text", "-o", tmp_path / "x.hmm")
    assert r.returncode == 2 and "not tagged" in r.stderr
    r = fsmlearn("tag", "em", "--iterations", "1", "-o", tmp_path / "x.hmm")
    assert r.returncode == 2 and "--data" in r.stderr

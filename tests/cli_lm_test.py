"""``fsmlearn lm``: the interfaces other tools rely on."""

from __future__ import annotations

import subprocess
import sys

import kenlm
import pytest

from lm_model_test import conll_sentences
from fsmlearn.lm.tools import find_tool, run_lmplz


def fsmlearn(*args, stdin=None):
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", *map(str, args)], input=stdin,
                       capture_output=True, text=True, timeout=600)
    return r


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    s = conll_sentences()
    (d / "train.txt").write_text("\n".join(s[:4000]) + "\n")
    (d / "held.txt").write_text("\n".join(s[4000:4300]) + "\n")
    run_lmplz(s[:4000], 4, d / "ken.arpa", discount_fallback=True)
    return d


def test_compile_and_score_match_kenlm(files):
    d = files
    r = fsmlearn("lm", "compile", d / "ken.arpa", "-o", d / "ken.fsm")
    assert r.returncode == 0, r.stderr
    held = (d / "held.txt").read_text().splitlines() + ["unseen words here", ""]
    r = fsmlearn("lm", "score", d / "ken.fsm", stdin="\n".join(held) + "\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(held)
    k = kenlm.Model(str(d / "ken.arpa"))
    vocab = set(k_ for k_ in open(d / "ken.arpa").read().split() if k_)
    for s, line in zip(held, lines):
        lp, oov = line.split("\t")
        assert float(lp) == pytest.approx(k.score(s, bos=True, eos=True), abs=1e-4)
        assert int(oov) == sum(1 for w in s.split() if w not in k)
    del vocab


def _query_fields(out: str):
    """KenLM query's output as tokens: (word, id, n-gram length, log10 prob) per word,
    ("Total", value, OOVs) per line, and the summary lines as (name, value)."""
    rows = []
    for line in out.splitlines():
        if ":\t" in line:
            name, value = line.split(":\t")
            rows.append((name, float(value)))
            continue
        for part in line.split("\t"):
            if part.startswith("Total: "):
                _, total, _, oov = part.split(" ")
                rows.append(("Total", float(total), int(oov)))
            else:
                word, rest = part.rsplit("=", 1)
                i, n, p = rest.split(" ")
                rows.append((word, int(i), int(n), float(p)))
    return rows


def test_query_prints_what_kenlm_query_prints(files):
    d = files
    r = fsmlearn("lm", "compile", "-q", d / "ken.arpa", "-o", d / "query.fsm")
    assert r.returncode == 0, r.stderr
    held = (d / "held.txt").read_text().splitlines()[:150] + ["unseen words here", "", "<unk> the", " a\tb  "]
    text = "\n".join(held) + "\n"
    for opts in ([], ["-n"], ["-v", "sentence"], ["-v", "summary"], ["--threads", "2"]):
        ours = fsmlearn("lm", "query", *opts, d / "query.fsm", stdin=text)
        assert ours.returncode == 0, ours.stderr
        ken = subprocess.run([find_tool("query"), *[o for o in opts if o not in ("--threads", "2")], str(d / "ken.arpa")],
                             input=text, capture_output=True, text=True)
        a, b = _query_fields(ours.stdout), _query_fields(ken.stdout)
        assert len(a) == len(b) > 0, opts
        for x, y in zip(a, b):
            assert x[0] == y[0], (opts, x, y)
            if x[0] == "Total":
                assert x[1] == pytest.approx(y[1], abs=1e-4) and x[2] == y[2]
            elif len(x) == 2:
                assert x[1] == pytest.approx(y[1], rel=1e-6), (opts, x, y)
            else:
                assert x[1:3] == y[1:3] and x[3] == pytest.approx(y[3], abs=2e-6), (opts, x, y)
        # the same to the byte: KenLM's float32 arithmetic is reproduced
        assert ours.stdout == ken.stdout, opts


def test_count_estimate_ppl_and_sample(files):
    d = files
    r = fsmlearn("lm", "count", d / "train.txt", "-o", d / "counts", "--order", "3", "--cutoffs", "1")
    assert r.returncode == 0, r.stderr
    assert (d / "counts" / "3gms" / "3gm-0000.gz").exists()
    assert "counted" in r.stderr        # progress on stderr
    r = fsmlearn("lm", "estimate", "--counts", d / "counts", "--order", "3", "-o", d / "ours.arpa.gz")
    assert r.returncode == 0, r.stderr
    r = fsmlearn("lm", "check", d / "ours.arpa.gz")
    assert r.returncode == 0 and "valid ARPA, order 3" in r.stdout
    r = fsmlearn("lm", "ppl", d / "ours.arpa.gz", d / "held.txt", "-q")
    assert r.returncode == 0 and "Perplexity including OOVs:" in r.stdout
    ppl = float(r.stdout.split("Perplexity including OOVs:\t")[1].split()[0])
    assert 50 < ppl < 2000
    a = fsmlearn("lm", "sample", d / "ours.arpa.gz", "--sentences", "50", "--seed", "7", "-q")
    b = fsmlearn("lm", "sample", d / "ours.arpa.gz", "--sentences", "50", "--seed", "7", "-q")
    c = fsmlearn("lm", "sample", d / "ours.arpa.gz", "--sentences", "50", "--seed", "8", "-q")
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout != c.stdout
    assert len(a.stdout.splitlines()) == 50
    t = fsmlearn("lm", "sample", d / "ours.arpa.gz", "--tokens", "1000", "--seed", "7", "-o", d / "s.txt")
    assert t.returncode == 0, t.stderr
    n = len((d / "s.txt").read_text().split())
    assert 1000 <= n < 1200


def test_errors_are_reported_without_traceback(files):
    r = fsmlearn("lm", "compile", files / "missing.arpa", "-o", files / "x")
    assert r.returncode == 2 and "missing.arpa" in r.stderr and "Traceback" not in r.stderr
    assert not (files / "x").exists()


def test_every_user_error_is_one_line_and_exit_2(files):
    cases = [
        (("lm", "count", "--dataset", "bogus", "-o", files / "c"), "bogus"),
        (("lm", "count", "-o", files / "c"), "give text files or --dataset"),
        (("lm", "count", files / "train.txt", "--cutoffs", "0", "-o", files / "c"), "cutoffs must be >= 1"),
        (("lm", "estimate", files / "train.txt", "--cutoffs", "x", "-o", files / "c"), "cutoffs must be >= 1"),
        (("lm", "estimate", files / "train.txt", "--kn-discounts", "0.5 a", "-o", files / "c"), "--kn-discounts"),
        (("lm", "ppl", files / "absent.fsm", files / "held.txt"), "absent.fsm"),
        (("lm", "query", files / "absent.fsm"), "absent.fsm: no such file"),
        (("lm", "query", files / "train.txt"), "not a fsmlearn compiled language model"),
        (("lm", "query", "--threads", "-1", files / "train.txt"), "--threads must be >= 0"),
    ]
    bad = files / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\t<s>\nnot-a-number\t</s>\n\n\\end\\\n")
    cases.append((("lm", "compile", bad, "-o", files / "bad.fsm"), f"{bad}:6:"))
    for args, needle in cases:
        r = fsmlearn(*args)
        lines = [x for x in r.stderr.strip().splitlines() if not x.startswith("[")]     # not progress
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert len(lines) == 1 and lines[0].startswith("fsmlearn: error:") and needle in lines[0], (args, r.stderr)
    assert not (files / "c").exists() and not (files / "bad.fsm").exists()

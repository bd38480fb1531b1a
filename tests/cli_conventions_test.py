"""The command line's conventions (issue 27): KenLM's where a command mirrors KenLM (``lm query``'s
vocabulary ids, ``lm ppl``'s perplexities with and without OOVs), ``--threads`` on every scoring
command, ``--version``, every option's help showing its default, usage errors in one line."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys

import kenlm
import pytest

import fsmlearn
from cli_inputs_test import _leaves, run
from fsmlearn.cli.main import HelpFormatter, build_parser
from fsmlearn.lm.tools import find_tool, run_lmplz

TRAIN = ["the cat sat on the mat", "the dog sat on the log", "a cat ran", "a dog ran to the cat",
         "the cat saw a dog", "a dog saw the mat"]
HELD = ["the cat sat", "a zebra sat on the mat", "", "the dog ran to a unicorn", "zebra unicorn"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    (d / "train.txt").write_text("\n".join(TRAIN) + "\n")
    (d / "held.txt").write_text("\n".join(HELD) + "\n")
    # fsmlearn's own ARPA lists <s>, </s>, <unk> first; lmplz's <unk>, <s>, </s>
    assert run(["lm", "estimate", "-q", "--order", "3", d / "train.txt", "-o", d / "own.arpa"]).returncode == 0
    run_lmplz(TRAIN, 3, d / "ken.arpa", discount_fallback=True)
    for name in ("own", "ken"):
        assert run(["lm", "compile", "-q", d / f"{name}.arpa", "-o", d / f"{name}.fsm"]).returncode == 0
    return d


def _kenlm_query(arpa, text: bytes, *opts) -> bytes:
    return subprocess.run([find_tool("query"), *opts, str(arpa)], input=text, capture_output=True).stdout


@pytest.mark.parametrize("name", ["own", "ken"])
def test_query_prints_kenlms_vocabulary_ids(models, name):
    text = ("\n".join(HELD) + "\n<unk> the\n").encode()
    r = run(["lm", "query", models / f"{name}.fsm"], text)
    assert r.returncode == 0, r.stderr
    assert r.stdout == _kenlm_query(models / f"{name}.arpa", text)          # to the byte, ids included
    out = r.stdout.decode()
    assert "</s>=2 " in out and "zebra=0 " in out and "<unk>=0 " in out
    # the ids as KenLM numbers them: <unk> 0, then the 1-grams in file order from 1
    words = [line.split("\t")[1] for line in (models / f"{name}.arpa").read_text().split("\\1-grams:\n")[1]
             .split("\n\n")[0].splitlines()]
    want = {w: i for i, w in enumerate(["<unk>"] + [w for w in words if w != "<unk>"])}
    assert want["<s>"] == 1 and want["</s>"] == 2
    for part in out.replace("\n", "\t").split("\t"):
        if "=" in part and not part.startswith(("Total", "Perplexity")):
            word, rest = part.rsplit("=", 1)
            assert int(rest.split()[0]) == want.get(word, 0), part
    # OOVs as kenlm's Python module flags them
    k = kenlm.Model(str(models / f"{name}.arpa"))
    lines = [x for x in out.splitlines() if "Total:" in x]
    for s, line in zip(HELD, lines):
        ids = [int(p.rsplit("=", 1)[1].split()[0]) for p in line.split("\t") if "=" in p]
        assert [i == 0 for i in ids] == [oov for _, _, oov in k.full_scores(s)]


@pytest.mark.parametrize("name", ["own", "ken"])
def test_ppl_prints_the_perplexities_with_and_without_oovs_as_kenlm(models, name):
    held = models / "held.txt"
    r = run(["lm", "ppl", "-q", models / f"{name}.fsm", held, held, "--threads", "2"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    # KenLM query's summary lines, to the byte (the two files are read as one text)
    assert "\n".join(lines[:4]) + "\n" == _kenlm_query(models / f"{name}.arpa", held.read_bytes() * 2,
                                                        "-v", "summary").decode()
    got = dict(x.split(":\t") for x in lines)
    # the definitions, against kenlm's Python module
    k = kenlm.Model(str(models / f"{name}.arpa"))
    scores = [(p, oov) for s in HELD * 2 for p, _, oov in k.full_scores(s)]
    total = sum(p for p, _ in scores)
    n, n_oov = len(scores), sum(oov for _, oov in scores)
    assert n_oov > 0 and int(got["OOVs"]) == n_oov and int(got["Tokens"]) == n
    assert int(got["Sentences"]) == 2 * len(HELD)
    assert float(got["Log10 probability"]) == pytest.approx(total, abs=1e-4)
    assert float(got["Perplexity including OOVs"]) == pytest.approx(10 ** (-total / n), rel=1e-6)
    assert float(got["Perplexity excluding OOVs"]) == pytest.approx(
        10 ** (-sum(p for p, oov in scores if not oov) / (n - n_oov)), rel=1e-6)


def test_perplexity_function_reports_both(models):
    from fsmlearn.lm.score import load_lm, perplexity
    r = perplexity(load_lm(models / "ken.fsm"), HELD, batch=2)
    k = kenlm.Model(str(models / "ken.arpa"))
    scores = [(p, oov) for s in HELD for p, _, oov in k.full_scores(s)]
    inside = [p for p, oov in scores if not oov]
    assert r["oovs"] == len(scores) - len(inside) and r["tokens"] == len(scores)
    assert r["perplexity_excluding_oovs"] == pytest.approx(10 ** (-sum(inside) / len(inside)), rel=1e-6)


def test_every_scoring_command_takes_threads(models, tmp_path):
    text = ("\n".join(HELD * 50) + "\n").encode()
    one = run(["lm", "score", models / "ken.fsm", "--threads", "1"], text)
    two = run(["lm", "score", models / "ken.fsm", "--threads", "2"], text)
    assert one.returncode == two.returncode == 0 and one.stdout == two.stdout and len(one.stdout.splitlines()) == 250
    for argv in (["lm", "score", models / "ken.fsm"], ["lm", "query", models / "ken.fsm"],
                 ["lm", "ppl", models / "ken.fsm", models / "held.txt"], ["trf", "score", models / "x.npz"]):
        r = run(argv + ["--threads", "-1"])
        assert r.returncode == 2 and r.stderr == "fsmlearn: error: --threads must be >= 0, got -1\n", (argv, r.stderr)
    leaves = dict(_leaves(build_parser()))
    for name in ("lm score", "lm query", "lm ppl", "trf score"):
        assert "--threads" in leaves[name]._option_string_actions, name


def test_version():
    r = run(["--version"])
    assert r.returncode == 0 and r.stdout.decode() == f"fsmlearn {fsmlearn.__version__}\n"
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == f"fsmlearn {fsmlearn.__version__}\n", r.stderr


def test_every_option_has_help_showing_its_default_and_choices():
    flags = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
             argparse._CountAction, argparse._HelpAction, argparse._VersionAction)
    missing = set()
    n = 0
    for name, p in _leaves(build_parser()):
        text = p.format_help()
        fmt = HelpFormatter(p.prog)
        for a in p._actions:
            if not a.option_strings or isinstance(a, flags):
                continue
            n += 1
            if not a.help:
                missing.add((name, a.option_strings[-1]))
            shown = fmt._expand_help(a) if fmt._get_help_string(a) else ""
            if a.default is not None:
                assert "default" in shown and str(a.default) in shown or "(default" in shown, (name, a.dest, shown)
            if a.choices is not None:           # argparse shows them as {a,b,...}
                assert "{" + ",".join(map(str, a.choices)) + "}" in text, (name, a.dest)
    assert n > 100 and not missing, missing            # every option has a help text
    r = run(["lm", "estimate", "--help"])
    assert r.returncode == 0 and "highest n-gram order" in r.stdout.decode() and "(default: 5 from text" in r.stdout.decode()
    r = run(["tag", "giga200", "--help"])
    assert r.returncode == 0 and "n-gram EM iterations (default: 10)" in r.stdout.decode()


def test_usage_errors_are_one_line_and_exit_2():
    for argv, needle in ((["lm", "estimate", "--order", "x", "-o", "y"],
                          "lm estimate: argument --order: expected an integer >= 1, got 'x'"),
                         (["lm", "count", "--dataset", "nope", "-o", "y"], "invalid choice: 'nope'"),
                         (["trf", "score", "m.npz", "--base", "2"], "trf score: argument --base: invalid choice"),
                         (["lm", "sample", "m.fsm"], "one of the arguments --tokens --sentences is required")):
        r = run(argv)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
        assert r.stderr.startswith("fsmlearn: error: ") and needle in r.stderr, r.stderr


def test_kenlm_ids_of_a_model_with_unk_in_the_middle(models):
    import numpy as np
    from fsmlearn.lm.query import kenlm_ids
    from fsmlearn.lm.score import load_lm
    m = load_lm(models / "own.fsm")
    unk = m.word_id("<unk>")
    assert unk == 2 and m.word_id("<s>") == 0 and m.word_id("</s>") == 1
    assert kenlm_ids(m, np.array([0, 1, 2, 3, 4])).tolist() == [1, 2, 0, 3, 4]
    assert math.isfinite(float(kenlm_ids(m, np.array([m.word_id("cat")]))[0]))


@pytest.mark.parametrize("name", ["own", "ken"])
def test_score_counts_oovs_as_kenlm_does_a_literal_unk_included(models, name):
    text = ("\n".join(HELD) + "\n<unk> the\nthe <unk> zebra <unk>\n").encode()
    r = run(["lm", "score", models / f"{name}.fsm"], text)
    assert r.returncode == 0, r.stderr
    ours = [int(line.split("\t")[1]) for line in r.stdout.decode().splitlines()]
    ken = [int(line.rsplit("OOV: ", 1)[1]) for line in
           _kenlm_query(models / f"{name}.arpa", text, "-v", "sentence").decode().splitlines()
           if line.startswith("Total:")]
    assert ours == ken and ours[-2:] == [1, 3]


def test_the_parsers_dataset_names_are_the_datasets():
    from fsmlearn.cli.common import DATASET_NAMES
    from fsmlearn.data.datasets import DATASETS
    assert DATASET_NAMES == DATASETS


@pytest.mark.parametrize("argv,needle", [
    (["lm", "count", "x.txt", "--order", "0", "-o", "out"], "--order: expected an integer >= 1, got 0"),
    (["lm", "estimate", "x.txt", "--order", "-2", "-o", "x.arpa"], "--order: expected an integer >= 1, got -2"),
    (["lm", "web1t", "dir", "--order", "0"], "--order: expected an integer >= 1, got 0"),
    (["lm", "sample", "m.fsm", "--sentences", "-3"], "--sentences: expected an integer >= 1, got -3"),
    (["lm", "sample", "m.fsm", "--tokens", "0"], "--tokens: expected an integer >= 1, got 0"),
    (["lm", "estimate", "x.txt", "--order", "two", "-o", "x.arpa"], "expected an integer >= 1, got 'two'"),
])
def test_orders_and_sample_sizes_below_one_are_usage_errors(argv, needle, capsys):
    from fsmlearn.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and needle in err[0], err


def test_estimate_from_counts_refuses_an_order_above_theirs(tmp_path, capsys):
    from fsmlearn.cli.main import main
    (tmp_path / "t.txt").write_text("\n".join(TRAIN) + "\n")
    assert main(["lm", "count", "-q", str(tmp_path / "t.txt"), "--order", "2", "-o", str(tmp_path / "c")]) == 0
    assert main(["lm", "estimate", "-q", "--counts", str(tmp_path / "c"), "--order", "3",
                 "-o", str(tmp_path / "x.arpa")]) == 2
    assert "the counts go up to 2-grams; --order 3" in capsys.readouterr().err
    assert not (tmp_path / "x.arpa").exists()
    assert main(["lm", "estimate", "-q", "--counts", str(tmp_path / "c"), "-o", str(tmp_path / "x.arpa")]) == 0
    assert "ngram 2=" in (tmp_path / "x.arpa").read_text() and "ngram 3=" not in (tmp_path / "x.arpa").read_text()


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    from fsmlearn.cli import lm as cli_lm
    from fsmlearn.cli.main import main

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli_lm, "_check", interrupted)
    assert main(["lm", "check", "x.arpa"]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["fsmlearn: interrupted"]


def test_counts_never_replace_what_is_not_a_count_directory(tmp_path, capsys, monkeypatch):
    from fsmlearn.cli.main import main
    text = tmp_path / "t.txt"
    text.write_text("\n".join(TRAIN) + "\n")
    other = tmp_path / "notes.txt"
    other.write_text("keep me\n")
    box = tmp_path / "box"
    (box / "sub").mkdir(parents=True)
    (box / "important.txt").write_text("keep me too\n")
    for out in (text, other, box):
        assert main(["lm", "count", "-q", str(text), "--order", "2", "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"fsmlearn: error: {out}: exists and is not"), err
    assert text.read_text().startswith("the cat") and other.read_text() == "keep me\n"
    assert (box / "important.txt").read_text() == "keep me too\n" and (box / "sub").is_dir()
    monkeypatch.chdir(box / "sub")                       # the output holds the working directory
    assert main(["lm", "count", "-q", str(text), "--order", "2", "-o", str(box)]) == 2
    assert "holds the current directory" in capsys.readouterr().err
    assert main(["lm", "count", "-q", str(text), "--order", "2", "-o", "."]) == 2
    assert "is or holds the current directory" in capsys.readouterr().err
    # an earlier count directory is replaced; lm web1t refuses the same things
    counts = tmp_path / "c"
    assert main(["lm", "count", "-q", str(text), "--order", "2", "-o", str(counts)]) == 0
    assert main(["lm", "count", "-q", str(text), "--order", "3", "-o", str(counts)]) == 0
    assert (counts / "3gms").is_dir()
    capsys.readouterr()
    assert main(["lm", "web1t", str(counts), "-o", str(other)]) == 2
    assert other.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box", "c", "notes.txt", "t.txt"]   # nothing left over


@pytest.mark.parametrize("given,needle", [
    ("0.5 1 15", "order 1: Kneser-Ney discount D3+ = 15 is out of range (0 <= D3 <= 3)"),
    ("0.5 1 1.5 9 9 9", "order 2: Kneser-Ney discount D1 = 9 is out of range (0 <= D1 <= 1)"),
    ("-0.1 1 1.5", "D1 = -0.1 is out of range"),
    ("0.5 1 1.5 " * 4, "Kneser-Ney discounts given for 4 orders; the model has 3"),
])
def test_given_kneser_ney_discounts_are_checked_before_counting(tmp_path, capsys, given, needle):
    from fsmlearn.cli.main import main
    assert main(["lm", "estimate", "-q", str(tmp_path / "missing.txt"), "--order", "3", "--kn-discounts", given,
                 "-o", str(tmp_path / "x.arpa")]) == 2          # refused before the (missing) text is read
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "x.arpa").exists()

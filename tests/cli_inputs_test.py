"""Every subcommand of ``fsmlearn`` over inputs that are not what it reads (issue 27): a missing
file, a directory, bytes that are not UTF-8, binary data (the bytes of /bin/ls), an empty file.

Each must end in one line ``fsmlearn: error: FILE...`` naming the file and exit 2 without a
traceback or a half-written output; the scoring commands take undecodable words as KenLM
does (out of the vocabulary).  The commands run in this process (``main``), a few in real
processes to show that nothing reaches the terminal but the one line."""

from __future__ import annotations

import argparse
import io
import math
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from fsmlearn.cli.main import build_parser, main
from fsmlearn.lm.tools import find_tool, run_lmplz

TRAIN = ["the cat sat on the mat", "the dog sat on the log", "a cat ran", "a dog ran to the cat"]
KINDS = ("missing", "directory", "non-utf8", "binary", "empty")
FILE_KINDS = ("non-utf8", "binary", "empty")        # regular files
LS = open("/bin/ls", "rb").read()[:20_000]


def run(argv, stdin: bytes = b"the cat\n"):
    """main(argv) in this process with stdin given: (exit code, stdout bytes, stderr text)."""
    inp = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.StringIO()
    old = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = inp, out, err
    try:
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:               # argparse
            rc = e.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    out.flush()
    return SimpleNamespace(returncode=rc, stdout=out.buffer.getvalue(), stderr=err.getvalue())


def subprocess_run(*argv, stdin: bytes = b""):
    return subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", *map(str, argv)], input=stdin,
                          capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    bad = {"missing": d / "bad" / "nonexistent.txt", "directory": d / "bad" / "a-directory",
           "non-utf8": d / "bad" / "latin1.txt", "binary": d / "bad" / "ls.bin", "empty": d / "bad" / "empty.txt"}
    bad["directory"].mkdir(parents=True)
    bad["non-utf8"].write_bytes("the caf\u00e9 sat\n".encode("latin-1"))
    bad["binary"].write_bytes(LS)
    bad["empty"].write_bytes(b"")
    (d / "train.txt").write_text("\n".join(TRAIN) + "\n")
    run_lmplz(TRAIN, 3, d / "m.arpa", discount_fallback=True)
    assert run(["lm", "compile", "-q", d / "m.arpa", "-o", d / "m.fsm"]).returncode == 0
    (d / "tagged.txt").write_text("the/DT cat/NN sat/VBD\na/DT dog/NN ran/VBD\n")
    r = run(["tag", "train", "-q", "--data", d / "tagged.txt", "-o", d / "t.hmm"])
    assert r.returncode == 0, r.stderr
    from fsmlearn.trf.augsa import AugSAConfig, train_augsa
    from fsmlearn.trf.features import as_corpus, build_features, make_templates
    from fsmlearn.trf.io import save_trf
    rng = np.random.default_rng(0)
    vocab = ["the", "cat", "sat", "on", "<unk>"]
    train = as_corpus([rng.integers(0, 5, rng.integers(1, 5)) for _ in range(100)])
    fs = build_features(train, 5, make_templates("w+c", 2), classes=np.array([0, 1, 0, 1, 1]))
    model, _ = train_augsa(fs, train, AugSAConfig(samples=10, chains=1, iterations=10, t_c=10, t0=5, max_length=4,
                                                  long=True))
    save_trf(model, d / "m.npz", vocab)
    (d / "pairs.txt").write_text("a b\tx\nb a\ty x\n")
    from fsmlearn.rcm.io import save_align_rcm
    from fsmlearn.rcm.transduce import fit_transducer
    rcm, ins, outs = fit_transducer([(["a", "b"], ["x"]), (["b", "a"], ["y", "x"])], passes=1, hash_bits=8)
    save_align_rcm(rcm, d / "rcm.json", outs.symbols, ins.symbols)
    (d / "nb.txt").write_text("1\tthe cat\t-1\n1\tcat the\t-2\n")
    from fsmlearn.mrf import MRFModel, save_mrf, save_tagger
    from fsmlearn.mrf.tagger import fit_tagger
    tagger, _, _ = fit_tagger([[("the", "DT"), ("cat", "NN")], [("a", "DT"), ("dog", "NN")]], max_iter=2)
    save_tagger(tagger, d / "mt.npz")
    save_mrf(MRFModel.init(4, 1, rank=2, symbols=["<S>", "the", "cat", "<unk>"]), d / "mlm.npz")
    return SimpleNamespace(dir=d, bad=bad)


# (command, its arguments with {} for the input under test, the kinds tried); {d} is the folder
# of the good files, {o} an output path (in the test's own folder, which must stay empty).  Options that read an existing
# file only when it is there (--resume's report or model, --corpus's saved corpus) start a new
# run when it is missing, so "missing" is not tried for them.
FILE_CASES = [
    ("lm count", "{} -o {o}", KINDS),
    ("lm estimate", "{} --order 2 -o {o}", KINDS),
    ("lm compile", "{} -o {o}", KINDS),
    ("lm check", "{}", KINDS),
    ("lm score", "{}", KINDS),
    ("lm query", "{}", KINDS),
    ("lm ppl", "{} {d}/train.txt", KINDS),
    ("lm ppl", "{d}/m.fsm {}", KINDS),                 # scores a file that is not UTF-8 (see below)
    ("lm sample", "{} --sentences 2 -o {o}", KINDS),
    ("trf score", "{} {d}/train.txt", KINDS),
    ("trf score", "{d}/m.npz {}", KINDS),              # idem
    ("trf lm", "--resume --model {} --report {o}", ("directory",) + FILE_KINDS),
    ("trf train", "{} -o {o}", KINDS),
    ("trf rescore", "{} {d}/nb.txt", KINDS),
    ("trf rescore", "{d}/m.npz {}", KINDS),
    ("mrf lm", "{} -o {o}", KINDS),
    ("mrf train-tagger", "{} -o {o}", KINDS),
    ("mrf tag", "{}", KINDS),
    ("mrf eval", "{} {d}/tagged.txt", KINDS),
    ("mrf eval", "{d}/mt.npz {}", KINDS),
    ("mrf neighbours", "{} the", KINDS),
    ("mrf neighbours", "{d}/mlm.npz {}", KINDS),          # a word not in the model (here: the path)
    ("rcms train", "{} -o {o}", KINDS),
    ("rcms decode", "{}", KINDS),
    ("rcms eval", "{} {d}/pairs.txt", KINDS),
    ("rcms eval", "{d}/rcm.json {}", KINDS),
    ("rcms speech", "--resume --report {} --models {o}", ("directory",) + FILE_KINDS),
    ("rcms words", "--resume --report {} --models {o}", ("directory",) + FILE_KINDS),
    ("tag train", "--data {} -o {o}", KINDS),
    ("tag eval", "{}", KINDS),
    ("tag eval", "{d}/t.hmm --data {}", KINDS),
    ("tag tag", "{}", KINDS),
    ("tag em", "--text {} --iterations 1 --eval-data '' -o {o}", KINDS),
    ("tag em", "--corpus {} --iterations 1 --eval-data '' -o {o}", FILE_KINDS),
]
# folders: the missing path, regular files instead of a folder, an empty folder
DIR_CASES = [
    ("lm web1t", "{} -o {o}"),
    ("lm estimate", "--counts {} -o {o}"),
    ("tag giga200", "--ngrams {} --cache {o} --report {o}/r.json --model {o}/m"),
    ("mrf lm", "--data-dir {} --report {o}/r.json --model {o}/m.npz"),
    ("mrf tag-wsj", "--data-dir {} --report {o}/r.json --model {o}/m.npz"),
]
# subcommands that read no file of the user's (data comes from the shared corpora by name)
NO_INPUT = {"demo", "trf morph", "mrf synthetic", "rcms decipher"}
# scoring commands: a file that is not UTF-8 is scored, its undecodable word out of the vocabulary
SCORED = {("lm ppl", "{d}/m.fsm {}"), ("trf score", "{d}/m.npz {}")}


def _argv(command, args, path, env, out):
    import shlex
    return command.split() + [a.replace("{}", str(path)).replace("{d}", str(env.dir)).replace("{o}", str(out / "x"))
                              for a in shlex.split(args)]


def _assert_one_line(r, path, out):
    err = r.stderr
    assert r.returncode == 2, (r.returncode, err)
    assert "Traceback" not in err
    lines = [x for x in err.strip().splitlines() if not x.startswith("[")]      # not progress lines
    assert len(lines) == 1, err
    assert lines[0].startswith("fsmlearn: error: ") or lines[0].startswith(str(path)), err     # lm check: FILE:LINE
    assert str(path) in lines[0], err
    assert err.strip().splitlines()[-1] == lines[0]
    assert not any(out.iterdir()), sorted(out.iterdir())                         # nothing written


@pytest.mark.parametrize("command,args,kind", [(c, a, k) for c, a, kinds in FILE_CASES for k in kinds],
                         ids=lambda x: x.replace(" ", "-") if isinstance(x, str) else None)
def test_a_bad_input_file_is_one_line_naming_it_and_exit_2(env, tmp_path, command, args, kind):
    path = env.bad[kind]
    r = run(_argv(command, args, path, env, tmp_path))
    if kind == "non-utf8" and (command, args) in SCORED:
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        text = r.stdout.decode() + r.stderr
        assert "OOVs:\t1\n" in text if command == "lm ppl" else "1 <unk>" in text, text
        return
    _assert_one_line(r, path, tmp_path)


@pytest.mark.parametrize("command,args,kind", [(c, a, k) for c, a in DIR_CASES
                                               for k in ("missing",) + FILE_KINDS + ("empty-dir",)])
def test_a_bad_input_folder_is_one_line_naming_it_and_exit_2(env, tmp_path, command, args, kind):
    path = env.bad["directory"] if kind == "empty-dir" else env.bad[kind]
    _assert_one_line(run(_argv(command, args, path, env, tmp_path)), path, tmp_path)


def _leaves(parser, prefix=()):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, p in a.choices.items():
                yield from _leaves(p, prefix + (name,))
            return
    yield " ".join(prefix), parser


def test_every_subcommand_and_every_positional_input_is_tried():
    """A subcommand added later fails here until its inputs are in the cases above."""
    tried = {}
    for c, a, _ in FILE_CASES:
        tried.setdefault(c, []).append(a)
    for c, a in DIR_CASES:
        tried.setdefault(c, []).append(a)
    leaves = dict(_leaves(build_parser()))
    assert set(leaves) == set(tried) | NO_INPUT, set(leaves) ^ (set(tried) | NO_INPUT)
    for name, p in leaves.items():
        positionals = [a for a in p._actions if not a.option_strings]
        if name in NO_INPUT:
            assert not positionals, name
            continue
        # each positional argument is the bad input in some case of the command
        for i, a in enumerate(positionals):
            assert any(args.split()[i:i + 1] == ["{}"] for args in tried[name]), (name, a.dest)


# -------------------------------------------------------------------- stdin: KenLM's behaviour
def _kenlm_totals(arpa, data: bytes) -> list[float]:
    r = subprocess.run([find_tool("query"), "-v", "sentence", str(arpa)], input=data, capture_output=True)
    return [float(x.split()[1]) for x in r.stdout.decode("utf-8", "replace").splitlines() if x.startswith("Total:")]


@pytest.mark.parametrize("data", [b"the caf\xe9 sat\n\nthe cat sat", b"", LS + b"\n"], ids=["latin1", "empty", "binary"])
def test_scoring_stdin_takes_any_bytes_as_kenlm_does(env, data):
    r = run(["lm", "score", env.dir / "m.fsm", "--threads", "1"], data)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    rows = [x.split(b"\t") for x in r.stdout.splitlines()]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    assert len(rows) == len(lines)
    if data.endswith(b"\n"):            # (KenLM does not score a last line without a newline)
        assert np.allclose([float(a) for a, _ in rows], _kenlm_totals(env.dir / "m.arpa", data), atol=2e-5)
    if data.startswith(b"the caf"):
        assert [int(b) for _, b in rows] == [1, 0, 0]                # café is one unknown word
    q = run(["lm", "query", env.dir / "m.fsm"], data if data.endswith(b"\n") or not data else data + b"\n")
    ken = subprocess.run([find_tool("query"), str(env.dir / "m.arpa")],
                         input=data if data.endswith(b"\n") or not data else data + b"\n", capture_output=True)
    assert q.returncode == 0 and q.stdout == ken.stdout                   # KenLM's output to the byte


def test_real_processes_print_one_line_and_no_traceback(env, tmp_path):
    missing = env.bad["missing"]
    for argv in (["lm", "ppl", env.dir / "m.fsm", missing], ["lm", "estimate", missing, "-o", tmp_path / "x.arpa"],
                 ["trf", "score", env.dir / "m.npz", missing]):
        r = subprocess_run(*argv)
        err = r.stderr.decode()
        assert r.returncode == 2 and "Traceback" not in err, err
        assert err.splitlines() == [f"fsmlearn: error: {missing}: no such file"], err
    r = subprocess_run("lm", "score", env.dir / "m.fsm", stdin="the caf\u00e9 is open\n".encode("latin-1"))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    lp, oov = r.stdout.decode().split("\t")
    assert int(oov) == 3 and math.isclose(float(lp), _kenlm_totals(env.dir / "m.arpa", b"the caf\xe9 is open\n")[0],
                                          abs_tol=2e-5)
    assert not (tmp_path / "x.arpa").exists()


# -------------------------------------------------------------------- Web1T counts without prefixes
def _web1t(d, three_grams: str):
    (d / "1gms").mkdir(parents=True)
    (d / "1gms" / "vocab").write_text("the\t5\n<S>\t2\n</S>\t2\ncat\t3\n")
    (d / "2gms").mkdir()
    (d / "2gms" / "2gm-0000").write_text("<S> the\t2\nthe </S>\t2\n")
    (d / "3gms").mkdir()
    (d / "3gms" / "3gm-0000").write_text(three_grams)
    return d


def test_web1t_counts_with_an_n_gram_whose_prefix_is_missing_are_refused_at_its_line(tmp_path):
    d = _web1t(tmp_path / "w", "<S> the cat\t2\nthe cat </S>\t2\n")      # 'the cat' is no 2-gram
    out = tmp_path / "m.arpa"
    r = subprocess_run("lm", "estimate", "--counts", d, "-o", out)
    err = r.stderr.decode()
    assert r.returncode == 2 and "Traceback" not in err, err
    assert err.splitlines()[-1] == (f"fsmlearn: error: {d / '3gms' / '3gm-0000'}:2: 3-gram without its prefix "
                                    f"'the cat' among the 2-grams (2gms/2gm-0000; a prefix's count is at least the "
                                    f"n-gram's): 'the cat </S>'"), err
    assert not out.exists()
    r = run(["lm", "web1t", d])
    assert r.returncode == 2 and f"{d / '3gms' / '3gm-0000'}:2: 3-gram without its prefix" in r.stderr


def test_the_index_error_is_an_fsm_error_and_estimate_names_the_words():
    from fsmlearn.errors import FsmError
    from fsmlearn.lm.counts import NGramCounts
    from fsmlearn.lm.estimate import estimate
    from fsmlearn.lm.index import NGramIndex, NGramIndexError
    assert issubclass(NGramIndexError, FsmError) and issubclass(NGramIndexError, ValueError)
    with pytest.raises(NGramIndexError, match=r"2-gram number 0 \(word ids 3 1\) has no prefix"):
        NGramIndex([np.array([[0], [1]], np.int32), np.array([[3, 1]], np.int32)], 4)
    vocab = ["<s>", "</s>", "the", "cat"]
    c = NGramCounts(vocab, [np.arange(4, dtype=np.int32)[:, None], np.array([[0, 2], [2, 3]], np.int32),
                            np.array([[2, 3, 1], [3, 3, 1]], np.int32)],
                    [np.array([2, 2, 3, 2]), np.array([2, 2]), np.array([1, 1])], [1, 1, 1])
    with pytest.raises(FsmError, match=r"the counts' 3-gram 'cat cat </s>' has no prefix among the 2-grams"):
        estimate(c)


def test_count_cutoffs_that_fall_with_the_order_are_refused_and_an_empty_order_reads_back(env, tmp_path):
    r = run(["lm", "count", env.dir / "train.txt", "--order", "3", "--cutoffs", "1 5 2", "-o", tmp_path / "c"])
    assert r.returncode == 2 and "the 3-gram cutoff 2 is below the 2-gram cutoff 5" in r.stderr
    assert not (tmp_path / "c").exists()
    r = run(["lm", "count", "-q", env.dir / "train.txt", "--order", "3", "--cutoffs", "1 1 9", "-o", tmp_path / "c"])
    assert r.returncode == 0, r.stderr
    r = run(["lm", "web1t", tmp_path / "c"])               # the empty 3-gram order's index lists its empty file
    assert r.returncode == 0 and "3-grams 0" in r.stdout.decode(), r.stderr

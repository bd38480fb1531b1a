"""``fsmlearn tag``: train, tag, eval and em round trips through the command line, on the named
datasets and on a user's own tagged files (word/TAG and CoNLL-U), with their errors."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path
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
    sys.stdin = (io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8") if isinstance(stdin, bytes)
                 else io.StringIO(stdin or ""))
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


# ---------------------------------------------------------------- a user's own tagged files

# (word, Penn tag, UPOS); every sentence a line of word/TAG or a CoNLL-U block
OWN = [
    [("The", "DT", "DET"), ("dog", "NN", "NOUN"), ("barks", "VBZ", "VERB"), (".", ".", "PUNCT")],
    [("A", "DT", "DET"), ("cat", "NN", "NOUN"), ("sleeps", "VBZ", "VERB"), (".", ".", "PUNCT")],
    [("The", "DT", "DET"), ("cat", "NN", "NOUN"), ("saw", "VBD", "VERB"), ("the", "DT", "DET"),
     ("dog", "NN", "NOUN"), (".", ".", "PUNCT")],
    [("Dogs", "NNS", "NOUN"), ("bark", "VBP", "VERB"), ("loudly", "RB", "ADV"), (".", ".", "PUNCT")],
    [("I", "PRP", "PRON"), ("ca", "MD", "AUX"), ("n't", "RB", "PART"), ("sleep", "VB", "VERB"),
     (".", ".", "PUNCT")],
    [("She", "PRP", "PRON"), ("walks", "VBZ", "VERB"), ("to", "TO", "ADP"), ("the", "DT", "DET"),
     ("park", "NN", "NOUN"), (".", ".", "PUNCT")],
]


def word_tag_text(sents=OWN):
    return "".join(" ".join(f"{w}/{t}" for w, t, _ in s) + "\n" for s in sents * 3)


def conllu_text(sents=OWN):
    out = []
    for i, s in enumerate(sents * 3, 1):
        out.append(f"# sent_id = {i}\n# text = {' '.join(w for w, _, _ in s)}\n")
        out += [f"{k}\t{w}\t_\t{u}\t{t}\t_\t_\t_\t_\t_\n" for k, (w, t, u) in enumerate(s, 1)]
        out.append("\n")
    return "".join(out)


def plain(sents=OWN):
    return "".join(" ".join(w for w, _, _ in s) + "\n" for s in sents)


def total(stdout):
    return re.search(r"total (\S+)", stdout).group(1)


def test_train_eval_tag_on_an_own_word_tag_file(tmp_path):
    from fsmlearn.tag import HMM
    data = tmp_path / "own.txt"
    data.write_text(word_tag_text())
    model = tmp_path / "own.hmm"
    r = fsmlearn("tag", "train", "--data", data, "-o", model)
    assert r.returncode == 0, r.stderr
    assert "12 tags of its own" in r.stderr
    assert HMM.load(model).tags == tuple(sorted({t for s in OWN for _, t, _ in s}))
    r = fsmlearn("tag", "eval", model, "--data", data, "-q")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == (f"{data}: total 100.00% (87 tokens)  known 100.00% (87)  unknown n/a (0)  "
                        f"gold tags unknown to the model: 0 tokens\n")
    # each output format; the model's word/tag output evaluates to 100% against itself
    outs = {}
    for fmt in ("tags", "word/tag", "conllu"):
        r = fsmlearn("tag", "tag", model, "--format", fmt, stdin=plain() + "\n" + "The dog saw a park .\n")
        assert r.returncode == 0, r.stderr
        outs[fmt] = r.stdout
    assert outs["tags"].splitlines()[:2] == ["DT NN VBZ .", "DT NN VBZ ."]
    assert outs["tags"].splitlines()[6:] == ["", "DT NN VBD DT NN ."]
    assert outs["word/tag"].splitlines()[4] == "I/PRP ca/MD n't/RB sleep/VB ./."
    assert outs["word/tag"].splitlines()[6] == ""
    blocks = outs["conllu"].split("\n\n")
    assert blocks[0].splitlines() == ["# sent_id = 1", "# text = The dog barks .", "1\tThe\t_\t_\tDT\t_\t_\t_\t_\t_",
                                      "2\tdog\t_\t_\tNN\t_\t_\t_\t_\t_", "3\tbarks\t_\t_\tVBZ\t_\t_\t_\t_\t_",
                                      "4\t.\t_\t_\t.\t_\t_\t_\t_\t_"]
    assert blocks[6].startswith("# sent_id = 8\n")            # the empty line 7 gives no sentence
    (tmp_path / "out.txt").write_text(outs["word/tag"])
    (tmp_path / "out.conllu").write_text(outs["conllu"])
    for out, extra in (("out.txt", []), ("out.conllu", ["--conllu-tags", "xpos"])):
        r = fsmlearn("tag", "eval", model, "--data", tmp_path / out, *extra)
        assert r.returncode == 0 and total(r.stdout) == "100.00%", r.stdout + r.stderr
    # a new process loads the saved model and tags the same
    r = subprocess_fsmlearn("tag", "tag", model, "--format", "word/tag", stdin=plain() + "\n" + "The dog saw a park .\n")
    assert r.returncode == 0 and r.stdout == outs["word/tag"], r.stderr


def test_train_eval_tag_on_an_own_conllu_file(tmp_path):
    from fsmlearn.tag import HMM
    data = tmp_path / "own.conllu"
    data.write_text(conllu_text())
    upos, xpos = tmp_path / "upos.hmm", tmp_path / "xpos.hmm"
    assert fsmlearn("tag", "train", "--data", data, "-o", upos, "-q").returncode == 0
    assert fsmlearn("tag", "train", "--data", data, "--conllu-tags", "xpos", "-o", xpos, "-q").returncode == 0
    assert HMM.load(upos).tags == ("ADP", "ADV", "AUX", "DET", "NOUN", "PART", "PRON", "PUNCT", "VERB")
    assert "VBZ" in HMM.load(xpos).tags and len(HMM.load(xpos).tags) == 12
    # the same data as word/TAG (format by option) makes the same tagger as the XPOS column
    wt = tmp_path / "own.data"
    wt.write_text(word_tag_text())
    assert fsmlearn("tag", "train", "--data", wt, "--format", "word/tag", "-o", tmp_path / "wt.hmm",
                    "-q").returncode == 0
    assert (HMM.load(tmp_path / "wt.hmm").log_emit == HMM.load(xpos).log_emit).all()
    for model, extra, tag in ((upos, [], "NOUN"), (xpos, ["--conllu-tags", "xpos"], "NN")):
        r = fsmlearn("tag", "eval", model, "--data", data, *extra)
        assert r.returncode == 0 and total(r.stdout) == "100.00%" and "unknown to the model: 0 tokens" in r.stdout
        r = fsmlearn("tag", "tag", model, "--format", "conllu", stdin=plain())
        assert r.returncode == 0
        row = r.stdout.splitlines()[3].split("\t")      # 'dog': the tag in UPOS for a UD model, else XPOS
        assert row[1] == "dog" and row[3:5] == ([tag, "_"] if model == upos else ["_", tag])
        out = tmp_path / "out.conllu"
        out.write_text(r.stdout)
        r = fsmlearn("tag", "eval", model, "--data", out, *extra)
        assert r.returncode == 0 and total(r.stdout) == "100.00%"
    r = subprocess_fsmlearn("tag", "tag", upos, stdin=plain())
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "DET NOUN VERB PUNCT"


def test_tokenize(tmp_path):
    data = tmp_path / "own.txt"
    data.write_text(word_tag_text())
    model = tmp_path / "own.hmm"
    assert fsmlearn("tag", "train", "--data", data, "-o", model, "-q").returncode == 0
    r = fsmlearn("tag", "tag", model, "--tokenize", "--format", "word/tag", stdin="I can't sleep.\n")
    assert r.returncode == 0 and r.stdout == "I/PRP ca/MD n't/RB sleep/VB ./.\n"
    r = fsmlearn("tag", "tag", model, "--format", "word/tag", stdin="I can't sleep.\n")
    assert r.returncode == 0 and [t.rsplit("/", 1)[0] for t in r.stdout.split()] == ["I", "can't", "sleep."]
    r = fsmlearn("tag", "tag", "--help")
    assert "must be tokenised" in " ".join(r.stdout.split())


def test_tags_outside_the_tagset_asked_for(tmp_path):
    from fsmlearn.data.tagsets import TAG17_TAGS
    from fsmlearn.tag import HMM
    data = tmp_path / "hyph.txt"
    data.write_text(word_tag_text() + "A/DT well/RB -/HYPH known/VBN dog/NN ./.\n")
    model = tmp_path / "m.hmm"
    r = fsmlearn("tag", "train", "--data", data, "--tagset", "penn45", "-o", model)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines()[-1] == (f"fsmlearn: error: {data}:19: tag 'HYPH' of token '-/HYPH' is not one "
                                         f"of the tags of --tagset penn45")
    assert not model.exists()
    r = fsmlearn("tag", "train", "--data", data, "--tagset", "tag17", "-o", model, "-q")
    assert r.returncode == 0 and HMM.load(model).tags == TAG17_TAGS
    # a model without HYPH: the gold HYPH tokens are errors of the model, counted and reported
    penn = tmp_path / "penn.hmm"
    own = tmp_path / "own.txt"
    own.write_text(word_tag_text())
    assert fsmlearn("tag", "train", "--data", own, "-o", penn, "-q").returncode == 0
    r = fsmlearn("tag", "eval", penn, "--data", data, "-q")
    assert r.returncode == 0
    # 'known/VBN' (a tag the model has not either) and '-/HYPH' are wrong whatever the model says
    assert r.stdout.endswith("gold tags unknown to the model: 2 tokens (HYPH 1, VBN 1; counted as errors)\n")
    assert float(total(r.stdout)[:-1]) <= 100 * (93 - 2) / 93
    r = fsmlearn("tag", "eval", "--help")
    assert "counts as an error of the model" in " ".join(r.stdout.split())


BAD_INPUTS = {
    "missing": None,
    "directory": "dir",
    "non-UTF-8": b"The/DT caf\xe9/NN ./.\n",
    "binary": Path(sys.executable).read_bytes()[:4096],
    "empty": b"",
    "blank lines": b"\n\n",
    "not word/TAG": b"The dog barks .\n",
}


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_bad_tagged_files_are_one_line_and_exit_2(tmp_path, kind):
    model = tmp_path / "own.hmm"
    (tmp_path / "own.txt").write_text(word_tag_text())
    assert fsmlearn("tag", "train", "--data", tmp_path / "own.txt", "-o", model, "-q").returncode == 0
    bad = tmp_path / "bad.txt"
    content = BAD_INPUTS[kind]
    if content == "dir":
        bad.mkdir()
    elif content is not None:
        bad.write_bytes(content)
    before = sorted(tmp_path.iterdir())
    for args in (["train", "--data", bad, "-o", tmp_path / "new.hmm"], ["eval", model, "--data", bad]):
        r = fsmlearn("tag", *args)
        assert r.returncode == 2 and r.stdout == "", (kind, r.stdout)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"fsmlearn: error: {bad}"), (kind, r.stderr)
        assert len(lines[0]) < 400
        assert sorted(tmp_path.iterdir()) == before


def test_binary_or_non_utf8_stdin_is_refused(tmp_path):
    (tmp_path / "own.txt").write_text(word_tag_text())
    model = tmp_path / "own.hmm"
    assert fsmlearn("tag", "train", "--data", tmp_path / "own.txt", "-o", model, "-q").returncode == 0
    r = fsmlearn("tag", "tag", model, stdin=b"The dog .\nThe caf\xe9 .\n")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("fsmlearn: error: <stdin>:2: not UTF-8 text (decoded as UTF-8, strictly; invalid byte 0xe9 "
                        "at byte 8 of the line): b'The caf\\xe9 .'\n")
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", "tag", "tag", str(model)],
                       input=Path(sys.executable).read_bytes()[:65536], capture_output=True)
    assert r.returncode == 2 and r.stdout == b""
    err = r.stderr.decode().splitlines()
    assert len(err) == 1 and re.fullmatch(r"fsmlearn: error: <stdin>:\d+: NUL byte at byte \d+ of the line: binary "
                                          r"data, not text", err[0]), err


def test_dataset_names_and_file_options(tmp_path):
    r = fsmlearn("tag", "train", "--data", "wsj-trian", "-o", tmp_path / "x.hmm")
    assert r.returncode == 2 and r.stderr == ("fsmlearn: error: wsj-trian: neither a file nor a known dataset "
                                              "(the tagged datasets are wsj-small, wsj-train)\n")
    r = fsmlearn("tag", "eval", tmp_path / "x.hmm", "--data", "brown-lm")
    assert r.returncode == 2 and "no such file" in r.stderr           # the model is read first
    r = fsmlearn("tag", "train", "--data", "wsj-train", "--format", "conllu", "-o", tmp_path / "x.hmm")
    assert r.returncode == 2 and "--format and --conllu-tags are for tagged files" in r.stderr
    assert not (tmp_path / "x.hmm").exists()


def test_the_command_line_formats_are_the_data_layers():
    from fsmlearn.cli import tag
    from fsmlearn.data import OUTPUT_FORMATS, TAGGED_FORMATS
    assert tag.TAGGED_FORMATS == TAGGED_FORMATS and tag.OUTPUT_FORMATS == OUTPUT_FORMATS

"""The command line on bad input files (issue 16): one line naming the file and the line, exit 2,
and nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import bigram_count_dir

GOOD = ("\\data\\\nngram 1=4\nngram 2=2\n\n\\1-grams:\n-1\t<unk>\t0\n-99\t<s>\t-0.5\n-0.5\t</s>\n"
        "-0.5\tthe\t-0.3\n\n\\2-grams:\n-0.2\t<s> the\n-0.1\tthe </s>\n\n\\end\\\n")


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def errors(stderr: str, path) -> list[str]:
    """The error lines of stderr (progress lines come before them): 'fsmlearn: error: FILE:...'
    (``lm check`` prints 'FILE:LINE: reason' alone), checked to be its last."""
    lines = stderr.strip().splitlines()
    out = [x for x in lines if x.startswith("fsmlearn: error: ") or x.startswith(str(path))]
    assert out and lines[-1] == out[-1], stderr
    return out


@pytest.mark.parametrize("bad,line,needle", [
    (GOOD.replace("-0.5\tthe\t-0.3", "nan\tthe\t-0.3"), 9, "not finite"),
    (GOOD.replace("-0.1\tthe </s>", "-0.1\t<s> the"), 13, "listed twice"),
    (GOOD.replace("ngram 2=2", "ngram 2=123456789012"), 3, "more lines than the file's"),
])
@pytest.mark.parametrize("command", ["compile", "check"])
def test_a_bad_arpa_file_is_one_located_line_and_exit_2(tmp_path, bad, line, needle, command):
    src = tmp_path / "m.arpa"
    src.write_text(bad)
    args = ["lm", command, src] + (["-o", tmp_path / "m.fsm"] if command == "compile" else [])
    r = run(*args)
    assert r.returncode == 2, r.stderr
    lines = errors(r.stderr, src)
    assert len(lines) == 1 and f"{src}:{line}: " in lines[0] and needle in lines[0], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.arpa"]


def test_a_bad_count_directory_is_one_located_line_and_exit_2(tmp_path):
    d = bigram_count_dir(tmp_path / "counts", "the </S>\t2\n<S> the\t2\n")
    r = run("lm", "web1t", d)
    assert r.returncode == 2
    lines = errors(r.stderr, d)
    assert len(lines) == 1 and f"{d / '2gms' / '2gm-0000'}:2: out of order" in lines[0], r.stderr


def test_a_truncated_compiled_model_or_a_garbage_tagger_is_one_line_and_exit_2(tmp_path):
    src = tmp_path / "m.arpa"
    src.write_text(GOOD)
    out = tmp_path / "m.fsm"
    assert run("lm", "compile", src, "-o", out).returncode == 0
    out.write_bytes(out.read_bytes()[:300])
    for cmd in (["lm", "score", out], ["lm", "query", out]):
        r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", *map(str, cmd)], input="the\n",
                           capture_output=True, text=True)
        assert r.returncode == 2 and len(errors(r.stderr, out)) == 1 and str(out) in r.stderr, r.stderr
    bad = tmp_path / "t.hmm"
    bad.write_bytes(b"garbage")
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", "tag", "tag", str(bad)], input="the cat\n",
                       capture_output=True, text=True)
    assert r.returncode == 2 and errors(r.stderr, bad) == [f"fsmlearn: error: {bad}: corrupt or not a fsmlearn "
                                                           f"HMM file (BadZipFile: File is not a zip file)"]

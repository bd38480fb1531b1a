"""ARPA reader and writer: validation with file and line, compression, lossless round trips."""

from __future__ import annotations

import bz2
import gzip
import lzma
import subprocess
import sys

import numpy as np
import pytest

from fsmlearn.lm.arpa import check_arpa, read_arpa, write_arpa
from fsmlearn.errors import ArpaContextError, ArpaFormatError

GOOD = """some comment before the header

\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-1.0\t<unk>\t0
0\t<s>\t-0.30103
-0.6\t</s>
-0.7\tthe\t-0.2
-0.8 cat -0.25

\\2-grams:
-0.3\t<s> the
-0.5\tthe cat
-0.2\tcat </s>

\\end\\
"""


def write(tmp_path, text, name="m.arpa"):
    p = tmp_path / name
    opener = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}.get(name.rsplit(".", 1)[-1])
    if opener:
        with opener(p, "wb") as f:
            f.write(text.encode())
    else:
        p.write_text(text)
    return p


@pytest.mark.parametrize("name", ["m.arpa", "m.arpa.gz", "m.arpa.bz2", "m.arpa.xz"])
def test_reads_plain_and_compressed(tmp_path, name):
    lm = read_arpa(write(tmp_path, GOOD, name))
    assert lm.counts == [5, 3] and lm.vocab == ["<unk>", "<s>", "</s>", "the", "cat"]
    assert lm.logprob[0][4] == -0.8 and lm.backoff[0][4] == -0.25   # space-separated line
    assert not lm.has_backoff[0][2] and lm.has_backoff[0][1]
    assert lm.ngrams[1].tolist() == [[1, 3], [3, 4], [4, 2]]


@pytest.mark.parametrize("bad,line,needle", [
    (GOOD.replace("ngram 2=3", "ngram 2=4"), None, "declares 4 2-grams but the section has 3"),
    (GOOD.replace("ngram 1=5", "ngram 1=4"), 12, "more 1-grams than the header's count 4"),
    (GOOD.replace("-0.5\tthe cat", "-0.5\tthe cat dog"), 16, "wrong number of fields"),
    (GOOD.replace("-0.7\tthe", "-0.x7\tthe"), 11, "not a number"),
    (GOOD.replace("-0.5\tthe cat", "-0.5\tthe dog"), 16, "word not among the 1-grams"),
    (GOOD.replace("\\end\\\n", ""), None, "before \\end\\"),
    (GOOD.replace("\\2-grams:", "\\3-grams:"), 14, "expected the \\2-grams: section"),
    (GOOD.replace("-0.8 cat -0.25", "-0.8 the -0.25"), 12, "listed twice"),
    (GOOD.replace("ngram 2=3", "ngram 3=3"), 5, "expected the count of 2-grams"),
    ("nothing here\n", None, "no \\data\\ header"),
    (GOOD.replace("-0.2\tcat </s>", "-0.2\tcat </s>\t-0.1"), None, "highest order has a backoff"),
])
def test_errors_carry_file_line_and_text(tmp_path, bad, line, needle):
    p = write(tmp_path, bad)
    with pytest.raises(ArpaFormatError) as e:
        read_arpa(p)
    assert needle in str(e.value)
    assert e.value.path == str(p)
    if line is not None:
        assert e.value.line == line, str(e.value)
        assert str(e.value).startswith(f"{p}:{line}: ")


def test_truncated_compressed_file(tmp_path):
    p = write(tmp_path, GOOD, "m.arpa.gz")
    data = p.read_bytes()
    p.write_bytes(data[:len(data) // 2])
    with pytest.raises(ArpaFormatError, match="m.arpa.gz"):
        read_arpa(p)


def test_check_finds_missing_context(tmp_path):
    bad = GOOD.replace("ngram 2=3", "ngram 2=4").replace("-0.2\tcat </s>", "-0.2\tcat </s>\n-0.4\tcat the")
    bad = bad.replace("ngram 2=4\n", "ngram 2=4\nngram 3=1\n").replace(
        "\\end\\", "\\3-grams:\n-0.1\tthe the cat\n\n\\end\\")
    p = write(tmp_path, bad)
    for read in (read_arpa, check_arpa):
        with pytest.raises(ArpaContextError, match=r"3-gram 'the the cat' has no context") as e:
            read(p)
        assert e.value.line == 22


@pytest.mark.parametrize("name", ["out.arpa", "out.arpa.gz", "out.arpa.xz"])
def test_write_round_trip_is_lossless(tmp_path, name):
    lm = read_arpa(write(tmp_path, GOOD))
    rng = np.random.default_rng(0)
    lm.logprob[1] = -rng.random(3) * 3          # arbitrary floats survive exactly
    out = tmp_path / name
    write_arpa(lm, out)
    back = read_arpa(out)
    for k in range(2):
        assert np.array_equal(back.ngrams[k], lm.ngrams[k])
        assert np.array_equal(back.logprob[k], lm.logprob[k])
        assert np.array_equal(back.backoff[k], lm.backoff[k])
        assert np.array_equal(back.has_backoff[k], lm.has_backoff[k])
    assert back.vocab == lm.vocab
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.arpa", name])   # no temporaries


def test_kenlm_written_text_round_trips_byte_for_byte(tmp_path):
    # KenLM-style numbers (7 significant digits) are written back as they were read
    p = write(tmp_path, GOOD.replace("some comment before the header\n\n", ""))
    lm = read_arpa(p)
    out = tmp_path / "o.arpa"
    write_arpa(lm, out)
    norm = lambda t: [line.replace(" ", "\t") for line in t.splitlines() if line.strip()]
    orig = norm(p.read_text())
    # our writer puts the 0 backoffs KenLM omits only where the file had them
    assert norm(out.read_text()) == orig


def test_cli_check(tmp_path):
    good = write(tmp_path, GOOD)
    bad = write(tmp_path, GOOD.replace("-0.7\tthe", "-0.x7\tthe"), "bad.arpa")
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", "lm", "check", str(good)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", "lm", "check", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{bad}:11: not a number")


@pytest.mark.parametrize("bad,kind,line,needle", [
    (GOOD.replace("-0.7\tthe\t-0.2", "0.7\tthe\t-0.2"), "ArpaValueError", 11, "not finite and at most 0"),
    (GOOD.replace("-0.7\tthe\t-0.2", "nan\tthe\t-0.2"), "ArpaValueError", 11, "not finite"),
    (GOOD.replace("-0.7\tthe\t-0.2", "-inf\tthe\t-0.2"), "ArpaValueError", 11, "not finite"),
    (GOOD.replace("-0.7\tthe\t-0.2", "-0.7\tthe\tinf"), "ArpaValueError", 11, "backoff weight inf"),
    (GOOD.replace("-0.7\tthe\t-0.2", "-0.7\tthe\t1e999"), "ArpaValueError", 11, "not finite"),
    (GOOD.replace("-0.7\tthe\t-0.2", "-0.7\tthe\t-1_0"), "ArpaFormatError", 11, "wrong number of fields"),
    (GOOD.replace("-0.5\tthe cat", "-0.5\t<s> the"), "ArpaDuplicateError", 16, "'<s> the' is listed twice"),
    (GOOD.replace("-1.0\t<unk>\t0", "-1.0\tdog\t0"), "ArpaContextError", 7, "no <unk> among the 1-grams"),
    (GOOD.replace("ngram 2=3", "ngram 2=99999999999"), "ArpaCountError", 5, "more lines than the file's"),
    (GOOD.replace("ngram 2=3", "ngram 2=2"), "ArpaCountError", 17, "more 2-grams than the header's count 2"),
    (GOOD.replace("\\2-grams:", "\\3-grams:"), "ArpaSectionError", 14, "expected the \\2-grams: section"),
    ("", "ArpaSectionError", 1, "the file is empty"),
])
def test_each_kind_of_problem_has_its_own_error(tmp_path, bad, kind, line, needle):
    import fsmlearn.errors as errors
    p = write(tmp_path, bad)
    with pytest.raises(ArpaFormatError) as e:
        read_arpa(p)
    assert type(e.value) is getattr(errors, kind), repr(e.value)
    assert needle in str(e.value)
    assert e.value.line == line and str(e.value).startswith(f"{p}:{line}: "), str(e.value)


def test_a_count_no_file_could_hold_is_refused_before_allocating(tmp_path):
    """A compressed file's size says nothing about its lines: the arrays grow with the lines
    read, so a header promising 10**15 n-grams ends in a count error, not a MemoryError."""
    p = write(tmp_path, GOOD.replace("ngram 2=3", "ngram 2=1000000000000000"), "m.arpa.gz")
    with pytest.raises(ArpaFormatError, match="declares 1,000,000,000,000,000 2-grams but the section has 3"):
        read_arpa(p)


def test_sections_longer_than_the_first_allocation_grow(tmp_path):
    """More n-grams than the first allocation (65,536) and words than the first hash."""
    n = 70_000
    words = [f"w{i}" for i in range(n)]
    lines = ["\\data\\", f"ngram 1={n + 3}", f"ngram 2={n}", "", "\\1-grams:",
             "-1\t<unk>\t0", "-99\t<s>\t0", "-1\t</s>"]
    lines += [f"-5.5\t{w}\t-0.5" for w in words]
    lines += ["", "\\2-grams:"] + [f"-0.25\t<s> {w}" for w in words] + ["", "\\end\\", ""]
    lm = read_arpa(write(tmp_path, "\n".join(lines)))
    assert lm.counts == [n + 3, n] and lm.vocab[3 + n - 1] == words[-1]
    assert (lm.logprob[1] == -0.25).all() and (lm.ngrams[1][:, 1] == np.arange(3, n + 3)).all()


def test_a_word_that_is_not_utf8_is_named(tmp_path):
    p = tmp_path / "m.arpa"
    p.write_bytes(GOOD.replace("-0.8 cat", "-0.8 c\xffat").encode("latin-1"))
    with pytest.raises(ArpaFormatError, match=r"word is not UTF-8 \(byte 0xff\)") as e:
        read_arpa(p)
    assert e.value.line == 12


@pytest.mark.parametrize("name", ["out.arpa", "out.arpa.gz"])
def test_a_failed_write_leaves_nothing_behind(tmp_path, name):
    """An error half-way (here from the progress callback after the 1-grams) leaves neither the
    file nor a temporary file; an existing file is kept as it was."""
    lm = read_arpa(write(tmp_path / "..", GOOD, "src.arpa"))

    def fail(msg):
        raise KeyboardInterrupt(msg)
    out = tmp_path / name
    with pytest.raises(KeyboardInterrupt):
        write_arpa(lm, out, progress=fail)
    assert list(tmp_path.iterdir()) == []
    out.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        write_arpa(lm, out, progress=fail)
    assert [p.name for p in tmp_path.iterdir()] == [name] and out.read_bytes() == b"old"


def test_binary_data_before_the_header_is_said_to_be_binary(tmp_path):
    from fsmlearn.errors import ArpaSectionError
    from fsmlearn.lm.arpa import read_arpa
    p = tmp_path / "model.bin"
    p.write_bytes(b"mmap lm http://kheafield.com/code format version 5\n\0\0\0\x01\x02binary\n")
    with pytest.raises(ArpaSectionError) as e:
        read_arpa(p)
    assert str(e.value) == f"{p}:2: binary data (a NUL byte) before the \\data\\ header: not an ARPA text file"

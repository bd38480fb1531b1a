"""data.text: user text files, compressed by extension, line by line."""

import bz2
import gzip
import io
import lzma
import sys

import pytest

from fsmlearn.data import iter_lines, open_text


@pytest.mark.parametrize("suffix, opener", [("", open), (".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_open_text_by_extension(tmp_path, suffix, opener):
    p = tmp_path / f"t.txt{suffix}"
    with open_text(p, "wb") as f:
        f.write("a b\nc\n".encode())
    with opener(p, "rb") as f:
        assert f.read() == b"a b\nc\n"
    assert list(iter_lines([p])) == ["a b\n", "c\n"]


def test_iter_lines_over_files_and_stdin(tmp_path, monkeypatch):
    (tmp_path / "one.txt").write_bytes("The Cat\n\xff\n".encode("latin-1"))
    monkeypatch.setattr(sys, "stdin", io.StringIO("From STDIN\n"))
    got = list(iter_lines([tmp_path / "one.txt", "-"], lower=True))
    assert got == ["the cat\n", "\ufffd\n", "from stdin\n"]

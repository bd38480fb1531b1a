"""Text named on the command line (files or stdin), read with errors that name the file.

Every problem with an input becomes a :class:`~fsmlearn.errors.FsmError` that
names the file, and the line where there is one, instead of an ``OSError`` or
``UnicodeDecodeError``: a missing file
(:class:`~fsmlearn.errors.CorpusNotFoundError`), a directory, a file that
cannot be read or decompressed, an empty file, binary data (a NUL byte, as
grep and git tell binary from text) and, where the caller asks for text,
bytes that are not UTF-8 (:class:`~fsmlearn.errors.CorpusFormatError`).
Readers that score text (``lm ppl``, ``trf score``) take the bytes as they are,
as KenLM does: a word that is not UTF-8 is just a word the model does not
know.  ``-`` is stdin, named ``<stdin>`` in messages; files are opened by
:func:`fsmlearn.data.text.open_text` (``.gz``/``.bz2``/``.xz`` by extension).

Public names: STDIN, open_input, byte_lines, read_lines, read_blocks.
"""

from __future__ import annotations

import lzma
import os
import sys
import zlib
from collections.abc import Iterable, Iterator

from .text import open_text
from ..errors import CorpusFormatError, CorpusNotFoundError

__all__ = ["STDIN", "open_input", "byte_lines", "read_lines", "read_blocks"]

#: the name under which stdin (given as ``-``) appears in messages
STDIN = "<stdin>"

# what a broken compressed stream raises while it is read
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


def _name(path) -> str:
    return STDIN if str(path) == "-" else str(path)


def open_input(path):
    """A binary file object reading ``path`` (``-``: stdin, left open when the object is closed).

    Raises:
        CorpusNotFoundError: no such file.
        CorpusFormatError: a directory, or a file that cannot be opened (the reason).
    """
    p = str(path)
    if p == "-":
        return _Unclosed(sys.stdin.buffer)
    if os.path.isdir(p):
        raise CorpusFormatError("is a directory, not a file", p)
    try:
        return open_text(p, "rb")
    except FileNotFoundError:
        raise CorpusNotFoundError(f"{p}: no such file", p) from None
    except _READ_ERRORS as e:
        raise CorpusFormatError(f"cannot open: {_reason(e)}", p) from None


class _Unclosed:
    """A binary stream whose ``close`` leaves it open (stdin)."""

    def __init__(self, f):
        self.f = f

    def read(self, n=-1):
        return self.f.read(n)

    def __iter__(self):
        return iter(self.f)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _checked_read(f, n: int, name: str) -> bytes:
    try:
        return f.read(n)
    except _READ_ERRORS as e:
        raise CorpusFormatError(f"cannot read or decompress: {_reason(e)}", name) from None


def _binary(name: str, line: bytes, lineno: int) -> CorpusFormatError:
    col = line.find(b"\0") + 1
    return CorpusFormatError(f"binary data, not text (a NUL byte at column {col})", name, lineno)


def byte_lines(path, *, utf8: bool = True, binary: bool = False, empty: bool = False,
               block: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line without its ``\\n``) of a file or stdin (``-``).

    Args:
        path: the file, or ``-`` for stdin.
        utf8: refuse a line that is not UTF-8.
        binary: accept NUL bytes (else the first one is refused as binary data).
        empty: accept an input without a byte (else it is refused).
        block: bytes read at a time.

    Raises:
        CorpusNotFoundError, CorpusFormatError: as :func:`open_input`; and an
            empty input, a NUL byte, bytes that are not UTF-8 (``utf8``), or a
            broken compressed stream, naming the file and line.
    """
    name = _name(path)
    with open_input(path) as f:
        lineno = 0
        rest = b""
        seen = False
        while True:
            chunk = _checked_read(f, block, name)
            if not chunk:
                break
            seen = True
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                lineno += 1
                _check_line(line, lineno, name, utf8, binary)
                yield lineno, line
        if rest:
            lineno += 1
            _check_line(rest, lineno, name, utf8, binary)
            yield lineno, rest
    if not seen and not empty:
        raise CorpusFormatError("the input is empty" if name == STDIN else "the file is empty", name)


def _check_line(line: bytes, lineno: int, name: str, utf8: bool, binary: bool) -> None:
    if not binary and b"\0" in line:
        raise _binary(name, line, lineno)
    if utf8:
        _decode(line, lineno, name)


def _decode(line: bytes, lineno: int, name: str) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusFormatError(f"bytes that are not UTF-8 at column {e.start + 1}: "
                                f"{line[e.start:e.start + 8]!r}", name, lineno) from None


def read_lines(paths: Iterable, lower: bool = False) -> Iterator[str]:
    """The lines of text files in turn (``-``: stdin), as str without the newline, checked
    as :func:`byte_lines` checks them (UTF-8, no NUL byte, no empty file).

    Args:
        paths: file names.
        lower: lower-case every line.
    """
    for p in paths:
        name = _name(p)
        for n, line in byte_lines(p, utf8=False):
            s = _decode(line, n, name)
            yield s.lower() if lower else s


def read_blocks(paths: Iterable, block: int = 1 << 24, binary: bool = False) -> Iterator[bytes]:
    """Blocks of whole lines (each ending in ``\\n``) of files or stdin, for scoring: the bytes
    are not decoded (a word that is not UTF-8 stays a word), but a named file must not be
    empty nor binary (a NUL byte) unless ``binary``; stdin may be either.

    Args:
        paths: file names (``-``: stdin).
        block: bytes read at a time (a block holds whole lines, so it may be longer).
        binary: accept NUL bytes and empty files.

    Raises:
        as :func:`byte_lines`.
    """
    for p in paths:
        name = _name(p)
        lax = binary or name == STDIN
        with open_input(p) as f:
            rest = b""
            lineno = 0
            seen = False
            while True:
                chunk = _checked_read(f, block, name)
                data = rest + chunk
                if chunk:
                    cut = data.rfind(b"\n") + 1
                    data, rest = data[:cut], data[cut:]
                    seen = True
                elif data:
                    data, rest = data + b"\n", b""
                if data:
                    if not lax and b"\0" in data:
                        at = data.find(b"\0")
                        start = data.rfind(b"\n", 0, at) + 1
                        end = data.find(b"\n", at)
                        raise _binary(name, data[start:end], lineno + data.count(b"\n", 0, at) + 1)
                    lineno += data.count(b"\n")
                    yield data
                if not chunk:
                    break
        if not seen and not lax:
            raise CorpusFormatError("the file is empty", name)

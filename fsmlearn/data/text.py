"""Text files given by the user: opened by extension, read one line at a time.

Public names: open_text, iter_lines, iter_strict_lines.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import sys

from ..errors import CorpusFormatError

__all__ = ["open_text", "iter_lines", "iter_strict_lines"]


def open_text(path, mode: str = "rb"):
    """Open a plain, .gz, .bz2 or .xz file, chosen by the name's extension.

    Args:
        path: the file (str or Path).
        mode: a binary mode (``"rb"``, ``"wb"``, ...); gzip writes at level 3.

    Returns:
        A binary file object.
    """
    p = str(path)
    writing = any(c in mode for c in "wax")
    if p.endswith(".gz"):
        # level 9 (gzip's default) triples the time of writing a large model
        return gzip.open(p, mode, compresslevel=3) if writing else gzip.open(p, mode)
    if p.endswith(".bz2"):
        return bz2.open(p, mode)
    if p.endswith(".xz") or p.endswith(".lzma"):
        return lzma.open(p, mode)
    return open(p, mode)


def iter_lines(paths, lower: bool = False):
    """The lines of text files in turn (one sentence per line, tokens separated by
    spaces), each with its newline.

    Args:
        paths: file names (.gz/.bz2/.xz are decompressed; ``-`` is stdin).
        lower: lower-case every line.

    Yields:
        str lines; bytes that are not UTF-8 become U+FFFD.
    """
    for p in paths:
        if p == "-":
            for line in sys.stdin:
                yield line.lower() if lower else line
            continue
        with open_text(p, "rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace")
                yield line.lower() if lower else line


def iter_strict_lines(f, where: str = "<stdin>"):
    """The lines of a file or stream, refused at the first sign of binary data.

    Args:
        f: a binary stream (e.g. ``sys.stdin.buffer``), or a text one (its lines are
            then only checked for control characters).
        where: the name for error messages.

    Yields:
        (line number from 1, str line without its end) pairs.

    Raises:
        CorpusFormatError: a line with a NUL byte (binary data), not UTF-8, or with
            a control character other than whitespace; the message reads
            ``<where>:<line>: ...`` and quotes at most 80 characters of the line.
    """
    from .locate import strict_lines
    from .readers import _no_control
    for lineno, raw in enumerate(f, 1):
        if isinstance(raw, bytes):
            nul = raw.find(b"\0")
            if nul >= 0:
                raise CorpusFormatError(f"NUL byte at byte {nul + 1} of the line: binary data, not text",
                                        where, lineno)
            try:
                (line, *_) = strict_lines(where, raw)
            except CorpusFormatError as e:
                raise CorpusFormatError(e.reason, where, lineno) from None
        else:
            line = raw[:-1] if raw.endswith("\n") else raw
            if line.endswith("\r"):
                line = line[:-1]
        _no_control(where, lineno, line)
        yield lineno, line


def strict_file_lines(path):
    """The (line number, line) pairs of a text file (:func:`iter_strict_lines`; ``.gz``/``.bz2``/
    ``.xz`` decompressed).

    Raises:
        ArgumentError: a file that cannot be opened; CorpusFormatError: as
            :func:`iter_strict_lines`.
    """
    from ..errors import ArgumentError
    try:
        f = open_text(path, "rb")
    except OSError as e:
        raise ArgumentError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        yield from iter_strict_lines(f, str(path))


def read_token_lines(paths) -> list[list[str]]:
    """The sentences of text files (one a line, tokens separated by white space; ``.gz``/
    ``.bz2``/``.xz`` decompressed), empty lines skipped.

    Raises:
        as :func:`strict_file_lines`.
    """
    return [words for p in paths for _, line in strict_file_lines(p) if (words := line.split())]


def held_out(sents, dev=None, every: int = 20):
    """(training, held-out) sentences: ``dev`` when given, else every ``every``-th sentence of
    ``sents`` held out (the rest trained on)."""
    if dev is not None:
        return list(sents), list(dev)
    return ([s for i, s in enumerate(sents) if i % every != every - 1],
            [s for i, s in enumerate(sents) if i % every == every - 1])

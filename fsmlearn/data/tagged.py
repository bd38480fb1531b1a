"""A user's own tagged files: ``word/TAG`` text and CoNLL-U, read whole and checked; tagged output.

Formats (:data:`TAGGED_FORMATS`), chosen by name or by the file's extension
(:func:`tagged_format`: ``.conllu``, also compressed as ``.conllu.gz``, is
CoNLL-U; any other name is ``word/TAG``):

- ``word/tag``: one sentence per non-blank line, tokens separated by
  whitespace, each token ``word/TAG`` split at the last ``/`` (so ``1/2/CD``
  is the word ``1/2``; neither part may be empty).  Blank lines are skipped.
  Words and tags are kept as written (no Treebank unescaping, no tag
  normalising).
- ``conllu``: CoNLL-U, as :func:`~fsmlearn.data.readers.parse_conllu_lines`
  reads it: (FORM, UPOS) pairs by default, checked against the 17 UD tags, or
  (FORM, XPOS) pairs with ``column="xpos"``, any tag but ``_`` (XPOS tag sets
  are the treebank's own).

Files may be compressed (``.gz``, ``.bz2``, ``.xz``, by extension).  Every
problem raises an error whose message begins with the file's name, and with
the line where there is one (``my.txt:3: token 'dog' is not word/TAG ...``):
a missing file (:class:`~fsmlearn.errors.CorpusNotFoundError`), and as
:class:`~fsmlearn.errors.CorpusFormatError` a directory, a file that cannot
be read or decompressed, text that is not UTF-8, a control character (binary
data: NUL bytes, ...), a token or line that does not parse, a tag outside
the tag set asked for (``tags``), and a file with no sentence at all (empty,
or blank lines and comments only).  A NUL byte anywhere is binary data, refused
before the text is decoded.

Output (:func:`format_tagged`) is one of ``tags`` (the tags of a sentence on
one line), ``word/tag`` or ``conllu`` (ID, FORM and the tag in the UPOS or
XPOS column, every other column ``_``), so tagged output reads back with
:func:`read_tagged_file`.

Public names: TAGGED_FORMATS, OUTPUT_FORMATS, tagged_format, read_tagged_file,
parse_word_tag_lines, tags_of, format_tagged.
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path

from ..errors import ArgumentError, CorpusFormatError, CorpusNotFoundError
from .locate import strict_lines
from .readers import _clip, parse_conllu_lines, word_tag_lines
from .text import open_text

__all__ = ["TAGGED_FORMATS", "OUTPUT_FORMATS", "tagged_format", "read_tagged_file",
           "parse_word_tag_lines", "tags_of", "format_tagged"]

#: The formats of tagged input files.
TAGGED_FORMATS: tuple[str, ...] = ("word/tag", "conllu")
#: The formats of tagged output: the tags alone, or one of :data:`TAGGED_FORMATS`.
OUTPUT_FORMATS: tuple[str, ...] = ("tags", "word/tag", "conllu")

_COMPRESSED = (".gz", ".bz2", ".xz", ".lzma")


def tagged_format(path) -> str:
    """The format a tagged file's name implies: ``conllu`` for ``*.conllu`` (also
    ``*.conllu.gz``, ``.bz2``, ``.xz``), else ``word/tag``.

    Args:
        path: the file name (str or Path).

    Returns:
        One of :data:`TAGGED_FORMATS`.
    """
    name = Path(path).name.lower()
    for ext in _COMPRESSED:
        if name.endswith(ext):
            name = name[:-len(ext)]
            break
    return "conllu" if name.endswith(".conllu") else "word/tag"


def _describe(tags: frozenset, tagset_name: str | None) -> str:
    if tagset_name:
        return tagset_name
    return f"the {len(tags)} tags asked for ({_clip(' '.join(sorted(tags)), 0, 120)})"


def parse_word_tag_lines(where: str, lines: Iterable[str], tags: Collection[str] | None = None,
                         tagset_name: str | None = None) -> Iterator[list[tuple[str, str]]]:
    """Sentences of a ``word/TAG`` file, given its lines (one sentence per non-blank line).

    Args:
        where: the file's name for error messages.
        lines: its lines, decoded, without line ends.
        tags: the tags accepted (None: any non-empty tag).
        tagset_name: how an error message names ``tags`` (default: lists them).

    Yields:
        One non-empty list of (word, tag) str pairs per non-blank line.

    Raises:
        CorpusFormatError: a control character, a token that is not ``word/TAG``
            (no ``/``, empty word or tag), or a tag outside ``tags``; names
            ``where``, the line and the token.
    """
    accepted = None if tags is None else frozenset(tags)

    def in_tagset(tag, tok, lineno):
        if tag not in accepted:
            raise CorpusFormatError(f"tag {tag!r} of token {tok!r} is not one of "
                                    f"{_describe(accepted, tagset_name)}", where, lineno)

    yield from word_tag_lines(where, lines, None if accepted is None else in_tagset, _clip)


def _read_bytes(p: Path) -> bytes:
    if not p.exists():
        raise CorpusNotFoundError(f"{p}: no such file", p)
    if p.is_dir():
        raise CorpusFormatError("is a directory, not a tagged file", p)
    try:
        with open_text(p, "rb") as f:
            return f.read()
    except (EOFError, zlib.error, lzma.LZMAError) as e:
        raise CorpusFormatError(f"cannot decompress ({type(e).__name__}: {e})", p) from None
    except OSError as e:
        if e.strerror:              # permission denied, I/O error, ...
            raise CorpusFormatError(f"cannot read: {e.strerror}", p) from None
        # gzip's BadGzipFile, bz2's invalid data stream
        raise CorpusFormatError(f"cannot decompress ({type(e).__name__}: {e})", p) from None


def read_tagged_file(path, format: str | None = None, column: str = "upos",
                     tags: Collection[str] | None = None, tagset_name: str | None = None
                     ) -> list[list[tuple[str, str]]]:
    """The sentences of a user's tagged file (formats and errors in the module docstring).

    Args:
        path: the file (str or Path).
        format: one of :data:`TAGGED_FORMATS`; None: by extension (:func:`tagged_format`).
        column: for CoNLL-U, ``"upos"`` (column 4, default) or ``"xpos"`` (column 5).
        tags: the tags accepted (None: any tag of the format, UPOS checked against
            the 17 UD tags); a tag outside them is a located error.
        tagset_name: how an error message names ``tags`` (default: lists them).

    Returns:
        A non-empty list of non-empty lists of (word, tag) str pairs.

    Raises:
        ArgumentError: unknown format or column.
        CorpusNotFoundError: no such file (a ``FileNotFoundError``).
        CorpusFormatError: as listed in the module docstring; names the file, and
            the line where there is one.
    """
    if format is not None and format not in TAGGED_FORMATS:
        raise ArgumentError(f"unknown tagged-file format {format!r}; expected one of "
                            f"{', '.join(TAGGED_FORMATS)}")
    if column not in ("upos", "xpos"):
        raise ArgumentError(f"column must be 'upos' or 'xpos', got {column!r}")
    p = Path(path)
    fmt = format or tagged_format(p)
    data = _read_bytes(p)
    where = str(p)
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        col = nul - data.rfind(b"\n", 0, nul)
        raise CorpusFormatError(f"NUL byte at byte {col} of the line: binary data, not a tagged file",
                                where, line)
    lines = strict_lines(where, data)
    if fmt == "conllu":
        if tags is None:
            want = None if column == "upos" else "any"
        else:
            want = frozenset(tags)
        sents = list(parse_conllu_lines(where, lines, column, want, tagset_name))
    else:
        sents = list(parse_word_tag_lines(where, lines, tags, tagset_name))
    if not sents:
        what = "empty file" if not data else ("only blank lines and comments" if fmt == "conllu"
                                              else "only blank lines")
        raise CorpusFormatError(f"no tagged sentences ({what}); expected "
                                f"{'CoNLL-U' if fmt == 'conllu' else 'word/TAG tokens, one sentence a line'}",
                                p)
    return sents


def tags_of(sentences: Iterable[Sequence[tuple[str, str]]]) -> tuple[str, ...]:
    """The tags that occur in tagged sentences, sorted (a file's own tag set).

    Args:
        sentences: lists of (word, tag) pairs.

    Returns:
        A sorted tuple of distinct tag strings.
    """
    return tuple(sorted({t for s in sentences for _, t in s}))


def format_tagged(words: Sequence[str], tags: Sequence[str], format: str = "tags", *,
                  column: str = "xpos", sent_id=None, text: str | None = None) -> str:
    """One tagged sentence as output text, with its line ends.

    Args:
        words: the tokens.
        tags: one tag per token.
        format: one of :data:`OUTPUT_FORMATS`: ``tags`` (tags separated by spaces, one
            line), ``word/tag`` (``word/TAG`` tokens, one line) or ``conllu`` (a
            block of ten tab-separated columns, ID, FORM and the tag in ``column``,
            every other column ``_``, then a blank line; an empty sentence is
            written as nothing at all, CoNLL-U having no empty sentences).
        column: for ``conllu``, ``"upos"`` (column 4) or ``"xpos"`` (column 5).
        sent_id: for ``conllu``, an optional ``# sent_id = ...`` comment.
        text: for ``conllu``, an optional ``# text = ...`` comment (whitespace runs
            are written as one space).

    Returns:
        The text (str), ending in a newline (``conllu``: a blank line), or ``""``.

    Raises:
        ArgumentError: unknown format or column, or as many tags as words not given.
    """
    if len(words) != len(tags):
        raise ArgumentError(f"{len(words)} words but {len(tags)} tags")
    if format == "tags":
        return " ".join(tags) + "\n"
    if format == "word/tag":
        return " ".join(f"{w}/{t}" for w, t in zip(words, tags)) + "\n"
    if format != "conllu":
        raise ArgumentError(f"unknown output format {format!r}; expected one of {', '.join(OUTPUT_FORMATS)}")
    if column not in ("upos", "xpos"):
        raise ArgumentError(f"column must be 'upos' or 'xpos', got {column!r}")
    if not words:
        return ""
    out = []
    if sent_id is not None:
        out.append(f"# sent_id = {sent_id}\n")
    if text is not None:
        out.append(f"# text = {' '.join(text.split())}\n")
    for i, (w, t) in enumerate(zip(words, tags), 1):
        upos, xpos = (t, "_") if column == "upos" else ("_", t)
        out.append(f"{i}\t{w}\t_\t{upos}\t{xpos}\t_\t_\t_\t_\t_\n")
    out.append("\n")
    return "".join(out)

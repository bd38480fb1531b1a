"""Where the shared corpora are, and reading their files in place.

The corpora are the NLTK data packages (zip archives) and a gzipped CoNLL-U
file described in ``../shared/data/README.md``.  They are read in place, with
:mod:`zipfile` and :mod:`gzip`: nothing is extracted, copied or cached on
disk, and the original archive layouts are kept, so a folder laid out like
``nltk_data`` (``corpora/treebank.zip``, ...) works too.  The data folder is
``data_dir`` when given, else ``$FSMLEARN_DATA``, else ``../shared/data``
relative to the repository root (:func:`data_dir`).

The readers of :mod:`fsmlearn.data.readers` take their bytes from
:func:`read_members`, one archive member in memory at a time, and their lines
from :func:`strict_lines` (UTF-8 or a
:class:`~fsmlearn.errors.CorpusFormatError` naming the line) or
:func:`lenient_lines` (UTF-8, falling back per line to Windows-1252 and then
Latin-1, for the raw-text corpora).  A corrupt archive, or a member that cannot
be decompressed, raises a CorpusFormatError naming the archive (or member).

Public names: CORPORA, TEXT_CORPORA, data_dir, corpus_path, fileids,
read_members, strict_lines, lenient_lines.
"""

from __future__ import annotations

import itertools
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusFormatError, CorpusNotFoundError, DatasetError

__all__ = ["CORPORA", "TEXT_CORPORA", "data_dir", "corpus_path", "fileids", "read_members",
           "strict_lines", "lenient_lines"]

#: Corpus name -> file below the data folder.
CORPORA: dict[str, str] = {
    "treebank": "corpora/treebank.zip",
    "conll2000": "corpora/conll2000.zip",
    "masc_tagged": "corpora/masc_tagged.zip",
    "brown": "corpora/brown.zip",
    "abc": "corpora/abc.zip",
    "movie_reviews": "corpora/movie_reviews.zip",
    "webtext": "corpora/webtext.zip",
    "cmudict": "corpora/cmudict.zip",
    "ud_english_ewt": "corpora/ud_english_ewt/en_ewt-ud-dev.conllu.gz",
}
#: The raw-text corpora (read by :func:`fsmlearn.data.readers.iter_text`).
TEXT_CORPORA: tuple[str, ...] = ("abc", "movie_reviews", "webtext")


def data_dir(path=None) -> Path:
    """The shared data folder.

    Args:
        path: an explicit folder (str or Path); else ``$FSMLEARN_DATA`` if set and
            non-empty; else ``../shared/data`` relative to the repository root.

    Returns:
        The folder as a Path (its existence is checked when a corpus is opened).
    """
    if path is not None:
        return Path(path)
    env = os.environ.get("FSMLEARN_DATA")
    if env:
        return Path(env)
    # this file is <repo>/fsmlearn/data/<module>.py; the data sits beside the repository
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def corpus_path(corpus: str, data_dir=None) -> Path:
    """The archive (or ``.conllu.gz`` file) of one corpus.

    Args:
        corpus: a key of :data:`CORPORA`.
        data_dir: the data folder, as for :func:`data_dir`.

    Returns:
        The file's Path.

    Raises:
        DatasetError: unknown corpus name (a ``ValueError``).
        CorpusNotFoundError: the file is not there (a ``FileNotFoundError``); the
            message says where it looked.
    """
    if corpus not in CORPORA:
        raise DatasetError(f"unknown corpus {corpus!r}; expected one of {', '.join(CORPORA)}")
    root = _data_dir(data_dir)
    p = root / CORPORA[corpus]
    if not p.is_file():
        raise CorpusNotFoundError(
            f"corpus {corpus!r} not found at {p} (set FSMLEARN_DATA or pass data_dir to "
            f"point at the folder holding corpora/; see ../shared/data/README.md)", p)
    return p


_data_dir = data_dir  # the parameter name ``data_dir`` shadows the function below


def _archive_root(zf: zipfile.ZipFile, zpath: Path) -> str:
    """The top folder of an NLTK archive (``treebank/``), from the archive's name."""
    root = zpath.stem + "/"
    if any(n.startswith(root) for n in itertools.islice(zf.namelist(), 5)):
        return root
    return ""


def fileids(corpus: str, data_dir=None) -> list[str]:
    """The file ids of an archive corpus, sorted by name.

    A file id is the member path below the archive's top folder
    (``"tagged/wsj_0001.pos"``, ``"ca01"``, ``"written/wsj_0006.txt"``).  Only the
    corpus files proper are listed: for treebank the tagged files, for brown the
    500 ``c[a-r]NN`` files, for conll2000 ``test.txt`` and ``train.txt``, for
    masc_tagged the ``spoken/`` and ``written/`` texts, for the text corpora
    their ``.txt`` files.

    Args:
        corpus: an archive corpus name (not ``ud_english_ewt``).
        data_dir: the data folder.

    Returns:
        A sorted list of str.

    Raises:
        DatasetError: unknown corpus, or ``ud_english_ewt`` (a single file).
        CorpusNotFoundError: the archive is missing.
        CorpusFormatError: the archive cannot be read (names it).
    """
    if corpus == "ud_english_ewt":
        raise DatasetError("ud_english_ewt is a single .conllu.gz file; it has no file ids")
    zpath = corpus_path(corpus, data_dir)
    with _open_zip(zpath) as zf:
        root = _archive_root(zf, zpath)
        names = [n[len(root):] for n in zf.namelist() if n.startswith(root) and not n.endswith("/")]
    pattern = {
        "treebank": r"tagged/wsj_\d{4}\.pos",
        "conll2000": r"(train|test)\.txt",
        "masc_tagged": r"(spoken|written)/.+\.txt",
        "brown": r"c[a-r]\d\d",
        "cmudict": r"cmudict",
    }.get(corpus, r"(.+/)?[^/]+\.txt")
    rx = re.compile(pattern)
    return sorted(n for n in names if rx.fullmatch(n))


def _where(zpath: Path, member: str) -> str:
    return f"{zpath}/{member}"


# what zipfile and its decompressors raise on a corrupt archive (lzma.LZMAError derives from
# Exception alone; it is matched by name so that lzma, an optional module, is not imported)
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
               NotImplementedError, RuntimeError, ValueError, OverflowError, struct.error)


def _zip_failure(e: Exception) -> bool:
    return isinstance(e, _ZIP_ERRORS) or type(e).__name__ == "LZMAError"


def _open_zip(zpath: Path) -> zipfile.ZipFile:
    """The archive opened for reading, or a CorpusFormatError naming it."""
    try:
        return zipfile.ZipFile(zpath)
    except Exception as e:          # noqa: BLE001 - re-raised unless a corrupt archive
        if isinstance(e, FileNotFoundError) or not _zip_failure(e):
            raise
        raise CorpusFormatError(f"cannot decompress: not a readable zip archive "
                                f"({type(e).__name__}: {e})", zpath) from None


def read_members(corpus: str, ids, data_dir) -> Iterator[tuple[str, bytes]]:
    """The bytes of a corpus's archive members, one member in memory at a time.

    Args:
        corpus: an archive corpus name (a key of :data:`CORPORA` but ``ud_english_ewt``).
        ids: a file id, a sequence of them, or None for all of :func:`fileids`.
        data_dir: the data folder, as for :func:`data_dir`.

    Yields:
        (where, data) pairs: ``where`` is ``<archive>/<member>`` (str, for error
        messages), ``data`` the member's bytes.

    Raises:
        DatasetError: unknown corpus.
        CorpusNotFoundError: the archive or a member is missing.
        CorpusFormatError: the archive or a member cannot be read or decompressed
            (names the archive, or ``<archive>/<member>``; the message says "cannot
            decompress").
    """
    zpath = corpus_path(corpus, data_dir)
    with _open_zip(zpath) as zf:
        root = _archive_root(zf, zpath)
        if ids is None:
            ids = fileids(corpus, data_dir)
        elif isinstance(ids, str):
            ids = [ids]
        for fid in ids:
            member = root + fid
            where = _where(zpath, member)
            try:
                data = zf.read(member)
            except KeyError:
                raise CorpusNotFoundError(f"{zpath} has no member {member!r}", where) from None
            except Exception as e:      # noqa: BLE001 - re-raised unless a corrupt archive
                if not _zip_failure(e):
                    raise
                raise CorpusFormatError(f"cannot decompress this member of the archive "
                                        f"({type(e).__name__}: {e})", where) from None
            yield where, data


def strict_lines(where: str, data: bytes) -> list[str]:
    """Decode UTF-8 (strictly) and split into lines without their ends.

    Args:
        where: the file's name for error messages (as :func:`read_members` gives it).
        data: the file's bytes.

    Returns:
        The lines, a list of str without ``\\n`` or ``\\r\\n``.

    Raises:
        CorpusFormatError: the bytes are not UTF-8 (the only encoding tried);
            names the line and the column, and quotes the line's bytes (80 of
            them around the bad one if the line is longer).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        bad = data[start:end if end >= 0 else len(data)]
        if len(bad) > 80:           # binary data: quote 80 bytes around the first bad one
            at = max(0, min(e.start - start - 40, len(bad) - 80))
            bad = (b"..." if at else b"") + bad[at:at + 80] + (b"..." if at + 80 < len(bad) else b"")
        raise CorpusFormatError(f"not UTF-8 text (decoded as UTF-8, strictly; invalid byte "
                                f"{data[e.start]:#04x} at byte {e.start - start + 1} of the "
                                f"line): {bad!r}", where, line) from None
    return text.replace("\r\n", "\n").split("\n")


def lenient_lines(data: bytes) -> list[str]:
    """Decode UTF-8, falling back per line to Windows-1252 then Latin-1 (never fails).

    Args:
        data: the file's bytes.

    Returns:
        The lines, a list of str without their ends.
    """
    try:
        return data.decode("utf-8").replace("\r\n", "\n").split("\n")
    except UnicodeDecodeError:
        pass
    out = []
    for raw in data.split(b"\n"):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            try:
                out.append(raw.decode("cp1252"))
            except UnicodeDecodeError:
                out.append(raw.decode("latin-1"))
    return out


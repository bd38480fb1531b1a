r"""Readers of the shared corpora, and the project's named datasets.

The corpora are the NLTK data packages (zip archives) and a gzipped CoNLL-U
file described in ``../shared/data/README.md``.  They are read in place, with
:mod:`zipfile` and :mod:`gzip`: nothing is extracted, copied or cached on
disk, and the original archive layouts are kept, so a folder laid out like
``nltk_data`` (``corpora/treebank.zip``, ...) works too.  The data folder is
``data_dir`` when given, else ``$FSMLEARN_DATA``, else ``../shared/data``
relative to the repository root (:func:`data_dir`).

Every reader is a generator over sentences and reads one archive member at a
time; nothing holds a whole corpus unless asked (:func:`load_dataset`).
Words never contain whitespace (a CoNLL-U FORM with a space is an error).  A malformed file raises
:class:`~fsmlearn.errors.CorpusFormatError`, whose message reads
``<archive>/<member>:<line>: <what> <quoted text>``.

Readers (``fileids`` are member paths below the archive's top folder, as
:func:`fileids` lists them, e.g. ``"tagged/wsj_0001.pos"`` or ``"ca01"``):

- :func:`iter_treebank`: the Penn Treebank sample's tagged files
  ``tagged/wsj_NNNN.pos``, sentences of (word, tag).  The NP-chunk brackets
  ``[ ... ]`` (output of a stochastic chunker, "best ignored" says the
  sample's README) are dropped.  Tokens tagged ``-NONE-`` (empty elements,
  traces) are dropped; the sample's tagged files hold none, but the Treebank
  format allows them.  Sentences are the blocks separated by blank lines or
  ``=====`` lines, except that a single blank line after a chunk line does
  not end a sentence (the files put one after a chunk inside a sentence,
  two after a chunk that ends one), and closing quotes or brackets (tags
  ``''``, ``-RRB-``) that open a block move to the end of the sentence
  before it (the files put a quote closing a sentence after its final
  period, on the next line).  This yields 3,946 sentences for
  wsj_0001-wsj_0199 against the parsed files' 3,914: the tagged files split
  a few sentences the parses join, e.g. "... Finmeccanica S.p / A. for $ 295
  million ." in wsj_0007.
- :func:`iter_conll2000`: CoNLL-2000 ``train.txt`` / ``test.txt``, one
  ``word POS chunk`` per line, a blank line between sentences; (word, tag)
  pairs, or (word, tag, chunk) triples with ``chunks=True``.
- :func:`iter_masc`: MASC ``written/*.txt`` and ``spoken/*.txt``, one
  sentence per non-blank line of ``word_TAG`` tokens (split at the last
  ``_``).  Known defects of the MASC export are repaired as follows: a piece
  without ``_`` (a multi-word token like ``D. C._NN`` or ``. . ._...``)
  takes the tag of the next tagged piece on its line, or ``None`` at the end
  of a line (about 10 tokens: URLs, rules of asterisks); tokens with an empty
  word (``_UH``, 22 of them) are dropped.  MASC's tags are noisy (``PP``,
  ``LRB``, ``UH```, ...) and left as they are.
- :func:`iter_brown`: the Brown Corpus ``c[a-r]NN`` files, one sentence per
  non-blank line of ``word/tag`` tokens (split at the last ``/``), Brown
  tags (lower case, ``-tl``/``-hl`` suffixes) kept as written.  Brown tags
  are never mapped to or mixed with Penn tags.
- :func:`iter_conllu`: a CoNLL-U file (UD English EWT dev): (FORM, XPOS) or
  (FORM, UPOS) pairs; comment lines, multiword-token lines (``1-2``) and
  empty nodes (``8.1``) are skipped.
- :func:`iter_text`: raw text (abc, movie_reviews, webtext) as tokenised
  sentences, see below.
- :func:`iter_words`: the plain words of any corpus, tags dropped.
- :func:`tokenize`, :func:`split_sentences`: the tokeniser for raw text.

Normalisation of the WSJ sources (``normalize=True``, the default, in
:func:`iter_treebank` and :func:`iter_conll2000`; :func:`iter_masc`
normalises its tags only, its words being plain text already), so the
Treebank sample, CoNLL-2000, MASC, UD and raw text spell the same word the
same way: words are unescaped to the characters of the text (``1\/2`` ->
``1/2``, ``\*`` -> ``*``, ``-LRB-`` -> ``(``, ``-RRB-`` -> ``)``, ``-LCB-``
-> ``{``, ``-RCB-`` -> ``}``, ``-LSB-`` -> ``[``, ``-RSB-`` -> ``]``); the
tags ``(`` and ``)`` become ``-LRB-`` and ``-RRB-`` (the spelling of the 45-tag
set); a compound tag ``A|B`` keeps its first alternative (one token,
``VBG|NN``, in the Treebank sample; two in MASC).  With ``normalize=False``
words and tags are returned as written.

Tokenisation of raw text (:func:`tokenize`), a simple PTB-like regular
expression applied to each line: URLs and e-mail addresses stay whole;
letter-dot abbreviations (``U.S.``, ``e.g.``), common titles and month
abbreviations (``Mr.``, ``Dr.``, ``Inc.``, ``Jan.``, ...) and single capital
initials followed by a capitalised word (``J. Smith``) keep their period;
numbers keep inner ``. , : /`` (``3.5``, ``30,000``, ``10:30``, ``1/2``);
words keep inner hyphens and apostrophes (``state-owned``, ``O'Connor``);
the clitics ``n't``, ``'s``, ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m`` (any
case, straight or curly apostrophe) are split off as in the Treebank
(``don't`` -> ``do n't``, ``can't`` -> ``ca n't``, ``John's`` -> ``John 's``);
runs of ``.`` / ``!`` / ``?`` and ``--`` are one token; every other
punctuation character is a token of its own.  Quotes are kept as written
(not rewritten to `````/``''``).  :func:`split_sentences` ends a sentence
after a token made of ``.!?`` (plus any closing quotes or brackets after
it; a straight quote closes only an open quotation, by parity) when the
next token does not start with a lower-case letter and is not more of the
same punctuation.  Each line is its own paragraph: sentences never
cross a line.  Raw files are decoded as UTF-8, falling back, line by line,
to Windows-1252 and then Latin-1 (abc/science.txt and four webtext files
are not UTF-8).  The movie reviews, already tokenised and lower-cased, go
through the same tokeniser, which splits their clitics (``don't``) too.

Named datasets, as ``../shared/data/README.md`` defines them
(:data:`DATASETS`, :func:`iter_sentences`, :func:`load_dataset`,
:func:`token_count`, :func:`dataset_fileids`).  Measured token counts (on
the shared data, commit 5db857e of the NLTK data index):

- ``wsj-small``: Treebank sample wsj_0001-wsj_0099, tagged (Penn tags,
  normalised): 1,927 sentences, 46,461 tokens.
- ``wsj-train``: CoNLL-2000 ``train.txt`` + ``test.txt`` and Treebank
  wsj_0100-wsj_0199, tagged: 12,967 sentences, 306,843 tokens (README:
  about 310k).
- ``mixed-text``: plain words (tags dropped) of every text corpus but
  cmudict: Treebank wsj_0100-wsj_0199 (47,739 tokens), CoNLL-2000
  train+test (259,104), MASC (591,604; all files except its copies of
  WSJ-small, ``written/wsj_0006, 0026, 0027, 0032, 0068, 0073``), Brown,
  all 500 files (1,161,192), abc (751,820), movie_reviews (1,527,573),
  webtext (385,055) and the UD English EWT dev file (25,147; it is in the
  README's table of text corpora, so it is in).  WSJ-small
  (wsj_0001-wsj_0099) is out.  4,749,234 tokens in 243,516 sentences,
  streamed in about 5 s.  The README says about 4.5M: its per-corpus
  figures count whitespace-separated pieces of the raw text (abc 664k,
  movie_reviews 1.49M, webtext 301k) and round MASC down to 500k, while
  the tokeniser here also splits punctuation and clitics.
- ``brown-lm``: the 500 ``brown/c*`` files sorted by name, ca01-ck26 train,
  ck27-cn17 valid, cn18-cr09 test; words lower-cased, tags dropped, one
  sentence per item; every word outside the vocabulary
  (:func:`brown_lm_vocabulary`: the 10,000 most frequent training words,
  ties broken by the word's string order) becomes ``<unk>``.  Train
  921,394 tokens (42,017 sentences), valid 119,418 (8,051), test 120,380
  (7,272): exactly the README's 921k / 119k / 120k.

Public names: CORPORA, DATASETS, BROWN_LM_VOCAB_SIZE, UNK, data_dir,
corpus_path, fileids, iter_treebank, iter_conll2000, iter_masc, iter_brown,
iter_conllu, iter_text, iter_words, tokenize, split_sentences, unescape_ptb,
iter_sentences, load_dataset, token_count, dataset_fileids,
brown_lm_vocabulary, iter_wsj_tagged.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import os
import re
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from fsmlearn.errors import CorpusFormatError

__all__ = ["CORPORA", "DATASETS", "BROWN_LM_VOCAB_SIZE", "UNK", "data_dir", "corpus_path",
           "fileids", "iter_treebank", "iter_conll2000", "iter_masc", "iter_brown",
           "iter_conllu", "iter_text", "iter_words", "tokenize", "split_sentences",
           "unescape_ptb", "iter_sentences", "load_dataset", "token_count", "dataset_fileids",
           "brown_lm_vocabulary", "iter_wsj_tagged"]

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
_TEXT_CORPORA = ("abc", "movie_reviews", "webtext")

#: The named datasets of the shared README.
DATASETS: tuple[str, ...] = ("wsj-small", "wsj-train", "mixed-text", "brown-lm")
_SPLITS = {"brown-lm": ("train", "valid", "test")}

#: Size of the Brown-LM vocabulary (without ``<unk>``).
BROWN_LM_VOCAB_SIZE = 10_000
#: The out-of-vocabulary token of Brown-LM.
UNK = "<unk>"


# --------------------------------------------------------------------------- locations

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
        ValueError: unknown corpus name.
        FileNotFoundError: the file is not there; the message says where it looked.
    """
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; expected one of {', '.join(CORPORA)}")
    root = _data_dir(data_dir)
    p = root / CORPORA[corpus]
    if not p.is_file():
        raise FileNotFoundError(
            f"corpus {corpus!r} not found at {p} (set FSMLEARN_DATA or pass data_dir to "
            f"point at the folder holding corpora/; see ../shared/data/README.md)")
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
        ValueError: unknown corpus, or ``ud_english_ewt`` (a single file).
        FileNotFoundError: the archive is missing.
    """
    if corpus == "ud_english_ewt":
        raise ValueError("ud_english_ewt is a single .conllu.gz file; it has no file ids")
    zpath = corpus_path(corpus, data_dir)
    with zipfile.ZipFile(zpath) as zf:
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


# --------------------------------------------------------------------------- file access

def _where(zpath: Path, member: str) -> str:
    return f"{zpath}/{member}"


def _members(corpus: str, ids, data_dir) -> Iterator[tuple[str, bytes]]:
    """Yield (where, bytes) for each file id, one member in memory at a time."""
    zpath = corpus_path(corpus, data_dir)
    with zipfile.ZipFile(zpath) as zf:
        root = _archive_root(zf, zpath)
        if ids is None:
            ids = fileids(corpus, data_dir)
        elif isinstance(ids, str):
            ids = [ids]
        for fid in ids:
            member = root + fid
            try:
                data = zf.read(member)
            except KeyError:
                raise FileNotFoundError(f"{zpath} has no member {member!r}") from None
            yield _where(zpath, member), data


def _strict_lines(where: str, data: bytes) -> list[str]:
    """Decode UTF-8 (strictly) and split into lines without their ends."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        bad = data[start:end if end >= 0 else len(data)]
        raise CorpusFormatError(f"not UTF-8 text (byte {data[e.start]:#04x}): {bad!r}",
                                where, line) from None
    return text.replace("\r\n", "\n").split("\n")


def _lenient_lines(data: bytes) -> list[str]:
    """Decode UTF-8, falling back per line to Windows-1252 then Latin-1."""
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


# --------------------------------------------------------------------------- normalisation

_BRACKET_WORDS = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}",
                  "-LSB-": "[", "-RSB-": "]"}
_TAG_FIXES = {"(": "-LRB-", ")": "-RRB-"}


def unescape_ptb(word: str) -> str:
    r"""A Treebank-escaped word as plain text.

    Args:
        word: e.g. ``"1\/2"``, ``"-LRB-"``, ``"\*"``.

    Returns:
        ``"1/2"``, ``"("``, ``"*"``; other words unchanged.
    """
    w = _BRACKET_WORDS.get(word)
    if w is not None:
        return w
    if "\\" in word:
        return word.replace("\\/", "/").replace("\\*", "*")
    return word


def _norm_tag(tag: str) -> str:
    if "|" in tag and len(tag) > 1:
        tag = tag.split("|", 1)[0]
    return _TAG_FIXES.get(tag, tag)


def _split_token(tok: str, sep: str, where: str, lineno: int, line: str):
    i = tok.rfind(sep)
    if i <= 0 or i == len(tok) - 1:
        what = "no tag separator" if i < 0 else ("empty word" if i == 0 else "empty tag")
        raise CorpusFormatError(f"token {tok!r} is not word{sep}TAG ({what}) in line {line!r}",
                                where, lineno)
    return tok[:i], tok[i + 1:]


# --------------------------------------------------------------------------- tagged readers

_CLOSERS = frozenset({"''", "-RRB-", ")"})
_SEP_LINE = re.compile(r"=+")


def iter_treebank(fileids=None, data_dir=None, normalize: bool = True
                  ) -> Iterator[list[tuple[str, str]]]:
    """Sentences of the Penn Treebank sample's tagged files.

    See the module docstring for the format, the sentence rule, the dropping of
    chunk brackets and ``-NONE-`` tokens, and ``normalize``.

    Args:
        fileids: file ids such as ``"tagged/wsj_0001.pos"`` (default: all 199).
        data_dir: the data folder.
        normalize: unescape words and normalise tags (see the module docstring).

    Yields:
        One list of (word, tag) str pairs per sentence.

    Raises:
        CorpusFormatError: a token that is not ``word/TAG``, an unbalanced chunk
            bracket, or text that is not UTF-8; names member and line.
        FileNotFoundError: missing archive or member.
    """
    for where, data in _members("treebank", fileids, data_dir):
        pending: list | None = None     # the last complete sentence, not yet yielded
        cur: list = []
        blanks = 0
        hard = False
        prev_chunk = False
        for lineno, line in enumerate(_strict_lines(where, data), 1):
            pieces = line.split()
            if not pieces:
                blanks += 1
                continue
            if _SEP_LINE.fullmatch(pieces[0]) and len(pieces) == 1:
                hard = True
                continue
            is_chunk = pieces[0] == "["
            if is_chunk and pieces[-1] != "]":
                raise CorpusFormatError(f"chunk '[' not closed on its line: {line!r}", where, lineno)
            if cur and (hard or (blanks and not (blanks == 1 and prev_chunk))):
                pending = yield from _treebank_push(pending, cur)
                cur = []
            blanks = 0
            hard = False
            prev_chunk = is_chunk
            body = pieces[1:-1] if is_chunk else pieces
            for tok in body:
                if tok == "[" or tok == "]":
                    raise CorpusFormatError(f"chunk bracket {tok!r} inside a line: {line!r}",
                                            where, lineno)
                word, tag = _split_token(tok, "/", where, lineno, line)
                if tag == "-NONE-":
                    continue
                if normalize:
                    word = unescape_ptb(word)
                    tag = _norm_tag(tag)
                cur.append((word, tag))
        if cur:
            pending = yield from _treebank_push(pending, cur)
        if pending:
            yield pending


def _treebank_push(pending, block):
    """Yield ``pending`` and return ``block`` as the new pending sentence.

    Closing quotes or brackets at the start of ``block`` move to the end of
    ``pending`` first (the tagged files write a quote closing one sentence at
    the start of the next block); a block of nothing else joins ``pending``.
    """
    if pending:
        k = 0
        while k < len(block) and block[k][1] in _CLOSERS:
            k += 1
        if k:
            pending.extend(block[:k])
            block = block[k:]
            if not block:
                return pending
        yield pending
    return block


def iter_conll2000(fileids=("train.txt", "test.txt"), data_dir=None, chunks: bool = False,
                   normalize: bool = True) -> Iterator[list[tuple]]:
    """Sentences of CoNLL-2000 (``word POS chunk`` lines, blank line between sentences).

    Args:
        fileids: ``"train.txt"``, ``"test.txt"`` or both (default, in that order).
        data_dir: the data folder.
        chunks: also return the chunk tag.
        normalize: unescape words and normalise tags (see the module docstring).

    Yields:
        One list per sentence of (word, tag) str pairs, or (word, tag, chunk)
        triples when ``chunks`` is true.

    Raises:
        CorpusFormatError: a line without exactly three fields, or text that is not
            UTF-8; names member and line.
    """
    for where, data in _members("conll2000", fileids, data_dir):
        cur: list = []
        for lineno, line in enumerate(_strict_lines(where, data), 1):
            fields = line.split()
            if not fields:
                if cur:
                    yield cur
                    cur = []
                continue
            if len(fields) != 3:
                raise CorpusFormatError(
                    f"expected 3 fields 'word POS chunk', got {len(fields)}: {line!r}",
                    where, lineno)
            word, tag, chunk = fields
            if normalize:
                word = unescape_ptb(word)
                tag = _norm_tag(tag)
            cur.append((word, tag, chunk) if chunks else (word, tag))
        if cur:
            yield cur


def iter_masc(fileids=None, data_dir=None, normalize: bool = True
              ) -> Iterator[list[tuple[str, str | None]]]:
    """Sentences (non-blank lines) of MASC's ``word_TAG`` files.

    See the module docstring for the repairs of known defects (pieces without a
    tag, empty words).

    Args:
        fileids: file ids such as ``"written/wsj_0187.txt"`` (default: all 392).
        data_dir: the data folder.
        normalize: normalise tags as for the WSJ readers (MASC words are plain text).

    Yields:
        One list of (word, tag) pairs per non-blank line; ``tag`` is ``None`` for
        untagged text at the end of a line.

    Raises:
        CorpusFormatError: a token with an empty tag (``word_``), or text that is
            not UTF-8; names member and line.
    """
    for where, data in _members("masc_tagged", fileids, data_dir):
        for lineno, line in enumerate(_strict_lines(where, data), 1):
            pieces = line.split()
            if not pieces:
                continue
            sent = []
            waiting = []
            for tok in pieces:
                i = tok.rfind("_")
                if i < 0:
                    waiting.append(tok)
                    continue
                if i == len(tok) - 1:
                    raise CorpusFormatError(f"token {tok!r} has an empty tag in line {line!r}",
                                            where, lineno)
                tag = tok[i + 1:]
                if normalize:
                    tag = _norm_tag(tag)
                for w in waiting:
                    sent.append((w, tag))
                waiting = []
                if i > 0:
                    sent.append((tok[:i], tag))
            for w in waiting:
                sent.append((w, None))
            if sent:
                yield sent


def iter_brown(fileids=None, data_dir=None) -> Iterator[list[tuple[str, str]]]:
    """Sentences (non-blank lines) of the Brown Corpus, ``word/tag`` tokens, Brown tags.

    Args:
        fileids: file ids such as ``"ca01"`` (default: the 500 files, sorted).
        data_dir: the data folder.

    Yields:
        One list of (word, Brown tag) str pairs per sentence.

    Raises:
        CorpusFormatError: a token that is not ``word/tag``, or text that is not
            UTF-8; names member and line.
    """
    for where, data in _members("brown", fileids, data_dir):
        for lineno, line in enumerate(_strict_lines(where, data), 1):
            pieces = line.split()
            if not pieces:
                continue
            sent = []
            for tok in pieces:
                i = tok.rfind("/")
                if i <= 0 or i == len(tok) - 1:
                    _split_token(tok, "/", where, lineno, line)   # raises
                sent.append((tok[:i], tok[i + 1:]))
            yield sent


_CONLLU_ID = re.compile(r"\d+")
_CONLLU_SKIP = re.compile(r"\d+-\d+|\d+\.\d+")


def iter_conllu(path=None, data_dir=None, column: str = "xpos") -> Iterator[list[tuple[str, str]]]:
    """Sentences of a CoNLL-U file (plain or ``.gz``), default the UD English EWT dev split.

    Args:
        path: a ``.conllu`` or ``.conllu.gz`` file; default the corpus ``ud_english_ewt``.
        data_dir: the data folder (used when ``path`` is None).
        column: ``"xpos"`` (column 5, Penn tags for EWT) or ``"upos"`` (column 4).

    Yields:
        One list of (FORM, tag) str pairs per sentence; comment lines,
        multiword-token lines (``1-2``) and empty nodes (``8.1``) are skipped.

    Raises:
        ValueError: unknown column.
        CorpusFormatError: a line without 10 tab-separated fields, a bad ID, an
            empty FORM, or text that is not UTF-8; names file and line.
    """
    col = {"upos": 3, "xpos": 4}.get(column)
    if col is None:
        raise ValueError(f"column must be 'xpos' or 'upos', got {column!r}")
    p = Path(path) if path is not None else corpus_path("ud_english_ewt", data_dir)
    if p.suffix == ".gz":
        with gzip.open(p, "rb") as f:
            data = f.read()
    else:
        data = p.read_bytes()
    where = str(p)
    cur: list = []
    for lineno, line in enumerate(_strict_lines(where, data), 1):
        if not line.strip():
            if cur:
                yield cur
                cur = []
            continue
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise CorpusFormatError(f"expected 10 tab-separated fields, got {len(fields)}: {line!r}",
                                    where, lineno)
        tid = fields[0]
        if not _CONLLU_ID.fullmatch(tid):
            if _CONLLU_SKIP.fullmatch(tid):
                continue
            raise CorpusFormatError(f"bad token ID {tid!r} in line {line!r}", where, lineno)
        form = fields[1]
        if not form or any(c.isspace() for c in form):
            raise CorpusFormatError(f"empty FORM or FORM with whitespace in line {line!r}",
                                    where, lineno)
        cur.append((form, fields[col]))
    if cur:
        yield cur


# --------------------------------------------------------------------------- raw text

_APOS = "'\u2019"
_ABBREV = ("Mr|Mrs|Ms|Messrs|Dr|Prof|Rev|Gen|Gov|Sen|Rep|Capt|Col|Lt|Sgt|St|Mt|Jr|Sr|"
           "Inc|Co|Corp|Ltd|Bros|vs|etc|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|No")
_TOKEN_RE = re.compile(rf"""
    (?:https?://|www\.)\S*[^\s.,;:!?'"()\[\]<>]            # URL (trailing punctuation split off)
  | [\w.+-]+@[\w-]+(?:\.[\w-]+)+                          # e-mail address
  | (?<!\w)(?:[^\W\d_]\.){{2,}}                            # U.S.  e.g.
  | (?<!\w)(?:{_ABBREV})\.                                 # Mr.  Inc.  Jan.
  | (?<!\w)[A-Z]\.(?=\s+[A-Z])                             # initial: J. Smith
  | \d+(?:[.,:/]\d+)+                                      # 3.5  30,000  10:30  1/2
  | \w+(?=[nN][{_APOS}][tT]\b)                             # do|n't
  | [nN][{_APOS}][tT]\b                                    # n't
  | [{_APOS}](?:[sS]|[rR][eE]|[vV][eE]|[lL][lL]|[dD]|[mM])\b   # 's 're 've 'll 'd 'm
  | \w+(?:-\w+|[{_APOS}](?!(?:[sS]|[rR][eE]|[vV][eE]|[lL][lL]|[dD]|[mM]|[tT])\b)\w+)*
  | [.!?]+ | -{{2,}}                                       # ...  ?!  --
  | \S                                                     # any other character
""", re.VERBOSE)
_TERMINAL = re.compile(r"[.!?]+")
_CLOSING = frozenset({"''", ")", "]", "}", "\u2019", "\u201d", "\u00bb"})


def tokenize(text: str) -> list[str]:
    """Tokenise one line of raw text with the PTB-like rules of the module docstring.

    Args:
        text: a str (no sentence splitting is done here).

    Returns:
        The tokens, a list of non-empty str without whitespace.

    Example:
        >>> tokenize("Mr. O'Connor's dog didn't bark -- at 10:30 in the U.S.!")
        ['Mr.', "O'Connor", "'s", 'dog', 'did', "n't", 'bark', '--', 'at', '10:30', 'in', 'the', 'U.S.', '!']
    """
    return _TOKEN_RE.findall(text)


def split_sentences(tokens: list[str]) -> list[list[str]]:
    """Split a tokenised paragraph into sentences (rule in the module docstring).

    A straight quote (``"`` or ``'``) after the final punctuation closes the
    sentence only if an odd number of the same quote came before it in the
    paragraph (it closes an open quotation); otherwise it opens the next one.

    Args:
        tokens: tokens of one line, as from :func:`tokenize`.

    Returns:
        A list of non-empty token lists (empty if ``tokens`` is empty).
    """
    out = []
    start = 0
    n = len(tokens)
    quotes = {'"': 0, "'": 0}
    i = 0
    while i < n:
        tok = tokens[i]
        if tok in quotes:
            quotes[tok] += 1
            i += 1
        elif _TERMINAL.fullmatch(tok):
            j = i + 1
            while j < n:
                t = tokens[j]
                if t in quotes:
                    if quotes[t] % 2 == 0:
                        break
                    quotes[t] += 1
                elif not (t in _CLOSING or _TERMINAL.fullmatch(t)):
                    break
                j += 1
            if j < n and not tokens[j][0].islower():
                out.append(tokens[start:j])
                start = j
            i = j
        else:
            i += 1
    if start < n:
        out.append(tokens[start:])
    return out


def iter_text(corpus: str, fileids=None, data_dir=None) -> Iterator[list[str]]:
    """Tokenised sentences of a raw-text corpus (abc, movie_reviews, webtext).

    Args:
        corpus: ``"abc"``, ``"movie_reviews"`` or ``"webtext"``.
        fileids: file ids such as ``"rural.txt"`` or ``"neg/cv000_29416.txt"``
            (default: all ``.txt`` files, sorted).
        data_dir: the data folder.

    Yields:
        One list of str tokens per sentence.

    Raises:
        ValueError: not a raw-text corpus.
    """
    if corpus not in _TEXT_CORPORA:
        raise ValueError(f"{corpus!r} is not a raw-text corpus; expected one of "
                         f"{', '.join(_TEXT_CORPORA)}")
    for _, data in _members(corpus, fileids, data_dir):
        for line in _lenient_lines(data):
            toks = _TOKEN_RE.findall(line)
            if toks:
                yield from split_sentences(toks)


def iter_words(corpus: str, fileids=None, data_dir=None) -> Iterator[list[str]]:
    """The plain words of any corpus but cmudict, one list per sentence, tags dropped.

    Args:
        corpus: a key of :data:`CORPORA` other than ``cmudict``.
        fileids: as for the corpus's reader (ignored for ``ud_english_ewt``).
        data_dir: the data folder.

    Yields:
        One list of str per sentence.

    Raises:
        ValueError: unknown corpus or cmudict.
    """
    if corpus in _TEXT_CORPORA:
        yield from iter_text(corpus, fileids, data_dir)
        return
    if corpus == "treebank":
        sents = iter_treebank(fileids, data_dir)
    elif corpus == "conll2000":
        sents = iter_conll2000(("train.txt", "test.txt") if fileids is None else fileids, data_dir)
    elif corpus == "masc_tagged":
        sents = iter_masc(fileids, data_dir)
    elif corpus == "brown":
        sents = iter_brown(fileids, data_dir)
    elif corpus == "ud_english_ewt":
        sents = iter_conllu(data_dir=data_dir)
    else:
        raise ValueError(f"corpus {corpus!r} has no words to read; expected one of "
                         f"{', '.join(c for c in CORPORA if c != 'cmudict')}")
    for sent in sents:
        yield [w for w, *_ in sent]


# --------------------------------------------------------------------------- named datasets

def _wsj_ids(first: int, last: int) -> list[str]:
    return [f"tagged/wsj_{i:04d}.pos" for i in range(first, last + 1)]


_WSJ_SMALL_MASC = re.compile(r"written/wsj_00\d\d\.txt")   # MASC's copies of wsj_0001-wsj_0099


def dataset_fileids(name: str, split: str | None = None, data_dir=None) -> list[tuple[str, str | None]]:
    """The files a named dataset reads, in reading order.

    Args:
        name: one of :data:`DATASETS`.
        split: ``"train"``, ``"valid"`` or ``"test"`` for ``brown-lm``; None otherwise.
        data_dir: the data folder (needed to list MASC and the text corpora).

    Returns:
        A list of (corpus, file id) pairs; the file id is None for ``ud_english_ewt``.

    Raises:
        ValueError: unknown dataset or split.
    """
    _check_dataset(name, split)
    if name == "wsj-small":
        return [("treebank", f) for f in _wsj_ids(1, 99)]
    if name == "wsj-train":
        return ([("conll2000", "train.txt"), ("conll2000", "test.txt")]
                + [("treebank", f) for f in _wsj_ids(100, 199)])
    if name == "brown-lm":
        ids = fileids("brown", data_dir)
        if len(ids) != 500:
            raise ValueError(f"brown-lm needs the 500 Brown files, found {len(ids)} in "
                             f"{corpus_path('brown', data_dir)}")
        part = {"train": ids[:400], "valid": ids[400:450], "test": ids[450:]}[split]
        return [("brown", f) for f in part]
    # mixed-text
    out = [("treebank", f) for f in _wsj_ids(100, 199)]
    out += [("conll2000", "train.txt"), ("conll2000", "test.txt")]
    out += [("masc_tagged", f) for f in fileids("masc_tagged", data_dir)
            if not _WSJ_SMALL_MASC.fullmatch(f)]
    for corpus in ("brown", "abc", "movie_reviews", "webtext"):
        out += [(corpus, f) for f in fileids(corpus, data_dir)]
    out.append(("ud_english_ewt", None))
    return out


def _check_dataset(name: str, split):
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    splits = _SPLITS.get(name)
    if splits is None:
        if split is not None:
            raise ValueError(f"dataset {name!r} has no splits, got split={split!r}")
    elif split not in splits:
        raise ValueError(f"dataset {name!r} needs split in {splits}, got {split!r}")


def _read_parts(parts, data_dir, words_only: bool) -> Iterator[list]:
    """Read (corpus, file id) pairs in order, grouping consecutive ids of one corpus."""
    for corpus, group in itertools.groupby(parts, key=lambda p: p[0]):
        ids = [f for _, f in group]
        if words_only:
            yield from iter_words(corpus, None if corpus == "ud_english_ewt" else ids, data_dir)
        elif corpus == "treebank":
            yield from iter_treebank(ids, data_dir)
        elif corpus == "conll2000":
            yield from iter_conll2000(ids, data_dir)
        else:
            raise ValueError(f"no tagged reader for {corpus!r} in a tagged dataset")


def iter_sentences(name: str, split: str | None = None, data_dir=None) -> Iterator[list]:
    """Stream the sentences of a named dataset (definitions in the module docstring).

    Args:
        name: ``"wsj-small"``, ``"wsj-train"``, ``"mixed-text"`` or ``"brown-lm"``.
        split: for ``brown-lm`` one of ``"train"``, ``"valid"``, ``"test"``; else None.
        data_dir: the data folder.

    Yields:
        For the WSJ datasets a list of (word, Penn tag) str pairs per sentence; for
        ``mixed-text`` and ``brown-lm`` a list of str words.

    Raises:
        ValueError: unknown dataset or split.
        CorpusFormatError: a malformed corpus file.
        FileNotFoundError: a missing archive.
    """
    parts = dataset_fileids(name, split, data_dir)
    if name == "brown-lm":
        vocab = set(brown_lm_vocabulary(data_dir))
        for sent in iter_words("brown", [f for _, f in parts], data_dir):
            yield [w if w in vocab else UNK for w in (x.lower() for x in sent)]
        return
    yield from _read_parts(parts, data_dir, words_only=(name == "mixed-text"))


def iter_wsj_tagged(data_dir=None) -> Iterator[list[tuple[str, str]]]:
    """All the WSJ tagged data, WSJ-small then WSJ-train (the tag dictionary's source).

    Args:
        data_dir: the data folder.

    Yields:
        One list of (word, Penn tag) str pairs per sentence.
    """
    yield from iter_sentences("wsj-small", data_dir=data_dir)
    yield from iter_sentences("wsj-train", data_dir=data_dir)


def load_dataset(name: str, split: str | None = None, data_dir=None) -> list[list]:
    """A named dataset as a list of sentences (use :func:`iter_sentences` to stream).

    Args:
        name, split, data_dir: as for :func:`iter_sentences`.

    Returns:
        The list of sentences :func:`iter_sentences` yields.
    """
    return list(iter_sentences(name, split, data_dir))


def token_count(name: str, split: str | None = None, data_dir=None) -> int:
    """The number of tokens of a named dataset (counted by streaming it).

    Args:
        name, split, data_dir: as for :func:`iter_sentences`.

    Returns:
        The token count, an int.
    """
    return sum(len(s) for s in iter_sentences(name, split, data_dir))


def brown_lm_vocabulary(data_dir=None) -> list[str]:
    """The Brown-LM vocabulary: the 10,000 most frequent lower-cased training words.

    Ties in frequency are broken by the words' string order, so the list is
    reproducible.  ``<unk>`` is not in it.  Computed once per data folder per
    process (kept in memory, never on disk).

    Args:
        data_dir: the data folder.

    Returns:
        A list of 10,000 str, most frequent first.
    """
    key = str(_data_dir(data_dir).resolve())
    return list(_brown_vocab(key))


@functools.lru_cache(maxsize=4)
def _brown_vocab(key: str) -> tuple[str, ...]:
    train = [f for _, f in dataset_fileids("brown-lm", "train", key)]
    counts: Counter = Counter()
    for sent in iter_words("brown", train, key):
        counts.update(w.lower() for w in sent)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(w for w, _ in ranked[:BROWN_LM_VOCAB_SIZE])

r"""Readers of the shared corpora, one generator over sentences per corpus format.

Every reader reads one archive member at a time (:func:`~fsmlearn.data.locate.read_members`);
nothing holds a whole corpus.  Words never contain whitespace (a CoNLL-U FORM
with a space is an error).  A malformed file raises
:class:`~fsmlearn.errors.CorpusFormatError`, whose message reads
``<archive>/<member>:<line>: <what> <quoted text>``; a missing archive or
member raises :class:`~fsmlearn.errors.CorpusNotFoundError`.

Readers (``fileids`` are member paths below the archive's top folder, as
:func:`~fsmlearn.data.locate.fileids` lists them, e.g. ``"tagged/wsj_0001.pos"`` or ``"ca01"``):

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
- :func:`iter_text`: raw text (abc, movie_reviews, webtext), each line
  tokenised and split into sentences by :mod:`fsmlearn.data.tokenise`
  (sentences never cross a line).  Raw files are decoded as UTF-8, falling
  back, line by line, to Windows-1252 and then Latin-1 (abc/science.txt and
  four webtext files are not UTF-8).  The movie reviews, already tokenised
  and lower-cased, go through the same tokeniser, which splits their
  clitics (``don't``) too.
- :func:`iter_words`: the plain words of any corpus, tags dropped.

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

Public names: iter_treebank, iter_conll2000, iter_masc, iter_brown,
iter_conllu, iter_text, iter_words, unescape_ptb.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

from ..errors import ArgumentError, CorpusFormatError, DatasetError
from .locate import CORPORA, TEXT_CORPORA, corpus_path, lenient_lines, read_members, strict_lines
from .tokenise import split_sentences, tokenize

__all__ = ["iter_treebank", "iter_conll2000", "iter_masc", "iter_brown", "iter_conllu",
           "iter_text", "iter_words", "unescape_ptb"]

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
        CorpusNotFoundError: missing archive or member.
    """
    for where, data in read_members("treebank", fileids, data_dir):
        pending: list | None = None     # the last complete sentence, not yet yielded
        cur: list = []
        blanks = 0
        hard = False
        prev_chunk = False
        for lineno, line in enumerate(strict_lines(where, data), 1):
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
    for where, data in read_members("conll2000", fileids, data_dir):
        cur: list = []
        for lineno, line in enumerate(strict_lines(where, data), 1):
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
    for where, data in read_members("masc_tagged", fileids, data_dir):
        for lineno, line in enumerate(strict_lines(where, data), 1):
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
    for where, data in read_members("brown", fileids, data_dir):
        for lineno, line in enumerate(strict_lines(where, data), 1):
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
        ArgumentError: unknown column (a ``ValueError``).
        CorpusFormatError: a line without 10 tab-separated fields, a bad ID, an
            empty FORM, or text that is not UTF-8; names file and line.
    """
    col = {"upos": 3, "xpos": 4}.get(column)
    if col is None:
        raise ArgumentError(f"column must be 'xpos' or 'upos', got {column!r}")
    p = Path(path) if path is not None else corpus_path("ud_english_ewt", data_dir)
    if p.suffix == ".gz":
        with gzip.open(p, "rb") as f:
            data = f.read()
    else:
        data = p.read_bytes()
    where = str(p)
    cur: list = []
    for lineno, line in enumerate(strict_lines(where, data), 1):
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



# --------------------------------------------------------------------------- raw text and plain words

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
        DatasetError: not a raw-text corpus (a ``ValueError``).
    """
    if corpus not in TEXT_CORPORA:
        raise DatasetError(f"{corpus!r} is not a raw-text corpus; expected one of "
                           f"{', '.join(TEXT_CORPORA)}")
    for _, data in read_members(corpus, fileids, data_dir):
        for line in lenient_lines(data):
            toks = tokenize(line)
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
        DatasetError: unknown corpus or cmudict (a ``ValueError``).
    """
    if corpus in TEXT_CORPORA:
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
        raise DatasetError(f"corpus {corpus!r} has no words to read; expected one of "
                           f"{', '.join(c for c in CORPORA if c != 'cmudict')}")
    for sent in sents:
        yield [w for w, *_ in sent]


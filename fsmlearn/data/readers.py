r"""Readers of the shared corpora, one generator over sentences per corpus format.

Every reader reads one archive member at a time (:func:`~fsmlearn.data.locate.read_members`);
nothing holds a whole corpus.  Words never contain whitespace or control
characters.  A missing archive or member raises
:class:`~fsmlearn.errors.CorpusNotFoundError`; a malformed file raises
:class:`~fsmlearn.errors.CorpusFormatError`, whose message reads
``<archive>/<member>:<line>: <what> <quoted value>`` (the 1-based line, and
the offending token, tag or line quoted).  Malformed means, in the tagged
formats: text that is not UTF-8 (the message says so and quotes the line), a
control character other than whitespace (U+0000-U+0008, U+000E-U+001B,
U+007F-U+009F but U+0085), a token or line that does not parse, a tag outside
the format's tag set (below), or an empty sentence.  A corrupt archive or
``.gz`` file raises a CorpusFormatError naming the file ("cannot
decompress ...").  An empty file is not an error: it has no sentences.

Readers (``fileids`` are member paths below the archive's top folder, as
:func:`~fsmlearn.data.locate.fileids` lists them, e.g. ``"tagged/wsj_0001.pos"`` or ``"ca01"``).
Each reader's parsing of one file is public too, as ``parse_<format>_lines(where,
lines, ...)``: ``where`` names the file in error messages and ``lines`` are
its decoded lines (:func:`~fsmlearn.data.locate.strict_lines` gives both
from a file's bytes, e.g. for a file outside the shared archives):

- :func:`iter_treebank` (:func:`parse_treebank_lines`): the Penn Treebank
  sample's tagged files ``tagged/wsj_NNNN.pos``, sentences of (word, tag).
  Tokens are ``word/TAG`` (split at the last ``/``; neither part empty),
  separated by whitespace.  The NP-chunk brackets ``[ ... ]`` (output of a
  stochastic chunker, "best ignored" says the sample's README) are dropped;
  a chunk line starts with ``[`` and ends with ``]``, holds at least one
  token, and has no other bracket token.  Tokens tagged ``-NONE-`` (empty
  elements, traces) are dropped; the sample's tagged files hold none, but
  the Treebank format allows them.  Every other tag must be one of the 45
  Penn tags (:data:`~fsmlearn.data.tagsets.PENN_TAGS`), spelled ``(`` /
  ``)`` for ``-LRB-`` / ``-RRB-`` or written as a compound ``A|B`` of Penn
  tags.  Sentences are the blocks separated by blank lines or ``=====``
  lines, except that a single blank line after a chunk line does not end a
  sentence (the files put one after a chunk inside a sentence, two after a
  chunk that ends one), and closing quotes or brackets (tags ``''``,
  ``-RRB-``) that open a block move to the end of the sentence before it
  (the files put a quote closing a sentence after its final period, on the
  next line).  This yields 3,946 sentences for wsj_0001-wsj_0199 against the
  parsed files' 3,914: the tagged files split a few sentences the parses
  join, e.g. "... Finmeccanica S.p / A. for $ 295 million ." in wsj_0007.
- :func:`iter_conll2000` (:func:`parse_conll2000_lines`): CoNLL-2000
  ``train.txt`` / ``test.txt``, one ``word POS chunk`` per line (exactly
  three whitespace-separated fields), one blank line between sentences
  (blank lines at the end of the file are ignored; a blank line at the start
  or after another blank line is an empty sentence, an error); the POS tag
  is a Penn tag as for the Treebank, the chunk tag ``O`` or ``B-``/``I-``
  and one of :data:`CONLL2000_CHUNK_TYPES`.  Yields (word, tag) pairs, or
  (word, tag, chunk) triples with ``chunks=True``.
- :func:`iter_masc` (:func:`parse_masc_lines`): MASC ``written/*.txt`` and
  ``spoken/*.txt``, one sentence per non-blank line of ``word_TAG`` tokens
  (split at the last ``_``).  Known defects of the MASC export are repaired
  as follows: a piece without ``_`` (a multi-word token like ``D. C._NN`` or
  ``. . ._...``) takes the tag of the next tagged piece on its line, or
  ``None`` at the end of a line (about 10 tokens: URLs, rules of asterisks);
  tokens with an empty word (``_UH``, 22 of them) are dropped (a line of
  nothing else is an empty sentence, an error).  MASC's tags are noisy
  (``PP``, ``LRB``, ``UH```, ...): any non-empty tag is kept as written; MASC
  has no tag set to check against.  A token ``word_`` (empty tag) is an
  error.
- :func:`iter_brown` (:func:`parse_brown_lines`): the Brown Corpus ``c[a-r]NN``
  files, one sentence per non-blank line of ``word/tag`` tokens (split at
  the last ``/``), Brown tags (lower case) kept as written and checked by
  :func:`is_brown_tag`: an optional ``fw-`` prefix, one or more of
  :data:`BROWN_BASE_TAGS` joined by ``+``, and any of the suffixes ``-tl``,
  ``-hl``, ``-nc`` (and ``-t``, ``-n``, the truncated suffixes of two tags
  in the corpus).  Brown tags are never mapped to or mixed with Penn tags.
- :func:`iter_conllu` (:func:`parse_conllu_lines`): a CoNLL-U file (UD
  English EWT dev): (FORM, XPOS) or (FORM, UPOS) pairs.  Every line is a
  comment (``#...``), a blank line (ending a sentence; blank lines at the
  end of the file are ignored, others after a blank line or at the start
  are empty sentences, errors), or ten tab-separated fields.  Word IDs are
  1, 2, 3, ... within a sentence; multiword-token lines (``1-2``) and empty
  nodes (``8.1``) are skipped; a sentence must hold at least one word.
  FORM is non-empty without whitespace; XPOS is a Penn tag or one of
  :data:`UD_XPOS_EXTRA`, UPOS one of :data:`UPOS_TAGS` (``_``, no tag, is
  an error); the ``tags`` argument accepts any tag instead (a treebank's own
  XPOS) or a given tag set.  Plain or ``.gz`` files.  A user's own files
  (``word/TAG`` or CoNLL-U) are read by :mod:`fsmlearn.data.tagged`.
- :func:`iter_text` (:func:`parse_text_lines`): raw text (abc,
  movie_reviews, webtext), each line tokenised and split into sentences by
  :mod:`fsmlearn.data.tokenise` (sentences never cross a line).  Raw files
  are decoded as UTF-8, falling back, line by line, to Windows-1252 and then
  Latin-1 (abc/science.txt and four webtext files are not UTF-8), so any
  bytes are accepted.  The movie reviews, already tokenised and lower-cased,
  go through the same tokeniser, which splits their clitics (``don't``) too.
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
``VBG|NN``, in the Treebank sample; two in MASC; a compound with an empty
alternative is an error).  With ``normalize=False`` words and tags are
returned as written.

Public names: iter_treebank, iter_conll2000, iter_masc, iter_brown,
iter_conllu, iter_text, iter_words, unescape_ptb, parse_treebank_lines,
parse_conll2000_lines, parse_masc_lines, parse_brown_lines,
parse_conllu_lines, parse_text_lines, UPOS_TAGS, UD_XPOS_EXTRA,
CONLL2000_CHUNK_TYPES, BROWN_BASE_TAGS, is_brown_tag.
"""

from __future__ import annotations

import functools
import gzip
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import ArgumentError, CorpusFormatError, CorpusNotFoundError, DatasetError
from .locate import CORPORA, TEXT_CORPORA, corpus_path, lenient_lines, read_members, strict_lines
from .tokenise import split_sentences, tokenize

__all__ = ["iter_treebank", "iter_conll2000", "iter_masc", "iter_brown", "iter_conllu",
           "iter_text", "iter_words", "unescape_ptb", "parse_treebank_lines",
           "parse_conll2000_lines", "parse_masc_lines", "parse_brown_lines",
           "parse_conllu_lines", "parse_text_lines", "UPOS_TAGS", "UD_XPOS_EXTRA",
           "CONLL2000_CHUNK_TYPES", "BROWN_BASE_TAGS", "is_brown_tag"]

# --------------------------------------------------------------------------- tag sets

#: The 17 Universal Dependencies part-of-speech tags (CoNLL-U column 4, UPOS).
UPOS_TAGS: tuple[str, ...] = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
                              "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X")
#: The XPOS tags of UD English beyond the 45 Penn tags (their 17-tag images are in
#: :data:`fsmlearn.data.tagsets.TAG17_OF`): hyphen, superfluous punctuation, address,
#: affix, non-final part of a split word, unknown.
UD_XPOS_EXTRA: tuple[str, ...] = ("HYPH", "NFP", "ADD", "AFX", "GW", "XX")
#: The chunk types of CoNLL-2000 (chunk tags are ``O``, ``B-<type>``, ``I-<type>``).
CONLL2000_CHUNK_TYPES: tuple[str, ...] = ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP",
                                          "PRT", "SBAR", "UCP", "VP")
#: The simple tags of the Brown Corpus (those of its manual, with the possessive ``$``
#: and negated ``*`` forms and the punctuation tags the corpus uses); see :func:`is_brown_tag`.
BROWN_BASE_TAGS: tuple[str, ...] = tuple("""
    ' '' ( ) * , -- . : `` abl abn abx ap ap$ at be bed bed* bedz bedz* beg bem bem* ben ber
    ber* bez bez* cc cd cd$ cs do do* dod dod* doz doz* dt dt$ dti dts dtx ex hv hv* hvd hvd*
    hvg hvn hvz hvz* in jj jj$ jjr jjs jjt md md* nil nn nn$ nns nns$ np np$ nps nps$ nr nr$
    nrs od pn pn$ pp pp$ pp$$ ppl ppls ppo pps ppss ql qlp rb rb$ rbr rbt rn rp to uh vb vbd
    vbg vbn vbz wdt wp$ wpo wps wql wrb""".split())

_BROWN_BASE = "|".join(re.escape(t) for t in sorted(BROWN_BASE_TAGS, key=len, reverse=True))
_BROWN_TAG = re.compile(rf"(?:fw-)?(?:{_BROWN_BASE})(?:\+(?:{_BROWN_BASE}))*(?:-(?:tl|hl|nc|t|n))*")


def is_brown_tag(tag: str) -> bool:
    """Whether ``tag`` is a Brown Corpus tag.

    A Brown tag is an optional ``fw-`` (foreign word) prefix, one or more of
    :data:`BROWN_BASE_TAGS` joined by ``+`` (contractions, ``ppss+md``), and
    any of the suffixes ``-tl`` (title), ``-hl`` (headline), ``-nc`` (cited
    word), or ``-t`` / ``-n`` (truncated suffixes of two tags in the corpus).
    Every one of the 472 tags of the shared Brown Corpus is one.

    Args:
        tag: a str.

    Returns:
        True or False.
    """
    return _BROWN_TAG.fullmatch(tag) is not None


@functools.cache
def _penn_tags() -> frozenset:
    # imported here: tagsets imports datasets, which imports this module
    from .tagsets import PENN_TAGS
    return frozenset(PENN_TAGS)


@functools.cache
def _conllu_tags(column: str) -> frozenset:
    if column == "upos":
        return frozenset(UPOS_TAGS)
    return _penn_tags() | frozenset(UD_XPOS_EXTRA)


_CHUNK_TAG = re.compile(rf"O|[BI]-(?:{'|'.join(CONLL2000_CHUNK_TYPES)})")

# --------------------------------------------------------------------------- normalisation

_BRACKET_WORDS = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}",
                  "-LSB-": "[", "-RSB-": "]"}
_TAG_FIXES = {"(": "-LRB-", ")": "-RRB-"}
# control characters that str.split() does not take for whitespace
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


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


def _clip(line: str, at: int = 0, width: int = 80) -> str:
    """At most ``width`` characters of ``line`` around position ``at``, '...' marking the cuts
    (binary data can make a "line" of thousands of characters; an error message quotes it in one
    line of reasonable length)."""
    if len(line) <= width:
        return line
    start = max(0, min(at - width // 2, len(line) - width))
    return ("..." if start else "") + line[start:start + width] + ("..." if start + width < len(line) else "")


def _no_control(where: str, lineno: int, line: str) -> None:
    m = _CONTROL.search(line)
    if m is not None:
        what = " (binary data?)" if m.group() == "\x00" else ""
        raise CorpusFormatError(f"control character U+{ord(m.group()):04X}{what} in line "
                                f"{_clip(line, m.start())!r}", where, lineno)


def _token_lines(where: str, lines: Iterable[str]) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, line, its whitespace-split tokens) of each non-blank line; a control character raises."""
    for lineno, line in enumerate(lines, 1):
        pieces = line.split()
        if not pieces:
            continue
        _no_control(where, lineno, line)
        yield lineno, line, pieces


def _split_token(tok: str, sep: str, where: str, lineno: int, line: str):
    i = tok.rfind(sep)
    if i <= 0 or i == len(tok) - 1:
        what = "no tag separator" if i < 0 else ("empty word" if i == 0 else "empty tag")
        raise CorpusFormatError(f"token {tok!r} is not word{sep}TAG ({what}) in line {line!r}",
                                where, lineno)
    return tok[:i], tok[i + 1:]


def _penn_tag(tag: str, tok: str, normalize: bool, where: str, lineno: int) -> str:
    """A WSJ-source tag checked against the Penn tags (``(``, ``)``, ``A|B`` allowed),
    normalised if asked."""
    penn = _penn_tags()
    if tag in penn:
        return tag
    alts = [_TAG_FIXES.get(a, a) for a in tag.split("|")]
    if not all(a in penn for a in alts):
        raise CorpusFormatError(f"tag {tag!r} of token {tok!r} is not a Penn tag (one of the 45, "
                                f"'(' or ')', or a compound A|B of them)", where, lineno)
    return alts[0] if normalize else tag


def _masc_tag(tag: str, tok: str, normalize: bool, where: str, lineno: int) -> str:
    if not normalize:
        return tag
    if "|" in tag and len(tag) > 1:
        first = tag.split("|", 1)[0]
        if not first:
            raise CorpusFormatError(f"compound tag {tag!r} of token {tok!r} has an empty first "
                                    f"alternative", where, lineno)
        tag = first
    return _TAG_FIXES.get(tag, tag)


class _Blocks:
    """The blank-line rule of the CoNLL formats: one blank line between sentences, any
    number at the end of the file; a blank line at the start or after a blank line
    begins an empty sentence, an error once a non-blank line follows."""

    def __init__(self, where: str):
        self.where = where
        self.empty_at = None

    def blank(self, lineno: int, after_sentence: bool) -> None:
        if not after_sentence and self.empty_at is None:
            self.empty_at = lineno

    def text(self) -> None:
        if self.empty_at is not None:
            where_ = ("the file starts with a blank line" if self.empty_at == 1
                      else "a blank line after a blank line")
            raise CorpusFormatError(f"empty sentence ({where_}; sentences are separated by "
                                    f"exactly one blank line): ''", self.where, self.empty_at)


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
        CorpusFormatError: text that is not UTF-8, a control character, a token
            that is not ``word/TAG``, a tag that is not a Penn tag, a chunk
            bracket out of place or an empty chunk; names member and line.
        CorpusNotFoundError: missing archive or member.
    """
    for where, data in read_members("treebank", fileids, data_dir):
        yield from parse_treebank_lines(where, strict_lines(where, data), normalize)


def parse_treebank_lines(where: str, lines: Iterable[str], normalize: bool = True
                         ) -> Iterator[list[tuple[str, str]]]:
    """Sentences of one Treebank tagged file, given its lines.

    Accepted forms: see :func:`iter_treebank` and the module docstring.

    Args:
        where: the file's name for error messages (e.g. ``<archive>/<member>``).
        lines: its lines, decoded, without line ends (e.g. from
            :func:`~fsmlearn.data.locate.strict_lines`).
        normalize: unescape words and normalise tags.

    Yields:
        One non-empty list of (word, tag) str pairs per sentence.

    Raises:
        CorpusFormatError: as for :func:`iter_treebank`; names ``where`` and the line.
    """
    pending: list | None = None     # the last complete sentence, not yet yielded
    cur: list = []
    blanks = 0
    hard = False
    prev_chunk = False
    for lineno, line in enumerate(lines, 1):
        pieces = line.split()
        if not pieces:
            blanks += 1
            continue
        _no_control(where, lineno, line)
        if len(pieces) == 1 and _SEP_LINE.fullmatch(pieces[0]):
            hard = True
            continue
        is_chunk = pieces[0] == "["
        if is_chunk:
            if len(pieces) == 1 or pieces[-1] != "]":
                raise CorpusFormatError(f"chunk '[' not closed on its line: {line!r}", where, lineno)
            if len(pieces) == 2:
                raise CorpusFormatError(f"empty chunk '[ ]' in line {line!r}", where, lineno)
        if cur and (hard or (blanks and not (blanks == 1 and prev_chunk))):
            pending = yield from _treebank_push(pending, cur)
            cur = []
        blanks = 0
        hard = False
        prev_chunk = is_chunk
        body = pieces[1:-1] if is_chunk else pieces
        for tok in body:
            if tok == "[" or tok == "]":
                raise CorpusFormatError(f"chunk bracket {tok!r} not at the ends of a chunk line: "
                                        f"{line!r}", where, lineno)
            word, tag = _split_token(tok, "/", where, lineno, line)
            if tag == "-NONE-":
                continue
            tag = _penn_tag(tag, tok, normalize, where, lineno)
            if normalize:
                word = unescape_ptb(word)
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

    Accepted forms: see the module docstring.

    Args:
        fileids: ``"train.txt"``, ``"test.txt"`` or both (default, in that order).
        data_dir: the data folder.
        chunks: also return the chunk tag.
        normalize: unescape words and normalise tags (see the module docstring).

    Yields:
        One list per sentence of (word, tag) str pairs, or (word, tag, chunk)
        triples when ``chunks`` is true.

    Raises:
        CorpusFormatError: text that is not UTF-8, a control character, a line
            without exactly three fields, a POS tag that is not a Penn tag, a bad
            chunk tag, or an empty sentence; names member and line.
        CorpusNotFoundError: missing archive or member.
    """
    for where, data in read_members("conll2000", fileids, data_dir):
        yield from parse_conll2000_lines(where, strict_lines(where, data), chunks, normalize)


def parse_conll2000_lines(where: str, lines: Iterable[str], chunks: bool = False,
                          normalize: bool = True) -> Iterator[list[tuple]]:
    """Sentences of one CoNLL-2000 file, given its lines.

    Accepted forms: see :func:`iter_conll2000` and the module docstring.

    Args:
        where: the file's name for error messages.
        lines: its lines, decoded, without line ends.
        chunks: also return the chunk tag.
        normalize: unescape words and normalise tags.

    Yields:
        One non-empty list per sentence of (word, tag) or (word, tag, chunk) tuples.

    Raises:
        CorpusFormatError: as for :func:`iter_conll2000`; names ``where`` and the line.
    """
    cur: list = []
    blocks = _Blocks(where)
    for lineno, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            blocks.blank(lineno, bool(cur))
            if cur:
                yield cur
                cur = []
            continue
        blocks.text()
        _no_control(where, lineno, line)
        if len(fields) != 3:
            raise CorpusFormatError(
                f"expected 3 fields 'word POS chunk', got {len(fields)}: {line!r}",
                where, lineno)
        word, tag, chunk = fields
        tag = _penn_tag(tag, word, normalize, where, lineno)
        if not _CHUNK_TAG.fullmatch(chunk):
            raise CorpusFormatError(f"chunk tag {chunk!r} of token {word!r} is not O, B-TYPE or "
                                    f"I-TYPE with TYPE one of {' '.join(CONLL2000_CHUNK_TYPES)}",
                                    where, lineno)
        if normalize:
            word = unescape_ptb(word)
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
        CorpusFormatError: text that is not UTF-8, a control character, a token
            with an empty tag (``word_``) or a compound tag with an empty first
            alternative, or a line of nothing but empty words; names member and line.
        CorpusNotFoundError: missing archive or member.
    """
    for where, data in read_members("masc_tagged", fileids, data_dir):
        yield from parse_masc_lines(where, strict_lines(where, data), normalize)


def parse_masc_lines(where: str, lines: Iterable[str], normalize: bool = True
                     ) -> Iterator[list[tuple[str, str | None]]]:
    """Sentences of one MASC file, given its lines.

    Accepted forms: see :func:`iter_masc` and the module docstring.

    Args:
        where: the file's name for error messages.
        lines: its lines, decoded, without line ends.
        normalize: normalise tags.

    Yields:
        One non-empty list of (word, tag or None) pairs per non-blank line.

    Raises:
        CorpusFormatError: as for :func:`iter_masc`; names ``where`` and the line.
    """
    for lineno, line, pieces in _token_lines(where, lines):
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
            tag = _masc_tag(tok[i + 1:], tok, normalize, where, lineno)
            for w in waiting:
                sent.append((w, tag))
            waiting = []
            if i > 0:
                sent.append((tok[:i], tag))
        for w in waiting:
            sent.append((w, None))
        if not sent:
            raise CorpusFormatError(f"empty sentence: every token has an empty word in line "
                                    f"{line!r}", where, lineno)
        yield sent


def iter_brown(fileids=None, data_dir=None) -> Iterator[list[tuple[str, str]]]:
    """Sentences (non-blank lines) of the Brown Corpus, ``word/tag`` tokens, Brown tags.

    Accepted forms: see the module docstring and :func:`is_brown_tag`.

    Args:
        fileids: file ids such as ``"ca01"`` (default: the 500 files, sorted).
        data_dir: the data folder.

    Yields:
        One list of (word, Brown tag) str pairs per sentence.

    Raises:
        CorpusFormatError: text that is not UTF-8, a control character, a token
            that is not ``word/tag``, or a tag that is not a Brown tag; names
            member and line.
        CorpusNotFoundError: missing archive or member.
    """
    for where, data in read_members("brown", fileids, data_dir):
        yield from parse_brown_lines(where, strict_lines(where, data))


def parse_brown_lines(where: str, lines: Iterable[str]) -> Iterator[list[tuple[str, str]]]:
    """Sentences of one Brown Corpus file, given its lines.

    Accepted forms: see :func:`iter_brown`.

    Args:
        where: the file's name for error messages.
        lines: its lines, decoded, without line ends.

    Yields:
        One non-empty list of (word, Brown tag) str pairs per non-blank line.

    Raises:
        CorpusFormatError: as for :func:`iter_brown`; names ``where`` and the line.
    """
    def brown_tag(tag, tok, lineno):
        if not _BROWN_TAG.fullmatch(tag):
            raise CorpusFormatError(f"tag {tag!r} of token {tok!r} is not a Brown tag", where, lineno)

    yield from word_tag_lines(where, lines, brown_tag)


def word_tag_lines(where: str, lines: Iterable[str], check_tag=None, quote=None
                   ) -> Iterator[list[tuple[str, str]]]:
    """The sentences of ``word/TAG`` text, one per non-blank line (the tag after the last
    ``/``): the one loop of the Brown reader and of a user's tagged files.

    Args:
        where: the file's name for error messages.
        lines: its lines, decoded, without line ends.
        check_tag: optional callable(tag, token, line number) that raises on a bad tag.
        quote: optional callable giving the line as a malformed token's message quotes it.

    Raises:
        CorpusFormatError: a control character or a token that is not ``word/TAG``
            (no ``/``, empty word or tag), naming ``where``, the line and the token.
    """
    for lineno, line, pieces in _token_lines(where, lines):
        sent = []
        for tok in pieces:
            word, tag = _split_token(tok, "/", where, lineno, line if quote is None else quote(line))
            if check_tag is not None:
                check_tag(tag, tok, lineno)
            sent.append((word, tag))
        yield sent


_CONLLU_ID = re.compile(r"[1-9][0-9]*")
_CONLLU_SKIP = re.compile(r"[1-9][0-9]*-[1-9][0-9]*|[0-9]+\.[1-9][0-9]*")


def iter_conllu(path=None, data_dir=None, column: str = "xpos", tags=None
                ) -> Iterator[list[tuple[str, str]]]:
    """Sentences of a CoNLL-U file (plain or ``.gz``), default the UD English EWT dev split.

    Accepted forms: see the module docstring.

    Args:
        path: a ``.conllu`` or ``.conllu.gz`` file; default the corpus ``ud_english_ewt``.
        data_dir: the data folder (used when ``path`` is None).
        column: ``"xpos"`` (column 5, Penn tags for EWT) or ``"upos"`` (column 4).
        tags: the tags accepted, as for :func:`parse_conllu_lines`.

    Yields:
        One list of (FORM, tag) str pairs per sentence; comment lines,
        multiword-token lines (``1-2``) and empty nodes (``8.1``) are skipped.

    Raises:
        ArgumentError: unknown column (a ``ValueError``).
        CorpusNotFoundError: ``path`` is not a file.
        CorpusFormatError: a ``.gz`` file that cannot be decompressed (names the
            file), or as for :func:`parse_conllu_lines` (names file and line).
    """
    if column not in ("upos", "xpos"):
        raise ArgumentError(f"column must be 'xpos' or 'upos', got {column!r}")
    p = Path(path) if path is not None else corpus_path("ud_english_ewt", data_dir)
    if not p.is_file():
        raise CorpusNotFoundError(f"CoNLL-U file {str(p)!r} not found", p)
    data = p.read_bytes()
    if p.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise CorpusFormatError(f"cannot decompress gzip data: {e}", p) from None
    where = str(p)
    yield from parse_conllu_lines(where, strict_lines(where, data), column, tags)


def parse_conllu_lines(where: str, lines: Iterable[str], column: str = "xpos", tags=None,
                       tagset_name: str | None = None) -> Iterator[list[tuple[str, str]]]:
    """Sentences of one CoNLL-U file, given its lines.

    Accepted forms: see the module docstring.

    Args:
        where: the file's name for error messages.
        lines: its lines, decoded, without line ends.
        column: ``"xpos"`` or ``"upos"``.
        tags: the tags accepted: None (default) for the column's own set
            (:data:`UPOS_TAGS`; Penn tags and :data:`UD_XPOS_EXTRA` for XPOS),
            ``"any"`` for any tag but ``_`` (no tag), e.g. a treebank's
            language-specific XPOS, or a collection of tag strings.
        tagset_name: how an error message names a collection ``tags`` (default:
            lists them).

    Yields:
        One non-empty list of (FORM, tag) str pairs per sentence.

    Raises:
        ArgumentError: unknown column.
        CorpusFormatError: a control character, a line that is not a comment,
            blank or ten tab-separated fields, a bad or out-of-sequence ID, an
            empty FORM or one with whitespace, a tag outside the column's tag
            set, or an empty sentence; names ``where`` and the line.
    """
    col = {"upos": 3, "xpos": 4}.get(column)
    if col is None:
        raise ArgumentError(f"column must be 'xpos' or 'upos', got {column!r}")
    if tags is None:
        accepted = _conllu_tags(column)
        what = ("a UD part-of-speech tag" if column == "upos"
                else "a Penn tag or one of " + " ".join(UD_XPOS_EXTRA))
    elif isinstance(tags, str):
        if tags != "any":
            raise ArgumentError(f"tags must be None, 'any' or a collection of tags, got {tags!r}")
        accepted, what = None, "a tag (column empty or '_')"
    else:
        accepted = frozenset(tags)
        shown = " ".join(sorted(accepted))
        what = "one of " + (tagset_name or f"the {len(accepted)} tags asked for ({_clip(shown, 0, 120)})")
    cur: list = []
    first = 0          # first line of the current sentence block, 0 before it starts
    blocks = _Blocks(where)
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            if first and not cur:
                raise CorpusFormatError(f"empty sentence: lines {first}-{lineno - 1} hold no "
                                        f"word line (only comments, multiword tokens or empty "
                                        f"nodes): {line!r}", where, first)
            blocks.blank(lineno, bool(cur))
            if cur:
                yield cur
                cur = []
            first = 0
            continue
        blocks.text()
        _no_control(where, lineno, line)
        if not first:
            first = lineno
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
        if int(tid) != len(cur) + 1:
            raise CorpusFormatError(f"token ID {tid!r} out of sequence (expected "
                                    f"'{len(cur) + 1}') in line {line!r}", where, lineno)
        form = fields[1]
        if not form or any(c.isspace() for c in form):
            raise CorpusFormatError(f"empty FORM or FORM with whitespace {form!r} in line {line!r}",
                                    where, lineno)
        tag = fields[col]
        bad = (not tag or tag == "_") if accepted is None else tag not in accepted
        if bad:
            raise CorpusFormatError(f"{column.upper()} {tag!r} of FORM {form!r} is not {what}",
                                    where, lineno)
        cur.append((form, tag))
    if first and not cur:
        raise CorpusFormatError("empty sentence: the lines from here to the end of the file "
                                "hold no word line (only comments, multiword tokens or empty "
                                "nodes)", where, first)
    if cur:
        yield cur


# --------------------------------------------------------------------------- raw text and plain words

def iter_text(corpus: str, fileids=None, data_dir=None) -> Iterator[list[str]]:
    """Tokenised sentences of a raw-text corpus (abc, movie_reviews, webtext).

    Any bytes are accepted (see the module docstring for the decoding).

    Args:
        corpus: ``"abc"``, ``"movie_reviews"`` or ``"webtext"``.
        fileids: file ids such as ``"rural.txt"`` or ``"neg/cv000_29416.txt"``
            (default: all ``.txt`` files, sorted).
        data_dir: the data folder.

    Yields:
        One list of str tokens per sentence.

    Raises:
        DatasetError: not a raw-text corpus (a ``ValueError``).
        CorpusNotFoundError: missing archive or member.
    """
    if corpus not in TEXT_CORPORA:
        raise DatasetError(f"{corpus!r} is not a raw-text corpus; expected one of "
                           f"{', '.join(TEXT_CORPORA)}")
    for _, data in read_members(corpus, fileids, data_dir):
        yield from parse_text_lines(lenient_lines(data))


def parse_text_lines(lines: Iterable[str]) -> Iterator[list[str]]:
    """Tokenised sentences of raw text, given its lines (each line split on its own).

    Args:
        lines: decoded lines (e.g. from :func:`~fsmlearn.data.locate.lenient_lines`).

    Yields:
        One non-empty list of non-empty str tokens without whitespace per sentence.
    """
    for line in lines:
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
        CorpusFormatError, CorpusNotFoundError: as for the corpus's reader.
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

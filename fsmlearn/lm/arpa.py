"""ARPA backoff language-model files: a streaming reader, a validator and a writer.

Format (Doug Paul's ARPA format as written by SRILM and KenLM)::

    \\data\\
    ngram 1=N1
    ...
    \\1-grams:
    logprob <TAB> word <TAB> backoff
    ...
    \\end\\

Fields may be separated by tabs or spaces.  The reader streams the file
(plain, ``.gz``, ``.bz2`` or ``.xz``) in large blocks and parses each block in
numba: words are looked up in a byte-level hash of the unigram vocabulary and
numbers are parsed exactly (Clinger's fast path, an integer mantissa below
2**53 times an exact power of ten, which is correctly rounded; anything else
goes through Python's ``float``).  Memory is the model's arrays plus one block.

Every problem raises :class:`~fsmlearn.errors.ArpaFormatError` with the file,
the 1-based line number and the offending text: a header count that does not
match its section, sections out of order, a wrong number of fields, a bad
number, an unknown word, a missing ``\\end\\``.

Public names: read_arpa, write_arpa, check_arpa (files are opened by
:func:`fsmlearn.data.text.open_text`, compressed by extension).
"""

from __future__ import annotations

import lzma
import math
import re
import zlib
from pathlib import Path

import numba as nb
import numpy as np

from ..data.text import open_text
from ..errors import (ArpaContextError, ArpaCountError, ArpaDuplicateError, ArpaFormatError,
                      ArpaSectionError, ArpaValueError, MachineError)
from ..fsm.atomic import atomic_path
from .index import NGramIndex, NGramIndexError
from .model import BOS, EOS, UNK, BackoffLM, compile_lm
from .vocab import (DIGIT_0, NEWLINE, SPACE, TAB, ByteVocab, build_table, is_space, line_end, next_token,
                    vocab_find)

_BLOCK = 64 << 20
_HEADER_RE = re.compile(rb"^ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECTION_RE = re.compile(rb"^\\(\d+)-grams:\s*$")

# parser status codes (_FULL: the arrays are full before the header's count; the caller grows them)
_OK, _STOP, _E_FIELDS, _E_NUMBER, _E_WORD, _E_TOO_MANY, _E_DUP_UNIGRAM, _FULL = 0, 1, 2, 3, 4, 5, 6, 7
_REASONS = {
    _E_FIELDS: "wrong number of fields for a {k}-gram (expected {k} words after the probability, "
               "then an optional numeric backoff)",
    _E_NUMBER: "not a number",
    _E_WORD: "word not among the 1-grams",
    _E_TOO_MANY: "more {k}-grams than the header's count {count}",
    _E_DUP_UNIGRAM: "word listed twice among the 1-grams",
}


# byte values the parser tests (module-level ints: numba compiles them as constants)
_DIGIT_9 = ord("9")
_MINUS = ord("-")
_PLUS = ord("+")
_DOT = ord(".")
_BACKSLASH = ord("\\")
_EXP_CHARS = (ord("e"), ord("E"))
_INF_NAN_CHARS = (ord("i"), ord("I"), ord("n"), ord("N"))


# ----------------------------------------------------------------- numba parts
_POW10 = np.array([10.0 ** i for i in range(23)])


@nb.njit(cache=True)
def _parse_number(buf, s, e, pow10):
    """Parse the decimal number buf[s:e] by Clinger's fast path.

    An integer mantissa of at most 18 significant digits below 2**53, times a
    power of ten in 10**-22 .. 10**22, is exact in float64, so one
    multiplication or division by the exact power gives the correctly rounded
    value.  Anything else (more digits, a larger exponent, ``inf``/``nan``)
    is left to a slow, correctly rounded parse by the caller.

    Args:
        buf: uint8 [n], the text; s, e: the field's bounds (no whitespace inside).
        pow10: float64 [23], ``10.0 ** i`` (:data:`_POW10`).

    Returns:
        (value float64, ok bool, exact bool): ``ok`` False: not a number;
        ``exact`` False: a number the fast path cannot give (value 0.0).
    """
    i = s
    neg = False
    if i < e and (buf[i] == _MINUS or buf[i] == _PLUS):
        neg = buf[i] == _MINUS
        i += 1
    if i >= e:
        return 0.0, False, True
    # inf / nan spelled out: leave to the slow path
    c = buf[i]
    if c in _INF_NAN_CHARS:
        return 0.0, True, False
    mant = np.int64(0)
    digits = 0
    exp10 = 0
    seen = False
    while i < e and DIGIT_0 <= buf[i] <= _DIGIT_9:
        if digits < 18:
            mant = mant * 10 + (buf[i] - DIGIT_0)
            if mant > 0:
                digits += 1
        else:
            exp10 += 1
        seen = True
        i += 1
    if i < e and buf[i] == _DOT:
        i += 1
        while i < e and DIGIT_0 <= buf[i] <= _DIGIT_9:
            if digits < 18:
                mant = mant * 10 + (buf[i] - DIGIT_0)
                if mant > 0:
                    digits += 1
                exp10 -= 1
            seen = True
            i += 1
    if not seen:
        return 0.0, False, True
    if i < e and buf[i] in _EXP_CHARS:
        i += 1
        eneg = False
        if i < e and (buf[i] == _MINUS or buf[i] == _PLUS):
            eneg = buf[i] == _MINUS
            i += 1
        if i >= e or not (DIGIT_0 <= buf[i] <= _DIGIT_9):
            return 0.0, False, True
        ev = 0
        while i < e and DIGIT_0 <= buf[i] <= _DIGIT_9:
            ev = ev * 10 + (buf[i] - DIGIT_0)
            if ev > 100000:
                ev = 100000
            i += 1
        exp10 += -ev if eneg else ev
    if i != e:
        return 0.0, False, True
    if mant == 0:
        return -0.0 if neg else 0.0, True, True
    if mant < 9007199254740992 and -22 <= exp10 <= 22:
        v = float(mant)
        v = v * pow10[exp10] if exp10 >= 0 else v / pow10[-exp10]
        return -v if neg else v, True, True
    return 0.0, True, False


@nb.njit(inline="always")
def _mark_slow(slow, n_slow, row, col, s, e):
    """Record that number ``col`` (0 log10 probability, 1 backoff) of n-gram ``row``, the
    text buf[s:e], needs Python's exact float parser; returns the new count."""
    slow[n_slow, 0] = row
    slow[n_slow, 1] = col
    slow[n_slow, 2] = s
    slow[n_slow, 3] = e
    return n_slow + 1


@nb.njit(cache=True)
def _parse_block(buf, pos, end, k, count, filled, table, wbuf, woff, mask, pow10,
                 ids, lp, bo, hasbo, slow, n_slow, unigram, spans):
    """Parse the lines of a k-gram section from buf[pos:end] (complete lines).

    Each line is ``logprob w1 .. wk [backoff]`` (fields split at whitespace);
    rows are written from row ``filled`` on.  Numbers the fast path cannot
    parse exactly are listed in ``slow`` for the caller to parse in bulk.

    Args:
        buf: uint8 [n], the buffered text; pos, end: the span to parse.
        k: the order; count: rows the header declares; filled: rows done so far.
        table, wbuf, woff, mask: the unigram vocabulary's byte hash
            (:mod:`fsmlearn.lm.vocab`; table int64 [cap], wbuf uint8,
            woff int64 [V + 1]).
        pow10: float64 [23], see :func:`_parse_number`.
        ids: int32 [cap, k], out: word ids (not written for unigrams); cap <= count
            is the rows allocated so far (``_FULL`` when they are used up).
        lp, bo: float64 [cap], out: log10 probability and backoff.
        hasbo: bool [cap], out: whether the line gave a backoff.
        slow: int64 [S, 4], out: (row, 0 = logprob / 1 = backoff, field
            start, field end) of each number left to the slow parse.
        n_slow: rows of ``slow`` already used.
        unigram: bool, k == 1: record word spans instead of looking words up.
        spans: int64 [cap, 2], out for unigrams: each word's (start, end)
            in ``buf``; the caller adds the words to the hash between blocks.

    Returns:
        (status, position, rows filled, slow parses, lines consumed).
        status ``_STOP``: a blank line or a line starting with a backslash at
        position; ``_OK``: the span is parsed (or ``slow`` is nearly full);
        else an error code of :data:`_REASONS` for the line at position.
    """
    lines = 0
    while pos < end:
        # line bounds
        le = line_end(buf, pos, end)
        # trim trailing spaces / CR
        te = le
        while te > pos and is_space(buf[te - 1]):
            te -= 1
        ts = pos
        while ts < te and is_space(buf[ts]):
            ts += 1
        if ts == te or buf[ts] == _BACKSLASH:
            return _STOP, pos, filled, n_slow, lines
        if filled >= lp.shape[0]:
            return (_E_TOO_MANY if lp.shape[0] >= count else _FULL), pos, filled, n_slow, lines
        # split into fields
        f = 0
        i = ts
        fs0 = 0
        fe0 = 0
        last_s = 0
        last_e = 0
        while i < te:
            s, i = next_token(buf, i, te)
            if s >= te:
                break
            if f == 0:
                fs0 = s
                fe0 = i
            elif f <= k:
                if unigram:
                    spans[filled, 0] = s
                    spans[filled, 1] = i
                else:
                    w, _ = vocab_find(buf, s, i, table, wbuf, woff, mask)
                    if w < 0:
                        return _E_WORD, pos, filled, n_slow, lines
                    ids[filled, f - 1] = w
            else:
                last_s = s
                last_e = i
            f += 1
        if f != k + 1 and f != k + 2:
            return _E_FIELDS, pos, filled, n_slow, lines
        v, ok, exact = _parse_number(buf, fs0, fe0, pow10)
        if not ok:
            return _E_NUMBER, pos, filled, n_slow, lines
        if not exact:
            n_slow = _mark_slow(slow, n_slow, filled, 0, fs0, fe0)
        lp[filled] = v
        if f == k + 2:
            v, ok, exact = _parse_number(buf, last_s, last_e, pow10)
            if not ok:   # an extra word rather than a bad backoff
                return _E_FIELDS, pos, filled, n_slow, lines
            if not exact:
                n_slow = _mark_slow(slow, n_slow, filled, 1, last_s, last_e)
            bo[filled] = v
            hasbo[filled] = True
        else:
            bo[filled] = 0.0
            hasbo[filled] = False
        filled += 1
        lines += 1
        if n_slow + 2 >= slow.shape[0]:
            return _OK, le + 1 if le < end else end, filled, n_slow, lines
        pos = le + 1
    return _OK, pos, filled, n_slow, lines


@nb.njit(cache=True)
def _gather_fields(buf, spans, width):
    """Fixed-width byte rows (NUL padded) of the fields buf[spans[i, 2]:spans[i, 3]]."""
    out = np.zeros((spans.shape[0], width), np.uint8)
    for i in range(spans.shape[0]):
        s = spans[i, 2]
        for j in range(spans[i, 3] - s):
            out[i, j] = buf[s + j]
    return out


@nb.njit(cache=True)
def _add_words(buf, spans, lo, hi, table, wbuf, woff, n_words, mask):
    """Add the unigram words buf[spans[i]] to the hash; returns (n_words, wbuf, dup row or -1)."""
    for r in range(lo, hi):
        s = spans[r, 0]
        e = spans[r, 1]
        w, slot = vocab_find(buf, s, e, table, wbuf, woff, mask)
        if w >= 0:
            return n_words, wbuf, r
        L = e - s
        need = woff[n_words] + L
        if need > wbuf.shape[0]:
            nb_ = np.empty(max(need, 2 * wbuf.shape[0]), np.uint8)
            nb_[:wbuf.shape[0]] = wbuf
            wbuf = nb_
        a = woff[n_words]
        for j in range(L):
            wbuf[a + j] = buf[s + j]
        woff[n_words + 1] = a + L
        table[slot] = n_words
        n_words += 1
    return n_words, wbuf, -1


# ------------------------------------------------------------------ reading
class _Lines:
    """Blocks of complete lines from a binary stream, with the current line number."""

    def __init__(self, f):
        self.f = f
        self.buf = np.empty(0, np.uint8)
        self.pos = 0
        self.line = 1          # line number of the line starting at self.pos
        self.eof = False

    def _more(self) -> None:
        data = self.f.read(_BLOCK)
        if not data:
            self.eof = True
            return
        self.buf = np.concatenate([self.buf[self.pos:], np.frombuffer(data, np.uint8)])
        self.pos = 0

    def fill(self) -> None:
        """Buffer at least half a block (or up to EOF) ending in a complete line."""
        while not self.eof and self.buf.size - self.pos < _BLOCK // 2:
            self._more()
        while not self.eof and self.complete_end() <= self.pos:
            self._more()

    def complete_end(self) -> int:
        """End of the last complete line buffered (the buffer's end at EOF)."""
        if self.eof:
            return self.buf.size
        nl = np.flatnonzero(self.buf[max(self.pos, self.buf.size - (1 << 20)):] == NEWLINE)
        if nl.size:
            return max(self.pos, self.buf.size - (1 << 20)) + int(nl[-1]) + 1
        nl = np.flatnonzero(self.buf[self.pos:] == NEWLINE)
        return self.pos + int(nl[-1]) + 1 if nl.size else self.pos

    def readline(self) -> bytes | None:
        """The next line without its newline, or None at EOF."""
        if self.complete_end() <= self.pos:
            self.fill()
        if self.pos >= self.buf.size:
            return None
        window = self.buf[self.pos:min(self.buf.size, self.pos + (1 << 16))].tobytes()
        j = window.find(b"\n")
        if j < 0:
            self.fill()
            window = self.buf[self.pos:].tobytes()
            j = window.find(b"\n")
        if j < 0:
            line = window
            self.pos = self.buf.size
        else:
            line = window[:j]
            self.pos += j + 1
        self.line += 1
        return line

    def line_text(self, pos: int) -> str:
        b = self.buf[pos:min(self.buf.size, pos + 300)].tobytes()
        j = b.find(b"\n")
        return (b[:j] if j >= 0 else b).decode("utf-8", "replace").rstrip("\r")


def read_arpa(path, progress=None) -> BackoffLM:
    """Read an ARPA file (plain, .gz, .bz2, .xz) into a :class:`BackoffLM`, checking all of it.

    Accepted forms (those of KenLM's and SRILM's writers; anything else is an error):

    - anything before the line ``\\data\\`` is ignored; then one line
      ``ngram K=COUNT`` per order K = 1, 2, ..., N in order (blank lines
      allowed), each COUNT a decimal integer; for a plain file, the counts must
      fit in the file's size (a k-gram line takes at least 2k + 2 bytes) before
      anything is allocated from them, and arrays grow with the lines read, so
      a count no file could hold never allocates its memory;
    - sections ``\\1-grams:`` .. ``\\N-grams:`` in order, each ending at a blank
      line or the next section, with exactly COUNT lines ``logprob w1 .. wk
      [backoff]``, fields separated by spaces or tabs (CR before the newline is
      allowed); the highest order has no backoff;
    - ``logprob``: a decimal number (optionally signed, with a fraction and an
      exponent), finite and at most 0 (``-99``, KenLM's and SRILM's log of zero
      for ``<s>``, is an ordinary value); ``backoff``: a finite decimal number;
      ``nan``, ``inf`` and the like are refused;
    - words: UTF-8 without whitespace; every word of a k-gram (k >= 2) is
      among the 1-grams; no word and no n-gram is listed twice; every k-gram's
      context (its first k - 1 words) is listed; ``<s>``, ``</s>`` and ``<unk>``
      are among the 1-grams;
    - the file ends with ``\\end\\`` (anything after it is ignored).

    Args:
        path: the file.
        progress: optional callable(str) receiving progress messages.

    Returns:
        The model; word ids are the positions of the words among the 1-grams.
        Its ``index`` (the n-grams' hash index, built for the checks) is kept
        for :func:`compile_lm`.

    Raises:
        ArpaFormatError: a line that does not parse, or a word missing from the
            1-grams; its subclasses ArpaCountError (a count that disagrees with its
            section or that the file cannot hold), ArpaSectionError (sections
            missing or out of order, no ``\\end\\``), ArpaValueError (a bad number),
            ArpaDuplicateError, ArpaContextError.  Each names the file, the
            1-based line and the offending text.
    """
    path = Path(path)
    say = progress or (lambda msg: None)
    try:
        f = open_text(path, "rb")
        size = path.stat().st_size if _ext(path) == "" else None
    except OSError as e:
        raise ArpaFormatError(f"cannot open: {e.strerror}", path) from None
    try:
        with f:
            return _read(f, path, say, size)
    except ArpaFormatError:
        raise
    except (EOFError, OSError, lzma.LZMAError, zlib.error) as e:
        raise ArpaFormatError(f"cannot decompress or read: {e}", path) from None


def _err(path, line, text, reason, kind=ArpaFormatError):
    return kind(f"{reason}: {text[:200]!r}", path, line)


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.empty((cap,) + a.shape[1:], a.dtype)
    out[:a.shape[0]] = a
    return out


def _read_header(L: _Lines, path, size):
    """The ``\\data\\`` header: {order: count}, the first section line, the counts' lines."""
    while True:
        raw = L.readline()
        if raw is None:
            if L.line == 1:
                raise ArpaSectionError("the file is empty", path, 1)
            raise ArpaSectionError("no \\data\\ header", path, L.line - 1)
        if b"\0" in raw:
            # before the header: not an ARPA text at all (a KenLM binary, a compiled model, ...)
            raise ArpaSectionError("binary data (a NUL byte) before the \\data\\ header: not an ARPA "
                                   "text file", path, L.line - 1)
        if raw.strip() == b"\\data\\":
            break
    counts, where = {}, {}
    while True:
        raw = L.readline()
        if raw is None:
            raise ArpaSectionError("the file ends inside the \\data\\ header", path, L.line - 1)
        s = raw.strip()
        if not s:
            continue
        m = _HEADER_RE.match(s)
        if m:
            k, c = int(m.group(1)), int(m.group(2))
            if k != len(counts) + 1:
                raise _err(path, L.line - 1, raw.decode("utf-8", "replace"),
                           f"expected the count of {len(counts) + 1}-grams", ArpaSectionError)
            counts[k] = c
            where[k] = L.line - 1
            continue
        if _SECTION_RE.match(s):
            break
        raise _err(path, L.line - 1, raw.decode("utf-8", "replace"), "bad header line (expected 'ngram K=COUNT')")
    if not counts:
        raise ArpaSectionError("the \\data\\ header declares no n-gram counts", path, L.line - 1)
    if size is not None:
        need = 0
        for k, c in counts.items():
            need += c * (2 * k + 2)
            if need > size:
                raise ArpaCountError(f"the header declares {c:,} {k}-grams: more lines than the file's "
                                     f"{size:,} bytes can hold", path, where[k])
    return counts, raw


def _check_values(path, k, lp, bo, hb, line0):
    """Every log10 probability finite and <= 0, every given backoff finite (line0: the section's first line)."""
    bad = ~(np.isfinite(lp) & (lp <= 0.0))
    if bad.any():
        r = int(np.argmax(bad))
        raise ArpaValueError(f"log10 probability {float(lp[r])!r} of a {k}-gram is not finite and at most 0",
                             path, line0 + r)
    bad = hb & ~np.isfinite(bo)
    if bad.any():
        r = int(np.argmax(bad))
        raise ArpaValueError(f"backoff weight {float(bo[r])!r} of a {k}-gram is not finite", path, line0 + r)


def _read(f, path, say, size) -> BackoffLM:
    L = _Lines(f)
    counts, header_line = _read_header(L, path, size)
    N = len(counts)
    ngrams, logprob, backoff, hasbo, first_line = [], [], [], [], []
    vcap = min(counts[1], 1 << 16)
    table = np.full(1 << max(4, int(math.ceil(math.log2(max(2, vcap) * 2)))), -1, np.int64)
    mask = table.size - 1
    wbuf = np.empty(1 << 16, np.uint8)
    woff = np.zeros(vcap + 1, np.int64)
    n_words = 0
    vocab: list[str] = []
    pow10 = _POW10
    for k in range(1, N + 1):
        m = _SECTION_RE.match(header_line.strip())
        if not m or int(m.group(1)) != k:
            raise _err(path, L.line - 1, header_line.decode("utf-8", "replace"),
                       f"expected the \\{k}-grams: section", ArpaSectionError)
        count = counts[k]
        line0 = L.line
        cap = min(count, 1 << 16)
        ids = np.empty((cap, k), np.int32)
        lp = np.empty(cap)
        bo = np.empty(cap)
        hb = np.empty(cap, np.bool_)
        spans = np.empty((cap if k == 1 else 0, 2), np.int64)
        filled = 0
        slow = np.empty((1 << 20, 4), np.int64)
        while True:
            L.fill()
            end = L.complete_end()
            if L.pos >= end:
                break
            start_line = L.line
            st, pos, new_filled, n_slow, lines = _parse_block(
                L.buf, L.pos, end, k, count, filled, table, wbuf, woff, mask, pow10,
                ids, lp, bo, hb, slow, 0, k == 1, spans)
            # numbers outside the fast path: numpy's correctly rounded conversion, in bulk
            if n_slow:
                sl = slow[:n_slow]
                width = int((sl[:, 3] - sl[:, 2]).max())
                mat = _gather_fields(L.buf, sl, width)
                try:
                    vals = mat.view(f"S{width}").ravel().astype(np.float64)
                except ValueError:
                    vals = None
                if vals is None or np.isnan(vals).any():
                    for r in range(n_slow):   # the culprit, by Python's parser, for the message
                        row, which, s0, e0 = (int(x) for x in sl[r])
                        text = L.buf[s0:e0].tobytes()
                        try:
                            v = float(text)
                        except ValueError:
                            v = None
                        if v is None or b"_" in text or not math.isfinite(v):
                            raise _err(path, start_line + row - filled, L.line_text(s0),
                                       "not a number" if v is None or b"_" in text
                                       else f"{'log10 probability' if which == 0 else 'backoff weight'} "
                                            f"{text.decode('ascii', 'replace')} is not finite", ArpaValueError)
                    raise ArpaFormatError("a number the parser could not read", path, start_line)
                rows, which = sl[:, 0], sl[:, 1]
                lp[rows[which == 0]] = vals[which == 0]
                bo[rows[which == 1]] = vals[which == 1]
            if k == 1 and new_filled > filled:
                if new_filled + 1 > woff.size:      # room for the words: grow and rehash
                    woff = _grow(woff, min(counts[1], 2 * new_filled) + 1)
                    table = np.full(1 << int(math.ceil(math.log2(2 * (woff.size - 1)))), -1, np.int64)
                    mask = table.size - 1
                    build_table(wbuf, woff[:n_words + 1], table, mask)
                n_words, wbuf, dup = _add_words(L.buf, spans, filled, new_filled, table, wbuf, woff, n_words, mask)
                for r in range(filled, new_filled if dup < 0 else dup):
                    word = L.buf[spans[r, 0]:spans[r, 1]].tobytes()
                    try:
                        vocab.append(word.decode("utf-8"))
                    except UnicodeDecodeError as e:
                        raise _err(path, start_line + (r - filled), L.line_text(int(spans[r, 0])),
                                   f"word is not UTF-8 (byte {word[e.start]:#04x})") from None
                if dup >= 0:
                    line = start_line + (dup - filled)
                    raise _err(path, line, L.line_text(int(spans[dup, 0])), _REASONS[_E_DUP_UNIGRAM],
                               ArpaDuplicateError)
            L.line = start_line + lines
            L.pos = pos
            filled = new_filled
            if st == _STOP:
                break
            if st == _FULL:
                cap = min(count, 2 * cap)
                ids, lp, bo, hb = _grow(ids, cap), _grow(lp, cap), _grow(bo, cap), _grow(hb, cap)
                if k == 1:
                    spans = _grow(spans, cap)
                continue
            if st != _OK:
                reason = _REASONS[st].format(k=k, count=count)
                kind = {_E_NUMBER: ArpaValueError, _E_TOO_MANY: ArpaCountError}.get(st, ArpaFormatError)
                raise _err(path, L.line, L.line_text(pos), reason, kind)
            if filled and filled % 5_000_000 < lines:
                say(f"read {filled:,} of {count:,} {k}-grams")
        if filled != count:
            raise ArpaCountError(f"the header declares {count:,} {k}-grams but the section has {filled:,}",
                                 path, L.line)
        lp, bo, hb, ids = lp[:filled], bo[:filled], hb[:filled], ids[:filled]
        _check_values(path, k, lp, bo, hb, line0)
        if k == 1:
            ids[:, 0] = np.arange(count, dtype=np.int32)   # word id = unigram position
        if k == N and hb.any():
            r = int(np.argmax(hb))
            raise ArpaFormatError(f"a {k}-gram of the highest order has a backoff weight", path, line0 + r)
        ngrams.append(ids)
        logprob.append(lp)
        backoff.append(bo)
        hasbo.append(hb)
        first_line.append(line0)
        say(f"read {filled:,} {k}-grams")
        # skip blank lines to the next header
        while True:
            raw = L.readline()
            if raw is None:
                raise ArpaSectionError("the file ends before \\end\\", path, L.line - 1)
            if raw.strip():
                break
        header_line = raw
        if k < N:
            continue
        if header_line.strip() != b"\\end\\":
            raise _err(path, L.line - 1, header_line.decode("utf-8", "replace"), "expected \\end\\",
                       ArpaSectionError)
    for w in (BOS, EOS, UNK):
        if w not in vocab:
            raise ArpaContextError(f"no {w} among the 1-grams", path, first_line[0] - 1)
    try:
        index = NGramIndex(ngrams, len(vocab))
    except NGramIndexError as e:
        k = len(e.row)
        words = " ".join(vocab[int(x)] for x in e.row)
        line = first_line[k - 1] + e.index
        if e.kind == "missing":
            raise ArpaContextError(f"{k}-gram {words!r} has no context: its first {k - 1} words are not "
                                   f"listed among the {k - 1}-grams", path, line) from None
        raise ArpaDuplicateError(f"{k}-gram {words!r} is listed twice", path, line) from None
    say("checked contexts and duplicates")
    return BackoffLM(vocab, ngrams, logprob, backoff, hasbo, index=index)


def check_arpa(path) -> BackoffLM:
    """Validate an ARPA file fully: format, counts, and that every n-gram's
    context is listed and no n-gram is listed twice.

    Args:
        path: the file (plain, .gz, .bz2, .xz).

    Returns:
        The model, a :class:`BackoffLM`.

    Raises:
        ArpaFormatError: with file and line (the line of the offending n-gram
            where it can be found).
    """
    lm = read_arpa(path)
    try:
        compile_lm(lm)
    except MachineError as e:
        line = _find_line(path, str(e))
        raise ArpaFormatError(str(e), path, line) from None
    return lm


def _find_line(path, message: str) -> int | None:
    m = re.search(r"'([^']*)'", message)
    if not m:
        return None
    words = m.group(1).split()
    with open_text(path, "rb") as f:
        for i, raw in enumerate(f, 1):
            parts = raw.split()
            if len(parts) >= len(words) + 1 and [p.decode("utf-8", "replace") for p in parts[1:1 + len(words)]] == words:
                return i
    return None


# ------------------------------------------------------------------ writing
@nb.njit(inline="always")
def _number_len(is_zero, txt, i):
    """Bytes of number i as :func:`_put_number` writes it."""
    if is_zero:
        return 1
    n = 0
    while n < txt.shape[1] and txt[i, n] != 0:
        n += 1
    return n


@nb.njit(inline="always")
def _put_number(out, p, is_zero, txt, i):
    """Write number i (``txt[i]``, NUL-padded ASCII; ``0`` when ``is_zero``) at
    ``out[p:]``; returns the position after it."""
    if is_zero:
        out[p] = DIGIT_0
        return p + 1
    n = _number_len(False, txt, i)
    out[p:p + n] = txt[i, :n]
    return p + n


@nb.njit(cache=True)
def _render_lines(rows, lp_txt, bo_txt, hb, zero_lp, zero_bo, wbuf, woff, lo, hi):
    """ARPA lines of n-grams lo..hi: 'logprob TAB words [TAB backoff] NL' as bytes.

    Numbers arrive as NUL-padded text (numpy's shortest round-trip form);
    zeros are written as '0', as KenLM does.  A first pass sizes the output,
    a second fills it.

    Args:
        rows: int32 [M, k], the n-grams' word ids.
        lp_txt, bo_txt: uint8 [M, W], log10 probability and backoff as
            NUL-padded ASCII.
        hb: bool [M], whether to write the backoff.
        zero_lp, zero_bo: bool [M], the number is zero (written ``0``).
        wbuf, woff: the words' bytes (uint8) and offsets (int64 [V + 1]).
        lo, hi: the rows to render.

    Returns:
        uint8 [bytes], the lines.
    """
    k = rows.shape[1]
    size = 0
    for i in range(lo, hi):
        size += 3 + k + _number_len(zero_lp[i], lp_txt, i)
        for c in range(k):
            w = rows[i, c]
            size += woff[w + 1] - woff[w]
        if hb[i]:
            size += 1 + _number_len(zero_bo[i], bo_txt, i)
    out = np.empty(size, np.uint8)
    p = 0
    for i in range(lo, hi):
        p = _put_number(out, p, zero_lp[i], lp_txt, i)
        out[p] = TAB
        p += 1
        for c in range(k):
            if c:
                out[p] = SPACE
                p += 1
            w = rows[i, c]
            for q in range(woff[w], woff[w + 1]):
                out[p] = wbuf[q]
                p += 1
        if hb[i]:
            out[p] = TAB
            p += 1
            p = _put_number(out, p, zero_bo[i], bo_txt, i)
        out[p] = NEWLINE
        p += 1
    return out[:p]


# ---------------------------------------------------------- shortest digits
# exact powers of ten and five for the shortest-digits kernel (10**k is exact in float64 for k <= 22)
_P10F = np.array([float(10 ** i) for i in range(23)], np.float64)
_P10I = np.array([10 ** i for i in range(19)], np.int64)
_P5I = np.array([5 ** i for i in range(23)], np.int64)
_DIG2 = np.frombuffer(b"".join(b"%02d" % i for i in range(100)), np.uint8).copy()  # "00" .. "99"
_SPLIT = 134217729.0  # 2**27 + 1, Dekker's splitter
_CH_MINUS, _CH_DOT, _CH_E, _CH_PLUS = 45, 46, 101, 43


@nb.njit(inline="always")
def _two_product(a, b):
    """(p, e) with p + e == a * b exactly (Dekker's TwoProduct; no FMA needed, no contraction)."""
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@nb.njit(inline="always")
def _shortest_at(N, R, sh, s, h_lo, h_up, even):
    """The decimal with step s (a power of ten) nearest to y inside x's rounding interval, as d
    (the decimal is d * s), or -1 when neither neighbour of y on that grid is inside.

    y = N + R * 2**-sh exactly (N an int64, 0 <= R < 2**sh); h_lo, h_up: the half-gaps below and
    above x, scaled like y, in units of 2**-sh; a boundary counts only when x's mantissa is even
    (round half to even, as Python's repr and numpy's Dragon4 assume)."""
    q = N // s
    rem = N - q * s                    # y - q*s == rem + R * 2**-sh
    lo_in = False
    dl = np.int64(0)
    if rem < 16:                       # the half-gaps are below 11.2: farther is outside
        dl = (rem << sh) + R
        lo_in = dl < h_lo or (dl == h_lo and even)
    up_in = False
    du = np.int64(0)
    ur = s - rem                       # (q+1)*s - y == ur - R * 2**-sh
    if ur <= 16:
        du = (ur << sh) - R
        up_in = du < h_up or (du == h_up and even)
    if lo_in and up_in:                # both inside: the nearer, a tie to the even digit
        if dl < du:
            return q
        if du < dl:
            return q + 1
        return q if q % 2 == 0 else q + 1
    if lo_in:
        return q
    if up_in:
        return q + 1
    return np.int64(-1)


@nb.njit(inline="always")
def _put_int(buf, end, t):
    """Write the decimal digits of t > 0 so that they end just before buf[end] (two at a time)."""
    p = end
    while t >= 100:
        r = t % 100
        t //= 100
        buf[p - 1] = _DIG2[2 * r + 1]
        buf[p - 2] = _DIG2[2 * r]
        p -= 2
    if t >= 10:
        buf[p - 1] = _DIG2[2 * t + 1]
        buf[p - 2] = _DIG2[2 * t]
    else:
        buf[p - 1] = DIGIT_0 + t


@nb.njit(cache=True)
def _digits_kernel(x, bits, need, out, flagged):
    """Shortest round-trip text of each needed x[i] exactly as numpy's ``astype("S32")`` writes it
    (the same as Python's ``repr``), NUL-padded into ``out`` (uint8 [n * 32], row i at 32 * i;
    rows not needed: zeros).  ``bits`` is x viewed as int64.  Handles +-0 and 1e-6 <~ |x| < 1e17;
    the indices of the others (smaller, larger, subnormal, inf, nan) go to ``flagged``, for the
    caller to convert with numpy; returns their count.

    y = |x| * 10**k in [1e16, 1e17) is computed exactly as a double-double (10**k exact for
    k <= 22; TwoProduct).  For the smallest precision p = 17 - j at which a neighbour of y on the
    grid 10**j lies inside x's round-to-nearest interval, the nearer such neighbour is taken, as
    shortest-digit algorithms do.  The comparisons are exact int64 arithmetic in units of
    2**(e + k - 2) (|x| = m * 2**e), a grid that holds y, its rounding error and the half-gaps."""
    n = bits.shape[0]
    nf = 0
    for i in range(n):
        base = 32 * i
        for c in range(32):
            out[base + c] = 0
        if not need[i]:
            continue
        b = bits[i]
        be = (b >> 52) & 0x7FF
        mant = b & 0xFFFFFFFFFFFFF
        pos = base
        if b < 0:
            out[pos] = _CH_MINUS
            pos += 1
        if be == 0 and mant == 0:      # +-0.0
            out[pos] = DIGIT_0
            out[pos + 1] = _CH_DOT
            out[pos + 2] = DIGIT_0
            continue
        e2 = be - 1023                 # 2**e2 <= |x| < 2**(e2 + 1)
        k = 16 - ((e2 * 78913) >> 18)  # 16 - floor(e2 * log10(2)): y's k, or one more
        if be == 0 or be == 0x7FF or k < 0 or k > 23:   # subnormal, inf, nan, out of range
            flagged[nf] = i
            nf += 1
            continue
        a = abs(x[i])
        if k == 23:
            k = 22
            hi, lo = _two_product(a, _P10F[22])
            if hi < 1e16:
                flagged[nf] = i
                nf += 1
                continue
        else:
            hi, lo = _two_product(a, _P10F[k])
            if hi >= 1e17:
                if k == 0:
                    flagged[nf] = i
                    nf += 1
                    continue
                k -= 1
                hi, lo = _two_product(a, _P10F[k])
        # y == hi + lo exactly (hi an integer >= 1e16, |lo| <= 8); y == m * 5**k * 2**(e + k)
        m = mant | (np.int64(1) << 52)
        g = be - 1075 + k - 2
        sh = -g if g < 0 else 0        # the unit: 2**-sh, a divisor of everything below
        fl = math.floor(lo)
        N = np.int64(hi) + np.int64(fl)
        R = np.int64((lo - fl) * np.float64(np.int64(1) << sh))  # exact: lo - fl is on the grid
        h_up = _P5I[k] << (g + 1 + sh)  # half a gap of x, 2**(e - 1) * 10**k, in units
        h_lo = h_up >> 1 if mant == 0 else h_up   # a power of two: the neighbour below is nearer
        even = (m & 1) == 0
        # the smallest p with a decimal inside (monotone in p): most numbers need 16 or 17
        # digits, so p = 16, then 17 or 15, then a binary search
        d = _shortest_at(N, R, sh, 10, h_lo, h_up, even)
        j = 1
        if d < 0:
            d = _shortest_at(N, R, sh, 1, h_lo, h_up, even)
            j = 0
        else:
            d2 = _shortest_at(N, R, sh, 100, h_lo, h_up, even)
            if d2 >= 0:
                d = d2
                j = 2
                lo_j = 3               # the largest j that works (the fewest digits), in [2, 16]:
                hi_j = 16              # j = lo_j - 1 works, every j > hi_j fails
                while lo_j <= hi_j:
                    mid = (lo_j + hi_j) >> 1
                    dm = _shortest_at(N, R, sh, _P10I[mid], h_lo, h_up, even)
                    if dm >= 0:
                        d = dm
                        j = mid
                        lo_j = mid + 1
                    else:
                        hi_j = mid - 1
        while d % 10 == 0:
            d //= 10
            j += 1
        nd = 17
        while d < _P10I[nd - 1]:
            nd -= 1
        E = nd - 1 + j - k             # |x| == d * 10**(E - nd + 1), 10**(nd - 1) <= d < 10**nd
        if E < -4 or E >= 16:          # 1.2345e-05, 1e+16
            if nd == 1:
                out[pos] = DIGIT_0 + d
                pos += 1
            else:
                _put_int(out, pos + nd + 1, d)
                out[pos] = out[pos + 1]
                out[pos + 1] = _CH_DOT
                pos += nd + 1
            out[pos] = _CH_E
            ea = E
            out[pos + 1] = _CH_PLUS
            if E < 0:
                out[pos + 1] = _CH_MINUS
                ea = -E
            pos += 2
            if ea >= 100:
                out[pos] = DIGIT_0 + ea // 100
                pos += 1
            out[pos] = DIGIT_0 + (ea // 10) % 10
            out[pos + 1] = DIGIT_0 + ea % 10
        elif E < 0:                    # 0.00012345
            out[pos] = DIGIT_0
            out[pos + 1] = _CH_DOT
            for q in range(-E - 1):
                out[pos + 2 + q] = DIGIT_0
            _put_int(out, pos + 1 - E + nd, d)
        elif nd <= E + 1:              # 12.0, 1200.0
            for q in range(nd, E + 1):
                out[pos + q] = DIGIT_0
            _put_int(out, pos + nd, d)
            out[pos + E + 1] = _CH_DOT
            out[pos + E + 2] = DIGIT_0
        else:                          # 123.456: the digits one to the right, the integer part back
            _put_int(out, pos + nd + 1, d)
            for q in range(E + 1):
                out[pos + q] = out[pos + q + 1]
            out[pos + E + 1] = _CH_DOT
    return nf


def _digits(x, need):
    """uint8 [n, 32]: the shortest round-trip text of ``x`` where ``need`` (the renderer reads no
    other row: zeros are written as ``0``, a missing backoff not at all), byte for byte what
    numpy's ``x.astype("S32")`` gives; other rows are zeros.  A numba kernel
    (:func:`_digits_kernel`) writes the numbers it handles exactly; the rest (|x| below about
    1e-6 or from 1e17, subnormals, inf, nan) go through numpy."""
    x = np.ascontiguousarray(x, np.float64).reshape(-1)
    need = np.ascontiguousarray(need, np.bool_).reshape(-1)
    out = np.empty((x.size, 32), np.uint8)
    flagged = np.empty(x.size, np.int64)
    nf = _digits_kernel(x, x.view(np.int64), need, out.reshape(-1), flagged)
    if nf:
        sel = flagged[:nf]
        out[sel] = x[sel].astype("S32").view(np.uint8).reshape(nf, 32)
    return out


def arpa_lines(rows, lp, bo, hb, wbuf, woff, step: int = 1_000_000):
    """Blocks (bytes) of ARPA n-gram lines ``logprob<TAB>w1 .. wk[<TAB>backoff]`` of one order,
    numbers in their shortest round-trip form, zeros as ``0``.

    Args:
        rows: int32 [M, k] word ids; lp, bo: float64 [M]; hb: bool [M] (a backoff is written);
        wbuf, woff: the words' bytes (:func:`fsmlearn.lm.vocab.word_bytes`).
    """
    rows = np.ascontiguousarray(rows)
    lp = np.asarray(lp, np.float64)
    bo = np.asarray(bo, np.float64)
    hb = np.asarray(hb, np.bool_)
    M = rows.shape[0]
    for lo in range(0, M, step):
        hi = min(M, lo + step)
        lp_txt = _digits(lp[lo:hi], lp[lo:hi] != 0.0)
        bo_txt = _digits(bo[lo:hi], hb[lo:hi] & (bo[lo:hi] != 0.0))
        yield _render_lines(rows[lo:hi], lp_txt, bo_txt, hb[lo:hi], lp[lo:hi] == 0.0,
                            bo[lo:hi] == 0.0, wbuf, woff, 0, hi - lo).tobytes()


def write_arpa(lm: BackoffLM, path, progress=None) -> None:
    """Write a model as an ARPA file (compressed by extension), atomically.

    Numbers are written in their shortest round-trip form (the digits Python's
    ``repr`` gives, found exactly in numba by :func:`_digits`), so reading the file back gives
    the same floats; zeros are written as ``0``; backoff weights are written
    where the model has them.  Lines are assembled in numba from a byte table
    of the vocabulary.  The file appears only when complete.

    Args:
        lm: the model.
        path: the output file; ``.gz``, ``.bz2`` or ``.xz`` compress it.
        progress: optional callable(str) receiving progress messages.
    """
    path = Path(path)
    say = progress or (lambda msg: None)
    bv = ByteVocab(lm.vocab)
    with atomic_path(path, suffix=".tmp" + _ext(path)) as tmp:
        with open_text(tmp, "wb") as out:
            out.write(b"\\data\\\n")
            for k, c in enumerate(lm.counts, 1):
                out.write(f"ngram {k}={c}\n".encode())
            for k in range(1, lm.order + 1):
                out.write(f"\n\\{k}-grams:\n".encode())
                rows = np.ascontiguousarray(lm.ngrams[k - 1])
                lp = np.asarray(lm.logprob[k - 1], np.float64)
                bo = np.asarray(lm.backoff[k - 1], np.float64)
                hb = np.asarray(lm.has_backoff[k - 1], np.bool_)
                M = rows.shape[0]
                for data in arpa_lines(rows, lp, bo, hb, bv.wbuf, bv.woff):
                    out.write(data)
                say(f"wrote {M:,} {k}-grams")
            out.write(b"\n\\end\\\n")


def _ext(path) -> str:
    p = str(path)
    for e in (".gz", ".bz2", ".xz"):
        if p.endswith(e):
            return e
    return ""

"""A byte-level word vocabulary for numba: words as UTF-8 bytes in one buffer,
an open-addressing hash from bytes to word id.

The hash (:func:`word_hash`) takes a word eight bytes at a time (little-endian, the last
piece zero-filled), each piece mixed into the running value by splitmix64's finaliser, so
that the tokeniser (:func:`scan_token`) finds a token's end and its hash in the same
eight-byte steps: an unaligned 64-bit load, the whitespace bytes flagged with word-wide bit
operations, the end at the lowest flag.  (Until compiled-LM file version 2 the hash was
FNV-1a, one byte at a time: 35 ms against 14 ms to scan and hash 7.26 MB on the project's
Intel machine, docs/bench-lm.md.)

Used by the ARPA reader (words of n-gram lines) and by sentence encoding for
scoring (whitespace-separated tokens of UTF-8 text), so that neither creates
a Python object per token.  The byte values of the ASCII characters that
structure text files (:data:`TAB`, :data:`SPACE`, :data:`NEWLINE`,
:data:`DIGIT_0`) are module-level ints here, which numba kernels read as
compile-time constants.

Public names: WordIndex, NGramTables, ByteVocab, word_bytes, word_hash, vocab_find, build_table,
slot_keys, token_prefix, encode_lines, count_span, count_lines, token_room, encode_span, scan_token, is_space,
line_end, next_token,
TAB, SPACE, NEWLINE, DIGIT_0; the markers BOS, EOS, UNK and LN10 = ln 10.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from ..fsm.hashing import same_run, table_capacity

BOS = "<s>"
EOS = "</s>"
UNK = "<unk>"
LN10 = math.log(10.0)

TAB = ord("\t")
NEWLINE = ord("\n")
SPACE = ord(" ")
DIGIT_0 = ord("0")
_CR = ord("\r")
_VT = ord("\v")
_FF = ord("\f")

#: byte classes of the tokeniser: 0 a token's byte, 1 whitespace inside a line (space, tab, CR,
#: VT, FF: what ``bytes.split`` splits at besides the newline), 2 the newline (a numba global:
#: a constant of the compiled kernels)
_BYTE_CLASS = np.zeros(256, np.uint8)
_BYTE_CLASS[[SPACE, TAB, _CR, _VT, _FF]] = 1
_BYTE_CLASS[NEWLINE] = 2
# word-wide constants of the tokeniser and the hash (numba globals: compile-time constants)
_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_SPACES = np.uint64(0x2020202020202020)
_BELOW_14 = np.uint64(0x8D8D8D8D8D8D8D8D)    # 127 + 14 in every byte
_ABOVE_8 = np.uint64(0x7777777777777777)     # 127 - 8 in every byte
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class WordIndex:
    """Mixin for an object with a ``vocab`` list (word id = position): the
    word -> id map, built on first use."""

    @property
    def word_ids(self) -> dict:
        d = self.__dict__.get("_word_ids")
        if d is None:
            d = self.__dict__["_word_ids"] = {w: i for i, w in enumerate(self.vocab)}
        return d

    def word_id(self, word: str) -> int:
        """The id of ``word``, -1 when it is not in the vocabulary."""
        return self.word_ids.get(word, -1)


class NGramTables(WordIndex):
    """Mixin for n-gram tables: ``vocab`` and ``ngrams`` (per order k, int32
    [M_k, k] word ids) give the order and the table sizes."""

    @property
    def order(self) -> int:
        return len(self.ngrams)

    @property
    def sizes(self) -> list[int]:
        """M_k, the number of n-grams of each order k = 1..order."""
        return [int(g.shape[0]) for g in self.ngrams]


def word_bytes(words) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a word list in one buffer.

    Args:
        words: a sequence of str (word id = position).

    Returns:
        (wbuf uint8 [total bytes], woff int64 [V + 1]): word ``w`` is
        ``wbuf[woff[w]:woff[w + 1]]``.
    """
    enc = [w.encode("utf-8") for w in words]
    woff = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(b) for b in enc], out=woff[1:])
    wbuf = np.frombuffer(b"".join(enc), np.uint8).copy() if enc else np.zeros(0, np.uint8)
    return wbuf, woff


@intrinsic
def _load8(typingctx, arr, idx):
    """The eight bytes ``arr[idx:idx + 8]`` of a contiguous 1-D uint8 array as one little-endian
    uint64 (an unaligned load; the caller makes sure they lie inside the array)."""
    if (not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype != types.uint8 or arr.layout != "C"
            or not isinstance(idx, types.Integer)):
        return None
    sig = types.uint64(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [index], wraparound=False)
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
    return sig, codegen


@nb.njit(inline="always")
def _piece(buf, i):
    """Up to eight bytes of ``buf`` from ``i`` as a little-endian uint64, zero-filled past the end."""
    n = buf.shape[0]
    if i + 8 <= n:
        return _load8(buf, i)
    x = np.uint64(0)
    for q in range(n - i):
        x |= np.uint64(buf[i + q]) << np.uint64(8 * q)
    return x


@nb.njit(inline="always")
def _mix(h, x):
    """The running hash ``h`` after the piece ``x``: splitmix64's finaliser of h * golden ^ x."""
    z = h * _GOLDEN ^ x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(inline="always")
def _space_flags(x):
    """The high bit of each byte of ``x`` that is ASCII whitespace (space, or 9-13: tab, LF,
    VT, FF, CR).  The lowest flag is exact; a space can also flag the byte above it (the
    borrow of the zero-byte test), which only the lowest flag's users ignore."""
    t = x ^ _SPACES
    spaces = (t - _ONES) & ~t & _HIGH
    low = x & _LOW7
    controls = (_BELOW_14 - low) & ~x & (low + _ABOVE_8) & _HIGH
    return spaces | controls


@nb.njit(inline="always")
def token_prefix(buf, s, e):
    """The first eight bytes of buf[s:e] as a little-endian uint64, zero-filled past ``e``:
    with the length, what :func:`slot_keys` keeps of a slot's word."""
    x = _piece(buf, s)
    if e - s < 8:
        x &= (np.uint64(1) << np.uint64(8 * (e - s))) - np.uint64(1)
    return x


@nb.njit(cache=True)
def word_hash(buf, s, e):
    """The hash (uint64) of the bytes buf[s:e] (buf uint8): each eight-byte piece from ``s``
    (the last zero-filled) mixed in turn (:func:`_mix`), from 0; :func:`scan_token` computes
    the same as it finds a token."""
    h = np.uint64(0)
    i = s
    while e - i >= 8:
        h = _mix(h, _piece(buf, i))
        i += 8
    if e > i:
        h = _mix(h, token_prefix(buf, i, e))
    return h


@nb.njit(cache=True)
def vocab_find(buf, s, e, table, wbuf, woff, mask):
    """(word id or -1, slot) of the bytes buf[s:e]."""
    return _probe(word_hash(buf, s, e), buf, s, e, table, wbuf, woff, mask)


@nb.njit(inline="always")
def _probe(h, buf, s, e, table, wbuf, woff, mask):
    """:func:`vocab_find` of bytes whose :func:`word_hash` ``h`` is known."""
    i = np.int64(h & np.uint64(mask))
    L = e - s
    while True:
        w = table[i]
        if w < 0:
            return -1, i
        a = woff[w]
        if woff[w + 1] - a == L and same_run(wbuf, a, buf, s, L):
            return w, i
        i = (i + 1) & mask


@nb.njit(cache=True)
def slot_keys(wbuf, woff, table):
    """uint64 [cap, 2]: for each slot of the hash ``table`` the first eight bytes of its
    word (:func:`token_prefix`) and the word's length in bytes (0, 0 for a free slot), so
    that the encoder's probe (:func:`_probe_token`) compares a token with a slot's word
    in the slot's own row, without loading the word's offsets and bytes for a word of at
    most eight bytes."""
    cap = table.shape[0]
    keys = np.zeros((cap, 2), np.uint64)
    for i in range(cap):
        w = table[i]
        if w >= 0:
            a = woff[w]
            e = woff[w + 1]
            keys[i, 0] = token_prefix(wbuf, a, e)
            keys[i, 1] = np.uint64(e - a)
    return keys


@nb.njit(inline="always")
def _probe_token(h, buf, s, e, table, keys, wbuf, woff, mask):
    """The word id of a token buf[s:e] whose :func:`word_hash` ``h`` is known, or -1 (the id
    :func:`vocab_find` gives), through the slots' keys (:func:`slot_keys`): a slot matches
    when its word's first eight bytes and length are the token's, and, for a word of more
    than eight bytes, its other bytes too.  On Brown-LM's test split x 13 (1.56M tokens, a
    vocabulary of 1,497 words) the lookups took 21.4 / 25.0 ms against 36.2 / 41.3 ms
    (docs/bench-lm.md)."""
    i = np.int64(h & np.uint64(mask))
    L = e - s
    pre = token_prefix(buf, s, e)
    uL = np.uint64(L)
    while True:
        w = table[i]
        if w < 0:
            return -1
        if keys[i, 0] == pre and keys[i, 1] == uL and (L <= 8 or same_run(wbuf, woff[w] + 8, buf, s + 8, L - 8)):
            return w
        i = (i + 1) & mask


@nb.njit(cache=True)
def build_table(wbuf, woff, table, mask):
    """Insert every word of (wbuf, woff) into the empty hash table (int64, -1 = free)."""
    for w in range(woff.shape[0] - 1):
        _, slot = vocab_find(wbuf, woff[w], woff[w + 1], table, wbuf, woff, mask)
        table[slot] = w


@nb.njit(cache=True)
def is_space(c):
    """Whether byte ``c`` is ASCII whitespace (space, tab, LF, CR, VT, FF), as
    ``bytes.split()`` splits."""
    return c == SPACE or c == TAB or c == _CR or c == _VT or c == _FF or c == NEWLINE


@nb.njit(inline="always")
def line_end(buf, i, n):
    """The position of the first newline in ``buf[i:n]`` (``n`` when there is none)."""
    while i < n and buf[i] != NEWLINE:
        i += 1
    return i


@nb.njit(inline="always")
def next_token(buf, k, j):
    """The next whitespace-separated token of ``buf[k:j]`` as (start, end);
    start == end == j when none is left."""
    while k < j and is_space(buf[k]):
        k += 1
    a = k
    while k < j and not is_space(buf[k]):
        k += 1
    return a, k


@nb.njit(cache=True)
def encode_lines(buf, table, keys, wbuf, woff, mask, unk):
    """Word ids of whitespace-separated tokens, one sentence per line.

    One pass over the text looks every token up in the hash, into room for the most
    tokens the text can hold (after a count of its lines, one comparison per byte).  A final line without a newline counts;
    an empty input has no sentences.

    Args:
        buf: uint8 [n], UTF-8 text, sentences separated by ``\\n``.
        table: int64 [cap], the hash of a :class:`ByteVocab` (-1 = free slot).
        keys: uint64 [cap, 2], its slots' keys (:func:`slot_keys`).
        wbuf: uint8, the words' bytes; woff: int64 [V + 1], their offsets.
        mask: int, ``cap - 1``.
        unk: int, the id given to tokens not in the vocabulary.

    Returns:
        (ptr int64 [S + 1], ids int32 [T], oov int64 [S]): sentence ``s`` is
        ``ids[ptr[s]:ptr[s + 1]]``; ``oov[s]`` counts its unknown tokens.
    """
    if keys.shape[0] != table.shape[0]:
        raise ValueError("encode_lines: keys must have one row per slot of the table (vocab.slot_keys)")
    n = buf.shape[0]
    S = count_lines(buf, 0, n)
    ptr = np.zeros(S + 1, np.int64)
    ids = np.empty(token_room(0, n), np.int32)      # the tokens are written as they are found
    oov = np.zeros(S, np.int64)
    _, T = encode_span(buf, 0, n, table, keys, wbuf, woff, mask, unk, ptr, ids, oov, 0, 0)
    return ptr, ids[:T].copy(), oov


@nb.njit(inline="always")
def count_lines(buf, i, hi):
    """The lines of buf[i:hi] (complete lines; a last one without a newline counts): the
    sentences :func:`encode_span` writes, by one comparison per byte."""
    S = 0
    for j in range(i, hi):
        S += buf[j] == NEWLINE
    if hi > i and buf[hi - 1] != NEWLINE:
        S += 1
    return S


@nb.njit(inline="always")
def token_room(i, hi):
    """The most tokens buf[i:hi] can hold: one byte each and a separator between."""
    return (hi - i + 1) // 2


@nb.njit(inline="always")
def count_span(buf, i, hi):
    """(lines, tokens) of buf[i:hi] (complete lines): the sizes :func:`encode_span` fills.
    One scan through the byte classes: a token starts at a token byte after a separator."""
    cls = _BYTE_CLASS
    S = 0
    T = 0
    prev = 1
    last = 2
    for j in range(i, hi):
        c = cls[buf[j]]
        if c == 0:
            if prev != 0:
                T += 1
        elif c == 2:
            S += 1
        prev = c
        last = c
    if hi > i and last != 2:
        S += 1          # a last line without a newline
    return S, T


@nb.njit(inline="always")
def scan_token(buf, i, hi):
    """The next token of a line from byte ``i`` on (whitespace skipped): (start, end, its
    :func:`word_hash`, computed eight bytes at a time as the end is found); start == end when
    the line has no token left, ``end`` then at its newline or at ``hi``.  Bytes past ``hi``
    (inside ``buf``) may be read, never used."""
    cls = _BYTE_CLASS
    while i < hi and cls[buf[i]] == 1:
        i += 1
    a = i
    h = np.uint64(0)
    if i >= hi or cls[buf[i]] != 0:
        return a, i, h
    while True:
        x = _piece(buf, i)
        f = _space_flags(x)
        if hi - i < 8:
            f |= np.uint64(0x80) << np.uint64(8 * (hi - i))     # the end of the span ends the token
        if f != np.uint64(0):
            k = trailing_zeros(f) >> 3
            if k > 0:
                h = _mix(h, x & ((np.uint64(1) << np.uint64(8 * k)) - np.uint64(1)))
            return a, i + k, h
        h = _mix(h, x)
        i += 8


@nb.njit(inline="always")
def encode_span(buf, i, hi, table, keys, wbuf, woff, mask, unk, ptr, ids, oov, s, t):
    """Word ids of the lines of buf[i:hi] (complete lines), one sentence per line, written
    from sentence ``s`` and token ``t`` on: ``ids[t..]`` the words' ids (``unk`` for a word
    not in the hash, counted in ``oov[s]`` as a literal ``unk`` word is), ``ptr[s + 1]`` each
    sentence's end.  Returns the next (s, t).  The one loop of :func:`encode_lines` and of the
    compiled model's parallel encoder: one scan of the bytes, each token's :func:`word_hash`
    computed as its end is found (:func:`scan_token`), and looked up through the slots'
    keys (``keys``: :func:`slot_keys` of ``table``; :func:`_probe_token`)."""
    while i < hi:
        while True:
            a, i, h = scan_token(buf, i, hi)
            if a == i:
                break
            w = _probe_token(h, buf, a, i, table, keys, wbuf, woff, mask)
            if w < 0:
                w = unk
                oov[s] += 1
            elif w == unk:
                oov[s] += 1      # a literal <unk> is an OOV too, as KenLM counts it
            ids[t] = w
            t += 1
        s += 1
        ptr[s] = t
        i += 1
    return s, t


class ByteVocab:
    """The byte-level hash of a word list (word id = position)."""

    def __init__(self, words):
        self.wbuf, self.woff = word_bytes(words)
        n = self.woff.size - 1
        cap = table_capacity(n)
        self.table = np.full(cap, -1, np.int64)
        self.mask = cap - 1
        build_table(self.wbuf, self.woff, self.table, self.mask)
        self._keys = None

    @property
    def keys(self):
        """The slots' keys (:func:`slot_keys`), made on first use."""
        if self._keys is None:
            self._keys = slot_keys(self.wbuf, self.woff, self.table)
        return self._keys

    def encode(self, text: bytes, unk: int):
        """(ptr, ids, oov) of UTF-8 text, one sentence per line."""
        buf = np.frombuffer(text, np.uint8)
        return encode_lines(buf, self.table, self.keys, self.wbuf, self.woff, self.mask, unk)

"""A byte-level word vocabulary for numba: words as UTF-8 bytes in one buffer,
an FNV-1a open-addressing hash from bytes to word id.

Used by the ARPA reader (words of n-gram lines) and by sentence encoding for
scoring (whitespace-separated tokens of UTF-8 text), so that neither creates
a Python object per token.

Public names: ByteVocab, fnv1a, vocab_find, encode_lines.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def fnv1a(buf, s, e):
    h = np.uint64(1469598103934665603)
    for i in range(s, e):
        h ^= np.uint64(buf[i])
        h *= np.uint64(1099511628211)
    return h


@nb.njit(cache=True)
def vocab_find(buf, s, e, table, wbuf, woff, mask):
    """(word id or -1, slot) of the bytes buf[s:e]."""
    i = np.int64(fnv1a(buf, s, e) & np.uint64(mask))
    L = e - s
    while True:
        w = table[i]
        if w < 0:
            return -1, i
        a = woff[w]
        if woff[w + 1] - a == L:
            same = True
            for j in range(L):
                if wbuf[a + j] != buf[s + j]:
                    same = False
                    break
            if same:
                return w, i
        i = (i + 1) & mask


@nb.njit(cache=True)
def _build_table(wbuf, woff, table, mask):
    for w in range(woff.shape[0] - 1):
        _, slot = vocab_find(wbuf, woff[w], woff[w + 1], table, wbuf, woff, mask)
        table[slot] = w


@nb.njit(cache=True)
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12 or c == 10


@nb.njit(cache=True)
def encode_lines(buf, table, wbuf, woff, mask, unk):
    """Word ids of whitespace-separated tokens, one sentence per line.

    Returns (ptr int64 [S+1], ids int32, oov int64 [S]); unknown tokens get
    ``unk`` and are counted per sentence.  A final line without a newline
    counts; an empty input has no sentences.
    """
    n = buf.shape[0]
    # count lines and tokens
    S = 0
    T = 0
    i = 0
    while i < n:
        j = i
        while j < n and buf[j] != 10:
            j += 1
        S += 1
        k = i
        while k < j:
            while k < j and _is_space(buf[k]):
                k += 1
            if k < j:
                T += 1
                while k < j and not _is_space(buf[k]):
                    k += 1
        i = j + 1
    ptr = np.zeros(S + 1, np.int64)
    ids = np.empty(T, np.int32)
    oov = np.zeros(S, np.int64)
    s = 0
    t = 0
    i = 0
    while i < n:
        j = i
        while j < n and buf[j] != 10:
            j += 1
        k = i
        while k < j:
            while k < j and _is_space(buf[k]):
                k += 1
            if k < j:
                a = k
                while k < j and not _is_space(buf[k]):
                    k += 1
                w, _ = vocab_find(buf, a, k, table, wbuf, woff, mask)
                if w < 0:
                    w = unk
                    oov[s] += 1
                ids[t] = w
                t += 1
        s += 1
        ptr[s] = t
        i = j + 1
    return ptr, ids, oov


class ByteVocab:
    """The byte-level hash of a word list (word id = position)."""

    def __init__(self, words):
        enc = [w.encode("utf-8") for w in words]
        self.woff = np.zeros(len(enc) + 1, np.int64)
        np.cumsum([len(b) for b in enc], out=self.woff[1:])
        self.wbuf = np.frombuffer(b"".join(enc), np.uint8).copy() if enc else np.zeros(0, np.uint8)
        cap = 16
        while cap < 2 * max(1, len(enc)):
            cap *= 2
        self.table = np.full(cap, -1, np.int64)
        self.mask = cap - 1
        _build_table(self.wbuf, self.woff, self.table, self.mask)

    def encode(self, text: bytes, unk: int):
        """(ptr, ids, oov) of UTF-8 text, one sentence per line."""
        buf = np.frombuffer(text, np.uint8)
        return encode_lines(buf, self.table, self.wbuf, self.woff, self.mask, unk)

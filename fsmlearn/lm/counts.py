"""n-gram counts: counting a corpus, count cutoffs, lookups.

Sentences are padded as ``<s> w1 ... wn </s>`` and every n-gram of order
1..N inside a padded sentence is counted (none crosses a sentence boundary),
as KenLM's ``lmplz`` does.  Counting streams the corpus in chunks: each chunk's
n-grams are packed into two 64-bit keys (``bits`` per word, ids < 2**bits),
sorted and run-length counted in numba, and merged into the running totals.

Large corpora already coded as ids are counted exactly by :func:`count_corpus`,
one hash partition at a time in a table of fixed size.

Public names: NGramCounts, count_ngrams, count_token_ids, count_corpus, apply_cutoffs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import ArgumentError
from .vocab import BOS, EOS, UNK
from .vocab import NGramTables


@dataclass
class NGramCounts(NGramTables):
    """Raw n-gram counts of orders 1..N.

    Attributes:
        vocab: words (word id = index); includes ``<s>`` and ``</s>``.
        ngrams: per order k, int32 [M_k, k] word ids, sorted lexicographically.
        counts: per order k, int64 [M_k] counts (>= 1).
        cutoffs: per order, the count cutoff already applied (1 = none).
    """
    vocab: list
    ngrams: list
    counts: list
    cutoffs: list

    def total_tokens(self) -> int:
        """Tokens counted, ``</s>`` included and ``<s>`` not (the unigram total)."""
        wid = self.word_ids
        c = self.counts[0]
        bos = wid.get(BOS, -1)
        return int(c.sum() - (c[self.ngrams[0][:, 0] == bos].sum() if bos >= 0 else 0))

    def __repr__(self) -> str:
        return f"NGramCounts(order={self.order}, vocab={len(self.vocab)}, ngrams={self.sizes})"


def key_bits(order: int, cap: int = 24) -> int:
    """Bits per word such that an n-gram of ``order`` words packs into two 64-bit
    keys: 64 // bits words in the low key, the rest (at most 64 bits) in the high one."""
    for b in range(cap, 0, -1):
        if (max(0, order - 64 // b)) * b <= 64:
            return b
    raise ArgumentError(f"order {order} cannot be packed into 128-bit keys")


@nb.njit(cache=True)
def _windows(tokens, sent_start, k, bits, hi, lo):
    """Pack every k-gram inside a sentence into (hi, lo); returns how many."""
    n = 0
    words_lo = 64 // bits
    S = sent_start.shape[0] - 1
    for s in range(S):
        a = sent_start[s]
        b = sent_start[s + 1]
        for i in range(a, b - k + 1):
            h = np.uint64(0)
            low = np.uint64(0)
            for j in range(k):
                w = np.uint64(tokens[i + j])
                if j < k - words_lo:
                    h = (h << np.uint64(bits)) | w
                else:
                    low = (low << np.uint64(bits)) | w
            hi[n] = h
            lo[n] = low
            n += 1
    return n


@nb.njit(cache=True)
def _runs(hi, lo):
    """Unique (hi, lo) pairs of sorted arrays and their multiplicities."""
    n = hi.shape[0]
    uh = np.empty(n, np.uint64)
    ul = np.empty(n, np.uint64)
    c = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if m > 0 and uh[m - 1] == hi[i] and ul[m - 1] == lo[i]:
            c[m - 1] += 1
        else:
            uh[m] = hi[i]
            ul[m] = lo[i]
            c[m] = 1
            m += 1
    return uh[:m], ul[:m], c[:m]


@nb.njit(cache=True)
def _merge(h1, l1, c1, h2, l2, c2):
    n1 = h1.shape[0]
    n2 = h2.shape[0]
    H = np.empty(n1 + n2, np.uint64)
    L = np.empty(n1 + n2, np.uint64)
    C = np.empty(n1 + n2, np.int64)
    i = 0
    j = 0
    m = 0
    while i < n1 or j < n2:
        if j >= n2 or (i < n1 and (h1[i] < h2[j] or (h1[i] == h2[j] and l1[i] < l2[j]))):
            H[m] = h1[i]
            L[m] = l1[i]
            C[m] = c1[i]
            i += 1
        elif i >= n1 or (h2[j] < h1[i] or (h2[j] == h1[i] and l2[j] < l1[i])):
            H[m] = h2[j]
            L[m] = l2[j]
            C[m] = c2[j]
            j += 1
        else:
            H[m] = h1[i]
            L[m] = l1[i]
            C[m] = c1[i] + c2[j]
            i += 1
            j += 1
        m += 1
    return H[:m], L[:m], C[:m]


@nb.njit(cache=True)
def _unpack(hi, lo, k, bits):
    n = hi.shape[0]
    out = np.empty((n, k), np.int32)
    words_lo = 64 // bits
    mask = np.uint64((1 << bits) - 1)
    nlo = min(k, words_lo)
    nhi = k - nlo
    for i in range(n):
        x = lo[i]
        for j in range(nlo):
            out[i, k - 1 - j] = np.int32(x & mask)
            x = x >> np.uint64(bits)
        x = hi[i]
        for j in range(nhi):
            out[i, nhi - 1 - j] = np.int32(x & mask)
            x = x >> np.uint64(bits)
    return out


def _sort_pairs(hi, lo, words_in_hi: int = 1):
    """(hi, lo) pairs sorted lexicographically; when no word is packed into ``hi`` (it is all
    zeros), a sort of ``lo`` alone, about twice as fast as sorting the pairs."""
    if words_in_hi <= 0:
        return hi, np.sort(lo)
    order = np.lexsort((lo, hi))
    return hi[order], lo[order]


def _push_run(stack, run):
    """Add a sorted run, merging neighbours of similar size (O(n log n) overall)."""
    stack.append(run)
    while len(stack) >= 2 and stack[-1][0].size * 2 >= stack[-2][0].size:
        b = stack.pop()
        a = stack.pop()
        stack.append(_merge(*a, *b))


def count_token_ids(chunks, words: list, order: int, bits: int | None = None, progress=None) -> NGramCounts:
    """Count the n-grams of id sequences.

    Args:
        chunks: iterable of (tokens int32, sent_start int64 [S+1]) pairs:
            padded sentences (``<s> ... </s>``) laid end to end.  ``words``
            may grow while the chunks are produced.
        words: the words of the ids (read after the last chunk).
        order: highest order N.
        bits: bits per word id in the packed keys (default: as many as
            128 // order allows, at most 24).
        progress: optional callable(str).

    Returns:
        NGramCounts with every n-gram of orders 1..N.
    """
    say = progress or (lambda msg: None)
    if bits is None:
        bits = key_bits(order)
    if bits < 1 or max(0, order - 64 // bits) * bits > 64:
        raise ArgumentError(f"order {order} does not fit 128-bit keys with {bits} bits per word")
    stacks = [[] for _ in range(order)]
    seen = 0
    for tokens, starts in chunks:
        if len(words) > (1 << bits):
            raise ArgumentError(f"a vocabulary of {len(words)} words is too large to count order {order} "
                           f"(at most {1 << bits} words)")
        tokens = np.ascontiguousarray(tokens, np.int32)
        starts = np.ascontiguousarray(starts, np.int64)
        seen += tokens.size
        for k in range(1, order + 1):
            if k == 1:              # unigrams: a count per id, no sort
                c = np.bincount(tokens, minlength=len(words))
                ids = np.flatnonzero(c)
                _push_run(stacks[0], (np.zeros(ids.size, np.uint64), ids.astype(np.uint64), c[ids].astype(np.int64)))
                continue
            hi = np.empty(tokens.size, np.uint64)
            lo = np.empty(tokens.size, np.uint64)
            n = _windows(tokens, starts, k, bits, hi, lo)
            hi, lo = _sort_pairs(hi[:n], lo[:n], k - 64 // bits)
            _push_run(stacks[k - 1], _runs(hi, lo))
        say(f"counted {seen:,} tokens")
    ngrams, counts = [], []
    for k in range(1, order + 1):
        st = stacks[k - 1]
        while len(st) > 1:
            b = st.pop()
            a = st.pop()
            st.append(_merge(*a, *b))
        if not st:
            ngrams.append(np.empty((0, k), np.int32))
            counts.append(np.empty(0, np.int64))
            continue
        h, l, c = st[0]
        ngrams.append(_unpack(h, l, k, bits))
        counts.append(c)
    return NGramCounts(list(words), ngrams, counts, [1] * order)


def count_ngrams(sentences, order: int, chunk_tokens: int = 5_000_000, vocab=None, progress=None) -> NGramCounts:
    """Count n-grams of tokenised sentences (streaming, in chunks).

    Args:
        sentences: iterable of sentences (strings split on whitespace, or
            lists of tokens); ``<s>`` and ``</s>`` are added.
        order: highest order N.
        chunk_tokens: tokens per counting chunk.
        vocab: optional fixed vocabulary (other words become ``<unk>``);
            by default every word seen is in the vocabulary.
        progress: optional callable(str).
    """
    words = [BOS, EOS, UNK] if vocab is None else list(vocab)
    wid = {w: i for i, w in enumerate(words)}
    for w in (BOS, EOS, UNK):
        if w not in wid:
            wid[w] = len(words)
            words.append(w)
    fixed = vocab is not None
    bos, eos, unk = wid[BOS], wid[EOS], wid[UNK]

    def chunks():
        buf = []
        starts = [0]
        get = wid.__getitem__
        for s in sentences:
            toks = s.split() if isinstance(s, str) else s
            buf.append(bos)
            try:
                buf.extend(map(get, toks))      # every word known: the loop in C
            except KeyError:
                del buf[starts[-1] + 1:]
                for t in toks:
                    i = wid.get(t)
                    if i is None:
                        if fixed:
                            i = unk
                        else:
                            i = wid[t] = len(words)
                            words.append(t)
                    buf.append(i)
            buf.append(eos)
            starts.append(len(buf))
            if len(buf) >= chunk_tokens:
                yield np.asarray(buf, np.int32), np.asarray(starts, np.int64)
                buf = []
                starts = [0]
        if len(starts) > 1:
            yield np.asarray(buf, np.int32), np.asarray(starts, np.int64)

    return count_token_ids(chunks(), words, order, progress=progress)


def apply_cutoffs(counts: NGramCounts, cutoffs, keep_bigrams: bool = False) -> NGramCounts:
    """Drop n-grams whose count is below their order's cutoff.

    Args:
        counts: the counts.
        cutoffs: one minimum count per order (or a single int for orders >= 2;
            unigrams are never cut).
        keep_bigrams: keep every 2-gram whatever its cutoff (as Smith and
            Eisner do, so every word pair of the corpus stays possible).
    """
    N = counts.order
    if isinstance(cutoffs, int):
        cutoffs = [1] + [cutoffs] * (N - 1)
    cutoffs = list(cutoffs) + [cutoffs[-1]] * (N - len(cutoffs))
    ngrams, cs, applied = [], [], []
    for k in range(1, N + 1):
        cut = 1 if k == 1 or (k == 2 and keep_bigrams) else int(cutoffs[k - 1])
        keep = counts.counts[k - 1] >= cut
        ngrams.append(counts.ngrams[k - 1][keep])
        cs.append(counts.counts[k - 1][keep])
        applied.append(max(cut, counts.cutoffs[k - 1]))
    return NGramCounts(counts.vocab, ngrams, cs, applied)


# --- exact counting of large corpora, one hash partition at a time -------------------------

@nb.njit(cache=True, inline="always")
def _mix(h, l):
    """splitmix64 finaliser of the packed key (partition and table slot)."""
    x = h * np.uint64(0x9E3779B97F4A7C15) ^ l
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@nb.njit(cache=True)
def _count_partition(ids, ptr, bos, eos, k, bits, part, nparts, th, tl, tc, mask):
    """Add every k-gram of the padded sentences whose hash falls in ``part`` to the
    open-addressing table (th, tl, tc); returns the number of distinct keys.

    Each sentence is padded with ``<s>`` and ``</s>``; a k-gram's word ids are
    packed ``bits`` bits each into two 64-bit keys (the last ``64 // bits``
    words in ``lo``, the rest in ``hi``), and its :func:`_mix` hash picks both
    the partition (``x % nparts``) and the first slot probed.

    Args:
        ids: int32 [T], the corpus's word ids; ptr: int64 [S + 1], sentence
            ``s`` is ``ids[ptr[s]:ptr[s + 1]]``.
        bos, eos: the ids of ``<s>`` and ``</s>``; k: the order; bits: bits per word.
        part, nparts: this partition and the number of partitions.
        th, tl: uint64 [cap], the keys' high and low words; tc: int64 [cap],
            counts (0 = free slot); updated in place.
        mask: uint64, ``cap - 1`` (cap a power of two).
    """
    words_lo = 64 // bits
    used = 0
    P = np.uint64(nparts)
    S = ptr.shape[0] - 1
    for s in range(S):
        a = ptr[s]
        L = ptr[s + 1] - a + 2            # <s> w1 .. wn </s>
        for i in range(L - k + 1):
            h = np.uint64(0)
            lo = np.uint64(0)
            for j in range(k):
                p = i + j
                if p == 0:
                    w = np.uint64(bos)
                elif p == L - 1:
                    w = np.uint64(eos)
                else:
                    w = np.uint64(ids[a + p - 1])
                if j < k - words_lo:
                    h = (h << np.uint64(bits)) | w
                else:
                    lo = (lo << np.uint64(bits)) | w
            x = _mix(h, lo)
            if x % P != np.uint64(part):
                continue
            slot = (x // P) & mask
            while True:
                if tc[slot] == 0:
                    th[slot] = h
                    tl[slot] = lo
                    tc[slot] = 1
                    used += 1
                    break
                if th[slot] == h and tl[slot] == lo:
                    tc[slot] += 1
                    break
                slot = (slot + np.uint64(1)) & mask
    return used


@nb.njit(cache=True)
def _windows_total(ptr, k):
    n = 0
    for s in range(ptr.shape[0] - 1):
        L = ptr[s + 1] - ptr[s] + 2
        if L >= k:
            n += L - k + 1
    return n


def count_corpus(ptr, ids, vocab, order: int, cutoffs=1, keep_bigrams: bool = False,
                 table_mb: float = 1024, progress=None) -> NGramCounts:
    """Exact n-gram counts of a large integer-coded corpus, with cutoffs applied.

    Unlike :func:`count_token_ids`, memory does not grow with the number of
    distinct n-grams: each order is counted one hash partition at a time in a
    fixed-size table (the corpus is re-read per partition), and only the
    n-grams that pass their order's cutoff are kept.

    Args:
        ptr: int64 [S+1] sentence offsets into ``ids``.
        ids: int32 [N] word ids into ``vocab`` (no ``<s>``/``</s>``; those are
            added around every sentence).
        vocab: the words; ``<s>`` and ``</s>`` are appended when missing.
        order: highest order N.
        cutoffs: minimum count per order (int for orders >= 2, or a list);
            unigrams are never cut.
        keep_bigrams: keep every 2-gram whatever its cutoff.
        table_mb: memory of one partition's table (the number of partitions
            follows from it and the corpus size).
        progress: optional callable(str).

    Returns:
        NGramCounts (sorted, cut; ``cutoffs`` record what was applied).
    """
    say = progress or (lambda msg: None)
    ptr = np.ascontiguousarray(ptr, np.int64)
    ids = np.asarray(ids)
    if ids.dtype != np.int32:
        ids = ids.astype(np.int32)
    words = list(vocab)
    wid = {w: i for i, w in enumerate(words)}
    for w in (BOS, EOS):
        if w not in wid:
            wid[w] = len(words)
            words.append(w)
    bos, eos = wid[BOS], wid[EOS]
    V = len(words)
    if ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or ptr[-1] != ids.shape[0]:
        raise ArgumentError("ptr must run from 0 to the number of tokens")
    if ids.size:
        lo_id, hi_id = int(ids.min()), int(ids.max())
        if lo_id < 0 or hi_id >= len(vocab):
            bad = lo_id if lo_id < 0 else hi_id
            raise ArgumentError(f"token id {bad} at position {int(np.flatnonzero(ids == bad)[0])} "
                           f"is outside the vocabulary of {len(vocab)} words")
    if isinstance(cutoffs, (int, np.integer)):
        cut = [1] + [int(cutoffs)] * (order - 1)
    else:
        cut = list(cutoffs) + [list(cutoffs)[-1]] * (order - len(list(cutoffs)))
    cut = [1] + [max(1, int(c)) for c in cut[1:order]]
    if keep_bigrams and order >= 2:
        cut[1] = 1
    bits = key_bits(order)
    if V > (1 << bits):
        raise ArgumentError(f"a vocabulary of {V} words is too large to count order {order} "
                       f"(at most {1 << bits} words)")
    # unigrams: every word seen, <s> and </s> once per sentence
    S = ptr.size - 1
    c1 = np.zeros(V, np.int64)
    step = 1 << 24
    for i in range(0, ids.size, step):
        c1[:len(vocab)] += np.bincount(ids[i:i + step], minlength=len(vocab))
    c1[bos] += S
    c1[eos] += S
    seen = np.flatnonzero(c1)
    ngrams = [seen.astype(np.int32)[:, None]]
    counts = [c1[seen]]
    slots = max(1 << 10, int(table_mb * (1 << 20)) // 24)
    cap = 1 << (slots.bit_length() - 1)
    th = np.empty(cap, np.uint64)
    tl = np.empty(cap, np.uint64)
    tc = np.zeros(cap, np.int64)
    t0 = time.time()
    for k in range(2, order + 1):
        total = int(_windows_total(ptr, k))
        nparts = max(1, -(-total * 2 // cap))    # load factor at most 1/2 even if all distinct
        hs, ls, cs = [], [], []
        distinct = 0
        for part in range(nparts):
            tc[:] = 0
            used = _count_partition(ids, ptr, bos, eos, k, bits, part, nparts, th, tl, tc,
                                    np.uint64(cap - 1))
            distinct += used
            keep = np.flatnonzero(tc >= cut[k - 1])
            hs.append(th[keep])
            ls.append(tl[keep])
            cs.append(tc[keep])
            if nparts > 1:
                say(f"{k}-grams: partition {part + 1}/{nparts} done ({time.time() - t0:.0f} s)")
        h = np.concatenate(hs)
        l = np.concatenate(ls)
        c = np.concatenate(cs)
        o = np.lexsort((l, h))
        ngrams.append(_unpack(h[o], l[o], k, bits))
        counts.append(c[o])
        say(f"{k}-grams: {distinct:,} distinct in {total:,} windows, {o.size:,} kept at cutoff {cut[k - 1]}")
    return NGramCounts(words, ngrams, counts, cut)

"""A hash index over the n-grams of a model or a count table.

Every n-gram gets a global id (orders in sequence, rows in order); an open
addressing hash maps (id of the prefix, last word) to the n-gram's id, so
that prefixes, suffixes and arbitrary n-grams are found in O(order) probes
without Python objects.

Public names: NGramIndex, NGramIndexError.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..errors import ModelError
from ..fsm.hashing import hash_insert as _insert
from ..fsm.hashing import hash_lookup as _lookup

@nb.njit(cache=True)
def _index_order(rows, V, uni, keys, vals, mask, gid0, prefix_out, err):
    """Give the k-grams ids gid0.. and find each one's prefix id.

    ``uni[w]`` is the id of unigram w (-1 if absent).  Returns the index of the
    first n-gram whose prefix is missing or which is duplicated (err[0] = 1
    missing prefix, 2 duplicate), or -1.
    """
    M, k = rows.shape
    for i in range(M):
        g = uni[rows[i, 0]]
        for j in range(1, k - 1):
            if g < 0:
                break
            g = _lookup(keys, vals, mask, g * V + rows[i, j])
        if g < 0:
            err[0] = 1
            return i
        prefix_out[i] = g
        prev = _insert(keys, vals, mask, g * V + rows[i, k - 1], gid0 + i)
        if prev != -1:
            err[0] = 2
            return i
    return -1


@nb.njit(cache=True)
def _suffix_ids(rows, V, uni, keys, vals, mask, prefix, suffix, out):
    """Id of the longest proper suffix of each k-gram that is in the model (-1: empty).

    ``prefix`` holds the k-grams' prefix ids and ``suffix`` the suffix ids of
    the lower orders (already filled).  Since every listed n-gram's prefix is
    listed, w_j..w_k can be listed only if w_j..w_(k-1) is: the candidates are
    the listed suffixes of the prefix w_1..w_(k-1), longest first (its suffix
    chain), each extended by w_k with one probe, then the unigram w_k.  In a
    model whose suffixes are all listed the first probe succeeds.
    """
    M, k = rows.shape
    for i in range(M):
        w = rows[i, k - 1]
        h = suffix[prefix[i]]
        g = -1
        while h >= 0:
            g = _lookup(keys, vals, mask, h * V + w)
            if g >= 0:
                break
            h = suffix[h]
        if h < 0:
            g = uni[w]
        out[i] = g


@nb.njit(cache=True)
def find_ngram(words, V, uni, keys, vals, mask):
    """Global id of the n-gram ``words`` (int32 array), or -1."""
    g = uni[words[0]] if words[0] < uni.shape[0] else -1
    for j in range(1, words.shape[0]):
        if g < 0:
            return -1
        g = _lookup(keys, vals, mask, g * V + words[j])
    return g


class NGramIndexError(ModelError):
    """An n-gram without its prefix, or listed twice (``kind`` "missing" or "duplicate",
    ``row`` its word ids, ``index`` its position among the n-grams of its order).

    An :class:`~fsmlearn.errors.FsmError` (a ``ValueError``): the readers that build an
    index from a file (:func:`~fsmlearn.lm.arpa.read_arpa`,
    :func:`~fsmlearn.lm.web1t.read_web1t`) refuse such input first, naming the file and
    line; this error reaches a caller that built the tables itself."""

    def __init__(self, kind: str, row, index: int = -1):
        k = len(row)
        ids = " ".join(str(int(w)) for w in row)
        what = (f"has no prefix among the {k - 1}-grams" if kind == "missing" else "is listed twice")
        super().__init__(f"{k}-gram number {index} (word ids {ids}) {what}")
        self.kind = kind
        self.row = row
        self.index = index


class NGramIndex:
    """Hash index of n-grams of orders 1..N (``ngrams[k-1]`` int32 [M_k, k]).

    Attributes:
        V: vocabulary size (word ids < V).
        total: number of n-grams; global ids run 0..total-1, order by order.
        offsets: int64 [N+1] first global id of each order.
        uni: int64 [V] global id of each unigram (-1 if absent).
        prefix: int64 [total] id of each n-gram's prefix (-1 for unigrams).
        suffix: int64 [total] id of the longest proper suffix that is listed
            (-1: the empty n-gram).
        order_of: int8 [total] order of each n-gram.

    Raises:
        NGramIndexError: an n-gram's prefix is missing ("missing") or an
            n-gram is listed twice ("duplicate").
    """

    def __init__(self, ngrams: list, V: int):
        self.V = int(V)
        self.N = len(ngrams)
        counts = [int(g.shape[0]) for g in ngrams]
        self.total = total = sum(counts)
        self.offsets = np.zeros(self.N + 1, np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        cap = 1
        while cap < 2 * max(total, 1):
            cap *= 2
        self.keys = np.full(cap, -1, np.int64)
        self.vals = np.full(cap, -1, np.int64)
        self.mask = cap - 1
        self.uni = np.full(self.V, -1, np.int64)
        u = ngrams[0][:, 0]
        if np.unique(u).size != u.size:
            seen = np.zeros(self.V, bool)
            for i, w in enumerate(u):     # the second occurrence of the first repeated word
                if seen[w]:
                    raise NGramIndexError("duplicate", np.array([w]), i)
                seen[w] = True
        self.uni[u] = np.arange(u.size)
        prefixes = [np.full(u.size, -1, np.int64)]
        for k in range(2, self.N + 1):
            rows = ngrams[k - 1]
            pre = np.empty(rows.shape[0], np.int64)
            err = np.zeros(1, np.int64)
            bad = _index_order(rows, self.V, self.uni, self.keys, self.vals, self.mask,
                               int(self.offsets[k - 1]), pre, err)
            if bad >= 0:
                raise NGramIndexError("missing" if err[0] == 1 else "duplicate", rows[bad].copy(), int(bad))
            prefixes.append(pre)
        self.prefix = np.concatenate(prefixes)
        self.suffix = np.empty(total, np.int64)
        for k in range(1, self.N + 1):
            lo, hi = int(self.offsets[k - 1]), int(self.offsets[k])
            if k == 1:
                self.suffix[lo:hi] = -1
            else:
                _suffix_ids(ngrams[k - 1], self.V, self.uni, self.keys, self.vals, self.mask, self.prefix[lo:hi],
                            self.suffix, self.suffix[lo:hi])
        self.order_of = np.concatenate([np.full(c, k + 1, np.int8) for k, c in enumerate(counts)])

    def find(self, words) -> int:
        """Global id of an n-gram given as word ids, or -1."""
        return int(find_ngram(np.asarray(words, np.int32), self.V, self.uni, self.keys, self.vals, self.mask))

"""Fast rescoring with a trained TRF: the feature acceptor's weights laid out for lookups.

``FeatureSet.scores`` (the feature acceptor's path weight lambda . f(x)) looks every firing
of every template up in the feature set's table of all d features (keys and values in two
arrays, then lambda by index: three scattered reads per firing).  For the Table 2 model of
the Brown-LM experiment (6.9M features, 28 template rows) that is about 400,000 probes of
a 256 MB table per 1,000 sentences.  A :class:`Rescorer` holds the same acceptor with a
fixed lambda in the form that scores fastest:

* one-token templates (``w0``, ``c0``) and two-slot templates whose slots are both classes
  (``c-1c0``, the skipping and tied class pairs): dense arrays of lambda indexed by the
  token or the class pair ((C+2)^2 entries each: 40,804 for 200 classes), which stay in
  cache;
* every other template: one open-addressing table whose slot holds the key and lambda side
  by side (one cache line per probe), probed for a whole list at once with the slots
  ``PREFETCH`` probes ahead requested from memory (:func:`fsmlearn.fsm.hashing.prefetch`),
  so the probes' memory latencies overlap instead of adding up.

The scores equal ``FeatureSet.scores`` up to the order of the floating-point sums (tests).
Tried and dropped: tries per template keyed by the context's feature (KenLM's layout, with
pruning where the context is not a feature): the lists of frequent word contexts are
thousands long, and the binary searches made it 2x slower than the table.

Public names: Rescorer, compile_rescorer, PREFETCH.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ..fsm.hashing import hash64, prefetch, table_capacity
from .features import (HOLE, ID_BITS, KIND_C, MAX_SLOTS, Corpus, FeatureSet, _pad, _row_key, _row_range, as_corpus,
                       check_corpus)
from .model import length_groups

#: how many probes ahead the kernel prefetches (measured on this project's machine: 32 to 64
#: halve the time of 200,000 probes of a 256 MB table against no prefetching)
PREFETCH = 32

#: how a template row is looked up
DENSE_ONE, DENSE_PAIR, HASHED = 0, 1, 2


@dataclass(frozen=True)
class Rescorer:
    """A TRF's weights for scoring (module docstring); built by :func:`compile_rescorer`.

    Attributes:
        features: the :class:`FeatureSet` (templates and classes).
        mode: int64 [R], DENSE_ONE, DENSE_PAIR or HASHED per template row.
        base: int64 [R], where a dense row's weights begin in ``dense``.
        dense: float64 [*], lambda of the dense rows (0 where a token or pair is no feature).
        table: int64 [2 cap], slot s holds key ``table[2s]`` (-1: empty) and lambda's bits
            ``table[2s+1]``; ``table_lam`` is the same memory viewed as float64.
        mask: cap - 1.
        length_term: float64 [G+1], ln pi_g - zeta_g - ln Z_1 per length group.
        m, long: the model's length groups (:func:`fsmlearn.trf.model.length_groups`).
    """
    features: FeatureSet
    mode: np.ndarray
    base: np.ndarray
    dense: np.ndarray
    table: np.ndarray
    table_lam: np.ndarray
    mask: int
    length_term: np.ndarray
    m: int
    long: bool

    def scores(self, corpus: Corpus) -> np.ndarray:
        """float64 [n]: lambda . f(x) of each sentence (``FeatureSet.scores``)."""
        if not isinstance(corpus, Corpus):
            corpus = as_corpus(corpus)
        fs = self.features
        check_corpus(corpus, fs.vocab_size)
        t = fs.templates
        out = np.zeros(len(corpus))
        _rescore(corpus.tokens, corpus.ptr, fs.bos, fs.eos, fs.classes, fs.n_classes + 2, t.tid, t.length, t.offset,
                 t.kind, t.minoff, self.mode, self.base, self.dense, self.table, self.table_lam, self.mask, PREFETCH,
                 out)
        return out

    def log_probs(self, corpus: Corpus) -> np.ndarray:
        """float64 [n]: ln p(j, x^j) of each sentence, equation (2) with the model's zeta
        (``TRF.log_probs``)."""
        if not isinstance(corpus, Corpus):
            corpus = as_corpus(corpus)
        g = length_groups(corpus.lengths, self.m, self.long)
        return self.length_term[g] + self.scores(corpus)


def compile_rescorer(model) -> Rescorer:
    """The :class:`Rescorer` of ``model`` (a :class:`fsmlearn.trf.model.TRF`) with its
    current lambda, zeta and length probabilities; a later change to the model needs a new
    one.  About a second per million features."""
    fs: FeatureSet = model.features
    t = fs.templates
    lam = np.ascontiguousarray(model.lam, np.float64)
    R = len(t.tid)
    n_c = fs.n_classes + 2
    mode = np.full(R, HASHED, np.int64)
    base = np.zeros(R, np.int64)
    tid_of_key = fs.keys >> (ID_BITS * MAX_SLOTS)
    dense_parts, size, hashed = [], 0, np.ones(len(fs.keys), bool)
    done = {}                                   # tid -> base (tied rows share their weights)
    for r in range(R):
        L = int(t.length[r])
        classes_only = bool(np.all(t.kind[r, :L] == KIND_C))
        if L == 1 or (L == 2 and classes_only):
            T = int(t.tid[r])
            mode[r] = DENSE_ONE if L == 1 else DENSE_PAIR
            if T not in done:
                gids = np.flatnonzero(tid_of_key == T)
                k = fs.keys[gids]
                a = (k >> (ID_BITS * (MAX_SLOTS - 1))) & HOLE
                if L == 1:
                    n = n_c if classes_only else fs.vocab_size + 2
                    idx = a
                else:
                    n = n_c * n_c
                    idx = a * n_c + ((k >> (ID_BITS * (MAX_SLOTS - 2))) & HOLE)
                w = np.zeros(n)
                w[idx] = lam[gids]
                dense_parts.append(w)
                done[T] = size
                size += n
                hashed[gids] = False
            base[r] = done[T]
    keys = fs.keys[hashed]
    cap = table_capacity(len(keys))
    table = np.full(2 * cap, -1, np.int64)
    table_lam = table.view(np.float64)
    _fill(keys, lam[hashed], table, table_lam, cap - 1)
    with np.errstate(divide="ignore"):
        term = np.log(model.pi) - model.zeta - model.log_z1()
    dense = np.concatenate(dense_parts) if dense_parts else np.zeros(0)
    return Rescorer(fs, mode, base, dense, table, table_lam, cap - 1, term, int(model.m), bool(model.long))


@nb.njit(cache=True)
def _fill(keys, lam, table, table_lam, mask):
    for f in range(keys.shape[0]):
        s = np.int64(hash64(keys[f]) & np.uint64(mask))
        while table[2 * s] != -1:
            s = (s + 1) & mask
        table[2 * s] = keys[f]
        table_lam[2 * s + 1] = lam[f]


@nb.njit(cache=True)
def _rescore(tokens, ptr, bos, eos, cls, n_c, tid, length, offset, kind, minoff, mode, base, dense, table,
             table_lam, mask, ahead, out):
    """out[s] += lambda . f(x_s): dense rows as the sentences are walked, the hashed rows'
    keys collected and then probed in one prefetched sweep."""
    n = ptr.shape[0] - 1
    R = tid.shape[0]
    maxlen = 0
    n_hashed = 0
    for s in range(n):
        n_pad = ptr[s + 1] - ptr[s] + 2
        maxlen = max(maxlen, n_pad)
        for r in range(R):
            if mode[r] == 2:
                lo, hi = _row_range(r, n_pad, minoff, length)
                if hi > lo:
                    n_hashed += hi - lo
    keys = np.empty(n_hashed, np.int64)
    slot = np.empty(n_hashed, np.int64)
    owner = np.empty(n_hashed, np.int64)
    y = np.empty(maxlen, np.int32)
    yc = np.empty(maxlen, np.int32)
    m = 0
    for s in range(n):
        n_pad = _pad(tokens, ptr[s], ptr[s + 1], bos, eos, y)
        for p in range(n_pad):
            yc[p] = cls[y[p]]
        acc = 0.0
        for r in range(R):
            lo, hi = _row_range(r, n_pad, minoff, length)
            md = mode[r]
            if md == 0:
                src = yc if kind[r, 0] == KIND_C else y
                b = base[r]
                for i in range(lo, hi):
                    acc += dense[b + src[i]]
            elif md == 1:
                b = base[r]
                o = offset[r, 0]
                for i in range(lo, hi):
                    acc += dense[b + yc[i + o] * n_c + yc[i]]
            else:
                for i in range(lo, hi):
                    k = _row_key(y, yc, i, r, tid, length, offset, kind)
                    keys[m] = k
                    slot[m] = np.int64(hash64(k) & np.uint64(mask))
                    owner[m] = s
                    m += 1
        out[s] += acc
    for j in range(m):
        if j + ahead < m:
            prefetch(table, 2 * slot[j + ahead])
        sl = slot[j]
        k = keys[j]
        while True:
            kk = table[2 * sl]
            if kk == k:
                out[owner[j]] += table_lam[2 * sl + 1]
                break
            if kk == -1:
                break
            sl = (sl + 1) & mask


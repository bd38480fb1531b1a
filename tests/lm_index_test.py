"""The n-gram index's suffix ids and the compiler's arc order against plain references."""

from __future__ import annotations

import numpy as np

from fsmlearn.lm.index import NGramIndex
from fsmlearn.lm.compiled import sort_arcs


def _closed_ngrams(rng, V, N, per_order, drop_suffixes):
    """Random n-grams of orders 1..N whose prefixes are listed; with
    ``drop_suffixes`` some proper suffixes are left out (as after pruning)."""
    grams = [{(w,) for w in range(V)}]
    for k in range(2, N + 1):
        prev = sorted(grams[-1])
        new = set()
        for _ in range(per_order):
            new.add(prev[rng.integers(len(prev))] + (int(rng.integers(V)),))
        grams.append(new)
    if not drop_suffixes:   # close under suffixes, as lmplz's models are
        for k in range(N, 1, -1):
            for g in list(grams[k - 1]):
                for s in range(1, k):
                    suf = g[s:]
                    for j in range(1, len(suf) + 1):
                        grams[len(suf[:j]) - 1].add(suf[:j])
    return [np.array(sorted(g, key=lambda t: t[::-1]), np.int32).reshape(-1, k + 1)
            for k, g in enumerate(grams)]


def _reference_suffix(ngrams):
    ids = {}
    for k, rows in enumerate(ngrams):
        for r in rows:
            ids[tuple(int(x) for x in r)] = len(ids)
    out = []
    for rows in ngrams:
        for r in rows:
            t = tuple(int(x) for x in r)
            best = -1
            for s in range(1, len(t)):
                if t[s:] in ids:
                    best = ids[t[s:]]
                    break
            out.append(best)
    return np.array(out)


def test_suffix_ids_match_a_dictionary_reference():
    rng = np.random.default_rng(3)
    for drop in (False, True):
        ngrams = _closed_ngrams(rng, V=12, N=5, per_order=300, drop_suffixes=drop)
        idx = NGramIndex(ngrams, 12)
        assert np.array_equal(idx.suffix, _reference_suffix(ngrams))


def test_sorted_arcs_follow_lexsort():
    rng = np.random.default_rng(5)
    n = 200
    # some states with many arcs (the merge sort path), most with few; labels unique per state
    sizes = np.where(rng.random(n) < 0.05, rng.integers(33, 400, n), rng.integers(0, 6, n))
    src = np.repeat(np.arange(n), sizes)
    lab = np.concatenate([rng.permutation(1000)[:k] - 2 for k in sizes]).astype(np.int32)
    perm = rng.permutation(src.size)
    src, lab = src[perm], lab[perm]
    dst = rng.integers(0, n, src.size)
    wt = rng.random(src.size)
    src_start = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=src_start[1:])
    d, x, w = sort_arcs(src, dst, lab, wt, src_start)
    order = np.lexsort((lab, src))
    assert d.dtype == np.int32 and x.dtype == np.int32
    assert np.array_equal(d, dst[order]) and np.array_equal(x, lab[order]) and np.array_equal(w, wt[order])

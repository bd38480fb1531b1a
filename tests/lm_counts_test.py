"""n-gram counting against a brute-force count."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import pytest

from fsmlearn.errors import FsmError
from fsmlearn.lm.counts import apply_cutoffs, count_ngrams


@given(st.lists(st.lists(st.sampled_from(list("abcde")), max_size=8), min_size=1, max_size=30),
       st.integers(1, 4), st.integers(1, 50))
def test_counts_equal_brute_force(sents, order, chunk):
    c = count_ngrams(sents, order, chunk_tokens=chunk)
    for k in range(1, order + 1):
        want = Counter()
        for s in sents:
            t = ["<s>"] + s + ["</s>"]
            for i in range(len(t) - k + 1):
                want[tuple(t[i:i + k])] += 1
        got = {tuple(c.vocab[w] for w in row): int(n) for row, n in zip(c.ngrams[k - 1], c.counts[k - 1])}
        assert got == dict(want)
        rows = c.ngrams[k - 1]
        assert all(tuple(rows[i]) < tuple(rows[i + 1]) for i in range(len(rows) - 1))   # sorted


def test_fixed_vocabulary_maps_unknown_words():
    c = count_ngrams(["a b z", "z z"], 2, vocab=["<s>", "</s>", "<unk>", "a", "b"])
    uni = {c.vocab[r[0]]: int(n) for r, n in zip(c.ngrams[0], c.counts[0])}
    assert uni["<unk>"] == 3 and "z" not in c.vocab


def test_apply_cutoffs():
    c = count_ngrams(["a b"] * 3 + ["a c"], 3)
    cut = apply_cutoffs(c, 2)
    assert all(n >= 2 for n in cut.counts[1]) and all(n >= 2 for n in cut.counts[2])
    keep = apply_cutoffs(c, 2, keep_bigrams=True)
    assert keep.sizes[1] == c.sizes[1] and keep.sizes[2] < c.sizes[2]
    assert cut.cutoffs == [1, 2, 2]


def test_large_word_ids_pack_without_overflow():
    # a 5-gram of ids above 2**16 once overflowed the high key (regression)
    from fsmlearn.lm.counts import count_token_ids, key_bits
    assert key_bits(5) == 21 and key_bits(4) == 24 and key_bits(6) == 21
    words = [f"w{i}" for i in range(300_000)]
    toks = np.array([0, 299_999, 250_000, 70_000, 123_456, 299_998, 1], np.int32)
    c = count_token_ids([(toks, np.array([0, toks.size]))], words, 5)
    assert c.ngrams[4].tolist() == [[0, 299_999, 250_000, 70_000, 123_456],
                                    [250_000, 70_000, 123_456, 299_998, 1],
                                    [299_999, 250_000, 70_000, 123_456, 299_998]]


@pytest.mark.parametrize("table_mb", [0, 64])
def test_count_corpus_matches_count_ngrams_with_cutoffs(table_mb):
    """The partitioned counter gives the same cut counts as counting everything
    and cutting afterwards, whether one partition suffices or many are needed."""
    from fsmlearn.lm.counts import count_corpus
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(40)]
    zipf = 1.0 / np.arange(1, 41)
    zipf /= zipf.sum()
    sents = [list(rng.choice(words, size=rng.integers(0, 12), p=zipf)) for _ in range(3000)]
    vocab = words + ["<unk>"]
    wid = {w: i for i, w in enumerate(vocab)}
    lens = [len(s) for s in sents]
    ptr = np.zeros(len(sents) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    ids = np.array([wid[w] for s in sents for w in s], np.int32)
    for cut, keep2 in (([1, 1, 1, 1], False), ([1, 3, 2, 4], False), ([1, 5, 5, 5], True)):
        ref = apply_cutoffs(count_ngrams(sents, 4), cut, keep_bigrams=keep2)
        # 0 MB means the smallest table (1,024 slots): dozens of partitions per order
        got = count_corpus(ptr, ids, vocab, 4, cut, keep_bigrams=keep2, table_mb=table_mb)
        ref_map = {tuple(ref.vocab[i] for i in row): int(c)
                   for k in range(4) for row, c in zip(ref.ngrams[k], ref.counts[k])}
        got_map = {tuple(got.vocab[i] for i in row): int(c)
                   for k in range(4) for row, c in zip(got.ngrams[k], got.counts[k])}
        assert got_map == ref_map
        assert got.sizes == ref.sizes
        for k in range(1, 4):   # sorted lexicographically by id
            g = got.ngrams[k]
            assert np.all(np.lexsort(g.T[::-1]) == np.arange(g.shape[0]))


def test_count_corpus_rejects_ids_outside_the_vocabulary():
    from fsmlearn.lm.counts import count_corpus
    with pytest.raises(FsmError, match="token id 9 at position 2"):
        count_corpus(np.array([0, 3], np.int64), np.array([0, 1, 9], np.int32), ["a", "b"], 3)

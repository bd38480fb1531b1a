"""n-gram counting against a brute-force count."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

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

"""Tagging (fsmlearn.tag.decode): Viterbi against brute-force enumeration of all taggings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsmlearn.tag import encode_sentences, tag_sentences, viterbi
from tag_common import brute_force, random_hmm, random_sentence


@pytest.mark.parametrize("order", [2, 3])
@given(seed=st.integers(0, 2**31))
def test_viterbi_is_the_best_tagging(order, seed):
    rng = np.random.default_rng(seed)
    hmm = random_hmm(rng, T=3, V=4, order=order)
    sents = [random_sentence(rng, hmm, int(rng.integers(1, 5))) for _ in range(4)]
    ptr, ids, oov = encode_sentences(hmm, sents)
    got = viterbi(hmm, ptr, ids, oov_words=oov, batch_tokens=5)     # several lattices
    for i, s in enumerate(sents):
        lp, seqs = brute_force(hmm, s)
        best = seqs[int(np.argmax(lp))]
        mine = tuple(int(t) for t in got[ptr[i]:ptr[i + 1]])
        # ties: the found tagging must score as well as the best
        assert lp[seqs.index(mine)] == pytest.approx(lp.max(), abs=1e-9)
        if np.sum(np.isclose(lp, lp.max(), atol=1e-9)) == 1:
            assert mine == best
    assert tag_sentences(hmm, sents) == [[hmm.tags[t] for t in got[ptr[i]:ptr[i + 1]]] for i in range(4)]

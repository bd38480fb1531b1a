"""n-gram EM on a real backoff LM: the pipeline from an LM to a tagger."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.data import iter_sentences
from fsmlearn.data.tagsets import tag_dictionary
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import compile_lm
from fsmlearn.tag.ngram.approx import setup_from_lm, train_ngram_em
from fsmlearn.algo.tied.materialise import bound_materialised
from fsmlearn.algo.tied.objective import expected_stats


@pytest.fixture(scope="module")
def small():
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:400]
    lm = compile_lm(estimate(count_ngrams(sents, 3), cutoffs=[1, 1, 2], keep_bigrams=True))
    td = tag_dictionary("tag17")
    return lm, td, list(iter_sentences("wsj-small"))[400:600]


def test_ngram_em_on_a_backoff_lm_raises_the_bound_and_learns(small):
    lm, td, ev = small
    st = setup_from_lm(lm, tagdict=td)
    assert float((st.cs.fin_k * st.cs.alpha[st.cs.fin_state]).sum()) == pytest.approx(1.0, abs=1e-7)
    h, recs = train_ngram_em(st, 4, eval=ev, tagdict=td)
    b = [r["bound"] for r in recs]
    assert all(np.isfinite(b)) and b[-1] > b[0] + 1.0
    assert recs[-1]["accuracy"] > recs[0]["accuracy"]
    assert np.allclose(np.exp(h.log_trans).sum(1)[:-1], 1.0) and np.allclose(np.exp(h.log_emit).sum(1), 1.0)


def test_bound_on_a_backoff_lm_matches_the_materialised_relaxation():
    # a tiny LM keeps the materialised (state, tag) machine small
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:25]
    lm = compile_lm(estimate(count_ngrams(sents, 3), discount_fallback=(0.5, 1.0, 1.5)))
    td = tag_dictionary("tag17")
    st = setup_from_lm(lm, tagdict=td)
    rng = np.random.default_rng(0)
    T = len(st.tags)
    lt = np.log(rng.dirichlet(np.ones(T + 1), size=T + 1))
    le = np.log(rng.dirichlet(np.ones(len(st.vocab) + 1), size=T))
    le = np.where(st.allowed.T, le, -np.inf)
    phi = st.cs.uniform_phi()
    ours = expected_stats(st.cs, phi, lt, le).bound
    assert ours == pytest.approx(bound_materialised(st.cs, phi, lt, le), rel=1e-7)


def test_a_tag_without_expected_transitions_gets_a_uniform_row_not_nan():
    from fsmlearn.tag.ngram.approx import _transition_probs
    T = 3
    with np.errstate(divide="ignore"):
        lt = np.log(np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.2, 0.2, 0.2, 0.4],
                              [0.3, 0.3, 0.4, 0.0]]))
        p = _transition_probs(lt, T)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(1), 1.0)
    np.testing.assert_allclose(p[1], 0.25)                        # the row that had no mass
    np.testing.assert_allclose(p[0], [0.5, 0.5, 0, 0])            # the others unchanged
    assert p[T, T] == 0.0 and p[T].sum() == pytest.approx(1.0)    # no empty sentence


def test_a_tag_dictionary_without_unknown_words_has_an_empty_mask():
    from fsmlearn.tag.oov_tags import OovTags
    d = OovTags("none", [], np.zeros(0, bool), np.array([True, False, True]))
    assert d.mask.shape == (0, 3) and d.open_mask.tolist() == [True, False, True]

"""The HMM (fsmlearn.tag.hmm): the closed-form M-step with its smoothings, validation,
the transducer's symbols."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fsmlearn.errors import ModelError
from fsmlearn.tag import HMM
from tag_common import random_hmm


def test_from_counts_is_normalised_counts():
    tags, vocab = ["A", "B"], ["x", "y", "z"]
    tc = np.array([[1.0, 3.0, 0.0], [2.0, 0.0, 2.0], [4.0, 0.0, 0.0]])
    ec = np.array([[1.0, 1.0, 0.0, 2.0], [0.0, 5.0, 5.0, 0.0]])
    h = HMM.from_counts(tags, vocab, tc, ec)
    np.testing.assert_allclose(np.exp(h.log_trans[0]), [0.25, 0.75, 0.0])
    np.testing.assert_allclose(np.exp(h.log_trans[1]), [0.5, 0.0, 0.5])
    np.testing.assert_allclose(np.exp(h.log_trans[2]), [1.0, 0.0, 0.0])
    assert h.log_trans[2, 2] == -np.inf
    np.testing.assert_allclose(np.exp(h.log_emit[0]), [0.25, 0.25, 0.0, 0.5])
    np.testing.assert_allclose(np.exp(h.log_emit[1]), [0.0, 0.5, 0.5, 0.0])
    # the allowed mask: disallowed emissions get -inf, the rest renormalise
    allowed = np.ones((4, 2), bool)
    allowed[3, 0] = False
    h = HMM.from_counts(tags, vocab, tc, ec, allowed=allowed)
    assert h.log_emit[0, 3] == -np.inf
    np.testing.assert_allclose(np.exp(h.log_emit[0]), [0.5, 0.5, 0.0, 0.0])
    # a tag with no count emits uniformly over its allowed words; an empty row is uniform
    h = HMM.from_counts(tags, vocab, np.zeros((3, 3)), np.zeros((2, 4)), allowed=allowed)
    np.testing.assert_allclose(np.exp(h.log_emit[0]), [1 / 3, 1 / 3, 1 / 3, 0.0])
    np.testing.assert_allclose(np.exp(h.log_trans[2]), [0.5, 0.5, 0.0])
    # additive smoothing
    h = HMM.from_counts(tags, vocab, tc, ec, smoothing=1.0)
    np.testing.assert_allclose(np.exp(h.log_trans[0]), np.array([2, 4, 1]) / 7)
    np.testing.assert_allclose(np.exp(h.log_trans[2]), [5 / 6, 1 / 6, 0.0])


def test_from_counts_interpolation_and_trigram():
    rng = np.random.default_rng(5)
    T, V = 4, 6
    tags, vocab = [f"t{i}" for i in range(T)], [f"w{i}" for i in range(V)]
    c3 = rng.integers(0, 6, (T + 1,) * 3).astype(float)
    c3[:, T, T] = 0
    ec = rng.integers(1, 5, (T, V + 1)).astype(float)
    for sm in ("interpolate", None, 0.5):
        h = HMM.from_counts(tags, vocab, c3, ec, smoothing=sm)
        assert h.order == 3 and h.log_trans3.shape == (T + 1,) * 3
        np.testing.assert_allclose(np.exp(h.log_trans3).sum(axis=2), 1.0, atol=1e-12)
        np.testing.assert_allclose(np.exp(h.log_trans).sum(axis=1), 1.0, atol=1e-12)
        assert np.all(h.log_trans3[:, T, T] == -np.inf)
    h = HMM.from_counts(tags, vocab, c3, ec, smoothing="interpolate")
    # interpolation: every possible transition gets mass from the unigram
    assert np.all(np.isfinite(h.log_trans3[:, :, :T]))
    # ML trigram relative frequencies where the history was seen
    h = HMM.from_counts(tags, vocab, c3, ec)
    a, b = 1, 2
    np.testing.assert_allclose(np.exp(h.log_trans3[a, b]), c3[a, b] / c3[a, b].sum())
    with pytest.raises(ModelError, match="shape"):
        HMM.from_counts(tags, vocab, np.zeros((T, T)), ec)
    with pytest.raises(ModelError, match="smoothing"):
        HMM.from_counts(tags, vocab, c3, ec, smoothing="bogus")


def test_constructor_validates():
    rng = np.random.default_rng(1)
    h = random_hmm(rng)
    with pytest.raises(ModelError, match="log_emit has shape"):
        HMM(h.tags, h.vocab, h.log_trans, h.log_emit[:, :-1])
    bad = h.log_trans.copy()
    bad[0, 0] = np.log(np.exp(bad[0, 0]) + 0.1)
    with pytest.raises(ModelError, match="row \\[0\\] of log_trans sums to"):
        HMM(h.tags, h.vocab, bad, h.log_emit)
    nan = h.log_emit.copy()
    nan[1, 1] = np.nan
    with pytest.raises(ModelError, match=r"log_emit\[1, 1\]"):
        HMM(h.tags, h.vocab, h.log_trans, nan)


def test_unk_as_a_vocabulary_word_gets_a_distinct_oov_symbol():
    """A tagger trained on an LM's vocabulary has the word <unk>; the transducer's
    out-of-vocabulary symbol is then <oov>, so the symbol table stays one-to-one."""
    tags = ["A", "B"]
    vocab = ["x", "<unk>"]
    with np.errstate(divide="ignore"):     # <s> -> </s> is impossible: log 0
        lt = np.log(np.array([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25], [0.5, 0.5, 0.0]]))
    le = np.log(np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]]))
    h = HMM(tags, vocab, lt, le)
    syms = h.word_symbols()
    assert syms.find("<unk>") == 2 and syms.find("<oov>") == 3
    m = h.tagger_transducer()
    assert m.num_arcs == 3 * 2 * 3 and math.isfinite(float(m.final[1:].min()))

"""The TRF rescorer (dense rows, the interleaved prefetched table) against the definition."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

from fsmlearn.fsm.hashing import prefetch
from fsmlearn.trf import rescore
from fsmlearn.trf.features import as_corpus, build_features, make_templates
from fsmlearn.trf.model import TRF, empirical_pi
from fsmlearn.trf.rescore import DENSE_ONE, DENSE_PAIR, HASHED, compile_rescorer

from trf_features_test import _direct_score


def _model(types, seed=0, V=6, C=3, maxlen=14, n=80):
    rng = np.random.default_rng(seed)
    train = as_corpus([rng.integers(0, V, rng.integers(1, maxlen)) for _ in range(n)])
    classes = rng.integers(0, C, V)
    classes[:C] = np.arange(C)
    fs = build_features(train, V, make_templates(types), classes=classes, n_classes=C)
    m = 10
    _, pi = empirical_pi(train.lengths, m, True, add=1.0)
    zeta = np.r_[0.0, 0.0, rng.normal(size=len(pi) - 2)]
    return rng, TRF(fs, rng.normal(size=fs.num_features), m, True, pi, zeta)


@pytest.mark.parametrize("types", ["w+c+ws+cs+wsh+csh+tied", "w+c+ws+cs+wsh+csh+cpw+tied", "w", "c+cs", "ws+tied"])
def test_rescorer_equals_the_feature_sets_scores_and_the_definition(types):
    rng, model = _model(types, seed=len(types))
    rs = compile_rescorer(model)
    V = model.features.vocab_size
    # lengths 1 to 20 (every row firing and not firing), longer than m (the long group)
    test = as_corpus([rng.integers(0, V, L) for L in list(range(1, 21)) + list(rng.integers(1, 20, 40))])
    s = rs.scores(test)
    assert np.allclose(s, model.features.scores(test, model.lam), rtol=0, atol=1e-12)
    direct = np.array([_direct_score(model.features, test.sentence(i), model.lam) for i in range(len(test))])
    assert np.allclose(s, direct, rtol=0, atol=1e-12)
    assert np.allclose(rs.log_probs(test), model.log_probs(test), rtol=0, atol=1e-10)


def test_rows_go_dense_or_to_the_table_by_their_slots():
    _, model = _model("w+c+ws+cs+tied")
    rs = compile_rescorer(model)
    t = model.features.templates
    mode = dict(zip(t.label, rs.mode))
    assert mode["w0"] == DENSE_ONE and mode["c0"] == DENSE_ONE
    assert mode["c-1c0"] == DENSE_PAIR and mode["c-3c0"] == DENSE_PAIR and mode["c-7c0"] == DENSE_PAIR
    assert mode["w-1w0"] == HASHED and mode["c-2c-1c0"] == HASHED and mode["w-6w0"] == HASHED
    # the tied class rows share one block of weights
    assert len({rs.base[r] for r, lab in enumerate(t.label) if lab in ("c-6c0", "c-9c0")}) == 1


def test_prefetch_distance_does_not_change_scores(monkeypatch):
    rng, model = _model("w+c+ws+wsh+tied", seed=5)
    rs = compile_rescorer(model)
    test = as_corpus([rng.integers(0, 6, rng.integers(1, 25)) for _ in range(50)])
    ref = rs.scores(test)
    for ahead in (0, 1, 7, 1000):
        monkeypatch.setattr(rescore, "PREFETCH", ahead)
        assert np.array_equal(rs.scores(test), ref)


def test_rescorer_keeps_the_lambda_it_was_built_with():
    rng, model = _model("w+c")
    rs = compile_rescorer(model)
    test = as_corpus([rng.integers(0, 6, 5) for _ in range(5)])
    before = rs.scores(test)
    model.lam[:] = 0.0
    assert np.array_equal(rs.scores(test), before)
    assert np.allclose(compile_rescorer(model).scores(test), 0.0)


def test_bad_sentences_are_refused():
    from fsmlearn.errors import ArgumentError
    _, model = _model("w+c")
    rs = compile_rescorer(model)
    with pytest.raises(ArgumentError, match="outside"):
        rs.scores(as_corpus([[0, 6]]))


def test_prefetch_is_a_hint_only():
    @nb.njit
    def total(a):
        s = 0.0
        for i in range(a.shape[0]):
            prefetch(a, min(i + 16, a.shape[0] - 1))
            s += a[i]
        return s
    a = np.arange(1000, dtype=np.float64)
    assert total(a) == a.sum()

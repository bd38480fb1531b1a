"""Trans-dimensional mixture sampling: the chains' samples follow q(j, x) (equation 12)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError
from fsmlearn.trf.features import as_corpus, build_features, make_templates
from fsmlearn.trf.sampler import Sampler


def _exact_and_empirical(fs, lam, len_w, M, tok, ln):
    probs = {}
    for j in range(1, M + 1):
        xs = [tuple(x) for x in itertools.product(range(fs.vocab_size), repeat=j)]
        s = fs.scores(as_corpus([list(x) for x in xs]), lam)
        probs.update({x: len_w[j] + v for x, v in zip(xs, s)})
    keys = list(probs)
    lp = np.array([probs[k] for k in keys])
    p = np.exp(lp - lp.max())
    p /= p.sum()
    counts = {}
    for a, n in zip(tok, ln):
        k = tuple(int(v) for v in a[:n])
        counts[k] = counts.get(k, 0) + 1
    emp = np.array([counts.get(k, 0) for k in keys]) / len(ln)
    return p, emp


@pytest.mark.parametrize("types,classes", [("w", None), ("w+c+ws+cpw+tied", [0, 1, 1, 0])])
def test_samples_follow_the_joint_distribution(types, classes):
    rng = np.random.default_rng(1)
    train = as_corpus([rng.integers(0, 4, rng.integers(1, 6)) for _ in range(80)])
    fs = build_features(train, 4, make_templates(types, 3), classes=None if classes is None else np.array(classes))
    lam = rng.normal(size=fs.num_features) * 0.7
    M = 3
    len_w = np.r_[0.0, 1.5, 0.0, -3.0]
    sampler = Sampler(fs, M, chains=2, seed=5)
    tok, ln = sampler.sample(40_000, lam, len_w)
    p, emp = _exact_and_empirical(fs, lam, len_w, M, tok, ln)
    tv = 0.5 * np.abs(emp - p).sum()
    assert tv < 0.03
    # the same samples against a wrong target (lambda halved) are far off: the test can fail
    p_wrong, _ = _exact_and_empirical(fs, lam * 0.5, len_w, M, tok, ln)
    assert 0.5 * np.abs(emp - p_wrong).sum() > 0.1
    acc = sampler.acceptance()
    assert 0 < acc["jump"] < 1


def test_chains_do_not_depend_on_the_thread_count_and_continue():
    import numba
    rng = np.random.default_rng(2)
    train = as_corpus([rng.integers(0, 5, rng.integers(1, 8)) for _ in range(50)])
    fs = build_features(train, 5, make_templates("w+c", 3), classes=np.array([0, 0, 1, 1, 2]))
    lam = rng.normal(size=fs.num_features)
    len_w = np.zeros(8)
    runs = []
    # one thread against as many as numba may use (2 on CI's machine)
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        s = Sampler(fs, 7, chains=2, seed=9)
        a = s.sample(50, lam, len_w)
        b = s.sample(50, lam, len_w)
        runs.append((a, b))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    for x, y in zip(runs[0], runs[1]):
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
    assert not np.array_equal(runs[0][0][0], runs[0][1][0])      # the chains moved on


def test_bad_arguments():
    fs = build_features(as_corpus([[0, 1]]), 2, make_templates("w"))
    with pytest.raises(ArgumentError):
        Sampler(fs, 0)
    s = Sampler(fs, 3)
    with pytest.raises(ArgumentError):
        s.sample(5, np.zeros(fs.num_features + 1), np.zeros(4))
    with pytest.raises(ArgumentError, match="class"):
        Sampler(build_features(as_corpus([[0, 1]]), 2, make_templates("w"), classes=np.array([0, 2]),
                               n_classes=3), 3)

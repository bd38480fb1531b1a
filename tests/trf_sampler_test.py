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


def _exact_by_the_engine(lp, lam, len_w, directions):
    """The target q(j, x) ∝ exp(len_w[j] + lambda . f(x)) from the engine on the feature
    acceptor times the lengths: its length marginal [M+1] and E_q[d . f] for each direction d."""
    logz = lp.log_normalisers(lam)
    lq = np.where(np.isfinite(logz), len_w + logz, -np.inf)
    lq[0] = -np.inf
    q = np.exp(lq - lq[np.isfinite(lq)].max())
    q /= q.sum()
    with np.errstate(divide="ignore"):
        ef, _ = lp.expected_features(lam, np.log(q))
    return q, directions @ ef


@pytest.mark.parametrize("types,classes,V,M", [("w+c", [0, 1, 1, 2, 0, 2, 1, 0], 8, 7),
                                               ("w+c+ws+cpw+tied", [0, 1, 1], 3, 6)])
def test_samples_follow_the_engines_exact_distribution(types, classes, V, M):
    """Past what the brute-force test enumerates (8 words and lengths to 7: 2.4M strings;
    skip-gram features over 3 words): the chains' length frequencies and mean scores along
    random directions against the exact values the engine computes on the feature
    acceptor intersected with the lengths."""
    from fsmlearn.trf.acceptor import LengthProduct, compile_acceptor
    rng = np.random.default_rng(3)
    train = as_corpus([rng.integers(0, V, rng.integers(1, M + 1)) for _ in range(120)])
    fs = build_features(train, V, make_templates(types, 2), classes=None if classes is None else np.array(classes))
    lam = rng.normal(size=fs.num_features) * 0.5
    lp = LengthProduct(compile_acceptor(fs), M)
    len_w = np.r_[0.0, rng.normal(size=M)] - lp.log_normalisers(lam) * 0.9
    len_w[0] = 0.0
    directions = rng.normal(size=(3, fs.num_features))
    q, mean = _exact_by_the_engine(lp, lam, len_w, directions)
    sampler = Sampler(fs, M, chains=2, seed=11)
    tok, ln = sampler.sample(60_000, lam, len_w)
    emp_len = np.bincount(ln, minlength=M + 1) / ln.size
    assert 0.5 * np.abs(emp_len - q).sum() < 0.03
    corpus = as_corpus([list(a[:n]) for a, n in zip(tok, ln)])
    emp_mean = np.array([fs.scores(corpus, d).mean() for d in directions])
    scale = np.array([fs.scores(corpus, d).std() for d in directions])
    # Monte Carlo error of correlated chains: well within 10 standard errors of 120k draws
    # with an autocorrelation time below 25 (the tolerance a wrong target breaks below)
    tol = 10 * scale * np.sqrt(25 / ln.size)
    assert np.all(np.abs(emp_mean - mean) < tol)
    # the same samples against a wrong target (lambda scaled) are far off: the test can fail
    q_wrong, mean_wrong = _exact_by_the_engine(lp, lam * 0.6, len_w, directions)
    assert 0.5 * np.abs(emp_len - q_wrong).sum() > 0.03 or np.any(np.abs(emp_mean - mean_wrong) > tol)


_THREADS_SCRIPT = """
import numba, numpy as np
from fsmlearn.trf.features import as_corpus, build_features, make_templates
from fsmlearn.trf.sampler import Sampler
rng = np.random.default_rng(2)
train = as_corpus([rng.integers(0, 5, rng.integers(1, 8)) for _ in range(50)])
fs = build_features(train, 5, make_templates("w+c", 3), classes=np.array([0, 0, 1, 1, 2]))
lam = rng.normal(size=fs.num_features)
runs = []
for threads in (1, 2):
    numba.set_num_threads(threads)
    s = Sampler(fs, 7, chains=2, seed=9)
    runs.append((s.sample(50, lam, np.zeros(8)), s.sample(50, lam, np.zeros(8))))
same = all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(runs[0], runs[1]))
moved = not np.array_equal(runs[0][0][0], runs[0][1][0])
print(same, moved)
"""


def test_chains_do_not_depend_on_the_thread_count_and_continue():
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_NUM_THREADS="2")
    r = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]      # same samples on 1 and 2 threads; the chains moved on


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


@pytest.mark.parametrize("types", ["w+c+ws+cs", "wsh+csh+cpw", "tied+w"])
def test_conditionals_equal_differences_of_the_scores(types):
    """Every template, every slot: the sampler's conditional at a position (class part plus
    word part) equals lambda . f with each token there, up to a constant (lengths to 13, so the
    tied distances 6-9 fire)."""
    from fsmlearn.trf.sampler import _conditional, _word_scores
    rng = np.random.default_rng(3)
    V, C = 6, 3
    classes = np.array([0, 1, 2, 0, 1, 2])
    train = as_corpus([rng.integers(0, V, rng.integers(1, 14)) for _ in range(300)])
    fs = build_features(train, V, make_templates(types, 4), classes=classes)
    lam = rng.normal(size=fs.num_features)
    s = Sampler(fs, 14)
    h, t = s.holes, fs.templates
    for _ in range(12):
        x = list(rng.integers(0, V, rng.integers(1, 14)))
        y = np.array([fs.bos] + x + [fs.eos], np.int32)
        for p in range(1, len(x) + 1):
            cs = np.zeros(C)
            act = np.zeros(t.tid.shape[0] * 4 + 4, np.int64)
            na = _conditional(y, len(y), p, fs.classes, C, t.tid, t.length, t.offset, t.kind, t.minoff, *h.table,
                              h.ptr, h.cls, h.tok, h.feat, s._hval(lam), cs, act)
            got = np.empty(V)
            for c in range(C):
                ws = np.zeros(V)
                size = _word_scores(c, act, na, h.ptr, h.cls, h.tok, h.feat, lam, s.mptr, s.mpos, ws)
                for k in range(size):
                    got[s.members[s.mptr[c] + k]] = cs[c] + ws[k]
            want = fs.scores(as_corpus([x[:p - 1] + [u] + x[p:] for u in range(V)]), lam)
            assert np.allclose(got - got[0], want - want[0], atol=1e-10)


def test_seeds_give_unrelated_streams():
    from fsmlearn.trf.sampler import _rand
    fs = build_features(as_corpus([[0, 1]]), 2, make_templates("w"))
    a, b = Sampler(fs, 3, chains=2, seed=0).rng.copy(), Sampler(fs, 3, chains=2, seed=1).rng.copy()
    da = [_rand(a, 0) for _ in range(20)]
    db = [_rand(b, 0) for _ in range(20)]
    assert not set(np.round(da, 12)) & set(np.round(db, 12))

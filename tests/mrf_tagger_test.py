"""The MRF tagger (fsmlearn.mrf.tagger): the lifted tree against brute force, the bound against
the exact joint log-partition, gradients against finite differences, decoding by the engine's
best path against enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError
from fsmlearn.mrf.lifted import TightenState, tighten
from fsmlearn.mrf.tagger import (TaggerMRF, decode, sentence_lattice_machine, tagged_sequence, tagger_bound,
                                 tagger_moments, train_tagger, tree_bp, tree_potentials, word_features)


def toy_model(rng, K=1, scale=1.0):
    m = TaggerMRF.init(["A", "B"], ["x", "Yy", "z1"], K=K)
    v = rng.normal(0, scale, m.to_vector().size)
    return m.with_vector(v)


def logsumexp(s):
    s = np.asarray(s)
    mx = s.max()
    return mx + np.log(np.exp(s - mx).sum())


def test_features_follow_appendix_b():
    F, index = word_features(["Dogs", "123", "IBMS"])
    names = {j: f for f, j in index.items()}
    got = [sorted(names[j] for j in F[i].indices) for i in range(3)]
    assert {"w=Dogs", "p1=D", "s1=s", "s4=Dogs", "initcap", "ends-s", "initcap-ends-s"} <= set(got[0])
    assert {"has-digit", "all-digits"} <= set(got[1]) and "allcaps-ends-S" in got[2]
    F2, _ = word_features(["Cats"], index)                 # unseen: affixes and shape only
    assert "w=Cats" not in index and F2.nnz > 0


@pytest.mark.parametrize("K", [1, 2])
def test_tree_bp_equals_brute_force(K):
    rng = np.random.default_rng(K)
    m = toy_model(rng, K)
    pot = tree_potentials(m)
    T, V = pot.Ew.shape
    th_w = np.log(pot.Ew) + pot.shift
    delta = rng.normal(0, 1, (K, T + V))
    r = tree_bp(pot, delta)
    dT, dW = delta[:, :T], delta[:, T:]
    tp = np.vstack([m.theta0 - dT.sum(0), m.theta0 + dT])
    wp = np.vstack([-dW.sum(0), dW])
    scores, confs = [], []
    for ts in itertools.product(range(T), repeat=K + 1):
        for ws in itertools.product(range(V), repeat=K + 1):
            s = sum(tp[j, ts[j]] + wp[j, ws[j]] + th_w[ts[j], ws[j]] for j in range(K + 1))
            s += sum(pot.logE[l][ts[0], ts[l + 1]] for l in range(K))
            scores.append(s)
            confs.append((ts, ws))
    lz = logsumexp(scores)
    assert r.logz == pytest.approx(lz, abs=1e-10)
    p = np.exp(np.array(scores) - lz)
    muT = np.zeros((K + 1, T))
    emit = np.zeros((T, V))
    for w, (ts, ws) in zip(p, confs):
        for j in range(K + 1):
            muT[j, ts[j]] += w
            emit[ts[j], ws[j]] += w / (K + 1)
    np.testing.assert_allclose(r.mu[:, :T], muT, atol=1e-12)
    np.testing.assert_allclose(r.emit, emit, atol=1e-12)


def test_bound_is_above_the_exact_joint_log_partition():
    rng = np.random.default_rng(7)
    m = TaggerMRF.init(["A"], ["x", "y"], K=1)              # T = 2, V = 3 with <S>
    m = m.with_vector(rng.normal(0, 1, m.to_vector().size))
    T, V, N = 2, 3, 4
    th_w = m.emission()
    states = list(itertools.product(range(T), range(V)))
    scores = []
    for seq in itertools.product(states, repeat=N):
        t = [a for a, _ in seq]
        w = [b for _, b in seq]
        scores.append(sum(m.theta0[t[i]] + th_w[t[i], w[i]] + m.trans[0][t[i], t[(i + 1) % N]] for i in range(N)))
    exact = logsumexp(scores)
    pot = tree_potentials(m)
    for d in [np.zeros((1, T + V))] + [rng.normal(0, s, (1, T + V)) for s in (0.5, 3.0)]:
        assert N * tree_bp(pot, d).logz / 2 >= exact - 1e-9
    st = TightenState.zeros(1, T + V)
    best = tighten(pot, st, max_iter=200, tol=1e-9, method="lbfgs", bp=tree_bp)
    assert N * best.logz / 2 >= exact - 1e-9


def test_gradient_equals_finite_differences():
    rng = np.random.default_rng(3)
    m = toy_model(rng, 1, 0.5)
    ts, ws = tagged_sequence([[("x", "A"), ("z1", "B")], [("Yy", "A")]], {t: i for i, t in enumerate(m.tags)},
                             {w: i for i, w in enumerate(m.vocab)}, 1)
    mom = tagger_moments(ts, ws, len(m.tags), len(m.vocab), 1)
    delta = rng.normal(0, 0.3, (1, len(m.tags) + len(m.vocab)))

    def f(v):
        mm = m.with_vector(v)
        pot = tree_potentials(mm)
        return tagger_bound(mm, mom, pot, tree_bp(pot, delta))

    v = m.to_vector()
    _, g = f(v)
    fd = np.empty_like(v)
    for i in range(v.size):
        e = np.zeros_like(v)
        e[i] = 1e-6
        fd[i] = (f(v + e)[0] - f(v - e)[0]) / 2e-6
    np.testing.assert_allclose(g, fd, atol=1e-7)


def test_decoding_is_the_best_tagging_by_enumeration():
    rng = np.random.default_rng(5)
    m = toy_model(rng, 1, 2.0)
    words = ["x", "Zz", "z1", "x"]                          # "Zz" unseen: features only
    th = m.emission(word_features(words, m.features)[0])
    best, arg = -np.inf, None
    for tags in itertools.product([1, 2], repeat=len(words)):
        s = m.trans[0][0, tags[0]] + m.trans[0][tags[-1], 0]
        s += sum(m.theta0[t] + th[t, i] for i, t in enumerate(tags))
        s += sum(m.trans[0][a, b] for a, b in zip(tags, tags[1:]))
        if s > best:
            best, arg = s, tags
    assert decode(m, [words, []]) == [[m.tags[t] for t in arg], []]
    with pytest.raises(ArgumentError):
        sentence_lattice_machine(toy_model(rng, 2), words)


def test_training_raises_the_bound():
    m = TaggerMRF.init(["A", "B"], ["x", "y", "z"])
    data = [[("x", "A"), ("y", "B")], [("z", "A"), ("x", "A"), ("y", "B")]] * 3
    ts, ws = tagged_sequence(data, {t: i for i, t in enumerate(m.tags)}, {w: i for i, w in enumerate(m.vocab)}, 1)
    mom = tagger_moments(ts, ws, len(m.tags), len(m.vocab), 1)
    trained, hist = train_tagger(m, mom, max_iter=30, l2=1e-3)
    assert len(hist) >= 2 and hist[-1]["bound"] > hist[0]["bound"]
    assert decode(trained, [["x", "y"]]) == [["A", "B"]]

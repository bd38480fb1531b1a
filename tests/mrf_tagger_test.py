"""The MRF tagger (fsmlearn.mrf.tagger): the lifted trees against brute force, the bound against
the exact joint log-partition (also with a window of L > 1 words), gradients against finite
differences, decoding by the engine's best path against enumeration of all taggings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError
from fsmlearn.mrf.lifted import TightenState, tighten
from fsmlearn.mrf.tagger import (MORPHOLOGY, TaggerMRF, decode, sentence_lattice_machine, tagged_sequence,
                                 tagger_bound, tagger_moments, train_tagger, tree_bp, tree_potentials,
                                 tree_weights, window_offsets, word_features, joint_log_partition)


def toy_model(rng, K=1, scale=1.0, L=1):
    m = TaggerMRF.init(["A", "B"], ["x", "Yy", "z1"], K=K, window=L)
    v = rng.normal(0, scale, m.to_vector().size)
    return m.with_vector(v)


def emissions_by_hand(m, words):
    """theta^{w,m}[t, word] per offset from U^m and the features' names (the morphology tests
    for offset 0 only): [L, T, len(words)]."""
    F, _ = word_features(list(words), m.features)
    names = {j: f for f, j in m.features.items()}
    out = np.zeros((m.L, len(m.tags), len(words)))
    for k in range(m.L):
        U = m.U if k == 0 else m.context_U[k - 1]
        for i in range(len(words)):
            for j in F[i].indices:
                if k == 0 or names[j] not in MORPHOLOGY:
                    out[k, :, i] += U[:, j]
    return out


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


def test_the_eight_morphology_tests_of_appendix_b():
    """Appendix B lists eight tests for the word under the tag; each word's full feature list
    (word, prefixes and suffixes up to 4, the tests that hold) and their count."""
    assert len(MORPHOLOGY) == 8 and MORPHOLOGY[-1] == "has-hyphen"
    words = ["Dogs", "well-known", "3-D", "IBMS", "123", "-"]
    F, index = word_features(words)
    names = {j: f for f, j in index.items()}
    got = [{names[j] for j in F[i].indices} for i in range(len(words))]
    affixes = lambda w: {f"p{k}={w[:k]}" for k in range(1, min(4, len(w)) + 1)} | \
        {f"s{k}={w[-k:]}" for k in range(1, min(4, len(w)) + 1)}
    tests = [{"initcap", "ends-s", "initcap-ends-s"}, {"has-hyphen"}, {"allcaps", "has-digit", "has-hyphen"},
             {"allcaps", "initcap", "allcaps-ends-S"}, {"has-digit", "all-digits"}, {"has-hyphen"}]
    for w, g, t in zip(words, got, tests):
        assert g == {"w=" + w} | affixes(w) | t, w
    assert [len(g) for g in got] == [12, 10, 10, 12, 9, 4]
    m = TaggerMRF.init(["A"], words, window=3)            # the context offsets drop all eight tests
    mask = m.context_mask()
    mnames = {j: f for f, j in m.features.items()}
    assert {mnames[j] for j in np.flatnonzero(mask == 0)} == {n for n in MORPHOLOGY if n in m.features}
    assert "has-hyphen" in index and mask[m.features["has-hyphen"]] == 0


def test_window_offsets_and_padding():
    assert window_offsets(1) == (0,) and window_offsets(2) == (0, 1) and window_offsets(3) == (0, 1, -1)
    assert window_offsets(5) == (0, 1, -1, 2, -2)
    for bad in (0, 10, 1.5):
        with pytest.raises(ArgumentError):
            window_offsets(bad)
    m = TaggerMRF.init(["A"], ["x"], K=1, window=5)
    assert m.pad == 2 and m.context_U.shape == (4, 2, len(m.features))
    ts, ws = tagged_sequence([[("x", "A")]], {"<S>": 0, "A": 1}, {"<S>": 0, "x": 1}, 1, pad=m.pad)
    assert ts.tolist() == [0, 0, 1, 0] and ws.tolist() == [0, 0, 1, 0]


@pytest.mark.parametrize("K,L,centre", [(1, 1, None), (2, 1, None), (1, 2, None), (1, 3, None), (2, 3, None),
                                         (1, 3, 0.7), (2, 2, 0.2)])
def test_tree_bp_equals_brute_force(K, L, centre):
    """Each offset's tree (tag star, a word leaf per tag copy, edges (K+1) theta^l and theta^{w,m} / p_m,
    copy c of tree m with unary theta^0 + delta_c / p_m) enumerated: log-partition (sum_m p_m log Z_m),
    node and edge marginals."""
    rng = np.random.default_rng(10 * K + L)
    m = toy_model(rng, K, L=L)
    p = tree_weights(L, centre)
    pot = tree_potentials(m, p)
    T, V, C = len(m.tags), len(m.vocab), L * (K + 1)
    th = [m.emission(k=k) / p[k] for k in range(L)]
    delta = rng.normal(0, 1, (C - 1, T + V))
    r = tree_bp(pot, delta)
    inv = 1 / np.repeat(p, K + 1)[:, None]
    dT, dW = delta[:, :T], delta[:, T:]
    tp = np.vstack([m.theta0 - inv[0] * dT.sum(0), m.theta0 + inv[1:] * dT])
    wp = np.vstack([-inv[0] * dW.sum(0), inv[1:] * dW])
    total = 0.0
    muT, muW = np.zeros((C, T)), np.zeros((C, V))
    pair, emit = np.zeros((K, T, T)), np.zeros((L, T, V))
    for k in range(L):
        o = k * (K + 1)
        scores, confs = [], []
        for ts in itertools.product(range(T), repeat=K + 1):
            for ws in itertools.product(range(V), repeat=K + 1):
                s = sum(tp[o + j, ts[j]] + wp[o + j, ws[j]] + th[k][ts[j], ws[j]] for j in range(K + 1))
                s += sum((K + 1) * m.trans[l][ts[0], ts[l + 1]] for l in range(K))
                scores.append(s)
                confs.append((ts, ws))
        lz = logsumexp(scores)
        total += p[k] * lz
        for w, (ts, ws) in zip(np.exp(np.array(scores) - lz), confs):
            for j in range(K + 1):
                muT[o + j, ts[j]] += w
                muW[o + j, ws[j]] += w
                emit[k, ts[j], ws[j]] += w / (K + 1)
            for l in range(K):
                pair[l, ts[0], ts[l + 1]] += p[k] * w
    assert r.log_partition == pytest.approx(total, abs=1e-10)
    np.testing.assert_allclose(r.mu, np.hstack([muT, muW]), atol=1e-12)
    np.testing.assert_allclose(r.pair, pair, atol=1e-12)
    np.testing.assert_allclose(r.emit, emit, atol=1e-12)
    with pytest.raises(ArgumentError):
        tree_bp(pot, np.zeros((C, T + V)))


def exact_joint_logz(m, N):
    """log Z of the cyclic joint model over all (tags, words) in (T x V)^N, by enumeration."""
    T, V = len(m.tags), len(m.vocab)
    th = [m.emission(k=k) for k in range(m.L)]
    t = np.array(list(itertools.product(range(T), repeat=N)))              # [T^N, N]
    w = np.array(list(itertools.product(range(V), repeat=N)))              # [V^N, N]
    tag_score = m.theta0[t].sum(1)
    for l in range(1, m.K + 1):
        tag_score = tag_score + m.trans[l - 1][t, np.roll(t, -l, axis=1)].sum(1)
    scores = np.repeat(tag_score[:, None], len(w), axis=1)
    for k, off in enumerate(m.offsets):
        wm = np.roll(w, -off, axis=1)                                      # W_{i+m}
        for i in range(N):
            scores += th[k][t[:, i][:, None], wm[:, i][None, :]]
    return logsumexp(scores.ravel())


@pytest.mark.parametrize("K,L,N,centre", [(1, 2, 4, None), (1, 3, 4, None), (2, 3, 6, None), (1, 5, 6, None),
                                           (1, 3, 4, 0.8), (1, 3, 4, 0.1), (2, 2, 6, 0.6)])
def test_window_bound_is_above_the_exact_joint_log_partition(K, L, N, centre):
    """N / (K+1) sum_m p_m log Z_m >= the cyclic joint model's log Z for every delta, tightened
    or not (T = 2, V = 3 with the separators), for uniform and other tree weights."""
    rng = np.random.default_rng(100 * K + 10 * L + N)
    m = TaggerMRF.init(["A"], ["x", "Yy"], K=K, window=L)
    m = m.with_vector(rng.normal(0, 1, m.to_vector().size))
    T, V, C = 2, 3, L * (K + 1)
    exact = exact_joint_logz(m, N)
    pot = tree_potentials(m, tree_weights(L, centre))
    bounds = []
    for d in [np.zeros((C - 1, T + V))] + [rng.normal(0, s, (C - 1, T + V)) for s in (0.5, 3.0, 30.0)]:
        bounds.append(N * tree_bp(pot, d).log_partition / (K + 1))
        assert bounds[-1] >= exact - 1e-9
    st = TightenState.zeros(C - 1, T + V)
    best = tighten(pot, st, max_iter=300, tol=1e-9, method="lbfgs", bp=tree_bp)
    tight = N * best.log_partition / (K + 1)
    # what the mathematics guarantees, on any processor: the tightened value is still a bound,
    # tightening never loosens it (the start, delta = 0, is bounds[0]), the optimum lies below
    # every delta's bound; and it tightened: the copies' disagreement fell by orders of
    # magnitude from the start's (about 2 to 4 here).  Not how far: L-BFGS stops at tol, after
    # 300 evaluations or where the floating point allows no further decrease, which depends on
    # the processor (gap 3e-6 here, 1.9e-5 on another EPYC for [1-5-6-None])
    assert exact - 1e-9 <= tight <= bounds[0] and tight <= min(bounds) + 1e-9
    assert best.gap < 1e-3 * tree_bp(pot, np.zeros((C - 1, T + V))).gap


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
        assert N * tree_bp(pot, d).log_partition / 2 >= exact - 1e-9
    st = TightenState.zeros(1, T + V)
    best = tighten(pot, st, max_iter=200, tol=1e-9, method="lbfgs", bp=tree_bp)
    assert N * best.log_partition / 2 >= exact - 1e-9


@pytest.mark.parametrize("K,L,centre", [(1, 1, None), (1, 2, None), (1, 3, None), (2, 3, None), (1, 3, 0.6)])
def test_gradient_equals_finite_differences(K, L, centre):
    rng = np.random.default_rng(3 + 10 * L + K)
    m = toy_model(rng, K, 0.5, L=L)
    ts, ws = tagged_sequence([[("x", "A"), ("z1", "B")], [("Yy", "A")]], {t: i for i, t in enumerate(m.tags)},
                             {w: i for i, w in enumerate(m.vocab)}, K, pad=m.pad)
    mom = tagger_moments(ts, ws, len(m.tags), len(m.vocab), K, m.offsets)
    delta = rng.normal(0, 0.3, (L * (K + 1) - 1, len(m.tags) + len(m.vocab)))

    def f(v):
        mm = m.with_vector(v)
        pot = tree_potentials(mm, tree_weights(L, centre))
        return tagger_bound(mm, mom, pot, tree_bp(pot, delta))

    v = m.to_vector()
    _, g = f(v)
    fd = np.empty_like(v)
    for i in range(v.size):
        e = np.zeros_like(v)
        e[i] = 1e-6
        fd[i] = (f(v + e)[0] - f(v - e)[0]) / 2e-6
    np.testing.assert_allclose(g, fd, atol=1e-7)
    if L > 1:                      # the morphology tests are the word under the tag's only
        T, Fn = len(m.tags), len(m.features)
        gc = g[T + K * T * T + T * Fn:].reshape(L - 1, T, Fn)
        cols = [m.features[n] for n in MORPHOLOGY if n in m.features]
        assert cols and np.all(gc[:, :, cols] == 0.0) and np.abs(gc).max() > 1e-3


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


@pytest.mark.parametrize("L", [1, 2, 3, 5])
def test_window_decoding_is_the_best_tagging_by_enumeration(L):
    rng = np.random.default_rng(50 + L)
    base = TaggerMRF.init(["A", "B", "C"], ["x", "Yy", "z1"], window=L)
    for _ in range(6):
        m = base.with_vector(rng.normal(0, 2.0, base.to_vector().size))
        for words in (["x", "Zz", "z1", "x", "Yy"], ["Yy"], ["z1", "QQ", "x"]):   # "Zz", "QQ" unseen
            P = m.pad
            padded = ["<S>"] * P + words + ["<S>"] * P
            th = emissions_by_hand(m, padded)
            best, arg = -np.inf, None
            for tags in itertools.product([1, 2, 3], repeat=len(words)):
                s = m.trans[0][0, tags[0]] + m.trans[0][tags[-1], 0]
                s += sum(m.trans[0][a, b] for a, b in zip(tags, tags[1:]))
                for i, t in enumerate(tags):
                    s += m.theta0[t] + sum(th[k, t, P + i + off] for k, off in enumerate(m.offsets))
                if s > best:
                    best, arg = s, tags
            assert decode(m, [words]) == [[m.tags[t] for t in arg]]


@pytest.mark.parametrize("K,L", [(1, 3), (2, 5)])
def test_window_moments_count_the_pairs(K, L):
    m = TaggerMRF.init(["A", "B"], ["x", "y", "z"], K=K, window=L)
    data = [[("x", "A"), ("y", "B"), ("z", "A")], [("z", "B")], [("y", "A"), ("x", "A")]]
    ti, wi = {t: i for i, t in enumerate(m.tags)}, {w: i for i, w in enumerate(m.vocab)}
    ts, ws = tagged_sequence(data, ti, wi, K, pad=m.pad)
    N = ts.size
    assert N % (K + 1) == 0 and ts[:m.pad].tolist() == [0] * m.pad
    mom = tagger_moments(ts, ws, len(m.tags), len(m.vocab), K, m.offsets)
    for k, off in enumerate(m.offsets):
        want = np.zeros((len(m.tags), len(m.vocab)))
        for i in range(N):
            want[ts[i], ws[(i + off) % N]] += 1.0 / N
        np.testing.assert_allclose(mom.emit[k].toarray(), want, atol=1e-15)
    for l in range(1, K + 1):
        want = np.zeros((len(m.tags),) * 2)
        for i in range(N):
            want[ts[i], ts[(i + l) % N]] += 1.0 / N
        np.testing.assert_allclose(mom.pairs[l - 1], want, atol=1e-15)


def test_training_raises_the_bound():
    m = TaggerMRF.init(["A", "B"], ["x", "y", "z"])
    data = [[("x", "A"), ("y", "B")], [("z", "A"), ("x", "A"), ("y", "B")]] * 3
    ts, ws = tagged_sequence(data, {t: i for i, t in enumerate(m.tags)}, {w: i for i, w in enumerate(m.vocab)}, 1)
    mom = tagger_moments(ts, ws, len(m.tags), len(m.vocab), 1)
    trained, hist = train_tagger(m, mom, max_iter=30, l2=1e-3)
    assert len(hist) >= 2 and hist[-1]["bound"] > hist[0]["bound"]
    assert decode(trained, [["x", "y"]]) == [["A", "B"]]


def test_training_with_a_window_raises_the_bound():
    """L = 3: the next word decides the tag of an ambiguous word ("x" is A before "y", B before "z")."""
    m = TaggerMRF.init(["A", "B", "C"], ["x", "y", "z"], window=3)
    data = [[("x", "A"), ("y", "C")], [("x", "B"), ("z", "C")]] * 3
    ts, ws = tagged_sequence(data, {t: i for i, t in enumerate(m.tags)}, {w: i for i, w in enumerate(m.vocab)}, 1,
                             pad=m.pad)
    mom = tagger_moments(ts, ws, len(m.tags), len(m.vocab), 1, m.offsets)
    trained, hist = train_tagger(m, mom, max_iter=60, l2=1e-3)
    assert len(hist) >= 2 and hist[-1]["bound"] > hist[0]["bound"]
    assert decode(trained, [["x", "y"], ["x", "z"]]) == [["A", "C"], ["B", "C"]]
    m1 = TaggerMRF.init(["A", "B", "C"], ["x", "y", "z"])                 # L = 1 cannot tell them apart
    ts, ws = tagged_sequence(data, {t: i for i, t in enumerate(m1.tags)}, {w: i for i, w in enumerate(m1.vocab)}, 1)
    t1, _ = train_tagger(m1, tagger_moments(ts, ws, len(m1.tags), len(m1.vocab), 1), max_iter=60, l2=1e-3)
    p1 = decode(t1, [["x", "y"], ["x", "z"]])
    assert p1[0][0] == p1[1][0]


@pytest.mark.parametrize("K,L,N", [(1, 1, 4), (1, 2, 4), (1, 3, 4), (2, 3, 6), (2, 1, 5)])
def test_the_engines_joint_log_partition_equals_enumeration(K, L, N):
    """joint_log_partition (the engine on the cycle of (tag, word) symbols) against the
    enumeration of every (tags, words) in (T x V)^N."""
    rng = np.random.default_rng(7 * K + 3 * L + N)
    m = TaggerMRF.init(["A"], ["x", "Yy"], K=K, window=L)
    m = m.with_vector(rng.normal(0, 1, m.to_vector().size))
    assert joint_log_partition(m, N) == pytest.approx(exact_joint_logz(m, N), abs=1e-9)


@pytest.mark.parametrize("K,L,N", [(1, 1, 24), (1, 3, 16), (2, 2, 12)])
def test_bound_is_above_the_engines_exact_log_partition_past_enumeration(K, L, N):
    """Past enumeration ((T V)^N = 6^N strings): the lifted bound, at delta = 0, at random
    delta and tightened, stays above the exact log Z from the engine, and tightening brings it
    closer; larger tag and word sets (T = 3, V = 4)."""
    rng = np.random.default_rng(11 * K + L + N)
    m = TaggerMRF.init(["A", "B"], ["x", "Yy", "zz"], K=K, window=L)
    m = m.with_vector(rng.normal(0, 1, m.to_vector().size))
    T, V, C = 3, 4, L * (K + 1)
    exact = joint_log_partition(m, N)
    pot = tree_potentials(m)
    b0 = N * tree_bp(pot, np.zeros((C - 1, T + V))).log_partition / (K + 1)
    assert b0 >= exact - 1e-9
    for s in (0.5, 3.0):
        assert N * tree_bp(pot, rng.normal(0, s, (C - 1, T + V))).log_partition / (K + 1) >= exact - 1e-9
    best = tighten(pot, TightenState.zeros(C - 1, T + V), max_iter=300, tol=1e-9, method="lbfgs", bp=tree_bp)
    tight = N * best.log_partition / (K + 1)
    assert exact - 1e-9 <= tight <= b0 + 1e-9

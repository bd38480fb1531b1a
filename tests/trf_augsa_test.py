"""AugSA (Figure 1), the TRF model (equation 2) and exact L-BFGS training on toy alphabets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError
from fsmlearn.trf.acceptor import LengthProduct, compile_acceptor
from fsmlearn.trf.augsa import AugSAConfig, empirical_stats, learning_rates, train_augsa
from fsmlearn.trf.exact import exact_zeta, fit_exact
from fsmlearn.trf.features import as_corpus, build_features, make_templates
from fsmlearn.trf.model import TRF, empirical_pi, length_groups, pi0_from_counts


def _toy(seed=0, V=3, n=400, m=4):
    rng = np.random.default_rng(seed)
    # a corpus with structure: token 0 tends to follow 1, lengths 1..m
    sents = []
    for _ in range(n):
        L = int(rng.integers(1, m + 1))
        x = [int(rng.integers(0, V))]
        for _ in range(L - 1):
            x.append(0 if x[-1] == 1 and rng.random() < 0.7 else int(rng.integers(0, V)))
        sents.append(x)
    return as_corpus(sents)


def test_learning_rates_are_equations_24_and_25():
    cfg = AugSAConfig(t_c=100, beta_lambda=0.8, beta_zeta=0.6, t0=200)
    assert learning_rates(1, cfg) == pytest.approx((1 / 101, 1.0))
    assert learning_rates(50, cfg) == pytest.approx((1 / (100 + 50 ** 0.8), 50 ** -0.6))
    assert learning_rates(500, cfg) == pytest.approx((1 / (100 + 300 + 200 ** 0.8), 1 / (300 + 200 ** 0.6)))
    # continuous at t0
    a, b = learning_rates(200, cfg), learning_rates(201, cfg)
    assert abs(a[0] - b[0]) < 1e-4 and abs(a[1] - b[1]) < 0.01


def test_pi0_of_equation_26():
    counts = np.array([0, 1, 5, 10, 4, 0, 1], float)        # n = 21, n_max = 10 at j = 3
    p = pi0_from_counts(counts, "eq26", c=1e-3)
    u = np.array([10, 10, 10, 4, 0, 1]) / 21
    u = np.maximum(u, 1e-3)
    assert np.allclose(p[1:], u / u.sum()) and p[0] == 0
    assert np.allclose(pi0_from_counts(counts, "empirical")[1:], counts[1:] / 21)
    with pytest.raises(ArgumentError):
        pi0_from_counts(counts, "bogus")


def test_stratified_variances_equal_the_definition():
    train = _toy(1, n=60)
    fs = build_features(train, 3, make_templates("w+ws", 3))
    g = length_groups(train.lengths, 4, False)
    mean, sigma = empirical_stats(fs, train, g)
    idx, ptr = fs.feature_counts(train)
    F = np.zeros((len(train), fs.num_features))
    for s in range(len(train)):
        np.add.at(F[s], idx[ptr[s]:ptr[s + 1]], 1)
    assert np.allclose(mean, F.mean(axis=0))
    want = np.zeros(fs.num_features)
    for j in np.unique(g):
        rows = F[g == j]
        want += len(rows) / len(train) * rows.var(axis=0)
    assert np.allclose(sigma, want, atol=1e-12)


def _exact_setup(fs, train, m):
    """(the length product of the feature acceptor, pi, p~[f]) for exact training to length m."""
    lp = LengthProduct(compile_acceptor(fs), m)
    _, pi = empirical_pi(train.lengths, m, False)
    ftilde, _ = empirical_stats(fs, train, length_groups(train.lengths, m, False))
    return lp, pi, ftilde


def _exact_nll(lp, fs, train, pi, lam):
    m = TRF(fs, lam, lp.m, False, pi, exact_zeta(lp, lam))
    return m.nll(train)


def test_model_probabilities_sum_to_one_with_exact_zeta():
    train = _toy(2, n=80)
    fs = build_features(train, 3, make_templates("w+c", 3), classes=np.array([0, 1, 1]))
    lam = np.random.default_rng(0).normal(size=fs.num_features)
    lp = LengthProduct(compile_acceptor(fs), 4)
    _, pi = empirical_pi(train.lengths, 4, False)
    model = TRF(fs, lam, 4, False, pi, exact_zeta(lp, lam))
    total = 0.0
    for j in range(1, 5):
        xs = as_corpus([list(x) for x in itertools.product(range(3), repeat=j)])
        total += np.exp(model.log_probs(xs)).sum()
    assert total == pytest.approx(1.0, abs=1e-10)
    with pytest.raises(ArgumentError, match="longer"):
        model.log_probs(as_corpus([[0] * 5]))


def test_exact_gradient_matches_finite_differences_and_lbfgs_lowers_the_nll():
    train = _toy(3, n=100)
    fs = build_features(train, 3, make_templates("w", 2))
    lp, pi, ftilde = _exact_setup(fs, train, 4)
    rng = np.random.default_rng(1)
    lam = rng.normal(size=fs.num_features) * 0.3
    E, _ = lp.expected_features(lam, np.log(np.where(pi > 0, pi, 1e-300)))
    grad = E - ftilde
    for i in rng.choice(fs.num_features, 6, replace=False):
        e = np.zeros(fs.num_features)
        e[i] = 1e-5
        fd = (_exact_nll(lp, fs, train, pi, lam + e) - _exact_nll(lp, fs, train, pi, lam - e)) / 2e-5
        assert fd == pytest.approx(grad[i], abs=1e-6)
    lam_hat, hist = fit_exact(lp, ftilde, pi, max_iterations=200)
    assert hist[-1][2] < _exact_nll(lp, fs, train, pi, np.zeros(fs.num_features)) - 0.05
    assert hist[-1][2] == pytest.approx(_exact_nll(lp, fs, train, pi, lam_hat), abs=1e-9)
    # at the optimum the expected features match the empirical ones (equation 6)
    E, _ = lp.expected_features(lam_hat, np.log(np.where(pi > 0, pi, 1e-300)))
    assert np.abs(E - ftilde).max() < 1e-4


def test_augsa_reaches_the_exact_optimum_and_estimates_zeta():
    train = _toy(4, n=400)
    fs = build_features(train, 3, make_templates("w", 2))
    lp, pi, ftilde = _exact_setup(fs, train, 4)
    lam_hat, hist = fit_exact(lp, ftilde, pi, max_iterations=300)
    best = hist[-1][2]
    start = _exact_nll(lp, fs, train, pi, np.zeros(fs.num_features))
    cfg = AugSAConfig(samples=100, chains=2, iterations=1500, t_c=10, beta_lambda=0.8, beta_zeta=0.6, t0=200,
                      l2=0.0, pi0="eq26", max_length=4, long=False, seed=3)
    model, rec = train_augsa(fs, train, cfg)
    nll = _exact_nll(lp, fs, train, pi, model.lam)
    assert nll - best < 0.05 * (start - best)
    z = exact_zeta(lp, model.lam)
    assert np.abs(model.zeta[1:] - z[1:]).max() < 0.1
    assert len(rec.iteration) == 1500 and 0 < rec.acceptance["jump"] <= 1


def test_stop_rule_and_long_sentences():
    train = _toy(5, n=200, m=6)
    dev = _toy(6, n=50, m=6)
    fs = build_features(train, 3, make_templates("w", 2))
    cfg = AugSAConfig(samples=20, chains=2, iterations=400, t_c=10, t0=30, max_length=4, long=True, stop=True,
                      stop_window=20, eval_every=5, gap_every=5, eval_sentences=50, stop_threshold=10.0)
    model, rec = train_augsa(fs, train, cfg, dev=dev)
    # a threshold no increase can reach stops at the first S_t, after 2 windows
    assert rec.stopped_at == 40 and rec.stop_s and rec.stop_s[0][0] == 40
    assert model.groups == 5 and len(model.zeta) == 6
    lp = model.log_probs(as_corpus([[0] * 6, [1, 2]]))
    assert np.all(np.isfinite(lp))


@pytest.mark.parametrize("change", [dict(samples=0), dict(chains=3, samples=10), dict(beta_zeta=1.0),
                                    dict(l2=-1.0), dict(pi0="x"), dict(max_length=0), dict(iterations=0)])
def test_bad_settings_are_refused(change):
    cfg = AugSAConfig(**{**dict(samples=10, chains=2), **change})
    with pytest.raises(ArgumentError):
        cfg.check()


def test_refining_zeta_with_lambda_fixed_approaches_the_exact_ratios():
    from fsmlearn.trf.augsa import refine_zeta
    train = _toy(7, n=300, m=5)
    fs = build_features(train, 3, make_templates("w", 2))
    lam = np.random.default_rng(3).normal(size=fs.num_features)
    lp = LengthProduct(compile_acceptor(fs), 5)
    z_exact = exact_zeta(lp, lam)
    _, pi = empirical_pi(train.lengths, 5, False)
    start = z_exact + np.r_[0.0, 0.0, 2.0, -2.0, 1.5, 3.0]       # a poor estimate
    model = TRF(fs, lam.copy(), 5, False, pi, start.copy())
    hist = refine_zeta(model, 3000, samples=100, chains=2, train=train)
    assert np.abs(model.zeta[1:] - z_exact[1:]).max() < 0.1
    assert np.abs(start[1:] - z_exact[1:]).max() > 2.9
    assert hist.shape == (3000, 6) and np.array_equal(hist[-1], model.zeta)


def test_a_feature_without_variance_gets_a_finite_step():
    # a length seen once: its features' stratified variance is exactly 0
    base = _toy(8, n=200, m=3)
    train = as_corpus([base.sentence(i) for i in range(len(base))] + [[2, 2, 2, 2, 2, 2]])
    fs = build_features(train, 3, make_templates("w", 3))
    cfg = AugSAConfig(samples=20, chains=2, iterations=20, t_c=10, t0=10, l2=0.0, max_length=6, long=False)
    model, _ = train_augsa(fs, train, cfg)
    assert np.all(np.isfinite(model.lam)) and np.abs(model.lam).max() < 100


def test_the_stop_rule_refuses_development_lengths_without_probability():
    train = _toy(9, n=100, m=3)
    dev = as_corpus([[0, 1, 2, 0]])
    fs = build_features(train, 3, make_templates("w", 2))
    cfg = AugSAConfig(samples=20, chains=2, iterations=50, max_length=4, long=False, stop=True, eval_sentences=10)
    with pytest.raises(ArgumentError, match="length 4"):
        train_augsa(fs, train, cfg, dev=dev)
    cfg.length_add = 0.5
    train_augsa(fs, train, cfg, dev=dev)


def test_the_long_sentence_group_estimates_its_one_log_ratio():
    from fsmlearn.trf.augsa import refine_zeta
    train = _toy(10, n=300, m=5)
    fs = build_features(train, 3, make_templates("w", 2))
    lam = np.random.default_rng(4).normal(size=fs.num_features) * 0.5
    lp = LengthProduct(compile_acceptor(fs), 5)                      # m = 3: the group is lengths 4..5
    lz = lp.log_normalisers(lam)
    want = np.r_[0.0, lz[1:4] - lz[1], np.logaddexp(lz[4], lz[5]) - lz[1]]
    _, pi = empirical_pi(train.lengths, 3, True)
    model = TRF(fs, lam, 3, True, pi, want + np.r_[0, 0, 1.0, -1.0, 2.0])
    refine_zeta(model, 3000, samples=100, train=train)
    assert np.abs(model.zeta - want).max() < 0.1


def test_augsa_with_l2_reaches_the_penalised_optimum():
    train = _toy(11, n=300)
    fs = build_features(train, 3, make_templates("w", 2))
    lp, pi, ftilde = _exact_setup(fs, train, 4)
    mu = 0.05
    lam_hat, _ = fit_exact(lp, ftilde, pi, l2=mu, max_iterations=300)
    cfg = AugSAConfig(samples=100, chains=2, iterations=1500, t_c=10, t0=200, l2=mu, pi0="eq26", max_length=4,
                      long=False, seed=5)
    model, _ = train_augsa(fs, train, cfg)

    def penalised(lam):
        return _exact_nll(lp, fs, train, pi, lam) + 0.5 * mu * lam @ lam
    zero = penalised(np.zeros(fs.num_features))
    assert penalised(model.lam) - penalised(lam_hat) < 0.05 * (zero - penalised(lam_hat))
    assert np.abs(model.lam - lam_hat).max() < 0.3

"""Augmented stochastic approximation (AugSA, Wang, Ou and Tan, Figure 1) for TRF models.

At iteration t, K samples B^(t) of (j, x^j) are drawn from q(j, x^j; lambda, zeta) (equation
12) by trans-dimensional mixture sampling (:mod:`fsmlearn.trf.sampler`, chains in parallel,
Appendix D), then

* lambda <- lambda + gamma_lambda / (sigma + mu) {-mu lambda + p~[f] - 1/K sum_B pi_j / pi0_j f(x^j)}
  (equation 16 with the L2 term of equation 38; sigma the stratified empirical variances of
  section 5.2, floored at 1e-15);
* zeta <- zeta + gamma_zeta {delta_l(B) / pi0_l}_l, then zeta <- zeta - zeta_1 (equations 17, 18);

with the two-stage rates gamma_lambda (24) and gamma_zeta (the second equation numbered 24
in the paper, i.e. 25), the sampling length probabilities pi0 empirical or by equation (26),
the long-sentence group of section 5.4 (lengths m+1..m+2 sampled, one zeta_{m+}), and the
stop rule of Appendix E (the gap D between the log-likelihoods of a training subset and a
development subset, averaged over windows of H iterations; stop when its increase S_t falls
below a threshold; applied after the first stage, t > t0, so that the large early
adjustments of lambda do not end training).  lambda starts at 0 and zeta at its exact value there, ln V^{j-1}
(section 4.2).

After training, :func:`refine_zeta` re-estimates zeta for the final lambda alone (equations
17-18 with lambda fixed and the rate 1/t, as the paper does for the IIS baseline, footnote
17): the training run's last zeta trails a moving lambda and carries the noise of its last
rates, which the sentence log-probabilities inherit.

Public names: AugSAConfig, empirical_stats, learning_rates, train_augsa, refine_zeta.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, asdict

import numba as nb
import numpy as np

from ..errors import ArgumentError
from .config import AugSAConfig
from .features import Corpus, FeatureSet, as_corpus
from .model import TRF, empirical_pi, length_groups, pi0_from_counts
from .sampler import Sampler


def learning_rates(t: int, cfg: AugSAConfig) -> tuple[float, float]:
    """(gamma_lambda, gamma_zeta) at iteration t >= 1 (equations 24 and 25)."""
    if t <= cfg.t0:
        return 1.0 / (cfg.t_c + t ** cfg.beta_lambda), t ** -cfg.beta_zeta
    return (1.0 / (cfg.t_c + t - cfg.t0 + cfg.t0 ** cfg.beta_lambda),
            1.0 / (t - cfg.t0 + cfg.t0 ** cfg.beta_zeta))


def empirical_stats(fs: FeatureSet, corpus: Corpus, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p~[f] float64 [d], sigma float64 [d]): mean feature counts per sentence and the
    stratified empirical variances sigma_i = sum_j n_j/n p~_j[(f_i - p~_j[f_i])^2] (section 5.2)."""
    mean, sq, sigma = _moments(fs, corpus, groups)
    return mean, sigma


def _moments(fs: FeatureSet, corpus: Corpus, groups: np.ndarray):
    """(p~[f], p~[f^2], the stratified variances): see :func:`empirical_stats`."""
    idx, ptr = fs.feature_counts(corpus)
    n = len(corpus)
    d = fs.num_features
    sent = np.repeat(np.arange(n), np.diff(ptr))
    # per (sentence, feature) counts
    key = sent.astype(np.int64) * d + idx
    uk, cnt = np.unique(key, return_counts=True)
    us, uf = uk // d, uk % d
    cnt = cnt.astype(np.float64)
    mean = np.bincount(uf, cnt, minlength=d) / n
    sq = np.bincount(uf, cnt * cnt, minlength=d) / n
    # sum_j n_j/n p~_j[f]^2 = sum_j (S_ij)^2 / (n n_j), S_ij = sum over sentences of length group j
    g = groups[us]
    nj = np.bincount(groups, minlength=groups.max() + 1).astype(np.float64)
    gk = g.astype(np.int64) * d + uf
    ugk, inv = np.unique(gk, return_inverse=True)
    S = np.bincount(inv, cnt)
    between = np.bincount(ugk % d, S * S / (n * nj[ugk // d]), minlength=d)
    return mean, sq, sq - between


def _usable_variances(sigma, sq, ftilde, n, floor):
    """sigma where it is above ``floor``; elsewhere the pooled (unstratified) variance
    p~[f^2] - p~[f]^2, and where that is zero too, 1/n.  The stratified variance is exactly 0
    for a feature whose count does not vary within any length (e.g. one seen only in the
    single training sentence of its length); the paper's floor of 1e-15 would then make the
    step of (16) about 1e15 without an L2 term."""
    bad = sigma <= floor
    if not bad.any():
        return sigma
    pooled = sq - ftilde ** 2
    out = sigma.copy()
    out[bad] = np.where(pooled[bad] > floor, pooled[bad], 1.0 / n)
    return out


@nb.njit(cache=True, parallel=True)
def _dense_step(lam, ftilde, scale, mu):
    """lambda += scale * (-mu lambda + p~[f]) over every feature."""
    for i in nb.prange(lam.shape[0]):
        lam[i] += scale[i] * (ftilde[i] - mu * lam[i])


@nb.njit(cache=True)
def _sparse_step(lam, scale, idx, w):
    """lambda[idx] -= scale[idx] * w (the sampled features' weighted counts)."""
    for k in range(idx.shape[0]):
        i = idx[k]
        lam[i] -= scale[i] * w[k]


@dataclass
class TrainRecord:
    """What AugSA reports per iteration (the lists are aligned with ``iteration``)."""
    iteration: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    sample_seconds: list = field(default_factory=list)
    mean_length: list = field(default_factory=list)
    gap: list = field(default_factory=list)          # (t, D(t)) where evaluated
    stop_s: list = field(default_factory=list)       # (t, S_t) where computed
    stopped_at: int | None = None
    acceptance: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def _samples_corpus(tok: np.ndarray, ln: np.ndarray) -> Corpus:
    mask = np.arange(tok.shape[1])[None, :] < ln[:, None]
    ptr = np.zeros(len(ln) + 1, np.int64)
    np.cumsum(ln, out=ptr[1:])
    return Corpus(np.ascontiguousarray(tok[mask], np.int32), ptr)


def train_augsa(fs: FeatureSet, train: Corpus, cfg: AugSAConfig, dev: Corpus | None = None,
                callback=None, progress=None, model: TRF | None = None) -> tuple[TRF, TrainRecord]:
    """Train a TRF on ``train`` by AugSA (Figure 1).

    Args:
        fs: the feature set (built from ``train``).
        train: the training sentences.
        cfg: the settings.
        dev: development sentences (needed by the stop rule).
        callback: called as ``callback(t, model, record)`` after each iteration; returning
            True stops training (used by experiments to track exact likelihoods).
        progress: called with a progress line every ``eval_every`` iterations.
        model: continue from this model (its lambda and zeta) instead of lambda = 0, at the
            iteration after ``model.meta["iterations_run"]`` (so the learning rates go on).

    Returns:
        (model, record).
    """
    cfg.check()
    if cfg.stop and dev is None:
        raise ArgumentError("TRF training: the stop rule needs development sentences")
    m, long = cfg.max_length, cfg.long
    lengths = train.lengths
    groups = length_groups(lengths, m, long)
    counts, pi = empirical_pi(lengths, m, long, cfg.length_add)
    G = len(pi) - 1
    pi0 = pi0_from_counts(counts, cfg.pi0)
    V = fs.vocab_size
    t_first = 1
    if model is not None:
        same = model.features is fs or np.array_equal(model.features.keys, fs.keys)
        if not same or model.m != m or model.long != long:
            raise ArgumentError("TRF training: the model to continue has another feature set or length groups")
        t_first = int(model.meta.get("iterations_run", 0)) + 1
    else:
        zeta = np.r_[0.0, np.arange(m) * math.log(V)]
        if long:
            zeta = np.r_[zeta, m * math.log(V) + math.log1p(V)]
        model = TRF(fs, np.zeros(fs.num_features), m, long, pi, zeta,
                    {"training": asdict(cfg)})
    lam, zeta = model.lam, model.zeta
    # sigma stratified by length (section 5.2), not by length group
    ftilde, sq, sigma = _moments(fs, train, lengths)
    sigma = _usable_variances(sigma, sq, ftilde, len(train), cfg.var_floor)
    M = m + 2 if long else m
    sampler = Sampler(fs, M, chains=cfg.chains, seed=cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    # the chains start from training sentences (of lengths the sampler visits)
    fit = np.flatnonzero(lengths <= M)
    sampler.start_from([train.sentence(int(i)) for i in rng.choice(fit, cfg.chains)])
    steps = cfg.samples // cfg.chains
    # group of each sampled length 1..M, and pi_j / pi0_j per group
    len_group = np.minimum(np.arange(M + 1), m + 1) if long else np.arange(M + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # pi_j / pi0_j with the maximum-likelihood pi_j = n_j / n of equation (6) (the model's
        # pi may add length_add to each count: that is for scoring, not for the fixed point)
        ratio = np.where(pi0 > 0, (counts / counts.sum()) / pi0, 0.0)
        log_pi0 = np.log(pi0)
    scale_base = 1.0 / (np.maximum(sigma, cfg.var_floor) + cfg.l2)
    sub_train = sub_dev = None
    if cfg.stop:
        k = min(cfg.eval_sentences, len(train))
        sub_train = as_corpus([train.sentence(i) for i in np.sort(rng.choice(len(train), k, replace=False))])
        k = min(cfg.eval_sentences, len(dev))
        sub_dev = as_corpus([dev.sentence(i) for i in np.sort(rng.choice(len(dev), k, replace=False))])
    if cfg.stop:
        dg = length_groups(sub_dev.lengths, m, long)
        if np.any(pi[dg] <= 0):
            j = int(sub_dev.lengths[np.flatnonzero(pi[dg] <= 0)[0]])
            raise ArgumentError(f"TRF training: a development sentence has length {j}, which has probability 0 "
                                f"(no training sentence has it); set length_add > 0")
    rec = TrainRecord()
    t_start = time.time()
    scale = np.empty_like(scale_base)
    for t in range(t_first, cfg.iterations + 1):
        t_it = time.time()
        g_lam, g_zeta = learning_rates(t, cfg)
        len_w = log_pi0[len_group] - zeta[len_group]
        len_w[0] = 0.0
        tok, ln = sampler.sample(steps, lam, len_w)
        t_s = time.time() - t_it
        sg = len_group[ln]
        # lambda: equation (38)
        idx, ptr = fs.feature_counts(_samples_corpus(tok, ln))
        w = np.repeat(ratio[sg] / cfg.samples, np.diff(ptr))
        np.multiply(scale_base, g_lam, out=scale)
        _dense_step(lam, ftilde, scale, cfg.l2)
        _sparse_step(lam, scale, idx, w)
        # zeta: equations (17) and (18)
        delta = np.bincount(sg, minlength=G + 1) / cfg.samples
        with np.errstate(divide="ignore", invalid="ignore"):
            zeta[1:] += g_zeta * np.where(pi0[1:] > 0, delta[1:] / pi0[1:], 0.0)
        zeta -= zeta[1]
        zeta[0] = 0.0
        rec.iteration.append(t)
        rec.sample_seconds.append(t_s)
        rec.mean_length.append(float(ln.mean()))
        stop = False
        if cfg.stop and t % cfg.gap_every == 0:
            lz1 = model.log_z1()
            D = float(model.log_probs(sub_train, log_z1=lz1).mean() - model.log_probs(sub_dev, log_z1=lz1).mean())
            if not math.isfinite(D):
                raise ArgumentError(f"TRF training: the stop rule's gap D is {D} at iteration {t}")
            rec.gap.append((t, D))
            H = cfg.stop_window
            if t >= 2 * H and t > min(cfg.t0, cfg.iterations):
                recent = [d for (s, d) in rec.gap if t - H < s <= t]
                before = [d for (s, d) in rec.gap if t - 2 * H < s <= t - H]
                if recent and before:
                    S = float(np.mean(recent) - np.mean(before))
                    rec.stop_s.append((t, S))
                    if S < cfg.stop_threshold:
                        stop = True
        rec.seconds.append(time.time() - t_it)
        model.meta["iterations_run"] = t
        if callback is not None and callback(t, model, rec):
            stop = True
        if progress is not None and (t % cfg.eval_every == 0 or t == cfg.iterations or stop):
            el = time.time() - t_start
            eta = el / (t - t_first + 1) * (cfg.iterations - t)
            acc = sampler.acceptance()
            progress(f"AugSA iteration {t:,}/{cfg.iterations:,}: {el:.0f} s, "
                     f"{len(rec.iteration) * cfg.samples / max(sum(rec.sample_seconds), 1e-9):.0f} sampled sentences/s, mean sampled length {np.mean(rec.mean_length[-cfg.eval_every:]):.1f}, "
                     f"jump acceptance {acc['jump']:.2f}" + (f", gap D {rec.gap[-1][1]:.3f}" if rec.gap else "")
                     + f", ETA {eta:.0f} s")
        if stop:
            rec.stopped_at = t
            break
    rec.acceptance = sampler.acceptance()
    model.meta["training"] = asdict(cfg)
    if rec.iteration:
        model.meta["iterations_run"] = rec.iteration[-1]
    return model, rec


def refine_zeta(model: TRF, iterations: int, *, samples: int = 300, chains: int = 2, pi0: str = "eq26",
                train: Corpus | None = None, seed: int = 1, offset: float = 10.0, progress=None) -> np.ndarray:
    """Re-estimate zeta for the model's lambda by stochastic approximation with lambda fixed.

    zeta <- zeta + gamma_t {delta_l(B) / pi0_l}, zeta <- zeta - zeta_1 (equations 17, 18) with
    gamma_t = 1 / (t + offset), from the model's zeta; the samples come from q (equation 12)
    by the same chains as training.  The model's zeta is replaced by the estimate.

    Args:
        model: the trained TRF.
        iterations: SA iterations.
        samples, chains: samples per iteration and parallel chains.
        pi0: ``"eq26"`` or ``"empirical"`` (from the training lengths in ``train``, or from the
            model's pi when ``train`` is None).
        train: the training sentences (to start the chains from and for pi0).
        seed: the chains' seed.
        offset: t's offset in the rate.
        progress: called with a line every tenth of the run.

    Returns:
        float64 [iterations, G+1]: the zeta after each iteration.
    """
    if iterations < 1 or samples < chains or samples % chains:
        raise ArgumentError(f"TRF zeta refinement: iterations = {iterations} must be >= 1 and samples = {samples} "
                            f"a multiple of chains = {chains}")
    m, long = model.m, model.long
    G = model.groups
    counts = empirical_pi(train.lengths, m, long)[0] if train is not None else model.pi
    pi0v = pi0_from_counts(counts, pi0)
    M = m + 2 if long else m
    sampler = Sampler(model.features, M, chains=chains, seed=seed)
    if train is not None:
        fit = np.flatnonzero(train.lengths <= M)
        pick = np.random.default_rng(seed).choice(fit, chains)
        sampler.start_from([train.sentence(int(i)) for i in pick])
    len_group = np.minimum(np.arange(M + 1), m + 1) if long else np.arange(M + 1)
    with np.errstate(divide="ignore"):
        log_pi0 = np.log(pi0v)
    zeta = model.zeta
    hist = np.empty((iterations, G + 1))
    for t in range(1, iterations + 1):
        len_w = log_pi0[len_group] - zeta[len_group]
        len_w[0] = 0.0
        _, ln = sampler.sample(samples // chains, model.lam, len_w)
        delta = np.bincount(len_group[ln], minlength=G + 1) / samples
        with np.errstate(divide="ignore", invalid="ignore"):
            zeta[1:] += np.where(pi0v[1:] > 0, delta[1:] / pi0v[1:], 0.0) / (t + offset)
        zeta -= zeta[1]
        zeta[0] = 0.0
        hist[t - 1] = zeta
        if progress is not None and (t % max(iterations // 10, 1) == 0):
            progress(f"zeta refinement: iteration {t:,}/{iterations:,}")
    return hist

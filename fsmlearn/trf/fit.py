"""A TRF language model of the user's own text: the library side of ``fsmlearn trf train``.

The steps of the paper's Brown-LM run (:mod:`fsmlearn.experiments.trf_lm`; Wang, Ou and Tan,
section 7) on any text: a vocabulary (the most frequent training words, or a file of words;
the rest ``<unk>``), word classes by exchange clustering, the features of the chosen types
that fire in training (section 7), AugSA (Figure 1, eqs. 24-25; the stop rule of Appendix E
on held-out text), checkpoints of the model at every evaluation so that a run can be
resumed, and optionally the re-estimation of zeta with lambda fixed.

Public names: vocabulary, to_corpus, FitConfig, fit_trf, augsa_config, refine, perplexity_of.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ArgumentError
from .config import AugSAConfig

UNK = "<unk>"

__all__ = ["vocabulary", "to_corpus", "FitConfig", "fit_trf", "augsa_config", "refine", "perplexity_of"]


def vocabulary(sents, size: int | None = None, words=None) -> list[str]:
    """The model's words: ``words`` (a list, e.g. a vocabulary file's lines) or the ``size``
    most frequent words of ``sents`` (all of them if None), ties by spelling; ``<unk>`` last."""
    if words is not None:
        vocab = [w for w in dict.fromkeys(words) if w != UNK]
    else:
        counts = Counter(w for s in sents for w in s if w != UNK)
        vocab = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]]
    if not vocab:
        raise ArgumentError("the vocabulary is empty")
    return vocab + [UNK]


def to_corpus(sents, vocab):
    """(Corpus of token ids, number of ``<unk>`` tokens): words outside ``vocab`` become
    ``<unk>``; empty sentences are dropped."""
    from .features import as_corpus
    idx = {w: i for i, w in enumerate(vocab)}
    unk = idx[UNK]
    ids = [[idx.get(w, unk) for w in s] for s in sents if s]
    oov = sum(int(np.count_nonzero(np.asarray(s) == unk)) for s in ids)
    return as_corpus(ids), oov


@dataclass
class FitConfig:
    """Settings (defaults: the paper's PTB settings, as ``fsmlearn trf lm`` uses them; K, the
    rates, L2, m and the stop threshold are :class:`~fsmlearn.trf.config.AugSAConfig`'s)."""
    features: str = "w+c+ws+cs+wsh+csh+tied"
    order: int = 4
    classes: int = 200
    samples: int = AugSAConfig.samples
    chains: int = 10
    iterations: int = 50_000
    hours: float = 2.75
    t_c: float = AugSAConfig.t_c
    beta_lambda: float = AugSAConfig.beta_lambda
    beta_zeta: float = AugSAConfig.beta_zeta
    t0: int = AugSAConfig.t0
    l2: float = AugSAConfig.l2
    max_length: int = AugSAConfig.max_length
    stop_window: int = 1000
    stop_threshold: float = AugSAConfig.stop_threshold
    eval_every: int = 100
    refine_iterations: int = 1000
    seed: int = 0
    threads: int = 0        # numba threads for the sampling chains (0: all; the chains' draws do not depend on it)

    def check(self) -> None:
        if not (self.hours > 0 and math.isfinite(self.hours)):
            raise ArgumentError(f"hours = {self.hours} must be positive")
        if self.classes < 2:
            raise ArgumentError(f"classes = {self.classes} must be at least 2")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise ArgumentError(f"threads = {self.threads!r} must be an integer >= 0")
        if self.refine_iterations < 0 or self.eval_every < 1 or self.iterations < 1:
            raise ArgumentError(f"refine_iterations {self.refine_iterations} (>= 0), eval_every {self.eval_every} "
                                f"and iterations {self.iterations} (>= 1)")


def perplexity_of(logp, corpus) -> float:
    """The perplexity of ``corpus`` (an id corpus) from its sentences' log probabilities ``logp``,
    each sentence's end counted as a token."""
    return float(math.exp(-np.sum(logp) / (corpus.lengths.sum() + len(corpus))))


def augsa_config(cfg: FitConfig, eval_sentences: int) -> AugSAConfig:
    """AugSA's settings for ``cfg``: pi0 of (26), the long-sentence group, the stop rule (D every
    iteration on ``eval_sentences`` training and held-out sentences), 0.5 added to each length's count."""
    return AugSAConfig(samples=cfg.samples, chains=cfg.chains, iterations=cfg.iterations, t_c=cfg.t_c,
                       beta_lambda=cfg.beta_lambda, beta_zeta=cfg.beta_zeta, t0=cfg.t0, l2=cfg.l2, pi0="eq26",
                       max_length=cfg.max_length, long=True, stop=True, stop_window=cfg.stop_window,
                       stop_threshold=cfg.stop_threshold, eval_every=cfg.eval_every, length_add=0.5, gap_every=1,
                       eval_sentences=eval_sentences, seed=cfg.seed)


def refine(model, cfg: FitConfig, train, say) -> bool:
    """Re-estimate ``model``'s zeta with lambda fixed for ``cfg.refine_iterations`` iterations
    (:func:`~fsmlearn.trf.augsa.refine_zeta`, recorded in its meta); False when there are none."""
    if cfg.refine_iterations <= 0:
        return False
    from .augsa import refine_zeta
    say(f"re-estimating zeta with lambda fixed ({cfg.refine_iterations:,} iterations)")
    refine_zeta(model, cfg.refine_iterations, samples=cfg.samples, chains=cfg.chains, train=train,
                seed=cfg.seed + 1, progress=say)
    model.meta["zeta_refined_iterations"] = cfg.refine_iterations
    return True


def fit_trf(train, dev, vocab, cfg: FitConfig, *, model_path, resume: bool = False, progress=None,
            lower: bool = False):
    """Train a TRF on the id corpora ``train`` and ``dev`` (:func:`to_corpus`) and save it with
    its vocabulary to ``model_path`` (atomically, at every evaluation and at the end);
    ``lower``: the text was lower-cased (recorded, so that scoring lower-cases too).

    Returns:
        (model, summary dict: iterations, seconds, the held-out perplexity curve and at the end).
    """
    from .augsa import train_augsa
    from .classes import exchange_clusters
    from .features import build_features, make_templates
    from .io import load_trf, save_trf
    cfg.check()
    say = progress or (lambda msg: None)
    model_path = Path(model_path)
    resumed = None
    if resume and not model_path.exists():
        say(f"--resume: no model at {model_path} yet: training from the start")
    if resume and model_path.exists():
        resumed, words = load_trf(model_path)
        if list(words or []) != list(vocab):
            raise ArgumentError(f"{model_path}: another vocabulary (other text or --vocab); remove it or drop "
                                "--resume")
    V = len(vocab)
    templates = make_templates(cfg.features, cfg.order)
    classes, n_classes = None, 0
    if templates.uses_classes:
        n_classes = min(cfg.classes, V)
        t0 = time.time()
        classes, cinfo = exchange_clusters([train.sentence(i) for i in range(len(train))], V, n_classes,
                                           max_passes=50, seed=cfg.seed)
        say(f"{n_classes} classes by exchange clustering: {len(cinfo.criterion)} passes, {time.time() - t0:.1f} s")
    fs = build_features(train, V, templates, classes=classes, n_classes=n_classes or None)
    say(f"{fs.num_features:,} features ({'+'.join(templates.names)})")
    acfg = augsa_config(cfg, min(1000, len(dev)))
    curve = []
    if resumed is not None:
        if not np.array_equal(resumed.features.keys, fs.keys):
            raise ArgumentError(f"{model_path}: another feature set (other text, vocabulary, classes or features); "
                                "remove it or drop --resume")
        curve = list(resumed.meta.get("curve", []))
        say(f"resuming from {model_path} at iteration {resumed.meta.get('iterations_run', 0):,}")
    deadline = time.time() + cfg.hours * 3600
    t_train = time.time()

    def cb(t, m, rec):
        m.meta["lower"] = bool(lower)
        if t % cfg.eval_every == 0:
            curve.append({"iteration": t, "seconds": time.time() - t_train,
                          "dev_ppl": perplexity_of(m.log_probs(dev, log_z1=m.log_z1()), dev)})
            m.meta["curve"] = curve
            save_trf(m, model_path, vocab)
            say(f"iteration {t:,}: held-out perplexity {curve[-1]['dev_ppl']:.1f}")
        return time.time() > deadline

    import numba as nb
    before = nb.get_num_threads()
    nb.set_num_threads(min(cfg.threads, nb.config.NUMBA_NUM_THREADS) if cfg.threads else nb.config.NUMBA_NUM_THREADS)
    try:
        model, rec = train_augsa(fs, train, acfg, dev=dev, callback=cb, progress=say, model=resumed)
    finally:
        nb.set_num_threads(before)
    model.meta["curve"] = curve
    model.meta["lower"] = bool(lower)
    refine(model, cfg, train, say)
    save_trf(model, model_path, vocab)
    summary = {"iterations": rec.iteration[-1] if rec.iteration else 0, "seconds": time.time() - t_train,
               "stopped_by_rule_at": rec.stopped_at, "features": fs.num_features, "classes": n_classes,
               "dev_ppl": perplexity_of(model.log_probs(dev, log_z1=model.log_z1()), dev), "curve": curve}
    return model, summary

"""``fsmlearn trf morph``: the word-morphology experiment of Wang, Ou and Tan, section 6.

English words as character sequences: the lower-case alphabetic words of the CMU
Pronouncing Dictionary, split 90/10 (seeded) into training and test word lists, words longer
than m = 20 letters dropped (3 words; the lengths above 20 have gaps).  Features: character
unigrams, bigrams and trigrams with their begin and end forms (the ``w`` templates of order 3
on the padded word), only those seen in training.  Runs:

* AugSA (Figure 1, Algorithm 1 of Table 1) with pi0 = n_j / n and with pi0 of equation (26),
  K = 100 samples per iteration, t_c = 100, beta_lambda = 0.8, beta_zeta = 0.6, t0 = 200,
  1,000 iterations (the paper's settings);
* quasi-Newton (L-BFGS) on the exact likelihood, the expected features by forward-backward
  on the feature acceptor (:mod:`fsmlearn.trf.exact`);
* a Witten-Bell character trigram (``fsmlearn.lm``), the paper's WB3.

Every AugSA evaluation point records the negative log-likelihood per word with the exact
normalisers (the engine's forward on the acceptor intersected with the lengths) on the
training and test words, the same with the estimated zeta, and the relative error
|zeta - zeta*| / |zeta*| of the estimated log ratios over lengths 2..m (and weighted by the
length probabilities pi_j, the error where the words are).  Evaluation points: every
iteration to 10, then 90 per decade.

Public names: MorphConfig, morph_data, run_morph.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass

import numpy as np

from ..data.cmudict import read_cmudict
from ..errors import ArgumentError
from ..trf.acceptor import LengthProduct, compile_acceptor
from ..trf.augsa import AugSAConfig, empirical_stats, train_augsa
from ..trf.exact import exact_zeta, fit_exact
from ..trf.features import as_corpus, build_features, make_templates
from ..trf.model import TRF, empirical_pi, length_groups
from .report import device, new_figure, peak_rss_mb, save_figure, write_report

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


@dataclass
class MorphConfig:
    """Settings of the word-morphology experiment (defaults: the paper's)."""
    max_length: int = 20
    test_fraction: float = 0.1
    seed: int = 0
    iterations: int = 1000
    samples: int = 100
    chains: int = 2
    t_c: float = 100.0
    beta_lambda: float = 0.8
    beta_zeta: float = 0.6
    t0: int = 200
    lbfgs_iterations: int = 1000
    runs: tuple = ("augsa-empirical", "augsa-eq26", "lbfgs", "wb3")
    report: str = "reports/trf-morph.json"
    data_dir: str | None = None

    def check(self) -> None:
        if not 1 <= self.max_length <= 30:
            raise ArgumentError(f"trf morph: max_length = {self.max_length} must be 1..30")
        if not 0 < self.test_fraction < 1:
            raise ArgumentError(f"trf morph: test_fraction = {self.test_fraction} must be in (0, 1)")
        bad = [r for r in self.runs if r not in ("augsa-empirical", "augsa-eq26", "lbfgs", "wb3")]
        if bad or not self.runs:
            raise ArgumentError(f"trf morph: unknown runs {bad}; expected some of augsa-empirical, augsa-eq26, "
                                f"lbfgs, wb3")
        if self.iterations < 1 or self.lbfgs_iterations < 1:
            raise ArgumentError("trf morph: iterations and lbfgs_iterations must be >= 1")


def morph_data(cfg: MorphConfig):
    """(train words, test words, dropped): the alphabetic lower-case cmudict words, shuffled
    with the seed, split, words longer than max_length dropped."""
    lex = read_cmudict(cfg.data_dir, lowercase=True)
    words = [w for w in lex if re.fullmatch("[a-z]+", w)]
    perm = np.random.default_rng(cfg.seed).permutation(len(words))
    kept = [words[i] for i in perm if len(words[i]) <= cfg.max_length]
    n_test = int(round(cfg.test_fraction * len(kept)))
    return kept[n_test:], kept[:n_test], len(words) - len(kept)


def _ids(words):
    return as_corpus([[ord(c) - 97 for c in w] for w in words])


def _wb3(train_words, test_words):
    from ..lm.counts import count_ngrams
    from ..lm.estimate import estimate
    from ..lm.model import compile_lm
    spaced = lambda ws: [" ".join(w) for w in ws]  # noqa: E731
    lm = compile_lm(estimate(count_ngrams(spaced(train_words), 3), "witten-bell"))
    out = {}
    for name, ws in (("train", train_words), ("test", test_words)):
        lp10, _ = lm.score(spaced(ws))
        out[name] = float(-np.log(10) * lp10.mean())
    return out


def _rel_err(z, zs):
    """|zeta - zeta*| / |zeta*| over lengths 2..m (Euclidean norms)."""
    return float(np.linalg.norm(z[2:] - zs[2:]) / np.linalg.norm(zs[2:]))


def _rel_err_weighted(z, zs, pi):
    """sum_j pi_j |zeta_j - zeta*_j| / sum_j pi_j |zeta*_j|: the error where the words are."""
    return float(np.sum(pi[2:] * np.abs(z[2:] - zs[2:])) / np.sum(pi[2:] * np.abs(zs[2:])))


def _evaluate_at(t: int, last: int) -> bool:
    """Evaluation points: every iteration to 10, then 90 per decade (10-100 every 1, 100-1000
    every 10, ...), the checkpoints 100, 1000 and the last iteration."""
    if t <= 10 or t in (100, 1000) or t == last:
        return True
    step = 10 ** (len(str(t)) - 2)
    return t % step == 0


def run_morph(cfg: MorphConfig, progress=print) -> dict:
    """Run the experiment; writes the JSON report and a PNG beside it; returns the report."""
    cfg.check()
    t_all = time.time()
    train_w, test_w, dropped = morph_data(cfg)
    train, test = _ids(train_w), _ids(test_w)
    m = cfg.max_length
    progress(f"cmudict words: {len(train):,} train, {len(test):,} test ({dropped} longer than {m} dropped)")
    fs = build_features(train, 26, make_templates("w", 3))
    acc = compile_acceptor(fs)
    lp = LengthProduct(acc, m)
    counts, pi = empirical_pi(train.lengths, m, False)
    ftilde, _ = empirical_stats(fs, train, length_groups(train.lengths, m, False))
    progress(f"{fs.num_features:,} features; feature acceptor {acc.num_states:,} states, with the lengths "
             f"{lp.machine.num_states:,} states and {lp.machine.num_arcs:,} arcs")
    report = {"experiment": "trf-morph", "config": asdict(cfg), "device": device(),
              "data": {"train_words": len(train), "test_words": len(test), "dropped_longer": dropped,
                       "max_length": m, "features": fs.num_features, "acceptor_states": acc.num_states,
                       "product_states": lp.machine.num_states, "product_arcs": lp.machine.num_arcs},
              "runs": {}}
    path = cfg.report

    def exact_point(model):
        lz = lp.log_normalisers(model.lam)
        z = lz - lz[1]
        z[0] = 0.0
        lz1 = float(lz[1])
        return {"train_nll": model.nll(train, zeta=z), "test_nll": model.nll(test, zeta=z),
                "train_nll_estimated_zeta": float(-model.log_probs(train, log_z1=lz1).mean()),
                "zeta_relative_error": _rel_err(model.zeta, z),
                "zeta_relative_error_weighted": _rel_err_weighted(model.zeta, z, pi)}, z

    for run in cfg.runs:
        t0 = time.time()
        if run.startswith("augsa"):
            rule = "empirical" if run == "augsa-empirical" else "eq26"
            acfg = AugSAConfig(samples=cfg.samples, chains=cfg.chains, iterations=cfg.iterations, t_c=cfg.t_c,
                               beta_lambda=cfg.beta_lambda, beta_zeta=cfg.beta_zeta, t0=cfg.t0, l2=0.0, pi0=rule,
                               max_length=m, long=False, eval_every=max(cfg.iterations // 10, 1), seed=cfg.seed)
            curve, snaps = [], {}
            eval_s = [0.0]

            def cb(t, model, rec, curve=curve, snaps=snaps, eval_s=eval_s):
                if _evaluate_at(t, cfg.iterations):
                    te = time.time()
                    point, z = exact_point(model)
                    curve.append({"iteration": t, **point})
                    if t in (100, 1000, 10000) or t == cfg.iterations:
                        snaps[str(t)] = {"zeta": model.zeta[1:].tolist(), "zeta_exact": z[1:].tolist(),
                                         "relative_error": point["zeta_relative_error"],
                                         "relative_error_weighted": point["zeta_relative_error_weighted"]}
                    eval_s[0] += time.time() - te
                return False

            model, rec = train_augsa(fs, train, acfg, callback=cb,
                                     progress=lambda s, run=run: progress(f"{run}: {s}"))
            train_s = time.time() - t0 - eval_s[0]
            report["runs"][run] = {"pi0": rule, "curve": curve, "zeta_at": snaps, "final": curve[-1],
                                   "train_seconds": train_s, "exact_evaluation_seconds": eval_s[0],
                                   "acceptance": rec.acceptance,
                                   "samples_per_second": cfg.iterations * cfg.samples / max(sum(rec.sample_seconds),
                                                                                           1e-9)}
            f = curve[-1]
            progress(f"{run}: exact NLL train {f['train_nll']:.4f} test {f['test_nll']:.4f}, with estimated zeta "
                     f"{f['train_nll_estimated_zeta']:.4f}, zeta relative error "
                     + ", ".join(f"{k}: {v['relative_error']:.4f} (pi-weighted {v['relative_error_weighted']:.4f})"
                                 for k, v in snaps.items())
                     + f" ({train_s:.0f} s training)")
        elif run == "lbfgs":
            hist_pts = []

            def cb(k, lam, nll, hist_pts=hist_pts):
                if k % 10 == 0:
                    progress(f"lbfgs: iteration {k}: train NLL {nll:.4f}")

            lam, hist = fit_exact(lp, ftilde, pi, max_iterations=cfg.lbfgs_iterations, callback=cb)
            model = TRF(fs, lam, m, False, pi, exact_zeta(lp, lam))
            secs = time.time() - t0
            report["runs"][run] = {"curve": [{"iteration": k, "seconds": s, "train_nll": n} for k, s, n in hist],
                                   "final": {"train_nll": model.nll(train), "test_nll": model.nll(test)},
                                   "iterations": len(hist), "seconds": secs}
            progress(f"lbfgs: {len(hist)} iterations, train NLL {model.nll(train):.4f}, test "
                     f"{model.nll(test):.4f} ({secs:.0f} s)")
        else:
            wb = _wb3(train_w, test_w)
            report["runs"][run] = {"final": {"train_nll": wb["train"], "test_nll": wb["test"]},
                                   "seconds": time.time() - t0}
            progress(f"wb3: train NLL {wb['train']:.4f}, test {wb['test']:.4f}")
        report["seconds"] = time.time() - t_all
        report["peak_memory_mb"] = peak_rss_mb()
        write_report(path, report)
    _plot(report, str(path).rsplit(".", 1)[0] + ".png")
    progress(f"wrote {path} ({time.time() - t_all:.0f} s, peak {peak_rss_mb():.0f} MB)")
    return report


def _plot(report: dict, png: str) -> None:
    fig, ax = new_figure(3, figsize=(17, 4.6))
    runs = report["runs"]
    colours = {"augsa-empirical": "tab:red", "augsa-eq26": "tab:green"}
    names = {"augsa-empirical": "AugSA, pi0 = n_j/n", "augsa-eq26": "AugSA, pi0 of (26)"}
    for run, col in colours.items():
        if run not in runs:
            continue
        c = runs[run]["curve"]
        it = [p["iteration"] for p in c]
        ax[0].plot(it, [p["train_nll"] for p in c], color=col, label=names[run])
        ax[1].plot(it, [p["train_nll"] for p in c], color=col, label=f"{names[run]}, exact Z")
        ax[1].plot(it, [p["train_nll_estimated_zeta"] for p in c], color=col, ls="--",
                   label=f"{names[run]}, estimated zeta")
        for t, snap in runs[run]["zeta_at"].items():
            ls = {"100": ":", "1000": "--"}.get(t, "-")
            ax[2].plot(range(1, len(snap["zeta"]) + 1), np.array(snap["zeta"]) - np.array(snap["zeta_exact"]),
                       color=col, ls=ls, label=f"{names[run]}, t = {t}")
    if "lbfgs" in runs:
        ax[0].axhline(runs["lbfgs"]["final"]["train_nll"], color="tab:blue", label="L-BFGS (exact gradient), final")
    if "wb3" in runs:
        ax[0].axhline(runs["wb3"]["final"]["train_nll"], color="k", ls=":", label="WB3")
    for a in ax[:2]:
        a.set_xscale("log")
        a.set_xlabel("iteration")
        a.set_ylabel("negative log-likelihood per word (train)")
        a.legend(fontsize=8)
    lo = min(runs[r]["final"]["train_nll"] for r in runs)
    ax[0].set_ylim(lo - 0.2, lo + 3)
    ax[1].set_ylim(lo - 1, lo + 3)
    ax[0].set_title("(b) NLL with exact normalisers")
    ax[1].set_title("(c) exact vs estimated normalisers")
    ax[2].axhline(0, color="grey", lw=0.5)
    ax[2].set_xlabel("length j")
    ax[2].set_ylabel("zeta_j - zeta*_j")
    ax[2].set_title("(d) error of the estimated log ratios")
    ax[2].legend(fontsize=8)
    save_figure(fig, png)

"""``fsmlearn trf lm``: TRF language model on Brown-LM against modified Kneser-Ney 5-gram
(Wang, Ou and Tan, section 7 and Table 3, on the PTB-like Brown-LM split of
``../shared/data/README.md``).

The vocabulary is the 10,000 most frequent training words plus ``<unk>``; 200 word classes
by exchange clustering (:mod:`fsmlearn.trf.classes`); features w+c+ws+cs+wsh+csh+tied
(Table 2), only those seen in training; AugSA with K = 300 samples per iteration from ten
chains of 30 steps each on the two cores (Appendix D allows any number of chains; with two,
the chains cross lengths too seldom to keep zeta consistent across lengths: re-estimating
the zeta of one model gave test perplexities of 116 with two chains and 126 with twenty), t_c = 3000, beta_lambda = 0.8, beta_zeta = 0.6, t0 = 2000, L2 4e-5, pi0 of (26), the
long-sentence sub-model above m = 100 (section 5.4; Brown-LM's longest training sentence
has 180 tokens) and the stop rule of Appendix E (threshold 1e-4, the gap D computed every
iteration on 1,000 training and 1,000 validation sentences; applied after t0), within a time
limit.  The rule's window is H = 1,000 iterations, not the paper's 100: with H = 100 it
stopped a run at iteration 2,633, 633 iterations after t0, on the noise of D (test perplexity
122.5 there against KN5's 120.8).  The length probabilities pi_j add 0.5 to each length's count (Brown-LM's
training set lacks some lengths below m that the test set has).  The model is saved (atomically) at every evaluation, so ``--resume`` continues a run
that was cut off from its last checkpoint (the chains restart from training sentences).

After training, zeta is re-estimated for the final lambda with lambda fixed
(:func:`fsmlearn.trf.augsa.refine_zeta`, ``refine_iterations``); perplexities are reported
with that zeta and with the zeta training ended with.

KN5 is lmplz's modified Kneser-Ney 5-gram on the same training text, scored with the kenlm
module.  Perplexities count </s> as a token (KenLM's convention) and use the TRF's estimated
zeta.  The interpolations: linear, p = a p_TRF + (1 - a) p_KN5 per sentence (normalised),
and log-linear, ln p = a ln p_TRF + (1 - a) ln p_KN5 without its normaliser Z_a <= 1 (by
Hoelder's inequality), so the log-linear perplexity reported is an upper bound on that of
the normalised combination; a is chosen on the validation set.

Public names: LMConfig, brown_lm_ids, kenlm_text, run_lm.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..data.datasets import brown_lm_vocabulary, load_dataset
from ..errors import ArgumentError
from ..trf.augsa import train_augsa
from ..trf.classes import exchange_clusters
from ..trf.features import as_corpus, build_features, make_templates
from ..trf.fit import FitConfig, augsa_config, perplexity_of, refine
from .report import device, new_figure, output_place, peak_rss_mb, save_figure, write_report

UNK = "<unk>"


@dataclass
class LMConfig(FitConfig):
    """Settings of the Brown-LM experiment: :class:`~fsmlearn.trf.fit.FitConfig`'s (the paper's
    PTB settings) and where the run's files go."""
    report: str = "reports/trf-lm.json"
    model: str = "models/trf-lm.npz"
    resume: bool = False
    kn_order: int = 5
    kn_arpa: str | None = None       # where to keep lmplz's ARPA (default: a temporary file, removed)
    data_dir: str | None = None

    def check(self) -> None:
        if self.hours <= 0 or not math.isfinite(self.hours):
            raise ArgumentError(f"trf lm: hours = {self.hours} must be positive")
        if not 2 <= self.classes <= 10_000:
            raise ArgumentError(f"trf lm: classes = {self.classes} must be 2..10000")
        if self.refine_iterations < 0:
            raise ArgumentError(f"trf lm: refine_iterations = {self.refine_iterations} must be >= 0")
        if not 2 <= self.kn_order <= 6:
            raise ArgumentError(f"trf lm: kn_order = {self.kn_order} must be 2..6 (KenLM's build limit)")


def brown_lm_ids(data_dir=None):
    """(vocabulary list, {split: Corpus}): Brown-LM's sentences as token ids (``<unk>`` last)."""
    vocab = list(brown_lm_vocabulary(data_dir)) + [UNK]
    idx = {w: i for i, w in enumerate(vocab)}
    out = {}
    for split in ("train", "valid", "test"):
        sents = [s for s in load_dataset("brown-lm", split, data_dir) if s]
        out[split] = as_corpus([[idx[w] for w in s] for s in sents])
    return vocab, out


#: how ``<unk>`` is spelled for KenLM, which refuses ``<unk>`` in its training text: an
#: ordinary word there, as it is for the TRF
KENLM_UNK = "<oov>"


def kenlm_text(corpus, vocab) -> list[str]:
    """The sentences as text for lmplz and kenlm (``<unk>`` spelled :data:`KENLM_UNK`)."""
    words = [KENLM_UNK if w == UNK else w for w in vocab]
    return [" ".join(words[t] for t in corpus.sentence(i)) for i in range(len(corpus))]


def _kn5(cfg: LMConfig, vocab, data, work: Path, progress) -> dict:
    """lmplz's modified Kneser-Ney model on the training text; ln p of every sentence."""
    import kenlm
    from ..lm.tools import run_lmplz
    import tempfile
    with tempfile.TemporaryDirectory(dir=work, prefix=".kn-") as tmp:
        arpa = Path(cfg.kn_arpa) if cfg.kn_arpa else Path(tmp) / f"brown-lm-kn{cfg.kn_order}.arpa"
        t0 = time.time()
        run_lmplz(kenlm_text(data["train"], vocab), cfg.kn_order, arpa)
        secs = time.time() - t0
        model = kenlm.Model(str(arpa))
        out = {"seconds": secs, "arpa": str(arpa) if cfg.kn_arpa else None}
        for split in ("valid", "test"):
            out[split] = np.array([model.score(s, bos=True, eos=True)
                                   for s in kenlm_text(data[split], vocab)]) * math.log(10)
        del model
    progress(f"KN{cfg.kn_order} (lmplz, {secs:.0f} s): test perplexity {perplexity_of(out['test'], data['test']):.1f}")
    return out


def _mix(a, lt, lk, kind):
    if kind == "linear":
        return np.logaddexp(math.log(a) + lt, math.log1p(-a) + lk) if 0 < a < 1 else (lt if a == 1 else lk)
    return a * lt + (1 - a) * lk


def run_lm(cfg: LMConfig, progress=print) -> dict:
    """Run the experiment; writes the JSON report, a PNG beside it and the model."""
    from ..trf.io import load_trf, save_trf
    cfg.check()
    for out in (cfg.model, cfg.report):
        output_place(out)
    t_all = time.time()
    model_path = Path(cfg.model)
    # a model file that cannot be resumed from is refused before the data is read
    resumed = load_trf(model_path)[0] if cfg.resume and model_path.exists() else None
    vocab, data = brown_lm_ids(cfg.data_dir)
    V = len(vocab)
    tr = data["train"]
    progress(f"Brown-LM: {len(tr):,} training sentences ({tr.lengths.sum():,} tokens, longest {tr.lengths.max()}), "
             f"{len(data['valid']):,} validation, {len(data['test']):,} test; vocabulary {V:,}")
    t0 = time.time()
    classes, cinfo = exchange_clusters([tr.sentence(i) for i in range(len(tr))], V, cfg.classes, max_passes=50)
    progress(f"{cfg.classes} classes by exchange clustering: {len(cinfo.criterion)} passes, {time.time() - t0:.1f} s")
    t0 = time.time()
    fs = build_features(tr, V, make_templates(cfg.features, cfg.order), classes=classes, n_classes=cfg.classes)
    progress(f"{fs.num_features:,} features ({cfg.features}), {time.time() - t0:.0f} s")
    report_path = Path(cfg.report)
    work = report_path.parent
    work.mkdir(parents=True, exist_ok=True)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    kn = _kn5(cfg, vocab, data, work, progress)
    acfg = augsa_config(cfg, 1000)
    model = None
    curve = []
    if resumed is not None:
        model = resumed
        if not np.array_equal(model.features.keys, fs.keys):
            raise ArgumentError(f"trf lm --resume: {model_path} has another feature set; remove it or drop --resume")
        curve = list(model.meta.get("curve", []))
        progress(f"resuming from {model_path} at iteration {model.meta.get('iterations_run', 0):,}")
    deadline = time.time() + cfg.hours * 3600
    t_train = time.time()

    def cb(t, m, rec):
        if t % cfg.eval_every == 0:
            lz1 = m.log_z1()
            curve.append({"iteration": t, "seconds": time.time() - t_train,
                          "valid_ppl": perplexity_of(m.log_probs(data["valid"], log_z1=lz1), data["valid"]),
                          "mean_sampled_length": float(np.mean(rec.mean_length[-cfg.eval_every:])),
                          "sampled_sentences_per_s": cfg.samples * cfg.eval_every
                          / max(sum(rec.sample_seconds[-cfg.eval_every:]), 1e-9),
                          "gap": rec.gap[-1][1] if rec.gap else None})
            m.meta["curve"] = curve
            m.meta["classes_passes"] = len(cinfo.criterion)
            save_trf(m, model_path, vocab)
            progress(f"iteration {t:,}: validation perplexity {curve[-1]['valid_ppl']:.1f}")
        return time.time() > deadline

    model, rec = train_augsa(fs, tr, acfg, dev=data["valid"], callback=cb, progress=progress, model=model)
    train_s = time.time() - t_train
    model.meta["curve"] = curve
    save_trf(model, model_path, vocab)
    lz1 = model.log_z1()
    at_end = {s: perplexity_of(model.log_probs(data[s], log_z1=lz1), data[s]) for s in ("valid", "test")}
    t_ref = time.time()
    if refine(model, cfg, tr, progress):
        save_trf(model, model_path, vocab)
    refine_s = time.time() - t_ref
    trf = {s: model.log_probs(data[s], log_z1=lz1) for s in ("valid", "test")}
    res = {"trf": {s: perplexity_of(trf[s], data[s]) for s in ("valid", "test")},
           "trf_zeta_at_end_of_training": at_end,
           f"kn{cfg.kn_order}": {s: perplexity_of(kn[s], data[s]) for s in ("valid", "test")}}
    for kind in ("linear", "log-linear"):  # with the refined zeta
        grid = np.linspace(0, 1, 21)
        vals = [perplexity_of(_mix(a, trf["valid"], kn["valid"], kind), data["valid"]) for a in grid]
        a = float(grid[int(np.argmin(vals))])
        res[kind] = {"alpha": a, "valid": float(min(vals)),
                     "test": perplexity_of(_mix(a, trf["test"], kn["test"], kind), data["test"])}
    report = {"experiment": "trf-lm", "config": asdict(cfg), "device": device(),
              "data": {"vocabulary": V, "train_sentences": len(tr), "train_tokens": int(tr.lengths.sum()),
                       "valid_sentences": len(data["valid"]), "test_sentences": len(data["test"]),
                       "longer_than_m": int((tr.lengths > cfg.max_length).sum())},
              "features": fs.num_features, "classes": {"passes": len(cinfo.criterion)},
              "training": {"iterations": rec.iteration[-1] if rec.iteration else 0, "seconds": train_s,
                           "stopped_by_rule_at": rec.stopped_at, "acceptance": rec.acceptance,
                           "seconds_per_iteration": float(np.mean(rec.seconds)) if rec.seconds else None,
                           "sampled_sentences_per_second": cfg.samples * len(rec.sample_seconds)
                           / max(sum(rec.sample_seconds), 1e-9), "zeta_refinement_seconds": refine_s},
              "perplexity": res, "curve": curve, "kn_seconds": kn["seconds"],
              "seconds": time.time() - t_all, "peak_memory_mb": peak_rss_mb()}
    write_report(report_path, report)
    _plot(report, str(report_path).rsplit(".", 1)[0] + ".png")
    progress("test perplexity: " + ", ".join(f"{k} {v['test']:.1f}" for k, v in res.items() if "test" in v)
             + f"; {train_s / 3600:.2f} h training, peak {peak_rss_mb():.0f} MB")
    return report


def _plot(report: dict, png: str) -> None:
    fig, ax = new_figure(2, figsize=(12, 4.4))
    c = report["curve"]
    if c:
        ax[0].plot([p["iteration"] for p in c], [p["valid_ppl"] for p in c], label="TRF (estimated zeta)")
    for k, v in report["perplexity"].items():
        if k != "trf":
            ax[0].axhline(v["valid"], ls=":", color={"linear": "tab:green", "log-linear": "tab:purple"}.get(k, "k"),
                          label=f"{k} (final)")
    ax[0].set_xlabel("AugSA iteration")
    ax[0].set_ylabel("validation perplexity")
    ax[0].set_yscale("log")
    ax[0].legend(fontsize=8)
    names = list(report["perplexity"])
    ax[1].bar(names, [report["perplexity"][k]["test"] for k in names])
    ax[1].set_ylabel("test perplexity")
    save_figure(fig, png)

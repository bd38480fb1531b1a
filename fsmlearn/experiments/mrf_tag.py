"""``fsmlearn mrf tag-wsj``: the MRF part-of-speech tagger of Jernite, Rush and Sontag (2015,
section 6, Table 2) on WSJ-train -> WSJ-small, against the supervised HMM taggers.

The tagger (:mod:`fsmlearn.mrf.tagger`, K = 1, each tag joined to its L nearest words,
``window`` (default 1: the word under the tag), appendix B's features) is trained on the
joint likelihood of WSJ-train's tags and words by the lifted bound (Algorithm 2, L-BFGS),
decoded on WSJ-small by the engine's best path on each sentence's tagging lattice, and
scored in total, on known and on unknown words (those not in WSJ-train, the HMM's
definition).  The trained tagger is saved with :func:`fsmlearn.mrf.io.save_tagger` when
``model`` is set (with its window offsets and context potentials).  The supervised
TnT-style bigram and trigram HMMs of :mod:`fsmlearn.tag` are trained and scored on the
same split in the same run.

Public names: TagConfig, run_tag, accuracy_of.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..data import load_tagged
from ..errors import ArgumentError
from ..mrf.io import save_tagger
from ..mrf.tagger import MAX_WINDOW, decode, fit_tagger, tagging_accuracy, tree_weights
from .report import device, new_figure, output_place, peak_rss_mb, save_figure, write_report

__all__ = ["TagConfig", "run_tag", "accuracy_of"]


@dataclass
class TagConfig:
    """Settings of the tagging run."""
    K: int = 1
    window: int = 1
    centre_weight: float | None = None
    max_iter: int = 150
    l2: float = 1e-6
    tighten_iter: int = 30
    tighten_method: str = "lbfgs"
    eval_every: int = 25
    minutes: float = 25.0
    hmm: bool = True
    max_affix: int = 4
    report: Path = Path("build/mrf/tag.json")
    model: Path | None = None
    data_dir: str | None = None

    def check(self) -> None:
        if self.K != 1 or self.max_iter < 1 or self.l2 < 0 or self.eval_every < 1 or self.minutes <= 0 \
                or not 1 <= self.window <= MAX_WINDOW:
            raise ArgumentError(f"tag settings out of range: K {self.K} (decoding needs 1), window {self.window} "
                                f"(1..{MAX_WINDOW}), max_iter {self.max_iter}, l2 {self.l2}, eval_every "
                                f"{self.eval_every}, minutes {self.minutes}")


def accuracy_of(pred, gold_sents, known: set) -> dict:
    """Total, known-word and unknown-word accuracy (fractions) and token counts
    (:func:`fsmlearn.mrf.tagger.tagging_accuracy`)."""
    return tagging_accuracy(pred, gold_sents, known)


def run_tag(cfg: TagConfig, progress=None, train=None, test=None) -> dict:
    """Train, decode, score; write ``cfg.report`` and its PNG.  ``train``/``test`` default to
    WSJ-train and WSJ-small (lists of (word, tag) sentences)."""
    cfg.check()
    for out in (cfg.model, cfg.report):
        output_place(out)
    say = progress or (lambda msg: None)
    t_all = time.perf_counter()
    train = load_tagged("wsj-train", cfg.data_dir) if train is None else train
    test = load_tagged("wsj-small", cfg.data_dir) if test is None else test
    vocab = sorted({w for s in train for w, _ in s})
    known = set(vocab)
    words = [[w for w, _ in s] for s in test]
    evals = []
    t0 = time.perf_counter()

    def on_iteration(m, e):
        say(f"iteration {e['iteration']}: bound {e['bound']:.4f} nats/position, gap {e['gap']:.1e}, "
            f"{e['seconds']:.0f} s")
        stop = e["seconds"] > 60 * cfg.minutes
        if e["iteration"] % cfg.eval_every == 0 or stop:
            a = accuracy_of(decode(m, words), test, known)
            a["iteration"] = e["iteration"]
            evals.append(a)
            say(f"  WSJ-small: total {100 * a['total']:.2f}%, known {100 * a['known']:.2f}%, unknown "
                f"{100 * a['unknown']:.2f}%")
        return stop

    trained, history, mom = fit_tagger(train, window=cfg.window, centre_weight=cfg.centre_weight,
                                       max_iter=cfg.max_iter, l2=cfg.l2, tighten_iter=cfg.tighten_iter,
                                       tighten_method=cfg.tighten_method, max_affix=cfg.max_affix,
                                       on_iteration=on_iteration, progress=lambda m: say("WSJ-train: " + m))
    model = trained
    weights = tree_weights(model.L, cfg.centre_weight)
    train_seconds = time.perf_counter() - t0
    if cfg.model is not None:
        Path(cfg.model).parent.mkdir(parents=True, exist_ok=True)
        save_tagger(trained, cfg.model)
    t = time.perf_counter()
    final = accuracy_of(decode(trained, words), test, known)
    decode_seconds = time.perf_counter() - t
    say(f"MRF tagger: total {100 * final['total']:.2f}%, known {100 * final['known']:.2f}%, unknown "
        f"{100 * final['unknown']:.2f}% "
        f"({final['unknown_tokens']:,} unknown tokens)")
    hmms = {}
    if cfg.hmm:
        from ..tag.train import train_supervised
        for order in (2, 3):
            hmm = train_supervised(train, order=order)
            pred = [[hmm.tags[i] for i in row] for row in _hmm_tags(hmm, words)]
            hmms[f"hmm_order{order}"] = accuracy_of(pred, test, known)
            say(f"HMM order {order}: total {100 * hmms[f'hmm_order{order}']['total']:.2f}%, unknown "
                f"{100 * hmms[f'hmm_order{order}']['unknown']:.2f}%")
    cfgd = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()}
    report = {"experiment": "mrf-tag: WSJ-train -> WSJ-small (Jernite, Rush and Sontag 2015, section 6, Table 2)",
              "config": cfgd, "device": device(), "offsets": list(model.offsets),
              "tree_weights": weights.tolist(), "N_train": mom.N, "tags": len(model.tags),
              "vocab": len(model.vocab), "features": len(model.features), "history": history,
              "evaluations": evals, "mrf": final, "hmm": hmms, "train_seconds": train_seconds,
              "decode_seconds": decode_seconds, "iterations": len(history),
              "bp_passes": int(sum(e["bp_passes"] for e in history)),
              "paper": {"hmm": [95.8, 65.4], "lifted_mrf": [96.0, 76.0]},
              "seconds": time.perf_counter() - t_all, "peak_rss_mb": peak_rss_mb()}
    path = Path(cfg.report)
    write_report(path, report)
    if history:
        fig, axes = new_figure(2, figsize=(12, 4.5))
        axes[0].plot([e["iteration"] for e in history], [e["bound"] for e in history], color="red")
        axes[0].set_xlabel("L-BFGS iteration")
        axes[0].set_ylabel("lifted bound, nats per position")
        axes[0].grid(alpha=0.3)
        pts = evals if evals else []
        axes[1].plot([a["iteration"] for a in pts], [100 * a["total"] for a in pts], "o-", label="MRF total")
        axes[1].plot([a["iteration"] for a in pts], [100 * a["unknown"] for a in pts], "s-", label="MRF unknown")
        for name, a in hmms.items():
            axes[1].axhline(100 * a["total"], ls="--", color="gray")
            axes[1].axhline(100 * a["unknown"], ls=":", color="gray")
        axes[1].set_xlabel("L-BFGS iteration")
        axes[1].set_ylabel("WSJ-small accuracy, % (gray: HMMs)")
        axes[1].legend()
        axes[1].grid(alpha=0.3)
        save_figure(fig, path.with_suffix(".png"))
    return report


def _hmm_tags(hmm, words):
    from ..tag.decode import viterbi
    from ..tag.lattice import encode_sentences
    ptr, ids, oov = encode_sentences(hmm, words)
    pred = viterbi(hmm, ptr, ids, oov_words=oov)
    return [pred[ptr[i]:ptr[i + 1]] for i in range(len(words))]

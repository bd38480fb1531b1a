"""``fsmlearn rcm decipher``: decipherment by EM with reified context models (Steinhardt and
Liang 2015, section 6).

The data: the ``vocab`` most frequent words of a dataset (Mixed-text by
default), the sentences made only of them, shuffled (seed), the first
``ciphertexts`` enciphered by a seeded 1:1 substitution of the words, the rest
plaintext for the transition model.  Each run (a method, an order, a size)
trains the substitution table by EM (:func:`fsmlearn.rcm.decipher.em_step`)
from the same start and records the mapping accuracy (over cipher tokens) and
the log-likelihood per iteration; the report is JSON with a PNG of accuracy
per iteration beside it.

Methods: ``exact`` (exact contexts of the run's order), ``beam`` (beam search:
RCMS with weight -inf outside the beam), ``rcms``.

Public names: DecipherConfig, prepare_decipherment, run_decipher, parse_runs.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data import iter_dataset_words
from ..errors import ArgumentError
from ..rcm.decipher import AbsoluteDiscountLM, DecipherModel, em_step, mapping_accuracy
from .report import new_figure, save_figure, write_report

__all__ = ["DecipherConfig", "prepare_decipherment", "run_decipher", "parse_runs"]

PAPER_RUNS = "exact:1,beam:1:60,rcms:1:60,beam:2:60,rcms:2:60"


def parse_runs(text: str) -> list[tuple[str, int, int]]:
    """'method:order[:size],...' -> [(method, order, size)] (size 0 for exact)."""
    out = []
    for part in text.split(","):
        f = part.strip().split(":")
        try:
            method, order = f[0], int(f[1])
            size = int(f[2]) if len(f) > 2 else 0
        except (IndexError, ValueError):
            raise ArgumentError(f"bad run {part!r}: expected method:order[:size], e.g. rcms:2:60") from None
        if method not in ("exact", "beam", "rcms") or order < 1 or (method != "exact" and size < 1):
            raise ArgumentError(f"bad run {part!r}: method exact, beam or rcms, order >= 1, a size >= 1 "
                                f"for beam and rcms")
        out.append((method, order, size))
    return out


@dataclass
class DecipherConfig:
    data: str = "mixed-text"
    vocab: int = 500
    ciphertexts: int = 2000
    iterations: int = 20
    seed: int = 0
    runs: list = field(default_factory=lambda: parse_runs(PAPER_RUNS))
    report: str | None = None


def prepare_decipherment(sentences, vocab: int, ciphertexts: int, seed: int) -> dict:
    """The decipherment data from tokenised sentences (see the module docstring).

    Returns:
        dict: words (the kept vocabulary, most frequent first), plain (lists of word ids),
        cipher (lists of cipher symbols), truth (int64: the plaintext word of each cipher
        symbol), sentences (how many sentences consist of the kept words).
    """
    if vocab < 2 or ciphertexts < 1:
        raise ArgumentError(f"vocab must be >= 2 and ciphertexts >= 1, got {vocab} and {ciphertexts}")
    sentences = [s for s in sentences if s]
    counts = Counter(w for s in sentences for w in s)
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:vocab]]
    wid = {w: i for i, w in enumerate(words)}
    kept = [[wid[w] for w in s] for s in sentences if all(w in wid for w in s)]
    if len(kept) <= ciphertexts:
        raise ArgumentError(f"only {len(kept)} sentences consist of the {vocab} most frequent words; "
                            f"need more than {ciphertexts} (the rest is the plaintext)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(kept))
    key = rng.permutation(len(words))              # plaintext word y -> cipher symbol key[y]
    cipher = [[int(key[y]) for y in kept[j]] for j in order[:ciphertexts]]
    plain = [kept[j] for j in order[ciphertexts:]]
    return {"words": words, "plain": plain, "cipher": cipher, "truth": np.argsort(key),
            "sentences": len(kept)}


def _plot(runs: list, path: Path, title: str) -> None:
    fig, ax = new_figure(1, figsize=(7, 4))
    for r in runs:
        it = [x["iteration"] for x in r["iterations"]]
        ax.plot(it, [100 * x["accuracy"] for x in r["iterations"]], "o-", ms=3, label=r["name"])
    ax.set_xlabel("EM iteration")
    ax.set_ylabel("mapping accuracy over cipher tokens (%)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)


def run_decipher(cfg: DecipherConfig, progress=None, sentences=None) -> dict:
    """Run every configured method; returns the report (also written when ``cfg.report``).

    ``sentences`` (tokenised) replaces the dataset (tests).
    """
    say = progress or (lambda m: None)
    if cfg.iterations < 1:
        raise ArgumentError(f"--iterations must be >= 1, got {cfg.iterations}")
    if sentences is None:
        say(f"reading {cfg.data}")
        sentences = iter_dataset_words(cfg.data)
    d = prepare_decipherment(sentences, cfg.vocab, cfg.ciphertexts, cfg.seed)
    V = len(d["words"])
    tokens = np.bincount(np.concatenate([np.asarray(c) for c in d["cipher"]]), minlength=V)
    say(f"{d['sentences']:,} sentences of the {V} most frequent words: {len(d['cipher']):,} enciphered "
        f"({int(tokens.sum()):,} tokens), {len(d['plain']):,} plaintext")
    rng = np.random.default_rng(cfg.seed + 1)
    start = np.log(np.full((V, V), 1.0 / V) * (1 + 0.01 * rng.random((V, V))))
    start -= np.logaddexp.reduce(start, axis=1, keepdims=True)
    report = {"command": "fsmlearn rcm decipher", "data": cfg.data, "vocab": V, "ciphertexts": cfg.ciphertexts,
              "cipher_tokens": int(tokens.sum()), "plaintext_sentences": len(d["plain"]),
              "sentences_of_kept_words": d["sentences"], "seed": cfg.seed, "iterations_per_run": cfg.iterations,
              "runs": [], "complete": False}
    report_path = Path(cfg.report) if cfg.report else None
    for method, order, size in cfg.runs:
        name = f"{method} order {order}" + (f" size {size}" if method != "exact" else "")
        lm = AbsoluteDiscountLM(d["plain"], V, order)
        model = DecipherModel(lm, outside=-np.inf if method == "beam" else 0.0)
        log_emit = start.copy()
        run = {"name": name, "method": method, "order": order, "size": size, "iterations": []}
        report["runs"].append(run)
        for it in range(1, cfg.iterations + 1):
            t0 = time.time()
            log_emit, ll, counts = em_step(model, d["cipher"], log_emit, size,
                                           exact_order=order if method == "exact" else None)
            acc = mapping_accuracy(counts, d["truth"], weights=tokens)
            run["iterations"].append({"iteration": it, "accuracy": acc, "loglik": ll,
                                      "seconds": time.time() - t0})
            say(f"{name}: iteration {it}/{cfg.iterations}: accuracy {100 * acc:.2f}%, "
                f"log-likelihood {ll:,.1f}, {time.time() - t0:.1f} s")
            if report_path is not None:
                write_report(report_path, report)
    report["complete"] = True
    if report_path is not None:
        write_report(report_path, report)
        png = report_path.with_suffix(".png")
        _plot(report["runs"], png, f"decipherment: {V} words, {len(d['cipher']):,} ciphertexts")
        say(f"wrote {report_path} and {png}")
    return report

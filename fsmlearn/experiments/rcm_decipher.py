"""``fsmlearn rcms decipher``: decipherment by EM with reified context models (Steinhardt and
Liang 2015, section 6).

The data: the ``vocab`` most frequent words of a dataset (Mixed-text by
default), the sentences made only of them, shuffled (seed), the first
``ciphertexts`` enciphered by a seeded 1:1 substitution of the words, the rest
plaintext for the transition model.  Each run (a method, an order, a size)
trains the substitution table by EM (:func:`fsmlearn.rcm.decipher.em_step`)
from the same start and records the mapping accuracy (over cipher tokens) and
the log-likelihood per iteration, and the mass-weighted average context length (section 7); the
report is JSON with a PNG beside it (accuracy per iteration at the largest
size and by size for the 2nd-order runs, and the context length).  Runs are
independent: ``jobs`` > 1 runs them in that many forked processes.

Methods: ``exact`` (exact contexts of the run's order), ``beam`` (beam search:
RCMS with weight -inf outside the beam), ``rcms``.

The report also gives the perplexity of the ciphertexts' hidden plaintext under the
plaintext LM of each order (what the transitions can tell EM), and ``plaintext``
limits the plaintext to its first sentences and ``discount`` sets the absolute
discount of the plaintext LMs (the paper's 0.25 by default), to see how the
methods depend on the transition model.

Public names: DecipherConfig, prepare_decipherment, run_decipher, parse_runs,
plaintext_perplexity.
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

__all__ = ["DecipherConfig", "prepare_decipherment", "run_decipher", "parse_runs", "plaintext_perplexity"]

PAPER_RUNS = "exact:1,beam:1:60,rcms:1:60,beam:2:60,rcms:2:60"
#: the 2nd-order learning curves at the other sizes of figure 5 (right)
CURVE_RUNS = "beam:2:10,rcms:2:10,beam:2:20,rcms:2:20,beam:2:30,rcms:2:30"
DEFAULT_RUNS = PAPER_RUNS + "," + CURVE_RUNS


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
    runs: list = field(default_factory=lambda: parse_runs(DEFAULT_RUNS))
    report: str | None = None
    jobs: int = 1
    plaintext: int | None = None
    discount: float = 0.25
    segments: str = "sentences"


def plaintext_perplexity(lm: AbsoluteDiscountLM, sentences) -> float:
    """The per-word perplexity of ``sentences`` (label sequences) under the transition LM, each
    word given the history a context reaching back to ``<s>`` would give it (as
    :class:`~fsmlearn.rcm.decipher.DecipherModel` does): how much the LM knows about the
    ciphertexts' hidden plaintext."""
    total, n = 0.0, 0
    for seq in sentences:
        hist: tuple = (-2,)
        for y in seq:
            total += float(lm.log_prob(hist[-lm.n:] if lm.n else ())[int(y)])
            hist = hist + (int(y),)
            n += 1
    return float(np.exp(-total / n)) if n else float("nan")


def _is_punctuation(word: str) -> bool:
    import unicodedata
    return all(unicodedata.category(c).startswith("P") for c in word)


def clauses(sentence) -> list:
    """A sentence's clauses: its runs of words between tokens made only of punctuation
    characters (Unicode categories P*), the punctuation dropped, runs of two words or more (a
    single word gives the transition model nothing)."""
    out, cur = [], []
    for w in list(sentence) + ["."]:
        if _is_punctuation(w):
            if len(cur) >= 2:
                out.append(cur)
            cur = []
        else:
            cur.append(w)
    return out


def prepare_decipherment(sentences, vocab: int, ciphertexts: int, seed: int, segments: str = "sentences") -> dict:
    """The decipherment data from tokenised sentences (see the module docstring); with
    ``segments="clauses"`` the units are the sentences' :func:`clauses` that consist of the
    kept words (the vocabulary still counted over whole sentences).

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
    if segments not in ("sentences", "clauses"):
        raise ArgumentError(f"segments {segments!r}: sentences or clauses")
    units = sentences if segments == "sentences" else [c for s in sentences for c in clauses(s)]
    kept = [[wid[w] for w in s] for s in units if all(w in wid for w in s)]
    if len(kept) <= ciphertexts:
        raise ArgumentError(f"only {len(kept)} {segments} consist of the {vocab} most frequent words; "
                            f"need more than {ciphertexts} (the rest is the plaintext)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(kept))
    key = rng.permutation(len(words))              # plaintext word y -> cipher symbol key[y]
    cipher = [[int(key[y]) for y in kept[j]] for j in order[:ciphertexts]]
    plain = [kept[j] for j in order[ciphertexts:]]
    return {"words": words, "plain": plain, "cipher": cipher, "truth": np.argsort(key),
            "sentences": len(kept)}


def _plot(runs: list, path: Path, title: str) -> None:
    """Three panels: accuracy per iteration at the largest size (figure 5 left), accuracy per
    iteration of the 2nd-order runs by size (figure 5 right), context length (figure 6)."""
    fig, axes = new_figure(3, figsize=(17, 4.6))
    top = max([r["size"] for r in runs] + [0])
    colours = {}
    for r in runs:
        it = [x["iteration"] for x in r["iterations"]]
        acc = [100 * x["accuracy"] for x in r["iterations"]]
        if r["method"] == "exact" or r["size"] == top:
            axes[0].plot(it, acc, "o-", ms=3, label=r["name"])
        if r["method"] != "exact" and r["order"] == 2:
            c = colours.setdefault(r["size"], f"C{len(colours)}")
            axes[1].plot(it, acc, "-" if r["method"] == "rcms" else "--", color=c,
                         label=f"{r['method']} size {r['size']}")
        k = runs.index(r)
        axes[2].plot(it, [x["context_length"] for x in r["iterations"]], "o-" if k < 10 else "s--", ms=3,
                     color=f"C{k % 10}", label=r["name"])
    axes[0].set_title(f"size {top}: order and method")
    axes[1].set_title("2nd order by size (solid RCMS, dashed beam)")
    axes[2].set_title("average context length (mass-weighted)")
    for ax, yl in zip(axes, ("mapping accuracy: cipher symbols (%)", "mapping accuracy (%)",
                             "determined labels of c_{i-1}")):
        ax.set_xlabel("EM iteration")
        ax.set_ylabel(yl)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)


_SHARED: dict = {}      # the data of a run_decipher call, inherited by forked workers


def _one_run_indexed(item):
    return item[0], _one_run(item[1])


def _one_run(spec) -> dict:
    """EM for one (method, order, size) from the shared start; progress through ``say``."""
    method, order, size = spec
    d, start, tokens, iterations, say, discount = (_SHARED[k] for k in ("data", "start", "tokens", "iterations", "say",
                                                                         "discount"))
    V = start.shape[0]
    name = f"{method} order {order}" + (f" size {size}" if method != "exact" else "")
    lm = AbsoluteDiscountLM(d["plain"], V, order, discount=discount)
    model = DecipherModel(lm, outside=-np.inf if method == "beam" else 0.0)
    log_emit = start.copy()
    run = {"name": name, "method": method, "order": order, "size": size, "iterations": []}
    for it in range(1, iterations + 1):
        t0 = time.time()
        stats: dict = {}
        log_emit, ll, counts = em_step(model, d["cipher"], log_emit, size,
                                       exact_order=order if method == "exact" else None, stats=stats)
        # the paper's measure (Nuhn et al. 2013): the fraction of the cipher's symbols mapped right;
        # beside it the fraction of cipher tokens
        acc = mapping_accuracy(counts, d["truth"], weights=tokens > 0)
        tok = mapping_accuracy(counts, d["truth"], weights=tokens)
        run["iterations"].append({"iteration": it, "accuracy": acc, "token_accuracy": tok, "loglik": ll,
                                  "context_length": stats["context_length"], "seconds": time.time() - t0})
        say(f"{name}: iteration {it}/{iterations}: mapping accuracy {100 * acc:.2f}% of symbols, "
            f"{100 * tok:.2f}% of tokens, log-likelihood {ll:,.1f}, context length {stats['context_length']:.3f}, "
            f"{time.time() - t0:.1f} s")
    return run


def run_decipher(cfg: DecipherConfig, progress=None, sentences=None) -> dict:
    """Run every configured method; returns the report (also written when ``cfg.report``).

    ``sentences`` (tokenised) replaces the dataset (tests).
    """
    say = progress or (lambda m: None)
    if cfg.iterations < 1 or cfg.jobs < 1:
        raise ArgumentError(f"--iterations and --jobs must be >= 1, got {cfg.iterations} and {cfg.jobs}")
    if not 0 < cfg.discount < 1:
        raise ArgumentError(f"--discount must be between 0 and 1 (exclusive), got {cfg.discount}")
    if sentences is None:
        say(f"reading {cfg.data}")
        sentences = iter_dataset_words(cfg.data)
    d = prepare_decipherment(sentences, cfg.vocab, cfg.ciphertexts, cfg.seed, cfg.segments)
    if cfg.plaintext is not None:
        if not 1 <= cfg.plaintext <= len(d["plain"]):
            raise ArgumentError(f"--plaintext must be between 1 and the {len(d['plain']):,} plaintext sentences, "
                                f"got {cfg.plaintext}")
        d["plain"] = d["plain"][:cfg.plaintext]
    V = len(d["words"])
    tokens = np.bincount(np.concatenate([np.asarray(c) for c in d["cipher"]]), minlength=V)
    say(f"{d['sentences']:,} {cfg.segments} of the {V} most frequent words: {len(d['cipher']):,} enciphered "
        f"({int(tokens.sum()):,} tokens), {len(d['plain']):,} plaintext")
    rng = np.random.default_rng(cfg.seed + 1)
    start = np.log(np.full((V, V), 1.0 / V) * (1 + 0.01 * rng.random((V, V))))
    start -= np.logaddexp.reduce(start, axis=1, keepdims=True)
    report = {"command": "fsmlearn rcms decipher", "data": cfg.data, "vocab": V, "ciphertexts": cfg.ciphertexts,
              "cipher_tokens": int(tokens.sum()), "plaintext_sentences": len(d["plain"]),
              "sentences_of_kept_words": d["sentences"], "seed": cfg.seed, "iterations_per_run": cfg.iterations,
              "discount": cfg.discount, "runs": [], "complete": False}
    # what the plaintext LM of each order knows about the ciphertexts' hidden plaintext
    hidden = [d["truth"][np.asarray(c, np.int64)] for c in d["cipher"]]
    report["hidden_plaintext_perplexity"] = {
        str(o): plaintext_perplexity(AbsoluteDiscountLM(d["plain"], V, o, discount=cfg.discount), hidden)
        for o in sorted({1, 2} | {spec[1] for spec in cfg.runs})}
    say("the plaintext LMs' perplexity on the ciphertexts' hidden plaintext: " + ", ".join(
        f"order {o} {p:.1f}" for o, p in report["hidden_plaintext_perplexity"].items()))
    report_path = Path(cfg.report) if cfg.report else None
    _SHARED.update(data=d, start=start, tokens=tokens, iterations=cfg.iterations, say=say, discount=cfg.discount)
    done = {}

    def record(k, run):
        done[k] = run
        report["runs"] = [done[j] for j in sorted(done)]
        if report_path is not None:
            write_report(report_path, report)

    specs = list(cfg.runs)
    if cfg.jobs > 1 and len(specs) > 1:
        import multiprocessing as mp
        # heaviest first (size, then order) so that the last runs to finish are short ones
        order = sorted(range(len(specs)), key=lambda k: (-specs[k][2], -specs[k][1]))
        with mp.get_context("fork").Pool(min(cfg.jobs, len(specs))) as pool:
            for k, run in pool.imap_unordered(_one_run_indexed, [(k, specs[k]) for k in order]):
                record(k, run)
    else:
        for k, spec in enumerate(specs):
            record(k, _one_run(spec))
    report["complete"] = True
    if report_path is not None:
        write_report(report_path, report)
        png = report_path.with_suffix(".png")
        _plot(report["runs"], png, f"decipherment: {V} words, {len(d['cipher']):,} ciphertexts")
        say(f"wrote {report_path} and {png}")
    return report

"""``fsmlearn mrf lm``: the MRF language model of Jernite, Rush and Sontag (2015) on Brown-LM
(section 6, Figure 6 and Table 1).

The Brown-LM split of ../shared/data/README.md (:func:`fsmlearn.data.iter_sentences`,
``brown-lm``): the training sentences become one cyclic sequence with K ``<S>`` before
each sentence (section 4.1) and its moments are collected once; the validation split's
moments likewise.  A low-rank (eq. 5, D = 30) or full-rank model is trained by Algorithm 2
(L-BFGS over theta, Algorithm 1 warm-started inside each evaluation, the star's dense
potentials in float32) from theta^0 = the log unigram frequencies and theta^l from the
corpus's positive PMI (``init="pmi"``, its truncated SVD for a low-rank model: about 3x fewer
L-BFGS iterations to the best held-out bound than small random U, W, ``init="random"``).  After every L-BFGS iteration ("epoch": one outer iteration) the
report records the training bound and the held-out bound per position,

    <hat-mu_valid, theta> - log Z_star(theta, delta) / (K+1),

(the lifted bound on (1/N_valid) log p_cycl(x_valid), the same log-partition bound per
position), the seconds, the BP passes.  Training stops at ``max_iter``, at the time budget,
or after ``patience`` iterations without a better held-out bound; the best model is saved
(:func:`fsmlearn.mrf.io.save_mrf`) and, for a low-rank model, the nearest neighbours of a few
words in U (cosine; the paper's Table 1).

A full-rank model has K C^2 parameters: at C = 10,002 that is 2 x 10^8 and L-BFGS's history
alone would need tens of GB, so ``vocab`` restricts the vocabulary (the most frequent
training words, the rest ``<unk>``) for the full-rank run.

Public names: LMConfig, run_lm, nearest_neighbours, pmi_init.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..data import iter_sentences
from ..data.datasets import UNK, brown_lm_vocabulary
from ..errors import ArgumentError
from ..mrf import SEP, MRFModel, collect_moments, corpus_sequence, save_mrf, train_lifted
from .report import device, new_figure, output_place, peak_rss_mb, save_figure, write_report

__all__ = ["LMConfig", "run_lm", "nearest_neighbours", "pmi_init"]

#: the words of the paper's Table 1, and a few more
DEFAULT_PROBES = ("company", "red", "has", "dollar", "jack", "man", "money", "said", "city", "three")


@dataclass
class LMConfig:
    """Settings of the language-model run (defaults: the paper's K = 2, D = 30)."""
    K: int = 2
    rank: int | None = 30
    vocab: int | None = None
    max_iter: int = 200
    minutes: float = 40.0
    patience: int = 10
    tighten_iter: int = 50
    tighten_tol: float = 1e-3
    tighten_method: str = "subgradient"
    alpha0: float = 1e3
    l2: float = 0.0
    init_scale: float = 0.1
    init: str = "pmi"
    pmi_scale: float = 0.5
    seed: int = 0
    report: Path | None = Path("build/mrf/lm.json")
    model: Path | None = None
    data_dir: str | None = None
    text: tuple = ()
    dev: tuple = ()
    probes: tuple = DEFAULT_PROBES

    def check(self) -> None:
        bad = [f"{name} {value} (expected {want})" for name, value, ok, want in (
            ("order K", self.K, self.K >= 1, ">= 1"),
            ("rank", self.rank, self.rank is None or self.rank >= 1, ">= 1, or 0 for full rank"),
            ("max_iter", self.max_iter, self.max_iter >= 1, ">= 1"),
            ("minutes", self.minutes, self.minutes > 0, "> 0"),
            ("patience", self.patience, self.patience >= 1, ">= 1"),
            ("l2", self.l2, self.l2 >= 0, ">= 0"),
            ("vocab", self.vocab, self.vocab is None or self.vocab >= 1, ">= 1")) if not ok]
        if bad:
            raise ArgumentError("lm settings out of range: " + "; ".join(bad))
        if self.init not in ("random", "pmi"):
            raise ArgumentError(f"init {self.init!r}; expected 'random' or 'pmi'")
        if self.rank is None and (self.vocab is None or self.vocab > 3000) and not self.text:
            raise ArgumentError(f"a full-rank model over {self.vocab or 'all 10,000'} words has K C^2 parameters "
                                "beyond L-BFGS's memory here; give vocab <= 3000")


def nearest_neighbours(U: np.ndarray, symbols, words, k: int = 3) -> dict:
    """The k nearest rows of U by cosine for each word of ``words`` found in ``symbols`` (the
    sentence separator ``<S>`` is not a word: never a neighbour)."""
    idx = {w: i for i, w in enumerate(symbols)}
    n = U / np.maximum(np.linalg.norm(U, axis=1, keepdims=True), 1e-12)
    out = {}
    for w in words:
        if w not in idx:
            continue
        s = n @ n[idx[w]]
        s[idx[w]] = -np.inf
        if SEP in idx:
            s[idx[SEP]] = -np.inf
        out[w] = [[symbols[j], float(s[j])] for j in np.argsort(-s)[:k]]
    return out


def pmi_init(model: MRFModel, moments, scale: float = 0.5, seed: int = 0) -> MRFModel:
    """theta^l from the positive pointwise mutual information of the distance-l pairs, times
    ``scale`` (the first-order, weak-coupling guess of the MRF's optimum); for a low-rank model
    its rank-D truncated SVD, U = left vectors sqrt(s), W^l = right vectors sqrt(s) (the
    distances' PMI matrices side by side share U)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import svds
    C, K = model.C, model.K
    blocks = []
    for P in moments.pairs:
        P = P.tocoo()
        pmi = np.log(P.data * moments.N / (moments.unary[P.row] * moments.unary[P.col].astype(np.float64)))
        keep = pmi > 0
        blocks.append(sp.csr_matrix((scale * pmi[keep], (P.row[keep], P.col[keep])), shape=(C, C)))
    if model.rank is None:
        return MRFModel(model.theta0, pair=np.stack([b.toarray() for b in blocks]), symbols=model.symbols)
    D = model.rank
    u, s, vt = svds(sp.hstack(blocks).tocsr(), k=D, random_state=seed)
    r = np.sqrt(s)
    W = np.stack([(vt[:, l * C:(l + 1) * C].T * r) for l in range(K)])
    return MRFModel(model.theta0, U=u * r, W=W, symbols=model.symbols)


#: the vocabulary of a model of the user's text: its most frequent words (the rest ``<unk>``)
OWN_VOCAB = 10_000


def _own_data(cfg: LMConfig, say):
    """The user's text (``cfg.text``) and held-out text (``cfg.dev``, or every 20th sentence)."""
    from ..data.text import held_out, read_token_lines
    sents = read_token_lines(cfg.text)
    train, valid = held_out(sents, read_token_lines(cfg.dev) if cfg.dev else None)
    if not train or not valid:
        raise ArgumentError(f"{', '.join(map(str, cfg.text))}: {len(sents)} sentences; training needs some and "
                            "held-out text too (--dev, or at least 20 sentences to hold every 20th out)")
    counts = Counter(w for s in train for w in s if w != UNK)
    keep = cfg.vocab or OWN_VOCAB
    vocab = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:keep]]
    symbols = [SEP] + vocab + [UNK]
    say(f"{len(train):,} training and {len(valid):,} held-out sentences ({'--dev' if cfg.dev else 'every 20th'}), "
        f"{len(counts):,} words, C = {len(symbols):,} states (the {len(vocab):,} most frequent words, the rest <unk>)")
    return symbols, {w: i for i, w in enumerate(symbols)}, train, valid


def _data(cfg: LMConfig, say):
    if cfg.text:
        return _own_data(cfg, say)
    vocab = brown_lm_vocabulary(cfg.data_dir)
    train = list(iter_sentences("brown-lm", "train", cfg.data_dir))
    valid = list(iter_sentences("brown-lm", "valid", cfg.data_dir))
    if cfg.vocab is not None:
        counts = Counter(w for s in train for w in s if w != UNK)
        vocab = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:cfg.vocab]]
    symbols = [SEP] + list(vocab) + [UNK]
    index = {w: i for i, w in enumerate(symbols)}
    say(f"Brown-LM: {len(train):,} training and {len(valid):,} validation sentences, C = {len(symbols):,} states")
    return symbols, index, train, valid


def _plot(report: dict, path: Path) -> None:
    fig, axes = new_figure(2, figsize=(12, 4.5))
    h = report["history"]
    it = [e["iteration"] for e in h]
    axes[0].plot(it, [e["bound"] for e in h], color="red", label="training bound")
    axes[0].plot(it, [e["valid_bound"] for e in h], color="blue", label="held-out bound")
    axes[0].set_xlabel("L-BFGS iteration (epoch)")
    axes[0].set_ylabel("lifted bound, nats per position")
    axes[0].legend()
    axes[0].grid(alpha=0.3)
    axes[0].set_title(f"MRF LM on {', '.join(report['config']['text']) or 'Brown-LM'}: K = {report['config']['K']}, "
                      f"{'rank ' + str(report['config']['rank']) if report['config']['rank'] else 'full rank'}")
    axes[1].plot([e["seconds"] / 60 for e in h], [e["valid_bound"] for e in h], color="blue")
    axes[1].set_xlabel("minutes")
    axes[1].set_ylabel("held-out bound, nats per position")
    axes[1].grid(alpha=0.3)
    save_figure(fig, path)


def run_lm(cfg: LMConfig, progress=None) -> dict:
    """Train on Brown-LM and write ``cfg.report`` (JSON), its PNG and the best model.

    Returns:
        The report dict.
    """
    cfg.check()
    for out in (cfg.model, cfg.report):
        output_place(out, make=not cfg.text)        # your own text's -o: an existing folder
    say = progress or (lambda msg: None)
    t_all = time.perf_counter()
    symbols, index, train, valid = _data(cfg, say)
    C, K = len(symbols), cfg.K
    t = time.perf_counter()
    xtr = corpus_sequence(train, index, K, unk=UNK)
    xva = corpus_sequence(valid, index, K, unk=UNK)
    mtr, mva = collect_moments(xtr, C, K), collect_moments(xva, C, K)
    t_moments = time.perf_counter() - t
    say(f"moments: N = {mtr.N:,} (train), {mva.N:,} (valid); pairs per distance "
        f"{[p.nnz for p in mtr.pairs]} in {t_moments:.1f} s")
    del train, valid, xtr, xva
    rank = cfg.rank
    if rank is not None and rank >= C:
        # U is C x D: a rank of C or more is no constraint (and the truncated SVD needs D < C)
        rank = C - 1 if C > 1 else 1
        say(f"rank {cfg.rank} is at least the {C} states of this text's vocabulary: rank {rank} instead")
    model = MRFModel.init(C, K, rank=rank, seed=cfg.seed, scale=cfg.init_scale, symbols=symbols)
    # theta^0 starts at the log unigram frequencies: the optimum of the model without pairwise
    # potentials, where the lifted bound is exact
    model.theta0[:] = np.log(np.maximum(mtr.unary, 0.5) / mtr.N)
    if cfg.init == "pmi":
        model = pmi_init(model, mtr, cfg.pmi_scale, cfg.seed)
    best = {"valid": -np.inf, "iteration": 0, "seconds": 0.0, "model": model}
    t0 = time.perf_counter()
    stale = {"n": 0}

    def on_iteration(m, e):
        e["valid_bound"] = mva.dot(m) - e["log_z_star"] / (K + 1)
        e["seconds"] = time.perf_counter() - t0
        prev = history_seconds[-1] if history_seconds else 0.0
        e["iteration_seconds"] = e["seconds"] - prev
        history_seconds.append(e["seconds"])
        if e["valid_bound"] > best["valid"]:
            best.update(valid=e["valid_bound"], iteration=e["iteration"], seconds=e["seconds"], model=m)
            stale["n"] = 0
        else:
            stale["n"] += 1
        say(f"iteration {e['iteration']}: train bound {e['bound']:.4f}, held-out bound {e['valid_bound']:.4f} "
            f"nats/position, gap {e['gap']:.1e}, {e['tighten_iterations']} BP passes, "
            f"{e['iteration_seconds']:.1f} s ({e['seconds'] / 60:.1f} min)")
        return stale["n"] >= cfg.patience or e["seconds"] > 60 * cfg.minutes

    history_seconds: list = []
    res = train_lifted(model, mtr, max_iter=cfg.max_iter, dtype=np.float32, tighten_iter=cfg.tighten_iter,
                       tighten_tol=cfg.tighten_tol, alpha0=cfg.alpha0, tighten_method=cfg.tighten_method,
                       l2=cfg.l2, on_iteration=on_iteration)
    h = res.history
    its = [e["iteration_seconds"] for e in h]
    neighbours = nearest_neighbours(best["model"].U, symbols, cfg.probes) if cfg.rank else {}
    if cfg.model is not None:
        Path(cfg.model).parent.mkdir(parents=True, exist_ok=True)
        save_mrf(best["model"], cfg.model)
    cfgd = {k: (str(v) if isinstance(v, Path) else [str(x) for x in v] if isinstance(v, tuple) else v)
            for k, v in asdict(cfg).items()}
    data = ", ".join(map(str, cfg.text)) if cfg.text else "Brown-LM"
    report = {"experiment": f"mrf-lm on {data} (Jernite, Rush and Sontag 2015, section 6)", "config": cfgd,
              "device": device(), "C": C, "N_train": mtr.N, "N_valid": mva.N,
              "moments_seconds": t_moments, "history": h, "stopped": res.message,
              "best": {"valid_bound": best["valid"], "iteration": best["iteration"],
                       "minutes_to_best": best["seconds"] / 60},
              "outer_iteration_seconds": {"mean": float(np.mean(its)) if its else None,
                                          "max": float(np.max(its)) if its else None,
                                          "median": float(np.median(its)) if its else None},
              "bp_passes": int(res.state.iterations), "nearest_neighbours": neighbours,
              "seconds": time.perf_counter() - t_all, "peak_rss_mb": peak_rss_mb()}
    if cfg.report is not None:
        path = Path(cfg.report)
        write_report(path, report)
        if h:
            _plot(report, path.with_suffix(".png"))
    return report

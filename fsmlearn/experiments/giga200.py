"""``make tagger-giga200``: train a tagger from n-grams alone (Smith and Eisner's Giga-200).

The pipeline, each stage cached under one folder (``--cache``, default
``data/cache/giga200``) and rebuilt only when its parameters change:

1. seed LM: an unpruned modified Kneser-Ney 5-gram of Mixed-text, compiled
   (``seed-lm.fsm``);
2. the stand-in corpus: ``tokens`` (200M) tokens sampled from it with a fixed
   seed, kept as an integer-coded corpus (``corpus/``, memory-mapped);
3. its n-gram counts with Web1T's layout (``web1t/``): 5-grams at cutoff 20
   (every 2-gram kept), counted exactly one hash partition at a time.

With ``ngrams=DIR`` (``make tagger-giga200 NGRAMS=DIR``) a user's own Web1T
or Gigaword counts replace stages 1-3 and corpus EM is not run (there is no
corpus).  Then: estimate the backoff LM from the counts (absolute
discounting, D = 0.25, by default: n-gram EM treats c as the corpus, and the
less mass an estimator moves to unseen continuations the closer c stays to
it; on WSJ-train, 5-grams at cutoff 3, n-gram EM reaches 84.02% with it,
83.50% with Witten-Bell and 82.12% with Kneser-Ney, against corpus EM's
84.68%; each context's cut extensions' mass goes to its backoff weight,
``cut_mass`` of :func:`fsmlearn.lm.estimate.estimate`), compile it to a
failure-arc acceptor, run n-gram EM (:mod:`fsmlearn.tag.ngram.em`) from
the uniform start under the 17-tag dictionary, evaluate every iteration on
WSJ-small, and, on the sampled corpus, run ordinary EM from the same start
for comparison.  Writes the
tagger (``MODEL.hmm`` parameters and ``MODEL.fsm`` transducer), a JSON report
(kept current after every iteration) and a PNG of accuracy and bound per
iteration.

Public names: Giga200Config, run_giga200.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..data import iter_dataset_words, iter_sentences
from ..data.tagsets import tag_dictionary, tagset_tags
from ..errors import ArgumentError
from ..lm.counts import count_corpus, count_ngrams
from ..lm.estimate import estimate
from ..lm.model import CompiledLM, compile_lm
from ..lm.sample import sample_corpus
from ..lm.web1t import read_web1t, write_web1t
from ..algo.cuda import check_device
from ..tag import Corpus, dictionary_mask, em, setup_from_lm, train_ngram_em, uniform_hmm
from .report import Stage, device, new_figure, peak_rss_mb, reset_peak_rss, save_figure, stage_peak_rss_mb, \
    write_report

DEFAULT_CACHE = "data/cache/giga200"


@dataclass
class Giga200Config:
    cache: str = DEFAULT_CACHE
    report: str = "reports/tagger-giga200.json"
    model: str = "models/tagger-giga200"
    ngrams: str | None = None          # a user's Web1T count directory
    tokens: int = 200_000_000
    seed: int = 200
    order: int = 5
    cutoff: int = 20
    iterations: int = 10
    corpus_em: bool = True
    corpus_em_iterations: int | None = None     # default: iterations
    seed_order: int = 5
    seed_text: str = "mixed-text"     # the dataset the seed LM is estimated on
    method: str = "absolute"          # the LM estimator of c (see the module docstring)
    discount: float = 0.25
    cut_mass: str = "backoff"         # where the cut extensions' mass goes (lm.estimate)
    threads: int = 2
    scheduler: str = "local"          # where the counting and LM stages run (fsmlearn.lm.scale): local, an
    memory: str | None = None         # address, synchronous or in-memory; each worker's budget;
    tmp: str | None = None            # the spill folder; local workers (default one per core)
    workers: int | None = None
    worker_threads: int = 1           # threads per local worker
    device: str = "cpu"               # where n-gram EM (and c's forward values) run: "cpu" or "cuda"
    ngram_em_scheduler: str | None = None   # None: n-gram EM in this process; else its passes partitioned
    #                                         over this Dask cluster (fsmlearn.algo.tied.shards): local or an address
    extra: dict = field(default_factory=dict)


def _seed_lm(cfg: Giga200Config, cache: Path, say):
    st = Stage(cache / "seed-lm.fsm", {"text": cfg.seed_text, "order": cfg.seed_order,
                                         "method": "kneser-ney", "cutoffs": "none"})
    if st.fresh():
        say(f"seed LM: cached {st.path}")
        return CompiledLM.load(st.path)
    st.start()
    say(f"seed LM: counting {cfg.seed_order}-grams of {cfg.seed_text}")
    counts = count_ngrams(iter_dataset_words(cfg.seed_text), cfg.seed_order, progress=say)
    lm = estimate(counts, progress=say)
    del counts
    say(f"seed LM: {sum(lm.counts):,} n-grams {lm.counts}; compiling")
    c = compile_lm(lm, progress=say)
    del lm
    c.save(st.path)
    st.done()
    return c


def _stand_in(cfg: Giga200Config, cache: Path, say):
    """The sampled corpus (integer-coded, memory-mapped), built once."""
    st = Stage(cache / "corpus", {"seed_lm": cfg.seed_text, "seed_order": cfg.seed_order,
                                   "tokens": cfg.tokens, "seed": cfg.seed, "threads": cfg.threads,
                                   "batch": 200_000})
    if st.fresh():
        corpus = Corpus.load(st.path)
        say(f"stand-in corpus: cached {st.path} ({corpus.num_tokens:,} tokens)")
        return corpus
    seed_lm = _seed_lm(cfg, cache, say)
    st.start()
    t0 = time.time()
    say(f"sampling {cfg.tokens:,} tokens from the seed LM (seed {cfg.seed})")
    ptr, ids = sample_corpus(seed_lm, tokens=cfg.tokens, seed=cfg.seed, threads=cfg.threads,
                             progress=say)
    # the corpus's own vocabulary, most frequent first
    cnt = np.bincount(ids, minlength=len(seed_lm.vocab))
    order = np.argsort(-cnt, kind="stable")
    order = order[cnt[order] > 0]
    remap = np.full(len(seed_lm.vocab), -1, np.int32)
    remap[order] = np.arange(order.size, dtype=np.int32)
    ids = remap[ids]
    vocab = tuple(seed_lm.vocab[i] for i in order)
    corpus = Corpus(ptr, ids, vocab)
    say(f"sampled {corpus.num_sentences:,} sentences, {corpus.num_tokens:,} tokens, "
        f"{len(vocab):,} words in {time.time() - t0:.0f} s; saving")
    corpus.save(st.path)
    st.done()
    return Corpus.load(st.path)


def _estimate_compile_partitioned(cfg: Giga200Config, cache: Path, ngram_dir: Path, say):
    """The LM stage on the cluster of the counting stage (``fsmlearn.lm.scale``): the Web1T
    files estimated and compiled by partitions into ``CACHE/lm.fsm`` (rewritten every run), then
    mapped.  Returns (the compiled LM, n-grams per order, the words counted once)."""
    from ..lm.scale.cluster import open_runner, parse_memory
    from ..lm.scale.kn import estimate_web1t
    from ..lm.web1t import read_vocab
    import tempfile
    say(f"estimating a backoff LM ({cfg.method}) from {ngram_dir} and compiling it, by partitions")
    if cache.is_dir():
        path, temporary = cache / "lm.fsm", False
    else:                           # NGRAMS=DIR without a cache: a file that lives while it is mapped
        fd, name = tempfile.mkstemp(suffix=".fsm", dir=cfg.tmp)
        os.close(fd)
        path, temporary = Path(name), True
    try:
        with open_runner(cfg.scheduler, memory=parse_memory(cfg.memory) if cfg.memory else None, tmp=cfg.tmp,
                         workers=cfg.workers, threads=cfg.worker_threads, progress=say) as runner:
            sizes = estimate_web1t(runner, ngram_dir, None, max_order=cfg.order, method=cfg.method,
                                   discount=cfg.discount, cut_mass=cfg.cut_mass, compiled=path)
        lm = CompiledLM.load(path)
    finally:
        if temporary:
            path.unlink(missing_ok=True)    # (the mapping keeps its pages)
    words, c1 = read_vocab(next(p for p in (ngram_dir / "1gms").iterdir() if p.name.startswith("vocab")))
    return lm, sizes, {w for w, n in zip(words, c1) if n == 1}


def _count_dir(cfg: Giga200Config, cache: Path, corpus, say) -> Path:
    st = Stage(cache / "web1t", {"corpus": json.loads((cache / "corpus.params.json").read_text()),
                                  "order": cfg.order, "cutoff": cfg.cutoff, "keep_bigrams": True})
    if st.fresh():
        say(f"n-gram counts: cached {st.path}")
        return st.path
    st.start()
    t0 = time.time()
    say(f"counting {cfg.order}-grams of the stand-in corpus at cutoff {cfg.cutoff} (2-grams all kept)")
    if cfg.scheduler == "in-memory":
        counts = count_corpus(corpus.ptr, corpus.ids, corpus.vocab, cfg.order, cfg.cutoff,
                              keep_bigrams=True, progress=say)
        say(f"counted in {time.time() - t0:.0f} s: {counts.sizes} n-grams; writing {st.path}")
        write_web1t(counts, st.path, progress=say)
    else:
        from ..lm.scale.cluster import open_runner, parse_memory
        from ..lm.scale.count import count_ids_to_web1t
        folder = cache / "corpus"
        with open_runner(cfg.scheduler, memory=parse_memory(cfg.memory) if cfg.memory else None, tmp=cfg.tmp,
                         workers=cfg.workers, threads=cfg.worker_threads, progress=say) as runner:
            sizes = count_ids_to_web1t(runner, folder / "ptr.npy", folder / "ids.npy", corpus.vocab, cfg.order,
                                       st.path, cutoffs=cfg.cutoff, keep_bigrams=True)
        say(f"counted and wrote {st.path} in {time.time() - t0:.0f} s: {sizes} n-grams")
    st.done()
    return st.path


def _plot(report: dict, path: Path) -> None:
    """Accuracy and bound (and corpus EM's log-likelihood) per iteration."""
    fig, ax = new_figure(2, figsize=(11, 4))
    it = report["iterations"]
    ax[0].plot([r["iteration"] for r in it], [100 * r["accuracy"] for r in it], "o-", label="n-gram EM")
    ce = report.get("corpus_em") or []
    if ce:
        ax[0].plot([r["iteration"] for r in ce], [100 * r["accuracy"] for r in ce], "s-", label="corpus EM")
    ax[0].set_xlabel("iteration")
    ax[0].set_ylabel("accuracy on WSJ-small (%)")
    ax[0].grid(alpha=0.3)
    ax[0].legend()
    ax[1].plot([r["iteration"] for r in it], [r["bound"] for r in it], "o-", label="n-gram EM bound")
    ax[1].set_xlabel("iteration")
    ax[1].set_ylabel("bound (nats per sentence of c)")
    ax[1].grid(alpha=0.3)
    if ce and any(r.get("loglik_per_sentence") is not None for r in ce):
        ax[1].plot([r["iteration"] for r in ce], [r.get("loglik_per_sentence") for r in ce], "s-",
                   label="corpus EM log-likelihood per sentence")
    ax[1].legend()
    from matplotlib.ticker import MaxNLocator
    for a in ax:
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(f"tagger-giga200: {report['ngrams']:,} n-grams"
                 + (f" from {report['tokens']:,} sampled tokens" if report.get("tokens") else ""))
    fig.tight_layout()
    save_figure(fig, path)


def run_giga200(cfg: Giga200Config, progress=None) -> dict:
    """Run the whole pipeline (see the module docstring); returns the report."""
    say = progress or (lambda m: None)
    if cfg.iterations < 1:
        raise ArgumentError(f"iterations must be >= 1, got {cfg.iterations}")
    if cfg.cutoff < 1 or cfg.order < 2:
        raise ArgumentError(f"need order >= 2 and cutoff >= 1, got order {cfg.order}, cutoff {cfg.cutoff}")
    check_device(cfg.device)      # before hours of counting, not after
    if cfg.ngram_em_scheduler and cfg.device != "cpu":
        raise ArgumentError(f"--scheduler {cfg.ngram_em_scheduler} partitions n-gram EM over CPU workers; it "
                            f"does not run with --device {cfg.device} (leave one out)")
    t_all = time.time()
    cache = Path(cfg.cache)
    report_path = Path(cfg.report)
    model_path = Path(cfg.model)
    report = {"command": "make tagger-giga200", "config": asdict(cfg), "device": device(),
              "stages": {}, "complete": False}

    def write():
        # the process's peak: getrusage's, or a stage's own (VmHWM) where a reset of the
        # stage's count (reset_peak_rss) has lowered getrusage's figure too
        stages = [v for k, v in report.items() if "peak_rss_mb" in k and k != "peak_rss_mb"]
        report["peak_rss_mb"] = round(max([peak_rss_mb()] + stages), 1)
        report["seconds_total"] = round(time.time() - t_all, 1)
        write_report(report_path, report)

    corpus = None
    t0 = time.time()
    if cfg.ngrams:
        ngram_dir = Path(cfg.ngrams)
        if not ngram_dir.is_dir():
            raise ArgumentError(f"--ngrams (NGRAMS=) {ngram_dir}: not a directory")
        report["ngrams_source"] = str(ngram_dir)
    else:
        cache.mkdir(parents=True, exist_ok=True)
        corpus = _stand_in(cfg, cache, say)
        report["stages"]["stand_in_seconds"] = round(time.time() - t0, 1)
        report["tokens"] = corpus.num_tokens
        report["sentences"] = corpus.num_sentences
        t0 = time.time()
        ngram_dir = _count_dir(cfg, cache, corpus, say)
        report["stages"]["count_seconds"] = round(time.time() - t0, 1)
        report["ngrams_source"] = str(ngram_dir)
    t0 = time.time()
    if cfg.scheduler == "in-memory":
        say(f"reading the counts in {ngram_dir}")
        counts = read_web1t(ngram_dir, max_order=cfg.order, progress=say)
        report["stages"]["read_counts_seconds"] = round(time.time() - t0, 1)
        t0 = time.time()
        say(f"estimating a backoff LM ({cfg.method}) from {sum(counts.sizes):,} n-grams {counts.sizes}")
        lm = estimate(counts, cfg.method, discount=cfg.discount, cut_mass=cfg.cut_mass, progress=say)
        singleton_words = {counts.vocab[g[0]] for g, c in zip(counts.ngrams[0], counts.counts[0]) if c == 1}
        del counts
        report["ngrams_by_order"] = [int(x) for x in lm.counts]
        report["ngrams"] = int(sum(lm.counts))
        c = compile_lm(lm, progress=say)
        del lm
    else:
        c, sizes, singleton_words = _estimate_compile_partitioned(cfg, cache, ngram_dir, say)
        report["ngrams_by_order"] = [int(x) for x in sizes]
        report["ngrams"] = int(sum(sizes))
    report["stages"]["estimate_compile_seconds"] = round(time.time() - t0, 1)
    say(f"compiled: {c.machine.num_states:,} states, {c.machine.num_arcs:,} arcs "
        f"({time.time() - t0:.0f} s)")
    c.release_pages()           # n-gram EM reads c's machine alone, not its mapped scoring tables
    write()
    tags = tagset_tags("tag17")
    td = tag_dictionary("tag17")
    ev = list(iter_sentences("wsj-small"))
    t0 = time.time()
    rss0 = stage_peak_rss_mb()
    report["peak_rss_mb_before_ngram_em"] = round(rss0, 1)
    reset_peak_rss()        # the n-gram EM stage's own peak (setup included) from here
    st = setup_from_lm(c, tagdict=td, progress=say, device=cfg.device)
    report["ngram_em_setup_peak_rss_mb"] = round(stage_peak_rss_mb(), 1)
    report["stages"]["setup_seconds"] = round(time.time() - t0, 1)
    report["variational_parameters"] = int(st.cs.num_params)
    singletons = np.array([w in singleton_words for w in st.vocab])
    report["iterations"] = []

    def on_ngram(rec):
        report["iterations"].append(rec)
        write()

    say(f"n-gram EM: {cfg.iterations} iterations")
    shard = {}
    if cfg.ngram_em_scheduler:
        from ..lm.scale.cluster import parse_memory
        shard = dict(scheduler=cfg.ngram_em_scheduler, workers=cfg.workers, tmp=cfg.tmp,
                     memory=parse_memory(cfg.memory) if cfg.memory else None)
        report["ngram_em_scheduler"] = cfg.ngram_em_scheduler
    hmm, _ = train_ngram_em(st, cfg.iterations, eval=ev, heldout=[[w for w, _ in s] for s in ev], progress=say,
                            tagdict=td, singletons=singletons, on_record=on_ngram, device=cfg.device, **shard)
    stage_mb = stage_peak_rss_mb()
    report["ngram_em_peak_rss_mb"] = round(stage_mb, 1)
    report["ngram_em_bytes_per_ngram"] = round(stage_mb * 2**20 / max(report["ngrams"], 1), 1)
    say(f"n-gram EM stage: peak {stage_mb:,.0f} MB, {report['ngram_em_bytes_per_ngram']:.0f} bytes per n-gram")
    model_path.parent.mkdir(parents=True, exist_ok=True)
    hmm.save(model_path.with_suffix(".hmm"))
    hmm.tagger_transducer().save(model_path.with_suffix(".fsm"))
    say(f"wrote the tagger: {model_path.with_suffix('.hmm')} and {model_path.with_suffix('.fsm')}")
    del st, c
    if corpus is not None and cfg.corpus_em:
        iters = cfg.corpus_em_iterations if cfg.corpus_em_iterations is not None else cfg.iterations
        allowed = dictionary_mask(corpus.vocab, tags, td)
        h0 = uniform_hmm(tags, corpus.vocab, allowed, tagdict=td)
        report["corpus_em"] = []
        S = corpus.num_sentences

        def on_corpus(r):
            d = {"iteration": r.iteration, "accuracy": r.accuracy, "accuracy_known": r.accuracy_known,
                 "accuracy_unknown": r.accuracy_unknown, "loglik": r.loglik,
                 "heldout_loglik": r.heldout_loglik,
                 "loglik_per_sentence": (r.loglik / S) if r.loglik == r.loglik else None,
                 "seconds": r.seconds}
            ce = report["corpus_em"]
            if ce and ce[-1]["iteration"] == r.iteration:
                ce[-1] = d
            else:
                ce.append(d)
            write()

        say(f"corpus EM on the same {corpus.num_tokens:,} tokens: {iters} iterations")
        reset_peak_rss()
        em(h0, corpus, allowed, iters, eval=ev, heldout=[[w for w, _ in s] for s in ev], progress=say,
           on_record=on_corpus)
        report["corpus_em_peak_rss_mb"] = round(stage_peak_rss_mb(), 1)
    it = report["iterations"]
    sec = [r["seconds"] for r in it[1:]]
    report["ngram_em_seconds_per_iteration"] = float(np.median(sec)) if sec else None
    if report.get("corpus_em"):
        csec = [r["seconds"] for r in report["corpus_em"][1:]]
        report["corpus_em_seconds_per_iteration"] = float(np.median(csec)) if csec else None
    report["complete"] = True
    write()
    png = report_path.with_suffix(".png")
    _plot(report, png)
    say(f"wrote {report_path} and {png} ({time.time() - t_all:.0f} s in all, "
        f"peak {report['peak_rss_mb']:,.0f} MB)")
    return report

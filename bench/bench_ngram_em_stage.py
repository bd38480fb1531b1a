"""The n-gram EM stage of ``make tagger-giga200`` alone, on a compiled LM already built
(``CACHE/lm.fsm``): setup (c's forward values, the structure), N iterations, the stage's
peak resident memory (setup included) and bytes per n-gram, seconds per iteration (median),
the bound and accuracy on WSJ-small after each iteration.  ``--scheduler`` runs the pass
partitioned over Dask workers (``--workers``, ``--memory``).  Not a test.

    python bench/bench_ngram_em_stage.py data/cache/giga200/lm.fsm --iterations 10
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lm")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--memory", default=None)
    ap.add_argument("--report", default=None)
    ap.add_argument("--ngrams", type=int, default=None, help="n-grams of the LM (for bytes per n-gram)")
    a = ap.parse_args(argv)
    from fsmlearn.data import iter_sentences
    from fsmlearn.data.tagsets import tag_dictionary
    from fsmlearn.experiments.report import reset_peak_rss, stage_peak_rss_mb
    from fsmlearn.lm.model import CompiledLM
    from fsmlearn.tag.ngram.approx import setup_from_lm, train_ngram_em

    def say(m):
        print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)

    c = CompiledLM.load(a.lm)
    ngrams = a.ngrams or (int(sum(c.counts)) if getattr(c, "counts", None) is not None else None)
    before = stage_peak_rss_mb()
    reset_peak_rss()
    t0 = time.time()
    td = tag_dictionary("tag17")
    st = setup_from_lm(c, tagdict=td, progress=say)
    out = {"lm": a.lm, "ngrams": ngrams, "setup_seconds": time.time() - t0,
           "setup_peak_rss_mb": stage_peak_rss_mb(), "rss_before_mb": before,
           "variational_parameters": st.cs.num_params}
    ev = list(iter_sentences("wsj-small"))
    kw = {}
    if a.scheduler:
        kw = dict(scheduler=a.scheduler, workers=a.workers, memory=a.memory)
    _, recs = train_ngram_em(st, a.iterations, eval=ev, tagdict=td, progress=say, **kw)
    out["iterations"] = recs
    sec = [r["seconds"] for r in recs[1:]]
    out["seconds_per_iteration_median"] = float(np.median(sec))
    out["peak_rss_mb"] = stage_peak_rss_mb()
    if ngrams:
        out["bytes_per_ngram"] = out["peak_rss_mb"] * 2**20 / ngrams
    say(json.dumps({k: v for k, v in out.items() if k != "iterations"}))
    if a.report:
        with open(a.report, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

"""The n-gram EM stage of ``make tagger-giga200`` alone, on a compiled LM already built
(``CACHE/lm.fsm``): setup (c's forward values, the structure), N iterations of variational
EM, the stage's peak resident memory (setup included) and bytes per n-gram, seconds per
iteration (median) and the bound after each.  With ``--workers K`` (one or more values)
the passes run partitioned over a Dask LocalCluster of K worker processes
(``--memory`` each, :mod:`fsmlearn.tag.ngram.shards`), after the one-process run, and
each run reports its workers' peak memory and the bytes sent to and from the parts per
iteration; the bounds must equal the one-process run's (relative 1e-9).  Not a test.

    python bench/bench_ngram_em_stage.py data/cache/giga200/lm.fsm --ngrams 32276850 --workers 2 3 4 --memory 3G
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
    ap.add_argument("--workers", type=int, nargs="*", default=[])
    ap.add_argument("--memory", default=None, help="each worker's budget, e.g. 3G")
    ap.add_argument("--report", default=None)
    ap.add_argument("--ngrams", type=int, default=None, help="n-grams of the LM (for bytes per n-gram)")
    a = ap.parse_args(argv)
    from fsmlearn.data.tagsets import tag_dictionary
    from fsmlearn.experiments.report import reset_peak_rss, stage_peak_rss_mb
    from fsmlearn.lm.model import CompiledLM
    from fsmlearn.lm.scale.cluster import parse_memory
    from fsmlearn.tag.ngram.approx import initial_theta, setup_from_lm
    from fsmlearn.tag.ngram.em import NGramEM

    def say(m):
        print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)

    c = CompiledLM.load(a.lm)
    out = {"lm": a.lm, "ngrams": a.ngrams, "rss_before_mb": stage_peak_rss_mb(), "runs": []}
    reset_peak_rss()
    t0 = time.time()
    st = setup_from_lm(c, tagdict=tag_dictionary("tag17"), progress=say)
    out.update(setup_seconds=time.time() - t0, setup_peak_rss_mb=stage_peak_rss_mb(),
               variational_parameters=st.cs.num_params)
    mem = parse_memory(a.memory) if a.memory else None
    ref = None
    for k in [0] + list(a.workers):
        lt, le = initial_theta(st)
        kw = dict(scheduler="local", workers=k, memory=mem, progress=say) if k else {}
        t0 = time.time()
        with NGramEM(st.cs, st.allowed, lt, le, **kw) as tr:
            start = time.time() - t0
            tr.run(a.iterations)
            sec = [r.seconds for r in tr.history[1:]]
            run = {"workers": k, "start_seconds": start, "seconds": sec,
                   "seconds_per_iteration_median": float(np.median(sec)),
                   "bounds": [r.bound for r in tr.history]}
            if k:
                sh = tr.shards
                run["worker_peak_rss_mb"] = sorted(sh.client.run(stage_peak_rss_mb).values())
                run["parts"] = len(sh.parts)
                tr_it = sh.traffic[1:]          # the iterations' passes (the first is the start's statistics)
                run["bytes_sent_per_iteration"] = float(np.median([t["sent"] for t in tr_it]))
                run["bytes_received_per_iteration"] = float(np.median([t["received"] for t in tr_it]))
            else:
                run["peak_rss_mb"] = stage_peak_rss_mb()
                if a.ngrams:
                    run["bytes_per_ngram"] = run["peak_rss_mb"] * 2**20 / a.ngrams
                ref = run["bounds"]
            if ref is not None and k:
                run["max_rel_bound_diff"] = float(np.max(np.abs(np.array(run["bounds"]) - ref) / np.abs(ref)))
        out["runs"].append(run)
        say(json.dumps({kk: v for kk, v in run.items() if kk not in ("bounds", "seconds")}))
        if a.report:
            with open(a.report, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

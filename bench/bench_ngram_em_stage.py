"""The n-gram EM stage of ``make tagger-giga200`` alone, on a compiled LM already built
(``CACHE/lm.fsm``): setup (c's forward values, the structure), N iterations of variational
EM, the stage's peak resident memory (setup included) and bytes per n-gram, seconds per
iteration (median) and the bound after each.  With ``--workers K`` (one or more values)
the passes run partitioned over a Dask LocalCluster of K worker processes
(``--memory`` each, :mod:`fsmlearn.algo.tied.shards`), after the one-process run, and
each run reports its workers' peak memory and the bytes sent to and from the parts per
iteration; the bounds must equal the one-process run's (relative 1e-9).  Not a test.

    python bench/bench_ngram_em_stage.py data/cache/giga200/lm.fsm --ngrams 32276850 --workers 2 3 4 --memory 3G

With ``--paired`` each K also runs side by side with a one-process trainer, an iteration
of each in turn, and the ratio of each pair is reported (this machine's speed drifts by
up to 1.5x between runs of the same command, more than the ratio measured).
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
    ap.add_argument("--paired", action="store_true",
                    help="also, for each --workers K, the one-process and the K-worker trainers side by side, "
                         "an iteration of each in turn: the ratio of each pair (a fair ratio on a machine whose "
                         "speed drifts between runs)")
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
                run["pass_seconds_median"] = {n: float(np.median([t["seconds"][n] for t in tr_it]))
                                              for n in ("pass1", "pass2", "pass3")}
                run["part_load_compute_save_seconds"] = [t["seconds"]["part_load_compute_save"] for t in tr_it]
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
    for k in (a.workers if a.paired else []):
        trs = []
        with NGramEM(st.cs, st.allowed, *initial_theta(st)) as one, \
                NGramEM(st.cs, st.allowed, *initial_theta(st), scheduler="local", workers=k, memory=mem) as shd:
            one.bound()
            shd.bound()
            for _ in range(a.iterations):
                pair = []
                for tr in (one, shd):
                    t0 = time.perf_counter()
                    b = tr.iterate()
                    pair.append((time.perf_counter() - t0, b))
                trs.append(pair)
        sec = np.array([[x[0] for x in pr] for pr in trs])
        run = {"paired_workers": k, "seconds_one": sec[:, 0].tolist(), "seconds_sharded": sec[:, 1].tolist(),
               "ratio_median": float(np.median(sec[:, 1] / sec[:, 0])),
               "ratio_of_medians": float(np.median(sec[:, 1]) / np.median(sec[:, 0])),
               "max_rel_bound_diff": float(max(abs(pr[1][1] - pr[0][1]) / abs(pr[0][1]) for pr in trs))}
        out["runs"].append(run)
        say(json.dumps({kk: v for kk, v in run.items() if not kk.startswith("seconds")}))
        if a.report:
            with open(a.report, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

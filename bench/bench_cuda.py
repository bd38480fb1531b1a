"""Benchmark: the CUDA path (issue 20) against the CPU path, in the same run.

* forward values (log semiring) over the engine benchmark's two machines
  (:func:`bench_engine.build`: default 1M states, 10M arcs, cyclic and
  acyclic), ``device="cpu"`` against ``device="cuda"``: the first call
  (device copies, levels) and the median of warm calls, the ratio CPU / GPU,
  and the largest relative difference of the forward probabilities;
* one variational-EM iteration of n-gram EM (:class:`fsmlearn.tag.ngram.em.NGramEM`,
  n_q = 1) on the same cq structure on both devices: c is the backoff LM of a
  Web1T count directory (``--ngrams``; for the issue's 200M-token setting the
  counts ``make tagger-giga200`` caches, ``data/cache/giga200/web1t``), or
  without it of the 5-gram counts of ``--text`` (default mixed-text, cutoff
  10); the first iteration of each device is a warm-up (compilation), then the
  median of ``--iterations``, the ratio, and the bounds' relative difference;
* the GPU model, the CPU's core and numba thread counts.

It refuses to run without a CUDA GPU (numba.cuda finds none, or numba's
simulator is on): simulator timings say nothing about a GPU.  ``--smoke``
runs the whole script in the simulator on tiny inputs to check that it works;
its timings are not GPU figures and it says so.

Usage: python bench/bench_cuda.py [--states N] [--degree D] [--runs K] [--cpu-threads 0,2]
       [--ngrams DIR | --text NAME] [--iterations K] [--smoke]
Writes reports/bench_cuda.json (reports/bench_cuda_smoke.json with --smoke).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

if "--smoke" in sys.argv:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"     # before numba is imported

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402

from bench_engine import build  # noqa: E402
from fsmlearn.algo import forward  # noqa: E402


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def gpu_name(smoke: bool) -> str:
    """The GPU's name; exits with a message when there is no real GPU (unless smoke)."""
    from numba import cuda
    sim = bool(nb.config.ENABLE_CUDASIM)
    if smoke:
        return "numba CUDA simulator (smoke run: no GPU figure)"
    if sim:
        sys.exit("bench_cuda: NUMBA_ENABLE_CUDASIM is set: the simulator's timings are not GPU figures. "
                 "Unset it (or set NUMBA_ENABLE_CUDASIM=0) on a machine with a CUDA GPU.")
    try:
        ok = cuda.is_available()
    except Exception as e:          # noqa: BLE001 - a driver that fails to load
        ok = False
        say(f"numba.cuda: {e}")
    if not ok:
        sys.exit("bench_cuda: no CUDA GPU here (numba.cuda.is_available() is False): nothing to measure. "
                 "Run it on a machine with an NVIDIA GPU and its driver; see docs/cuda.md.")
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def time_forward(m, device, runs, threads=None):
    if threads:
        nb.set_num_threads(threads)
    t = time.perf_counter()
    v = forward(m, "log", device=device)
    first = time.perf_counter() - t
    warm = []
    for _ in range(runs):
        t = time.perf_counter()
        forward(m, "log", device=device)
        warm.append(time.perf_counter() - t)
    return v, first, statistics.median(warm)


PROFILES = {}
PROFILE = False


def profile(name, fn, top=30):
    """Run fn() once under cProfile (after the timed runs: warm) and keep its top functions
    by internal time; a GPU's kernels show up in the calls that wait for them (copies to
    the host)."""
    import cProfile
    import io
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
    PROFILES[name] = buf.getvalue()


def rel_diff(a, b):
    pa, pb = np.exp(-a), np.exp(-b)
    scale = np.maximum(np.maximum(pa, pb), 1e-300)
    return float(np.max(np.abs(pa - pb) / scale))


def bench_forward(n, degree, runs, cpu_threads):
    """Forward on both machines; the CPU path at each of ``cpu_threads`` (the first is the headline)."""
    out = []
    for cyclic in (True, False):
        m = build(n, degree, cyclic)
        say(f"forward, {'cyclic' if cyclic else 'acyclic'}: {m.num_states:,} states, {m.num_arcs:,} arcs")
        cpu = {}
        for k in cpu_threads:
            vc, fc, wc = time_forward(m, "cpu", runs, threads=k)
            cpu[k] = (fc, wc)
            say(f"  cpu on {k} threads: first {fc:.3f} s, warm {wc:.3f} s")
        nb.set_num_threads(cpu_threads[0])
        vg, fg, wg = time_forward(m, "cuda", runs)
        if PROFILE:
            profile(f"forward_{'cyclic' if cyclic else 'acyclic'}_cuda", lambda: forward(m, "log", device="cuda"))
        fc, wc = cpu[cpu_threads[0]]
        r = {"machine": "cyclic" if cyclic else "acyclic", "states": m.num_states, "arcs": m.num_arcs,
             "cpu_threads": cpu_threads[0], "cpu_first_s": fc, "cpu_warm_s": wc,
             "cuda_first_s": fg, "cuda_warm_s": wg,
             "ratio_cpu_over_cuda_warm": wc / wg, "max_rel_diff": rel_diff(vc, vg),
             "cpu_by_threads": {str(k): {"first_s": f, "warm_s": w, "ratio_cpu_over_cuda_warm": w / wg}
                                for k, (f, w) in cpu.items()}}
        say(f"  cuda {wg:.3f} s (first {fg:.3f} s): " + ", ".join(
            f"{w / wg:.1f}x the CPU on {k} threads" for k, (f, w) in cpu.items())
            + f"; largest relative difference {r['max_rel_diff']:.2e}")
        out.append(r)
    return out


def ngram_lm(args):
    from fsmlearn.lm.estimate import estimate
    from fsmlearn.lm.model import compile_lm
    if args.ngrams:
        from fsmlearn.lm.web1t import read_web1t
        counts = read_web1t(args.ngrams, max_order=5, progress=say)
        lm = estimate(counts, "absolute", discount=0.25, cut_mass="backoff", progress=say)
        what = f"Web1T counts in {args.ngrams}"
    else:
        from fsmlearn.data import iter_sentences
        from fsmlearn.lm.counts import count_ngrams
        sents = [[w if isinstance(w, str) else w[0] for w in s] for s in iter_sentences(args.text)]
        if args.smoke:
            sents = sents[:200]
        counts = count_ngrams(sents, 5)
        lm = estimate(counts, "kneser-ney", cutoffs=[1, 1, args.cutoff, args.cutoff, args.cutoff],
                      keep_bigrams=True)
        what = f"5-grams of {args.text} at cutoff {args.cutoff}" + (" (first 200 sentences)" if args.smoke else "")
    return compile_lm(lm), what


def bench_vem(args):
    from fsmlearn.data.tagsets import tag_dictionary
    from fsmlearn.tag.ngram.approx import initial_theta, setup_from_lm
    from fsmlearn.tag.ngram.em import NGramEM
    c, what = ngram_lm(args)
    say(f"c: {what}: {c.machine.num_states:,} states, {c.machine.num_arcs:,} arcs")
    st = setup_from_lm(c, tagdict=tag_dictionary("tag17"), progress=say)
    lt, le = initial_theta(st)
    res = {"lm": what, "states": c.machine.num_states, "arcs": c.machine.num_arcs,
           "variational_parameters": int(st.cs.num_params)}
    bounds = {}
    for device in ("cpu", "cuda"):
        t = time.perf_counter()
        tr = NGramEM(st.cs, st.allowed, lt, le, device=device)
        res[f"{device}_trainer_setup_s"] = time.perf_counter() - t
        t = time.perf_counter()
        tr.iterate()                                  # warm-up: compilation, first statistics
        res[f"{device}_first_iteration_s"] = time.perf_counter() - t
        secs = []
        b = None
        for _ in range(args.iterations):
            t = time.perf_counter()
            b = tr.iterate()
            secs.append(time.perf_counter() - t)
        res[f"{device}_iteration_s"] = statistics.median(secs)
        if PROFILE:
            profile(f"vem_iteration_{device}", tr.iterate)
        bounds[device] = b
        say(f"  vEM on {device}: {res[f'{device}_iteration_s']:.3f} s per iteration (median of {len(secs)}), "
            f"bound {b:.6f}")
    res["ratio_cpu_over_cuda"] = res["cpu_iteration_s"] / res["cuda_iteration_s"]
    res["bound_rel_diff"] = abs(bounds["cpu"] - bounds["cuda"]) / max(abs(bounds["cpu"]), 1e-300)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--degree", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5, help="warm forward runs per device (median)")
    ap.add_argument("--ngrams", help="a Web1T count directory for c (e.g. data/cache/giga200/web1t)")
    ap.add_argument("--text", default="mixed-text", help="without --ngrams: the text whose 5-grams make c")
    ap.add_argument("--cutoff", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=3, help="timed vEM iterations per device (median)")
    ap.add_argument("--cpu-threads", default="0",
                    help="comma-separated numba thread counts for the CPU side of forward (0: all; the first "
                         "is the headline ratio and the one vEM uses), e.g. 0,2 to add a 2-core comparison")
    ap.add_argument("--profile", action="store_true",
                    help="also profile one warm call of each (cProfile, top functions) into the report")
    ap.add_argument("--skip-forward", action="store_true", help="only the n-gram EM iteration")
    ap.add_argument("--smoke", action="store_true", help="tiny inputs in numba's simulator: checks the script")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.smoke:
        a.states, a.degree, a.runs, a.iterations = min(a.states, 60), min(a.degree, 3), 1, 1
    global PROFILE
    PROFILE = a.profile
    threads = list(dict.fromkeys(int(k) or nb.config.NUMBA_NUM_THREADS for k in a.cpu_threads.split(",")))
    gpu = gpu_name(a.smoke)
    say(f"GPU: {gpu}; CPU: {os.cpu_count()} cores, numba threads {nb.get_num_threads()}")
    rep = {"gpu": gpu, "smoke": a.smoke, "cpu": platform.processor() or platform.machine(),
           "cpu_cores": os.cpu_count(), "numba_threads": nb.get_num_threads(),
           "forward": [] if a.skip_forward else bench_forward(a.states, a.degree, a.runs, threads),
           "vem_iteration": bench_vem(a)}
    if PROFILES:
        rep["profiles"] = PROFILES
    out = Path(a.out or ("reports/bench_cuda_smoke.json" if a.smoke else "reports/bench_cuda.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=1))
    print(f"GPU {gpu}" + (" (SMOKE RUN: these are simulator timings, not GPU figures)" if a.smoke else ""))
    for r in rep["forward"]:
        print(f"forward, {r['machine']} {r['states']:,} states / {r['arcs']:,} arcs: cuda {r['cuda_warm_s']:.3f} s; "
              + "; ".join(f"cpu on {k} threads {c['warm_s']:.3f} s, cpu/cuda {c['ratio_cpu_over_cuda_warm']:.1f}x"
                          for k, c in r["cpu_by_threads"].items())
              + f" (max rel diff {r['max_rel_diff']:.1e})")
    v = rep["vem_iteration"]
    print(f"vEM iteration ({v['lm']}; {v['variational_parameters']:,} parameters): cpu {v['cpu_iteration_s']:.3f} s, "
          f"cuda {v['cuda_iteration_s']:.3f} s, cpu/cuda {v['ratio_cpu_over_cuda']:.1f}x "
          f"(bound rel diff {v['bound_rel_diff']:.1e})")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

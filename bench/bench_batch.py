"""Benchmark: the engine over a batch of 100,000 sentence lattices (issue 31).

The tagger's E-step on the first ``--sentences`` sentences of Mixed-text (the
Merialdo set-up of bench/bench_em.py: 17 tags, the tag dictionary, uniform
start, bigram HMM), three ways in the same run:

* **batch**: one :class:`~fsmlearn.fsm.MachineBatch` of all the sentence
  lattices (:func:`fsmlearn.tag.lattice.build_lattice`) and one call of the
  engine's ``forward_backward`` over it, then the counts (what
  :func:`fsmlearn.tag.em.expected_counts` does);
* **per-machine loop**: the same lattices as separate Machines (split off
  the batch before the clock starts) and ``forward_backward`` called once
  per sentence;
* **peer**: the hand-written numba Baum-Welch of bench/bench_em.py (scaled
  forward-backward over each sentence's allowed tags, single thread) on the
  same sentences.

It checks that the three agree (each sentence's log-likelihood from the batch
and from the loop; the expected counts of the batch and of the peer) and prints
the ratios.  With ``--device cuda`` (a machine with a GPU) it also times the
batch's forward-backward on the GPU against the CPU's.

Usage: python bench/bench_batch.py [--sentences N] [--runs K] [--device cuda]
Writes reports/bench_batch.json.
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

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_em import load_corpus, peer_counts  # noqa: E402
from fsmlearn.algo import forward_backward  # noqa: E402
from fsmlearn.data.tagsets import tag_dictionary, tagset_tags  # noqa: E402
from fsmlearn.tag.em import Corpus, dictionary_mask, expected_counts, uniform_hmm  # noqa: E402
from fsmlearn.tag.lattice import build_lattice  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3, help="timed runs of the batch and the peer (median)")
    ap.add_argument("--loop-runs", type=int, default=1, help="timed runs of the per-machine loop")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--corpus", default=str(ROOT / "bench" / "work" / "em_mixed_text"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench_batch.json"))
    a = ap.parse_args(argv)

    full = load_corpus(Path(a.corpus))
    S = min(a.sentences, full.num_sentences)
    ptr = np.asarray(full.ptr[:S + 1], np.int64)
    ids = np.ascontiguousarray(full.ids[:int(ptr[-1])], dtype=np.int32)
    corpus = Corpus(ptr, ids, full.vocab)
    N = int(ptr[-1])
    tags = tagset_tags("tag17")
    td = tag_dictionary("tag17")
    allowed = dictionary_mask(corpus.vocab, tags, td)
    hmm = uniform_hmm(tags, corpus.vocab, allowed, tagdict=td)
    csr = hmm.emission_csr(allowed)
    say(f"{S:,} sentences of Mixed-text, {N:,} tokens; 17 tags, bigram; numba threads {nb.get_num_threads()}")

    # warm-up (compilation) on a slice
    k = min(200, S)
    small = Corpus(ptr[:k + 1], ids[:int(ptr[k])], corpus.vocab)
    expected_counts(hmm, small, allowed, N + 1)
    peer_counts(hmm, small, allowed)
    lat0 = build_lattice(hmm, small.ptr, small.ids, csr, semiring="real")
    for b in range(min(3, len(lat0.batch))):
        forward_backward(lat0.batch[b])

    # batch: the whole E-step (lattice build, one forward_backward over the batch, counts)
    runs = []
    for _ in range(a.runs):
        timings = {}
        t = time.perf_counter()
        tc, ec, ll = expected_counts(hmm, corpus, allowed, N + 1, timings=timings)
        runs.append((time.perf_counter() - t, timings))
    batch_s = statistics.median(r[0] for r in runs)
    phases = min(runs, key=lambda r: r[0])[1]
    lat = build_lattice(hmm, ptr, ids, csr, semiring="real")
    B = len(lat.batch)
    fb_s = []
    for _ in range(a.runs):
        t = time.perf_counter()
        fb = forward_backward(lat.batch)
        fb_s.append(time.perf_counter() - t)
    batch_fb = statistics.median(fb_s)
    say(f"batch: {B:,} machines, {lat.batch.num_states:,} states, {lat.batch.num_arcs:,} arcs; E-step "
        f"{batch_s:.3f} s (" + ", ".join(f"{k} {v:.3f} s" for k, v in phases.items())
        + f"); forward_backward alone {batch_fb:.3f} s")

    # per-machine loop over the same lattices
    t = time.perf_counter()
    machines = list(lat.batch)
    split_s = time.perf_counter() - t
    loop = []
    for _ in range(a.loop_runs):
        costs = np.empty(B)
        t = time.perf_counter()
        for b, m in enumerate(machines):
            costs[b] = forward_backward(m).cost
        loop.append(time.perf_counter() - t)
    loop_s = statistics.median(loop)
    cost_diff = float(np.max(np.abs(costs - fb.cost)))
    say(f"per-machine loop: forward_backward on {B:,} machines {loop_s:.3f} s "
        f"({1e6 * loop_s / B:.1f} us each; splitting the batch took {split_s:.1f} s, not timed); "
        f"largest log-likelihood difference from the batch {cost_diff:.2e}")

    # the peer
    pw = []
    for _ in range(a.runs):
        t = time.perf_counter()
        ptc, pec, pll = peer_counts(hmm, corpus, allowed)
        pw.append(time.perf_counter() - t)
    peer_s = statistics.median(pw)
    T = hmm.T
    ours_t = tc.reshape(T + 1, T + 1)
    ours_e = ec.reshape(T, -1)
    count_diff = max(float(np.max(np.abs(ptc - ours_t) / np.maximum(np.abs(ptc), 1e-300))),
                     float(np.max(np.abs(pec - ours_e) / np.maximum(np.abs(pec), 1e-300))))
    say(f"peer (hand-written numba Baum-Welch): {peer_s:.3f} s; largest relative count difference "
        f"{count_diff:.2e}, log-likelihood difference {abs(pll - ll):.2e}")

    rep = {"benchmark": "E-step over a batch of sentence lattices (17-tag bigram HMM, Mixed-text)",
           "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "numba_threads": nb.get_num_threads()},
           "sentences": B, "tokens": N, "states": lat.batch.num_states, "arcs": lat.batch.num_arcs,
           "batch_estep_s": batch_s, "batch_phases_s": phases, "batch_forward_backward_s": batch_fb,
           "loop_forward_backward_s": loop_s, "loop_us_per_machine": 1e6 * loop_s / B,
           "peer_estep_s": peer_s,
           "ratio_loop_over_batch_forward_backward": loop_s / batch_fb,
           "ratio_batch_estep_over_peer": batch_s / peer_s,
           "max_loglik_difference_batch_vs_loop": cost_diff,
           "max_relative_count_difference_vs_peer": count_diff}

    if a.device == "cuda":
        g = []
        t = time.perf_counter()
        fg = forward_backward(lat.batch, device="cuda")
        first = time.perf_counter() - t
        for _ in range(a.runs):
            t = time.perf_counter()
            fg = forward_backward(lat.batch, device="cuda")
            g.append(time.perf_counter() - t)
        gs = statistics.median(g)
        pdiff = float(np.max(np.abs(fg.posteriors - fb.posteriors)))
        rep["cuda"] = {"first_s": first, "warm_s": gs, "ratio_cpu_over_cuda": batch_fb / gs,
                       "max_posterior_difference": pdiff,
                       "max_loglik_difference": float(np.max(np.abs(fg.cost - fb.cost)))}
        say(f"cuda: forward_backward over the batch {gs:.3f} s warm (first {first:.2f} s), "
            f"{batch_fb / gs:.2f}x the CPU; largest posterior difference {pdiff:.2e}")

    print(f"{B:,} sentence lattices ({N:,} tokens): batch E-step {batch_s:.2f} s "
          f"(forward_backward {batch_fb:.2f} s); per-machine loop {loop_s:.2f} s "
          f"({loop_s / batch_fb:.1f}x the batch's forward_backward); hand-written Baum-Welch {peer_s:.2f} s "
          f"(batch E-step / peer {batch_s / peer_s:.2f}); counts agree to {count_diff:.1e}")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

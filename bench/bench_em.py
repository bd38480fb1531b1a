"""Benchmark: one EM iteration of a 17-tag bigram HMM over Mixed-text.

The Merialdo set-up of :mod:`fsmlearn.tag.em` (17 tags, the tag dictionary,
uniform start) on Mixed-text (about 4.75M tokens, its own vocabulary).  In
the same run:

* fsmlearn's EM iteration (E-step over batches of sentence lattices with the
  engine's forward_backward, M-step), wall and CPU seconds, tokens/s, and
  where the time goes (lattice build, forward-backward, count accumulation,
  M-step); the target is under 10 s per iteration;
* the peer: a hand-written Baum-Welch kernel (scaled forward-backward over
  each sentence's allowed tags, in numba, single thread), the least a
  specialised programme needs for the same counts; the ratio ours / peer,
  and the largest relative difference of the two sets of expected counts;
* E-step seconds for several chunk sizes (``--chunks``);
* a STREAM-like triad for the machine's memory bandwidth.

The encoded corpus is kept in bench/work/em_mixed_text (reading and
encoding the zips takes about 15 s the first time).

Usage: python bench/bench_em.py [--iterations K] [--chunk-tokens N] [--chunks 100000,200000,1000000]
Writes reports/bench_em.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fsmlearn.data import iter_sentences  # noqa: E402
from fsmlearn.data.tagsets import tag_dictionary, tagset_tags  # noqa: E402
from fsmlearn.tag.em import (Corpus, training_mask, dictionary_mask, encode_corpus, expected_counts,  # noqa: E402
                             uniform_hmm)
from fsmlearn.tag.hmm import HMM  # noqa: E402
from common import triad_bandwidth  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@nb.njit(cache=True)
def _peer_baum_welch(ptr, ids, row_ptr, row_tag, row_p, P, T, V, tc, ec):
    """Scaled forward-backward per sentence over the allowed tags (the peer).

    P is [T+1, T+1] probabilities (row/column T = <s>/</s>), row_p the
    emission probability of each (word, allowed tag) entry.  Adds expected
    counts to tc [(T+1)*(T+1)] and ec [T*(V+1)]; returns the log-likelihood.
    """
    T1 = T + 1
    maxlen = 0
    for s in range(ptr.shape[0] - 1):
        maxlen = max(maxlen, ptr[s + 1] - ptr[s])
    off = np.empty(maxlen + 1, np.int64)
    cs = np.empty(maxlen + 1)
    buf_a = np.empty(maxlen * T)
    buf_b = np.empty(maxlen * T)
    ll = 0.0
    for s in range(ptr.shape[0] - 1):
        lo = ptr[s]
        L = ptr[s + 1] - lo
        if L == 0:
            continue
        off[0] = 0
        for i in range(L):
            w = ids[lo + i]
            off[i + 1] = off[i] + row_ptr[w + 1] - row_ptr[w]
        # forward
        for i in range(L):
            w = ids[lo + i]
            r0 = row_ptr[w]
            K = row_ptr[w + 1] - r0
            c = 0.0
            for k in range(K):
                t = row_tag[r0 + k]
                acc = 0.0
                if i == 0:
                    acc = P[T, t]
                else:
                    wp = ids[lo + i - 1]
                    q0 = row_ptr[wp]
                    for j in range(row_ptr[wp + 1] - q0):
                        acc += buf_a[off[i - 1] + j] * P[row_tag[q0 + j], t]
                v = acc * row_p[r0 + k]
                buf_a[off[i] + k] = v
                c += v
            for k in range(K):
                buf_a[off[i] + k] /= c
            cs[i] = c
        wl = ids[lo + L - 1]
        q0 = row_ptr[wl]
        KL = row_ptr[wl + 1] - q0
        cend = 0.0
        for j in range(KL):
            cend += buf_a[off[L - 1] + j] * P[row_tag[q0 + j], T]
        cs[L] = cend
        for i in range(L + 1):
            ll += math.log(cs[i])
        # backward
        for j in range(KL):
            buf_b[off[L - 1] + j] = P[row_tag[q0 + j], T] / cend
            tc[row_tag[q0 + j] * T1 + T] += buf_a[off[L - 1] + j] * P[row_tag[q0 + j], T] / cend
        for i in range(L - 1, 0, -1):
            w = ids[lo + i]
            r0 = row_ptr[w]
            K = row_ptr[w + 1] - r0
            wp = ids[lo + i - 1]
            p0 = row_ptr[wp]
            Kp = row_ptr[wp + 1] - p0
            for j in range(Kp):
                tj = row_tag[p0 + j]
                acc = 0.0
                aj = buf_a[off[i - 1] + j]
                for k in range(K):
                    x = P[tj, row_tag[r0 + k]] * row_p[r0 + k] * buf_b[off[i] + k] / cs[i]
                    acc += x
                    tc[tj * T1 + row_tag[r0 + k]] += aj * x
                buf_b[off[i - 1] + j] = acc
        w = ids[lo]
        r0 = row_ptr[w]
        for k in range(row_ptr[w + 1] - r0):
            t = row_tag[r0 + k]
            tc[T * T1 + t] += buf_a[off[0] + k] * buf_b[off[0] + k]
        # emissions: state posteriors
        for i in range(L):
            w = ids[lo + i]
            r0 = row_ptr[w]
            for k in range(row_ptr[w + 1] - r0):
                ec[row_tag[r0 + k] * (V + 1) + w] += buf_a[off[i] + k] * buf_b[off[i] + k]
    return ll


def peer_counts(hmm: HMM, corpus: Corpus, allowed):
    T, V = hmm.T, hmm.V
    row_ptr, row_tag, row_lp = hmm.emission_csr(allowed)
    tc = np.zeros((T + 1) ** 2)
    ec = np.zeros(T * (V + 1))
    ll = _peer_baum_welch(np.asarray(corpus.ptr), np.ascontiguousarray(corpus.ids), row_ptr, row_tag,
                          np.exp(row_lp), np.exp(hmm.log_trans), T, V, tc, ec)
    return tc.reshape(T + 1, T + 1), ec.reshape(T, V + 1), ll


def load_corpus(folder: Path) -> Corpus:
    if (folder / "corpus.json").exists():
        return Corpus.load(folder)
    t = time.time()
    c = encode_corpus(iter_sentences("mixed-text"))
    c.save(folder)
    print(f"encoded Mixed-text: {c.num_tokens:,} tokens, {len(c.vocab):,} words ({time.time() - t:.1f} s); "
          f"saved to {folder}")
    return Corpus.load(folder)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=3, help="timed EM iterations (median reported)")
    ap.add_argument("--pairs", type=int, default=5,
                    help="alternating (EM iteration, peer E-step) pairs on the initial model; the ratio "
                         "against the peer is the median of the pairs' ratios")
    ap.add_argument("--chunk-tokens", type=int, default=200_000)
    ap.add_argument("--chunks", default="50000,200000,1000000", help="chunk sizes for the E-step sweep")
    ap.add_argument("--corpus", default=str(ROOT / "bench" / "work" / "em_mixed_text"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench_em.json"))
    args = ap.parse_args(argv)

    corpus = load_corpus(Path(args.corpus))
    N = corpus.num_tokens
    tags = tagset_tags("tag17")
    td = tag_dictionary("tag17")
    allowed = dictionary_mask(corpus.vocab, tags, td)
    mask = training_mask(allowed, len(corpus.vocab))
    hmm = uniform_hmm(tags, corpus.vocab, allowed, tagdict=td)
    print(f"Mixed-text: {N:,} tokens, {corpus.num_sentences:,} sentences, {len(corpus.vocab):,} words; "
          f"17 tags, bigram; mean allowed tags per token "
          f"{np.diff(hmm.emission_csr(allowed)[0])[np.asarray(corpus.ids)].mean():.2f}")

    # warm-up (numba compilation) on a slice
    small = Corpus(corpus.ptr[:2001], np.asarray(corpus.ids[:int(corpus.ptr[2000])]), corpus.vocab)
    expected_counts(hmm, small, allowed, args.chunk_tokens)
    peer_counts(hmm, small, allowed)

    # fsmlearn: EM iterations from the uniform start
    walls, cpus, phases, lls = [], [], [], []
    h = hmm
    for k in range(args.iterations):
        timings = {}
        t0, c0 = time.perf_counter(), time.process_time()
        tc, ec, ll = expected_counts(h, corpus, allowed, args.chunk_tokens, timings=timings)
        t1 = time.perf_counter()
        h_next = HMM.from_counts(h.tags, h.vocab, tc, ec, allowed=mask, tagdict=h.tagdict)
        t2, c2 = time.perf_counter(), time.process_time()
        timings["m_step"] = t2 - t1
        walls.append(t2 - t0)
        cpus.append(c2 - c0)
        phases.append(timings)
        lls.append(ll)
        print(f"iteration {k + 1}: {t2 - t0:.2f} s wall, {c2 - c0:.2f} s CPU, {N / (t2 - t0):,.0f} tokens/s; "
              f"loglik {ll:,.1f}; " + ", ".join(f"{p} {v:.2f} s" for p, v in timings.items()))
        if k == 0:
            ours0 = (tc, ec, ll)
        h = h_next
    wall = statistics.median(walls)
    cpu = statistics.median(cpus)

    # the peer on the initial model (compare counts too)
    pw = []
    for _ in range(2):
        t0 = time.perf_counter()
        ptc, pec, pll = peer_counts(hmm, corpus, allowed)
        pw.append(time.perf_counter() - t0)
    peer = min(pw)
    diff_t = float(np.max(np.abs(ptc - ours0[0]) / np.maximum(np.abs(ptc), 1e-300)))
    diff_e = float(np.max(np.abs(pec - ours0[1]) / np.maximum(np.abs(pec), 1e-300)))
    print(f"peer (hand-written numba Baum-Welch E-step): {peer:.2f} s, {N / peer:,.0f} tokens/s; "
          f"ours / peer (E+M vs E) = {wall / peer:.2f}; largest relative count difference "
          f"{max(diff_t, diff_e):.2e}, loglik difference {abs(pll - ours0[2]):.3g}")

    # alternating pairs: one EM iteration (E + M) then one peer E-step, on the same model, so that
    # both see the same machine load; the target ratio is the median of the pairs' ratios
    pair_ours, pair_peer = [], []
    for _ in range(args.pairs):
        t0 = time.perf_counter()
        tc, ec, _ = expected_counts(hmm, corpus, allowed, args.chunk_tokens)
        HMM.from_counts(hmm.tags, hmm.vocab, tc, ec, allowed=mask, tagdict=hmm.tagdict)
        t1 = time.perf_counter()
        peer_counts(hmm, corpus, allowed)
        t2 = time.perf_counter()
        pair_ours.append(t1 - t0)
        pair_peer.append(t2 - t1)
    pair_ratio = statistics.median([o / p for o, p in zip(pair_ours, pair_peer)]) if args.pairs else float("nan")
    if args.pairs:
        print(f"{args.pairs} alternating pairs: EM iteration {min(pair_ours):.2f}-{max(pair_ours):.2f} s, peer E-step "
              f"{min(pair_peer):.2f}-{max(pair_peer):.2f} s; ratio per pair "
              + ", ".join(f"{o / p:.2f}" for o, p in zip(pair_ours, pair_peer))
              + f"; median {pair_ratio:.2f} (target 1.5: {'met' if pair_ratio <= 1.5 else 'NOT met'})")

    # chunk-size sweep of the E-step
    sweep = {}
    for ch in [int(x) for x in args.chunks.split(",") if x]:
        t0 = time.perf_counter()
        expected_counts(hmm, corpus, allowed, ch)
        sweep[ch] = time.perf_counter() - t0
        print(f"E-step with {ch:,}-token chunks: {sweep[ch]:.2f} s")

    bw = triad_bandwidth()
    print(f"triad bandwidth {bw:.1f} GB/s; EM iteration {wall:.2f} s (target < 10 s): "
          f"{'met' if wall < 10 else 'NOT met'}")
    report = {
        "benchmark": "EM iteration, 17-tag bigram HMM, Mixed-text",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "triad_GBps": bw,
                    "load_average": os.getloadavg()},
        "tokens": N, "sentences": corpus.num_sentences, "vocab_size": len(corpus.vocab),
        "chunk_tokens": args.chunk_tokens,
        "iteration_seconds": walls, "iteration_cpu_seconds": cpus, "median_seconds": wall,
        "median_cpu_seconds": cpu, "tokens_per_second": N / wall, "phases": phases, "loglik": lls,
        "peer": {"name": "hand-written numba Baum-Welch (E-step only)", "seconds": peer,
                 "tokens_per_second": N / peer, "ratio_ours_over_peer": wall / peer,
                 "max_relative_count_difference": max(diff_t, diff_e),
                 "pairs": {"ours_seconds": pair_ours, "peer_seconds": pair_peer, "median_ratio": pair_ratio,
                           "target_ratio": 1.5}},
        "chunk_sweep_seconds": {str(k): v for k, v in sweep.items()},
        "target_seconds": 10.0, "target_met": wall < 10.0,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: scoring with a small model, against KenLM's Python loop in the same run.

The large-model figures of docs/bench-lm.md (a 13.7M-n-gram 5-gram) do not carry
over to small models, where the per-call work outside the walk weighs more.  This
estimates a 3-gram with ``fsmlearn lm estimate`` from the first ``--train``
sentences of Brown-LM's training split (default 6,000: about 171k n-grams),
compiles it, and scores Brown-LM's test split repeated ``--repeat`` times (default
13: 1.66M tokens = words + ``</s>``) with ``kenlm.Model.score`` in a Python loop
and with ``CompiledLM.score`` on one and two threads, alternating, ``--runs``
times (default 5); prints the medians and ours/KenLM as speed ratios.

It also times our two parts apart: encoding the strings into labels, and the walk.

Usage: python bench/bench_lm_small.py [--train N] [--repeat K] [--runs R]
Writes reports/bench_lm_small.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kenlm  # noqa: E402

from common import triad_bandwidth  # noqa: E402
from fsmlearn.data.datasets import iter_sentences  # noqa: E402
from fsmlearn.algo.score import score_sequences  # noqa: E402
from fsmlearn.lm import CompiledLM  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=int, default=6000, help="training sentences (default 6000)")
    ap.add_argument("--repeat", type=int, default=13, help="copies of the test split scored (default 13)")
    ap.add_argument("--runs", type=int, default=5, help="timed rounds (default 5)")
    ap.add_argument("--out", default="reports/bench_lm_small.json")
    a = ap.parse_args()
    fsmlearn = [sys.executable, "-m", "fsmlearn.cli.main"]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "train.txt").write_text("".join(" ".join(s) + "\n"
                                             for s in islice(iter_sentences("brown-lm", "train"), a.train)))
        subprocess.run([*fsmlearn, "lm", "estimate", "-q", "--order", "3", d / "train.txt", "-o", d / "m.arpa"],
                       check=True)
        subprocess.run([*fsmlearn, "lm", "compile", "-q", d / "m.arpa", "-o", d / "m.fsm"], check=True)
        head = (d / "m.arpa").read_text().split("\n\n")[0]
        sizes = [int(x.split("=")[1]) for x in head.splitlines() if x.startswith("ngram ")]
        lines = [" ".join(s) for s in iter_sentences("brown-lm", "test")] * a.repeat
        tokens = sum(len(x.split()) + 1 for x in lines)
        ken = kenlm.Model(str(d / "m.arpa"))
        ours = CompiledLM.load(d / "m.fsm")
        ours.score(lines[:100], threads=1)
        ours.score(lines[:100], threads=2)

        def time_kenlm():
            t = time.perf_counter()
            for x in lines:
                ken.score(x)
            return time.perf_counter() - t

        def time_ours(threads):
            t = time.perf_counter()
            ours.score(lines, threads=threads)
            return time.perf_counter() - t

        ptr, lab, _ = ours.encode(lines, 1)

        def time_encode(threads):
            t = time.perf_counter()
            ours.encode(lines, threads)
            return time.perf_counter() - t

        def time_walk(threads):
            t = time.perf_counter()
            score_sequences(None, ptr, lab, tables=ours.tables, threads=threads)
            return time.perf_counter() - t

        times = {"kenlm": [], "ours_1": [], "ours_2": [], "encode_1": [], "encode_2": [], "walk_1": [], "walk_2": []}
        for _ in range(a.runs):
            times["kenlm"].append(time_kenlm())
            times["ours_1"].append(time_ours(1))
            times["ours_2"].append(time_ours(2))
            for th in (1, 2):
                times[f"encode_{th}"].append(time_encode(th))
                times[f"walk_{th}"].append(time_walk(th))
        ours_tables_bytes = ours.tables.arcs.nbytes + ours.tables.back.nbytes + ours.tables.back_cost.nbytes
    med = {k: statistics.median(v) for k, v in times.items()}
    bw = triad_bandwidth()
    report = {"triad_gb_s": bw, "ngrams": sizes, "sentences": len(lines), "tokens": tokens, "seconds": times,
              "tokens_per_s": {k: tokens / v for k, v in med.items()},
              "speed_vs_kenlm": {k: med["kenlm"] / med[k] for k in ("ours_1", "ours_2")},
              "tables_bytes": ours_tables_bytes}
    print(f"triad bandwidth (single thread): {bw:.1f} GB/s")
    print(f"3-gram of {sum(sizes):,} n-grams ({' / '.join(f'{n:,}' for n in sizes)}); "
          f"{len(lines):,} sentences, {tokens:,} tokens")
    print(f"KenLM Python loop {tokens / med['kenlm'] / 1e6:.2f}M tokens/s; "
          f"ours 1 thread {tokens / med['ours_1'] / 1e6:.2f}M ({report['speed_vs_kenlm']['ours_1']:.2f}x), "
          f"2 threads {tokens / med['ours_2'] / 1e6:.2f}M ({report['speed_vs_kenlm']['ours_2']:.2f}x)")
    print(f"ours, seconds (median, 1 / 2 threads): the strings encoded {med['encode_1']:.3f} / "
          f"{med['encode_2']:.3f}, the walk {med['walk_1']:.3f} / {med['walk_2']:.3f} (tables "
          f"{ours_tables_bytes / 2**20:.1f} MiB); KenLM's loop {med['kenlm']:.3f}")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

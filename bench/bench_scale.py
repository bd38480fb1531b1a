"""Benchmark: the partitioned (Dask) LM estimation of issue 28 against KenLM's lmplz, on this machine.

The pipeline, its inputs built once in a work folder (``bench/work/scale`` or ``--work``):

1. the seed LM: :mod:`fsmlearn.experiments.giga200`'s own builder (an unpruned modified
   Kneser-Ney model of Mixed-text, order ``--seed-order``, compiled; cached by that
   builder as ``seed-lm.fsm`` with its parameters), run in a child process;
2. the stand-in text: ``fsmlearn lm sample seed-lm.fsm --tokens N --seed S -o FILE``, one
   sentence a line (as giga200 builds its stand-in corpus, but kept as plain text: the
   commands below read it by path); its sentences, tokens (words; ``</s>`` not counted)
   and the ``<unk>`` tokens the seed LM emitted are recorded;
3. timed runs, each a separate process, in this order:

   a. ``fsmlearn lm estimate TEXT -o OUT --order K --memory M --workers 2 --tmp DIR``: the
      Dask path, a LocalCluster of two worker processes (``--workers`` and ``--memory`` are
      given, so an input under 64 MB does not take the in-memory path);
   b. the same with ``--scheduler in-memory`` (the one-process path that holds every n-gram;
      skipped above 50M tokens unless ``--in-memory``);
   c. ``lmplz -o K -S M -T DIR --discount_fallback --skip_symbols < TEXT > OUT`` (``-S`` as
      kibibytes: KenLM's suffixes are binary, as ``--memory``'s are; ``--skip_symbols``
      because the sampled text may hold the seed model's ``<unk>``, which lmplz refuses as
      a word: it then drops those tokens, so its counts of n-grams around them differ);
   d. scaling: (a) again with ``--workers 1``, and with one worker of two threads
      (``--workers 1 --worker-threads 2``) (``--no-scaling`` skips both).

Per run: wall seconds (``time.perf_counter`` around the process), tokens/s, CPU seconds of
the process tree (``os.wait4``), peak resident memory of the whole process tree (every
0.2 s (``--poll``) the RSS of the process and of all its descendants, read from /proc and
summed; the maximum of the sums, and the largest single process's; a sum counts pages
shared by several processes once per process, and a peak shorter than the poll can be
missed: the kernel's high-water mark of the largest single process, from ``wait4``, is
recorded beside it and is the floor of both figures; the sampled figures are kept in the
report too), and the disk under the run's temporary folder, sampled with the
memory (``du``-like, allocated blocks): all of it (Dask's spill files, the ARPA pieces;
lmplz's temporary files) and the Dask spill directories alone (``dask-scratch-space``).
Ratios: ours / lmplz in wall seconds and in peak memory.  Sanity line: the n-gram counts
of each ARPA header (the Dask runs against the in-memory run must be equal; against lmplz
they differ only where lmplz dropped ``<unk>``).  The ARPA files are deleted after their
headers are read (``--keep`` keeps them).

This process imports nothing heavy (children do the work), so its own memory stays small
(a child's ``wait4`` high-water mark starts from its parent's; the report records ours).

Usage: python bench/bench_scale.py [--tokens N] [--memory 2G] [--order 5] [--work DIR] [--seed S]
       [--in-memory] [--no-scaling] [--keep] [--out FILE]
Writes reports/bench_scale.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from machine import loadavg, machine_facts  # noqa: E402 (bench/machine.py)

IN_MEMORY_MAX_TOKENS = 50_000_000     # (b) is skipped above this unless --in-memory
PAGE = os.sysconf("SC_PAGE_SIZE")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def say(msg: str = "") -> None:
    print(msg, flush=True)


def venv_bin(name: str) -> Path:
    return Path(sys.executable).parent / name


def fsmlearn_cmd() -> list[str]:
    exe = venv_bin("fsmlearn")
    if exe.is_file():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from fsmlearn.cli.main import main; sys.exit(main())"]


def lmplz_path() -> str:
    exe = venv_bin("lmplz")
    if exe.is_file():
        return str(exe)
    found = shutil.which("lmplz")
    if not found:
        raise SystemExit("lmplz not found (make install builds it into .venv/bin)")
    return found


def memory_bytes(text: str) -> int:
    """Bytes of ``2G``, ``512M``, ... (binary units, as ``fsmlearn --memory`` reads them)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise SystemExit(f"--memory {text!r}: expected a size such as 2G or 512M")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


# --- the process tree's memory and the temporary folder's size, sampled ----------------------

def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                s = f.read()
        except OSError:
            continue
        ppid = int(s[s.rfind(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root: int) -> tuple[int, int, int]:
    """(summed RSS of ``root`` and its descendants, the largest one's RSS, ``root``'s own)."""
    kids = _children()
    todo, total, largest, own = [root], 0, 0, 0
    while todo:
        pid = todo.pop()
        r = _rss(pid)
        total += r
        largest = max(largest, r)
        if pid == root:
            own = r
        todo.extend(kids.get(pid, ()))
    return total, largest, own


def disk_usage(path: Path) -> tuple[int, int]:
    """(bytes allocated under ``path``, of which under Dask spill folders ``dask-scratch-space``)."""
    total = spill = 0
    stack = [(str(path), False)]
    while stack:
        d, in_spill = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append((e.path, in_spill or e.name == "dask-scratch-space"))
                    elif e.is_file(follow_symlinks=False):
                        n = e.stat(follow_symlinks=False).st_blocks * 512
                        total += n
                        if in_spill:
                            spill += n
                except OSError:
                    continue
    return total, spill


class Sampler(threading.Thread):
    """Samples a process tree's RSS and a folder's disk usage every ``poll`` seconds."""

    def __init__(self, pid: int, tmp: Path, poll: float):
        super().__init__(daemon=True)
        self.pid, self.tmp, self.poll = pid, tmp, poll
        self.stop = threading.Event()
        self.peak_total = self.peak_single = self.peak_root = self.peak_children = 0
        self.peak_tmp = self.peak_spill = 0
        self.samples = 0

    def run(self) -> None:
        while not self.stop.is_set():
            total, single, own = tree_rss(self.pid)
            du, spill = disk_usage(self.tmp)
            self.peak_total = max(self.peak_total, total)
            self.peak_single = max(self.peak_single, single)
            self.peak_root = max(self.peak_root, own)
            self.peak_children = max(self.peak_children, total - own)
            self.peak_tmp = max(self.peak_tmp, du)
            self.peak_spill = max(self.peak_spill, spill)
            self.samples += 1
            self.stop.wait(self.poll)


_STAGE = re.compile(r"\[\s*([\d.]+)s\] (.+): \d+/\d+ ")


def measured(name: str, argv: list[str], tmp: Path, log: Path, poll: float, stdin: Path | None = None,
             stdout: Path | None = None) -> dict:
    """Run one command (stderr into ``log``) under a :class:`Sampler`; its figures (``ok`` False
    and the log's tail when it failed)."""
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    shell = " ".join(argv) + (f" < {stdin}" if stdin else "") + (f" > {stdout}" if stdout else "")
    say(f"  {name}: {shell}")
    with open(stdin or os.devnull, "rb") as fin, open(stdout or os.devnull, "wb") as fout, \
            open(log, "wb") as ferr:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=ferr)
        s = Sampler(proc.pid, tmp, poll)
        s.start()
        _, status, ru = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t
        s.stop.set()
        s.join()
    rc = os.waitstatus_to_exitcode(status)
    text = log.read_text(errors="replace")
    stages = {}
    for line in text.splitlines():
        m = _STAGE.match(line)
        if m:
            stages[m.group(2).strip()] = float(m.group(1))     # the stage's last progress line
    hwm = ru.ru_maxrss * 1024
    # a sample every ``poll`` seconds can miss a short peak (a run of a second or two): the kernel's
    # high-water mark of the largest single process is a floor of both figures
    rec = {"command": shell, "ok": rc == 0, "rc": rc, "wall_s": dt, "cpu_s": ru.ru_utime + ru.ru_stime,
           "peak_rss_total_bytes": max(s.peak_total, hwm), "peak_rss_single_bytes": max(s.peak_single, hwm),
           "sampled_peak_rss_total_bytes": s.peak_total, "sampled_peak_rss_single_bytes": s.peak_single,
           "peak_rss_command_process_bytes": s.peak_root, "peak_rss_descendants_bytes": s.peak_children,
           "largest_process_hwm_bytes": hwm, "peak_tmp_bytes": s.peak_tmp,
           "peak_spill_bytes": s.peak_spill, "samples": s.samples, "stage_ends_s": stages, "log": str(log)}
    shutil.rmtree(tmp, ignore_errors=True)
    if rc != 0:
        rec["error_tail"] = text[-2000:]
        say(f"  {name}: FAILED (exit {rc}); the log's tail:\n" + "\n".join(text.splitlines()[-8:]))
    else:
        say(f"  {name}: {dt:.1f} s, CPU {rec['cpu_s']:.1f} s, peak RSS {rec['peak_rss_total_bytes'] / 1e6:,.0f} MB "
            f"(largest process {rec['peak_rss_single_bytes'] / 1e6:,.0f} MB), temporary files "
            f"{s.peak_tmp / 1e6:,.1f} MB (spilled {s.peak_spill / 1e6:,.1f} MB)")
    return rec


# --- inputs ------------------------------------------------------------------------------------

def arpa_counts(path: Path) -> list[int]:
    """n-gram counts from an ARPA file's \\data\\ header."""
    counts, seen = [], False
    with open(path, "rb") as f:
        for raw in f:
            s = raw.strip()
            if s == b"\\data\\":
                seen = True
            elif seen:
                m = re.match(rb"ngram\s+(\d+)\s*=\s*(\d+)", s)
                if m:
                    counts.append(int(m.group(2)))
                elif s:
                    break
    return counts


def text_stats(path: Path) -> dict:
    n = t = unk = 0
    with open(path, "rb") as f:
        for line in f:
            ws = line.split()
            n += 1
            t += len(ws)
            unk += ws.count(b"<unk>")
    return {"sentences": n, "tokens": t, "unk_tokens": unk, "bytes": path.stat().st_size}


def seed_lm(work: Path, order: int) -> dict:
    """giga200's seed LM builder in a child process (it caches its result under ``work``)."""
    code = ("import sys, time\nfrom pathlib import Path\n"
            "from fsmlearn.experiments.giga200 import Giga200Config, _seed_lm\n"
            "t = time.time()\n"
            "_seed_lm(Giga200Config(seed_order=int(sys.argv[2])), Path(sys.argv[1]),\n"
            "         lambda m: print(f'[{time.time() - t:7.1f}s] {m}', file=sys.stderr, flush=True))\n")
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, str(work), str(order)], stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"seed LM failed:\n{r.stderr[-2000:]}")
    cached = "seed LM: cached" in r.stderr
    say(f"  seed LM: {'cached' if cached else f'built in {time.perf_counter() - t:.0f} s'} ({work / 'seed-lm.fsm'})")
    params = work / "seed-lm.fsm.params.json"
    return {"path": str(work / "seed-lm.fsm"), "params": json.loads(params.read_text()) if params.exists() else None,
            "built_s": None if cached else time.perf_counter() - t}


def stand_in(work: Path, tokens: int, seed: int, seed_order: int) -> tuple[Path, dict]:
    text = work / f"text-{tokens}-s{seed}-seed{seed_order}.txt"
    meta = text.with_name(text.name + ".json")
    if text.exists() and meta.exists():
        stats = json.loads(meta.read_text())
        say(f"  stand-in text: cached {text.name}: {stats['sentences']:,} sentences, {stats['tokens']:,} tokens")
        return text, dict(stats, cached=True)
    t = time.perf_counter()
    r = subprocess.run(fsmlearn_cmd() + ["lm", "sample", "-q", str(work / "seed-lm.fsm"), "--tokens", str(tokens),
                                         "--seed", str(seed), "-o", str(text)], stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"lm sample failed:\n{r.stderr[-2000:]}")
    stats = {"sample_s": time.perf_counter() - t, **text_stats(text)}
    meta.write_text(json.dumps(stats, indent=1))
    say(f"  stand-in text: sampled {text.name} in {stats['sample_s']:.0f} s: {stats['sentences']:,} sentences, "
        f"{stats['tokens']:,} tokens ({stats['unk_tokens']:,} <unk>), {stats['bytes'] / 1e6:,.1f} MB")
    return text, dict(stats, cached=False)


# --- main --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=200_000_000, help="tokens of stand-in text (default 200M)")
    ap.add_argument("--memory", default="2G", help="each Dask worker's --memory, and lmplz's -S (default 2G)")
    ap.add_argument("--order", type=int, default=5, help="n-gram order (default 5)")
    ap.add_argument("--work", default=str(ROOT / "bench" / "work" / "scale"),
                    help="cache and scratch folder (default bench/work/scale)")
    ap.add_argument("--seed", type=int, default=28, help="sampling seed of the stand-in text (default 28)")
    ap.add_argument("--seed-order", type=int, default=5, help="order of giga200's Mixed-text seed LM (default 5)")
    ap.add_argument("--in-memory", action="store_true",
                    help=f"run (b), --scheduler in-memory, even above {IN_MEMORY_MAX_TOKENS // 1_000_000}M tokens")
    ap.add_argument("--no-scaling", action="store_true", help="skip (d), the one-worker runs")
    ap.add_argument("--keep", action="store_true", help="keep the ARPA files")
    ap.add_argument("--poll", type=float, default=0.2, help="seconds between memory and disk samples")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench_scale.json"))
    args = ap.parse_args(argv)
    mem = memory_bytes(args.memory)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    report = {"machine": machine_facts(), "loadavg_start": loadavg(2), "work": str(work),
              "config": {k: v for k, v in vars(args).items() if k not in ("work", "out")}, "memory_bytes": mem}
    t_all = time.perf_counter()

    say("== 1-2. seed LM and stand-in text")
    report["seed_lm"] = seed_lm(work, args.seed_order)
    text, stats = stand_in(work, args.tokens, args.seed, args.seed_order)
    report["text"] = dict(stats, path=str(text))
    tokens = stats["tokens"]

    fsm = fsmlearn_cmd()
    runs: dict[str, dict] = {}
    notes: list[str] = []

    def ours(name: str, *extra: str) -> None:
        out = work / f"{name}.arpa"
        tmp = work / f"tmp-{name}"
        rec = measured(name, fsm + ["lm", "estimate", str(text), "-o", str(out), "--order", str(args.order), *extra],
                       tmp, logs / f"{name}.log", args.poll)
        finish(name, rec, out)

    def finish(name: str, rec: dict, out: Path) -> None:
        if rec["ok"]:
            rec["tokens_per_s"] = tokens / rec["wall_s"]
            rec["ngrams"] = arpa_counts(out)
            rec["arpa_bytes"] = out.stat().st_size
        if out.exists() and not args.keep:
            out.unlink()
        runs[name] = rec

    say("== 3. timed runs")
    dask_args = ("--memory", args.memory, "--tmp")
    ours("dask-2", *dask_args, str(work / "tmp-dask-2"), "--workers", "2")
    if args.tokens <= IN_MEMORY_MAX_TOKENS or args.in_memory:
        ours("in-memory", "--scheduler", "in-memory")
    else:
        note = (f"in-memory: skipped ({args.tokens:,} tokens > {IN_MEMORY_MAX_TOKENS:,}: that path holds every "
                "n-gram in one process; --in-memory runs it)")
        notes.append(note)
        say(f"  {note}")
    out = work / "lmplz.arpa"
    tmp = work / "tmp-lmplz"
    rec = measured("lmplz", [lmplz_path(), "-o", str(args.order), "-S", f"{mem // 1024}K", "-T", str(tmp) + "/",
                             "--discount_fallback", "--skip_symbols"], tmp, logs / "lmplz.log", args.poll,
                   stdin=text, stdout=out)
    finish("lmplz", rec, out)
    if not args.no_scaling:
        ours("dask-1", *dask_args, str(work / "tmp-dask-1"), "--workers", "1")
        ours("dask-1x2", *dask_args, str(work / "tmp-dask-1x2"), "--workers", "1", "--worker-threads", "2")

    # ratios and the sanity line
    peer = runs["lmplz"]
    for name, r in runs.items():
        if name != "lmplz" and r["ok"] and peer["ok"]:
            r["wall_ratio_vs_lmplz"] = r["wall_s"] / peer["wall_s"]
            r["peak_rss_ratio_vs_lmplz"] = r["peak_rss_total_bytes"] / max(1, peer["peak_rss_total_bytes"])
    if runs["dask-2"]["ok"] and runs.get("dask-1", {}).get("ok"):
        report["scaling_speedup_2_over_1_workers"] = runs["dask-1"]["wall_s"] / runs["dask-2"]["wall_s"]
    if runs["dask-2"]["ok"] and runs.get("dask-1x2", {}).get("ok"):
        report["speedup_2x1_over_1x2_threads"] = runs["dask-1x2"]["wall_s"] / runs["dask-2"]["wall_s"]
    counts = {n: r["ngrams"] for n, r in runs.items() if r["ok"]}
    sanity = {}
    ref = counts.get("in-memory")
    for n in ("dask-2", "dask-1", "dask-1x2"):
        if n in counts and ref is not None:
            sanity[f"{n}_equals_in_memory"] = counts[n] == ref
    if "dask-2" in counts and "lmplz" in counts:
        sanity["dask-2_minus_lmplz"] = [a - b for a, b in zip(counts["dask-2"], counts["lmplz"])]
    report["ngram_counts"] = counts
    report["sanity"] = sanity
    report["runs"] = runs
    report["notes"] = notes
    report["bench_process_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    report["loadavg_end"] = loadavg(2)
    report["total_s"] = time.perf_counter() - t_all
    outp = Path(args.out)
    outp.parent.mkdir(parents=True, exist_ok=True)
    outp.write_text(json.dumps(report, indent=2))

    say("\n" + "=" * 110)
    say(f"{tokens:,} tokens ({stats['sentences']:,} sentences, {stats['bytes'] / 1e6:,.1f} MB), order {args.order}, "
        f"--memory {args.memory} per worker (lmplz -S {mem // 1024}K); {report['machine'].get('cores')} cores, "
        f"{report['machine'].get('mem_gib')} GiB")
    say(f"{'run':10s} {'wall s':>8s} {'CPU s':>7s} {'Mtok/s':>7s} {'peak MB':>8s} {'largest MB':>10s} "
        f"{'client MB':>9s} {'tmp MB':>7s} {'spill MB':>8s} {'wall/lmplz':>10s} {'mem/lmplz':>9s}")
    say("(peak MB: the process tree's summed RSS; largest MB: its largest process; client MB: the command's "
        "own process; tmp MB / spill MB: disk under the run's temporary folder / in Dask's spill folders)")
    for name, r in runs.items():
        if not r["ok"]:
            say(f"{name:10s} FAILED (exit {r['rc']}; see {r['log']})")
            continue
        wr = r.get("wall_ratio_vs_lmplz")
        mr = r.get("peak_rss_ratio_vs_lmplz")
        say(f"{name:10s} {r['wall_s']:8.1f} {r['cpu_s']:7.1f} {r['tokens_per_s'] / 1e6:7.3f} "
            f"{r['peak_rss_total_bytes'] / 1e6:8,.0f} {r['peak_rss_single_bytes'] / 1e6:10,.0f} "
            f"{r['peak_rss_command_process_bytes'] / 1e6:9,.0f} {r['peak_tmp_bytes'] / 1e6:7,.1f} "
            f"{r['peak_spill_bytes'] / 1e6:8,.1f} {'' if wr is None else f'{wr:.2f}':>10s} "
            f"{'' if mr is None else f'{mr:.2f}':>9s}")
    for note in notes:
        say(f"note: {note}")
    if "scaling_speedup_2_over_1_workers" in report:
        say(f"scaling: wall time with 1 worker / with 2 workers = {report['scaling_speedup_2_over_1_workers']:.2f}")
    if "speedup_2x1_over_1x2_threads" in report:
        say(f"threads: wall time with 1 worker x 2 threads / with 2 workers x 1 thread = "
            f"{report['speedup_2x1_over_1x2_threads']:.2f}")
    say("n-grams per order: " + "; ".join(f"{n} {'/'.join(f'{x:,}' for x in c)}" for n, c in counts.items()))
    say("sanity: " + (", ".join(f"{k} {v}" for k, v in sanity.items()) or "nothing to compare") +
        (f" (lmplz dropped {stats['unk_tokens']:,} <unk> tokens: --skip_symbols)" if stats["unk_tokens"] else ""))
    say(f"load average {report['loadavg_start']} -> {report['loadavg_end']}; total {report['total_s']:.0f} s; "
        f"wrote {outp}")
    return 0 if all(r["ok"] for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

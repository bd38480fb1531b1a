"""Benchmark: process start-up of every fsmlearn command against KenLM's tools (issue 27).

Reproduces the tables of docs/startup.md, whole processes timed from this
script (``time.perf_counter`` around ``subprocess.Popen`` and ``os.wait4``,
whose ``ru_maxrss`` is that child's own peak resident memory):

1. the floor: ``python -c pass``, ``python -c "import numba"``, ``python -c
   "import fsmlearn.cli.main"``, and a script that imports numba and calls one
   trivial ``@numba.njit(cache=True)`` function defined in a module in a
   temporary folder (its cache filled by the unmeasured first run);
2. every fsmlearn command against its KenLM peer where there is one, on small
   inputs built once into a work folder (``bench/work/startup`` or ``--work``):
   a 3-gram estimated by ``fsmlearn lm estimate`` from the first 6,000
   sentences of Brown-LM's training split, compiled by ``fsmlearn lm compile``
   and by KenLM's ``build_binary`` (probing); the first 10 sentences of
   Brown-LM's test split; the first 200 training sentences with ``<unk>``
   replaced by another word (``lmplz`` refuses ``<unk>`` in a corpus); a
   bigram HMM from ``fsmlearn tag train --data wsj-train``.  Commands that
   read stdin get the input file there (the others name it), stdout and
   stderr go to /dev/null.

Each command runs once unmeasured (page cache, numba's cache), then ``--runs``
times, alternating ours and the peer (A B A B ...; the floor's four commands
round-robin), so that a change of the machine's load hits both sides.  Per
command: median, min and max wall seconds and median peak MiB; ours/peer is
the median of the pairwise ratios.

3. a check: numba's cache files (``*.nbi``, ``*.nbc`` under the package's
   ``__pycache__`` folders, or under ``$NUMBA_CACHE_DIR`` when set), counted
   before and after 20 runs of the README's quick start and 20 of ``lm
   score``: they must not grow (before issue 27 they grew about 2 MB a run).
   The script exits 1 when they grew.

Usage: python bench/bench_startup.py [--work DIR] [--runs N] [--cache-runs N] [--out FILE]
Writes reports/bench_startup.json and prints a table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from machine import loadavg as _loadavg, machine_facts  # noqa: E402 (bench/machine.py)

TRAIN_SENTENCES = 6000      # the model's training text (Brown-LM train, from the first)
TEST_SENTENCES = 10         # the scored / tagged input (Brown-LM test, from the first)
ESTIMATE_SENTENCES = 200    # the estimation input (Brown-LM train, from the first, <unk> replaced)
UNK_REPLACEMENT = "UNK"     # not a word of the lower-cased Brown-LM text
ORDER = 3
SAMPLE_SENTENCES = 5

TRIVIAL_MODULE = """\
import numba


@numba.njit(cache=True)
def plus_one(x):
    return x + 1
"""

TRIVIAL_SCRIPT = """\
import numba
import trivial

trivial.plus_one(1)
"""


def say(msg: str = "") -> None:
    print(msg, flush=True)


def venv_bin() -> Path:
    return Path(sys.executable).parent   # not resolved: a venv's python is a symlink


def fsmlearn_cmd() -> list[str]:
    exe = venv_bin() / "fsmlearn"
    if exe.is_file():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from fsmlearn.cli.main import main; sys.exit(main())"]


def kenlm_tool(name: str) -> str:
    """KenLM's program ``name``: beside sys.executable (make install puts it there), else on $PATH
    (the search of fsmlearn.lm.tools.find_tool, which this process does not import: see run_once)."""
    cand = venv_bin() / name
    if cand.is_file() and os.access(cand, os.X_OK):
        return str(cand)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"KenLM's {name} was found neither in {venv_bin()} nor on $PATH (make install builds it)")
    return found


def readme_quick_start() -> str:
    """The README's first python block (as tests/readme_test.py extracts it)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    if not blocks:
        raise SystemExit("README.md has no ```python block")
    return blocks[0]


# --------------------------------------------------------------------------- running children

class Cmd:
    """One command line to time: argv, stdin file (or None: /dev/null), working folder."""

    def __init__(self, label: str, argv: list[str], stdin: Path | None = None, cwd: Path | None = None,
                 shown: str | None = None):
        self.label, self.argv, self.stdin, self.cwd = label, [str(a) for a in argv], stdin, cwd
        self.shown = shown   # how the report shows argv, when not as it is

    def shell(self) -> str:
        s = self.shown or " ".join(self.argv)
        return s + (f" < {self.stdin}" if self.stdin else "")


def parent_peak_rss() -> int:
    """This process's own peak RSS in bytes: the floor of every child's figure (see run_once)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_once(cmd: Cmd) -> tuple[float, int]:
    """Run a command once: (wall seconds, peak RSS in bytes of that child alone).

    Linux keeps a process's high-water RSS across exec, and a child starts
    from its parent's (fork and vfork alike), so ``ru_maxrss`` reads at least
    this process's own peak RSS: this script therefore imports neither numpy
    nor fsmlearn (the inputs are built by child processes) and stays at about
    16 MiB; the report records the figure (``parent_peak_mib``).
    """
    with open(cmd.stdin if cmd.stdin else os.devnull, "rb") as fin:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd.argv, stdin=fin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=cmd.cwd)
        _, status, ru = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        with open(cmd.stdin if cmd.stdin else os.devnull, "rb") as fin:
            r = subprocess.run(cmd.argv, stdin=fin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               cwd=cmd.cwd)
        raise SystemExit(f"command failed ({proc.returncode}): {cmd.shell()}\n"
                         f"{r.stderr.decode(errors='replace')[-2000:]}")
    _CHILD_CPU[0] += ru.ru_utime + ru.ru_stime
    return dt, ru.ru_maxrss * 1024   # ru_maxrss is in KiB on Linux


_CHILD_CPU = [0.0]   # CPU seconds of every measured child (user + system), for other_cpu_s


def busy_cpu_s() -> float | None:
    """CPU seconds spent by the whole machine so far (all cores, /proc/stat: not idle, not iowait)."""
    try:
        f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    v = [int(x) for x in f]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """What other processes ran while a stretch of measurements ran: machine's busy CPU seconds
    (/proc/stat) less those of the measured children and of this process, per wall second (a
    reading of 0 is a quiet machine; 1 is one core taken by others on average)."""

    def __init__(self):
        self.t, self.busy, self.child, self.me = time.perf_counter(), busy_cpu_s(), _CHILD_CPU[0], self_cpu_s()

    def cores(self) -> float | None:
        busy = busy_cpu_s()
        if busy is None or self.busy is None:
            return None
        dt = time.perf_counter() - self.t
        other = (busy - self.busy) - (_CHILD_CPU[0] - self.child) - (self_cpu_s() - self.me)
        return round(max(other, 0.0) / dt, 3) if dt > 0 else None


def self_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def time_round_robin(cmds: list[Cmd], runs: int) -> list[dict]:
    """Each command once unmeasured, then ``runs`` rounds of all of them in turn."""
    for c in cmds:
        run_once(c)
    load = OtherLoad()
    walls = [[] for _ in cmds]
    rss = [[] for _ in cmds]
    for _ in range(runs):
        for i, c in enumerate(cmds):
            dt, peak = run_once(c)
            walls[i].append(dt)
            rss[i].append(peak)
    other = load.cores()
    return [dict(summary(c, w, r), other_load_cores=other) for c, w, r in zip(cmds, walls, rss)]


def summary(cmd: Cmd, walls: list[float], rss: list[int]) -> dict:
    return {"label": cmd.label, "command": cmd.shell(), "wall_s": walls,
            "median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "peak_mib": [r / 2**20 for r in rss], "median_peak_mib": statistics.median(rss) / 2**20,
            "max_peak_mib": max(rss) / 2**20}


# --------------------------------------------------------------------------- inputs

def make_once(name: str, out: Path, fn) -> None:
    """Build ``out`` with fn(tmp_path) unless it exists; fn writes tmp_path, renamed into place."""
    if out.exists():
        say(f"  {name}: cached ({out.name})")
        return
    tmp = out.with_name(out.name + ".part")
    if tmp.is_dir():
        shutil.rmtree(tmp)
    elif tmp.exists():
        tmp.unlink()
    t = time.perf_counter()
    fn(tmp)
    os.replace(tmp, out)
    say(f"  {name}: {time.perf_counter() - t:.1f} s ({out.name})")


WRITE_SENTENCES = """\
import sys
from fsmlearn.data.datasets import UNK, iter_sentences
split, n, replace, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
k = 0
with open(out, "w", encoding="utf-8") as f:
    for sent in iter_sentences("brown-lm", split):
        if replace:
            sent = [replace if w == UNK else w for w in sent]
        f.write(" ".join(sent) + "\\n")
        k += 1
        if k == n:
            break
if k < n:
    sys.exit(f"brown-lm {split} has only {k} sentences, {n} wanted")
"""


def write_sentences(path: Path, split: str, n: int, replace_unk: str = "") -> None:
    """The first n sentences of a Brown-LM split, one a line (in a child process: see run_once)."""
    check_call([sys.executable, "-c", WRITE_SENTENCES, split, n, replace_unk, path])


def check_call(argv: list) -> None:
    r = subprocess.run([str(a) for a in argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(map(str, argv))}\n"
                         f"{r.stderr.decode(errors='replace')[-2000:]}")


def arpa_counts(path: Path) -> list[int]:
    counts = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"ngram\s+(\d+)\s*=\s*(\d+)", line.strip())
            if m:
                counts.append(int(m.group(2)))
            elif counts and line.startswith("\\"):
                break
    return counts


def build_inputs(work: Path) -> dict:
    fsm = fsmlearn_cmd()
    f = {"train": work / f"brown-lm-train{TRAIN_SENTENCES}.txt",
         "test": work / f"brown-lm-test{TEST_SENTENCES}.txt",
         "est": work / f"brown-lm-train{ESTIMATE_SENTENCES}-no-unk.txt",
         "arpa": work / f"brown-lm-train{TRAIN_SENTENCES}.{ORDER}gram.arpa",
         "fsm": work / f"brown-lm-train{TRAIN_SENTENCES}.{ORDER}gram.fsm",
         "klm": work / f"brown-lm-train{TRAIN_SENTENCES}.{ORDER}gram.klm",
         "hmm": work / "wsj-train.bigram.hmm"}
    make_once(f"first {TRAIN_SENTENCES:,} sentences of brown-lm train", f["train"],
              lambda p: write_sentences(p, "train", TRAIN_SENTENCES))
    make_once(f"first {TEST_SENTENCES} sentences of brown-lm test", f["test"],
              lambda p: write_sentences(p, "test", TEST_SENTENCES))
    make_once(f"first {ESTIMATE_SENTENCES} sentences of brown-lm train, <unk> -> {UNK_REPLACEMENT}", f["est"],
              lambda p: write_sentences(p, "train", ESTIMATE_SENTENCES, replace_unk=UNK_REPLACEMENT))
    make_once(f"fsmlearn lm estimate --order {ORDER}", f["arpa"],
              lambda p: check_call(fsm + ["lm", "estimate", "-q", "--order", ORDER, f["train"], "-o", p]))
    make_once("fsmlearn lm compile", f["fsm"], lambda p: check_call(fsm + ["lm", "compile", "-q", f["arpa"], "-o", p]))
    make_once("build_binary", f["klm"], lambda p: check_call([kenlm_tool("build_binary"), f["arpa"], p]))
    make_once("fsmlearn tag train --data wsj-train (bigram)", f["hmm"],
              lambda p: check_call(fsm + ["tag", "train", "-q", "--data", "wsj-train", "-o", p]))
    return f


# --------------------------------------------------------------------------- numba's cache

def numba_cache_root() -> Path:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    spec = importlib.util.find_spec("fsmlearn")
    if spec is None or not spec.submodule_search_locations:
        return ROOT / "fsmlearn"
    return Path(list(spec.submodule_search_locations)[0])


def numba_cache_files(root: Path) -> dict[str, tuple[int, int]]:
    """{path: (bytes, mtime_ns)} of numba's index (.nbi) and data (.nbc) files under root."""
    out = {}
    for pat in ("*.nbi", "*.nbc"):
        for p in root.rglob(pat):
            if os.environ.get("NUMBA_CACHE_DIR") or "__pycache__" in p.parts:
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


def cache_check(cmds: list[Cmd], runs: int) -> dict:
    root = numba_cache_root()
    before = numba_cache_files(root)
    t = time.perf_counter()
    for c in cmds:
        for _ in range(runs):
            run_once(c)
    after = numba_cache_files(root)
    nb = sum(s for s, _ in before.values())
    na = sum(s for s, _ in after.values())
    return {"root": str(root), "commands": [c.shell() for c in cmds], "runs_each": runs,
            "seconds": time.perf_counter() - t,
            "files_before": len(before), "bytes_before": nb, "files_after": len(after), "bytes_after": na,
            "files_added": sorted(set(after) - set(before)), "files_removed": sorted(set(before) - set(after)),
            "files_rewritten": sorted(p for p in set(before) & set(after) if before[p][1] != after[p][1]),
            "grew": na > nb or len(after) > len(before)}


# --------------------------------------------------------------------------- the machine

def loadavg() -> list[float]:
    return _loadavg(2)


def machine_info() -> dict:
    info = machine_facts()
    r = subprocess.run([sys.executable, "-c", "import numpy, numba; print(numpy.__version__, numba.__version__)"],
                       capture_output=True, text=True)
    if r.returncode == 0 and len(r.stdout.split()) == 2:
        info["numpy"], info["numba"] = r.stdout.split()
    info["env"] = {k: v for k, v in os.environ.items()
                   if k.startswith(("NUMBA_", "OPENBLAS_", "OMP_", "MKL_")) or k == "FSMLEARN_DATA"}
    return info


# --------------------------------------------------------------------------- the tables

def fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_range(r: dict) -> str:
    return f"{fmt_s(r['median_s'])} ({fmt_s(r['min_s'])}-{fmt_s(r['max_s'])})"


def fmt_load(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f}"


def fmt_ratio(x: float) -> str:
    return f"{x:.0f}x" if x >= 100 else f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=str(ROOT / "bench" / "work" / "startup"),
                    help="folder of the inputs, built once (default bench/work/startup)")
    ap.add_argument("--runs", type=int, default=9, help="measured runs of each command (default 9)")
    ap.add_argument("--cache-runs", type=int, default=20,
                    help="runs of the quick start and of lm score in the cache check (default 20; 0 skips it)")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench_startup.json"))
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    outdir = work / "out"    # what the timed commands write
    outdir.mkdir(exist_ok=True)
    py = sys.executable
    fsm = fsmlearn_cmd()
    query, lmplz, build_binary = kenlm_tool("query"), kenlm_tool("lmplz"), kenlm_tool("build_binary")
    report = {"machine": machine_info(), "loadavg_start": loadavg(), "work": str(work),
              "config": {"runs": args.runs, "cache_runs": args.cache_runs}}
    t_all = time.perf_counter()

    say(f"== inputs (in {work})")
    f = build_inputs(work)
    counts = arpa_counts(f["arpa"])
    report["inputs"] = {k: {"file": p.name, "bytes": p.stat().st_size} for k, p in f.items()}
    report["inputs"]["arpa"]["ngrams"] = counts
    say(f"  model: {ORDER}-gram of {sum(counts):,} n-grams (" + " / ".join(f"{n:,}" for n in counts) +
        f"); compiled {f['fsm'].stat().st_size / 1e6:.1f} MB, KenLM binary {f['klm'].stat().st_size / 1e6:.1f} MB; "
        f"HMM {f['hmm'].stat().st_size / 1e6:.1f} MB")

    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        (tmp / "trivial.py").write_text(TRIVIAL_MODULE)
        (tmp / "script.py").write_text(TRIVIAL_SCRIPT)
        qs_dir = tmp / "quickstart"   # the quick start runs in a folder of its own, as tests/readme_test.py does
        qs_dir.mkdir()

        load_all = OtherLoad()
        say(f"== the floor ({args.runs} runs each after one unmeasured, round-robin)")
        floor_cmds = [Cmd("python -c pass", [py, "-c", "pass"], cwd=work),
                      Cmd('python -c "import numba"', [py, "-c", "import numba"], cwd=work),
                      Cmd('python -c "import fsmlearn.cli.main"', [py, "-c", "import fsmlearn.cli.main"], cwd=work),
                      Cmd("import numba + call one trivial cached @njit", [py, "script.py"], cwd=tmp)]
        floor = time_round_robin(floor_cmds, args.runs)
        for r in floor:
            say(f"  {r['label']:48s} {fmt_range(r):>24s} s  {r['median_peak_mib']:6.0f} MiB")
        report["floor"] = floor

        quick = Cmd("the README's quick start", [py, "-c", readme_quick_start()], cwd=qs_dir,
                    shown=f"{py} -c <README.md's first python block>")
        score = Cmd(f"lm score {TEST_SENTENCES} sentences", fsm + ["lm", "score", f["fsm"]], f["test"], work)
        rows = [  # (ours, peer or None)
            (Cmd("fsmlearn --version", fsm + ["--version"], cwd=work), None),
            (quick, None),
            (score, Cmd("query -v sentence (binary)", [query, "-v", "sentence", f["klm"]], f["test"], work)),
            (Cmd(f"lm query {TEST_SENTENCES} sentences", fsm + ["lm", "query", f["fsm"]], f["test"], work),
             Cmd("query (binary)", [query, f["klm"]], f["test"], work)),
            (Cmd(f"lm ppl {TEST_SENTENCES} sentences", fsm + ["lm", "ppl", f["fsm"], f["test"]], cwd=work),
             Cmd("query -v summary (binary)", [query, "-v", "summary", f["klm"]], f["test"], work)),
            (Cmd(f"lm compile the {sum(counts) / 1e3:.0f}k-n-gram ARPA",
                 fsm + ["lm", "compile", f["arpa"], "-o", outdir / "compiled.fsm"], cwd=work),
             Cmd("build_binary", [build_binary, f["arpa"], outdir / "compiled.klm"], cwd=work)),
            (Cmd(f"lm estimate {ESTIMATE_SENTENCES} sentences, order {ORDER}",
                 fsm + ["lm", "estimate", "--order", ORDER, f["est"], "-o", outdir / "estimated.arpa"], cwd=work),
             Cmd(f"lmplz -o {ORDER} -S 1G", [lmplz, "-o", ORDER, "--discount_fallback", "-S", "1G"], f["est"], work)),
            (Cmd(f"lm estimate {ESTIMATE_SENTENCES} sentences, order {ORDER}",
                 fsm + ["lm", "estimate", "--order", ORDER, f["est"], "-o", outdir / "estimated.arpa"], cwd=work),
             Cmd(f"lmplz -o {ORDER} (default -S 80%)", [lmplz, "-o", ORDER, "--discount_fallback"], f["est"], work)),
            (Cmd(f"lm count {ESTIMATE_SENTENCES} sentences, order {ORDER}",
                 fsm + ["lm", "count", "--order", ORDER, f["est"], "-o", outdir / "counts"], cwd=work), None),
            (Cmd(f"lm sample {SAMPLE_SENTENCES} sentences",
                 fsm + ["lm", "sample", f["fsm"], "--sentences", SAMPLE_SENTENCES], cwd=work), None),
            (Cmd(f"lm check the {sum(counts) / 1e3:.0f}k-n-gram ARPA", fsm + ["lm", "check", f["arpa"]], cwd=work),
             None),
            (Cmd(f"tag tag {TEST_SENTENCES} sentences (bigram HMM of WSJ-train)", fsm + ["tag", "tag", f["hmm"]],
                 f["test"], work), None),
            (Cmd("tag train --data wsj-train",
                 fsm + ["tag", "train", "--data", "wsj-train", "-o", outdir / "trained.hmm"], cwd=work), None),
        ]

        say(f"== every command against KenLM's tools ({args.runs} runs each after one unmeasured; "
            f"ours and the peer alternate)")
        commands = []
        for ours, peer in rows:
            res = time_round_robin([ours] + ([peer] if peer else []), args.runs)
            rec = {"ours": res[0]}
            line = f"  {ours.label:48s} {fmt_range(res[0]):>24s} s  {res[0]['median_peak_mib']:6.0f} MiB"
            if peer:
                rec["peer"] = res[1]
                rec["ours_over_peer"] = statistics.median(a / b for a, b in zip(res[0]["wall_s"], res[1]["wall_s"]))
                line += (f" | {peer.label:28s} {fmt_range(res[1]):>24s} s  {res[1]['median_peak_mib']:6.0f} MiB"
                         f" | {fmt_ratio(rec['ours_over_peer'])}")
            say(line)
            commands.append(rec)
        report["commands"] = commands
        report["other_load_cores"] = load_all.cores()

        if args.cache_runs > 0:
            say(f"== numba's cache before and after {args.cache_runs} runs of the quick start and "
                f"{args.cache_runs} of lm score")
            report["cache_check"] = cache_check([quick, score], args.cache_runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    report["parent_peak_mib"] = parent_peak_rss() / 2**20
    report["loadavg_end"] = loadavg()
    report["total_s"] = time.perf_counter() - t_all
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))

    m = report["machine"]
    say("\n" + "=" * 100)
    say(f"{m.get('cpu', '?')}, {m['cores']} cores, {m.get('mem_gib', '?')} GiB; python {m['python']}, "
        f"numba {m.get('numba', '?')}; load average {report['loadavg_start']} -> {report['loadavg_end']}")
    say(f"medians of {args.runs} runs (min-max), wall seconds; peak resident memory of the child (MiB, median; "
        f"a figure under this script's own {report['parent_peak_mib']:.0f} MiB reads as that); 'others': "
        f"cores that other processes kept busy on average while a row ran (/proc/stat; 0 is a quiet machine; "
        f"{report['other_load_cores']} over all rows)\n")
    say(f"{'the floor':52s} {'wall s':>24s} {'MiB':>6s} {'others':>6s}")
    for r in floor:
        say(f"{r['label']:52s} {fmt_range(r):>24s} {r['median_peak_mib']:6.0f} {fmt_load(r['other_load_cores']):>6s}")
    say(f"\n{'command':52s} {'fsmlearn s':>24s} {'MiB':>6s} {'others':>6s}   {'KenLM':28s} {'KenLM s':>24s} "
        f"{'MiB':>6s} {'ours/peer':>9s}")
    for rec in commands:
        o = rec["ours"]
        line = f"{o['label']:52s} {fmt_range(o):>24s} {o['median_peak_mib']:6.0f} {fmt_load(o['other_load_cores']):>6s}"
        if "peer" in rec:
            p = rec["peer"]
            line += (f"   {p['label']:28s} {fmt_range(p):>24s} {p['median_peak_mib']:6.0f} "
                     f"{fmt_ratio(rec['ours_over_peer']):>9s}")
        say(line)
    status = 0
    if "cache_check" in report:
        c = report["cache_check"]
        say(f"\nnumba's cache ({c['root']}): {c['files_before']:,} files, {c['bytes_before']:,} bytes before; "
            f"{c['files_after']:,} files, {c['bytes_after']:,} bytes after {c['runs_each']} runs of the quick start "
            f"and {c['runs_each']} of lm score ({len(c['files_added'])} added, {len(c['files_removed'])} removed, "
            f"{len(c['files_rewritten'])} rewritten): " + ("GREW" if c["grew"] else "did not grow"))
        if c["grew"]:
            status = 1
    say(f"wrote {out} ({report['total_s']:.0f} s in all)")
    return status


if __name__ == "__main__":
    sys.exit(main())

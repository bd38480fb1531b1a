r"""Benchmark peer (issue 18): the TRF authors' C++ toolkit (SPMILM, Bin Wang) on Brown-LM.

Runs the toolkit's SA trainer (``trf-satrain``) on Brown-LM with the issue's setting --
word and class 1-3-gram features (``w[1:3]`` and ``c[1:3]`` in its feature-type file),
200 word classes, 300 sampled sentences per SA iteration, 2 threads -- and reports its
sampling throughput (sentences per second) and seconds per SA iteration, so that our
trainer can be compared with it on the same machine.

Steps (the data files are cached in the work folder and rebuilt only when missing):

1. the Brown-LM splits through fsmlearn (``load_dataset("brown-lm", split)``; vocabulary
   ``brown_lm_vocabulary() + ["<unk>"]``, ids 0 .. 10,000, out-of-vocabulary words already
   ``<unk>``; empty sentences dropped) in the toolkit's formats: ``vocab.list``
   (``id<TAB>word``) and ``train.id`` / ``valid.id`` / ``test.id`` (one sentence of ids per
   line, no boundary markers);
2. 200 word classes, written as ``vocab_c200.list`` (``id<TAB>word<TAB>class=c``, the
   format its ``tools/trf.py`` writes).  By default they come from
   ``fsmlearn.trf.classes.exchange_clusters(train, 10001, 200, max_passes=50)`` (as
   ``fsmlearn trf lm`` makes them; about 5 s).  The toolkit has its own clustering
   (``word-cluster -txt train.id -num 200 -write ... -thread 2``, ``--clustering toolkit``)
   but it is unusable here: it copies its whole 4M-entry count buffer to every thread for
   every pair of words, and ran at about 6 words/s on this 2-core machine, i.e. about 28
   minutes per pass over the 10,001 words with up to 100 passes;
3. the feature-type file ``w1-3_c1-3.fs`` (two lines: ``w[1:3]`` and ``c[1:3]``);
4. ``trf-satrain -vocab vocab_c200.list -train train.id -valid valid.id -test test.id
   -feat w1-3_c1-3.fs -order 3 -len 93 -iter N -mini-batch 300 -thread 2 -t0 2000
   -gamma-lambda 3000,0 -gamma-zeta 0,0.6 -L2 4e-5 -print-per-iter N -write ... -log ...``
   (the learning rates of the authors' ``egs/ptb_wsj0/run_trf.py``).  ``-len``: the
   toolkit's length prior is the training length histogram, lengths >= -len pooled, with
   no smoothing, so a valid or test sentence of a length below -len that training lacks
   gets log pi = -inf.  Its default (``-len 0``: the longest sentence, 180) gives infinite
   valid and test -LL on Brown-LM (test has lengths 94, 120, 124, 144, valid 103 and 172,
   that training lacks); the default here is the largest L <= 100 with every length
   1 .. L in training, 93 (``--max-len`` overrides it; ``--max-len 0`` is the toolkit's).

Timing: the toolkit's log line ``t=N epoch=... time=Xm`` gives the minutes spent in the
SA loop from its start up to the end of iteration N's sampling and gradient (its clock
starts after feature extraction and the empirical expectations and variances, so setup
is excluded).  With ``-print-per-iter N`` that line is written once, at the last
iteration, and the evaluation it triggers (the log-likelihood of train, valid and test,
the ``ExValues``) is outside the timed span.  Seconds per iteration = 60 X / N;
sentences per second = 300 N / (60 X).  The log's per-iteration line ``class-propose
acc-rate=..(a/b)`` gives b = the tokens sampled in that iteration (one Gibbs sweep per
sample), so the mean sampled length and tokens per second are reported too.  The
ExValues are the negative mean log-likelihoods per sentence under the SA-estimated zeta;
perplexity = exp(NLL * S / (S + W)) (S sentences, W words: ``</s>`` counted, as the
toolkit's ``wb.LL2PPL``).  The trainer's peak resident memory and CPU time are
``os.wait4``'s figures for that child; the 1-minute load average before and after is
recorded, since the 2 cores are shared.

Caveat (seen on every run here): with 2 threads the toolkit runs 2 Markov chains (one
per thread, 150 samples each per iteration), and within about 10 iterations both
collapse to sentences of 1-3 words (length-jump and class acceptance near 0, valid and
test -LL in the thousands, perplexity astronomical).  Its seconds per iteration then
fall to a floor of about 0.11-0.17 s, set by an O(#features) loop per sample (each of
the 300 samples adds a dense 1.19M-entry count vector and its square into the
per-thread totals), and sentences per second rise accordingly: the figures of a run
longer than a few iterations measure a degenerate sampler, not the cost of sampling
Brown-LM-like sentences.  Compare per sampled token (and look at the mean sampled
length) rather than per sentence.

Building the peer (what was run on this machine: g++ 12.2 with OpenMP, nothing else;
SRILM, RNNLM and Torch, which its ``install.sh`` also builds, are not needed).  The
stored snapshot lacks its large data blobs (SRILM tarball, PTB text, n-best lists), so
the clone's checkout fails; the TRF sources are complete and are restored by path.  Two
functions fall off their end without a return (``trf::omp_rand`` in
``src/TRF/trf-def.cpp``, ``qsort_compare_double`` in ``src/TRF/trf-sa-train.cpp``;
g++ warns -Wreturn-type), and with g++ >= 8 at -O3 ``trf-satrain`` then segfaults in
``omp_rand`` at start-up, so a ``return 0;`` is added at the end of each (the files have
CRLF line ends)::

    git clone <the fetched mirror of github.com/wbengine/SPMILM> /work/peers/SPMILM
    cd /work/peers/SPMILM && git restore --source=HEAD -- tools/trf
    cd tools/trf
    perl -0pi -e 's/(\t\treturn rand\(\);\r\n#endif\r\n)(\t\}\r\n)/$1\t\treturn 0;\r\n$2/' src/TRF/trf-def.cpp
    perl -0pi -e 's/(\tif \(\*\(double\*\)a > \*\(double\*\)b\) return 1;\r\n)/$1\t\treturn 0;\r\n/' src/TRF/trf-sa-train.cpp
    nice make -j2 all    # -> bin/trf-satrain bin/trf-mltrain bin/trf bin/word-cluster (about 1 min)

(commit 5e43a1f "update the trf codes"; after the two perl lines the build has no
-Wreturn-type warning left).

Usage::

    python bench/trf_peer.py --spmilm /work/peers/SPMILM [--iterations 40] [--work DIR]
        [--max-len L] [--clustering fsmlearn|toolkit] [--threads 2]

``--spmilm`` (or ``$FSMLEARN_SPMILM``) may name the repository root, ``tools/trf`` or its
``bin`` folder.  The work folder is ``bench/work/trf-peer`` or ``$FSMLEARN_BENCH_DIR/trf-peer``.
Writes ``<work>/result-<run name>.json`` and prints the figures.  Other benchmarks import
:func:`run_peer`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

SAMPLES = 300
THREADS = 2
CLASSES = 200
FEATURES = "w[1:3]\nc[1:3]\n"
FEATURE_FILE = "w1-3_c1-3.fs"
# learning rates of the authors' egs/ptb_wsj0/run_trf.py
T0 = 2000
GAMMA_LAMBDA = "3000,0"
GAMMA_ZETA = "0,0.6"
L2 = 4e-5

_TIME_RE = re.compile(r"t=(\d+)\s+epoch=\S+\s+time=([0-9.eE+-]+)m")
_EXV_RE = re.compile(r"ExValues=\{([^}]*)\}")
_PROPOSE_RE = re.compile(r"len-jump acc-rate=\S*\((\d+)/(\d+)\)\s+class-propose acc-rate=\S*\((\d+)/(\d+)\)")


class PeerError(RuntimeError):
    """The toolkit is missing, failed, or wrote a log this script cannot read."""


def default_work_dir() -> Path:
    base = os.environ.get("FSMLEARN_BENCH_DIR")
    if base:
        return Path(base) / "trf-peer"
    return Path(__file__).resolve().parent / "work" / "trf-peer"


def find_bin(spmilm_dir) -> Path:
    """The folder holding ``trf-satrain`` and ``word-cluster`` under ``spmilm_dir``."""
    if not spmilm_dir:
        raise PeerError("the SPMILM toolkit is not given: pass --spmilm DIR or set FSMLEARN_SPMILM "
                        "(build it as the docstring of bench/trf_peer.py says)")
    root = Path(spmilm_dir).expanduser()
    for cand in (root, root / "bin", root / "tools" / "trf" / "bin"):
        if (cand / "trf-satrain").is_file() and (cand / "word-cluster").is_file():
            return cand.resolve()
    raise PeerError(f"no trf-satrain and word-cluster under {root} (looked in ., bin, tools/trf/bin); "
                    "build the toolkit first (cd tools/trf && make all)")


def _write_lines(path: Path, lines) -> None:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "w") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(tmp, path)


def prepare_data(work: Path, progress=print) -> dict:
    """Brown-LM in the toolkit's formats (cached): vocab.list and {train,valid,test}.id."""
    from fsmlearn.data.datasets import brown_lm_vocabulary, load_dataset
    work.mkdir(parents=True, exist_ok=True)
    paths = {"vocab": work / "vocab.list"}
    for split in ("train", "valid", "test"):
        paths[split] = work / f"{split}.id"
    stats_path = work / "data.json"
    if all(p.is_file() for p in paths.values()) and stats_path.is_file():
        return {**{k: str(v) for k, v in paths.items()}, **json.loads(stats_path.read_text())}
    vocab = list(brown_lm_vocabulary()) + ["<unk>"]
    idx = {w: i for i, w in enumerate(vocab)}
    stats = {"vocab_size": len(vocab)}
    for split in ("train", "valid", "test"):
        sents = [s for s in load_dataset("brown-lm", split) if s]
        _write_lines(paths[split], (" ".join(str(idx[w]) for w in s) for s in sents))
        stats[f"{split}_sentences"] = len(sents)
        stats[f"{split}_words"] = sum(len(s) for s in sents)
        stats[f"{split}_longest"] = max(len(s) for s in sents)
    _write_lines(paths["vocab"], (f"{i}\t{w}" for i, w in enumerate(vocab)))
    stats_path.write_text(json.dumps(stats, indent=1))
    progress(f"Brown-LM written to {work}: {stats['train_sentences']:,} / {stats['valid_sentences']:,} / "
             f"{stats['test_sentences']:,} sentences, vocabulary {len(vocab):,}")
    return {**{k: str(v) for k, v in paths.items()}, **stats}


def _run_logged(cmd: list, out_path: Path, usage_out: dict | None = None) -> tuple[int, float, float]:
    """Run cmd with stdout+stderr to out_path; (returncode, wall seconds, peak RSS MB).

    usage_out, if given, receives "cpu_seconds" (the child's user + system time).
    """
    t = time.perf_counter()
    with open(out_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=out_path.parent)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if usage_out is not None:
        usage_out["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    return proc.returncode, time.perf_counter() - t, usage.ru_maxrss / 1024


def _toolkit_classes(work: Path, bin_dir: Path, data: dict, threads: int, progress) -> dict:
    """{word id: class} by the toolkit's word-cluster (hours on Brown-LM: see the docstring)."""
    res = work / f"train.id_c{CLASSES}.res"
    if not res.is_file():
        part = work / f"train.id_c{CLASSES}.res.part"
        cmd = [str(bin_dir / "word-cluster"), "-txt", data["train"], "-num", str(CLASSES),
               "-write", str(part), "-thread", str(threads)]
        progress("clustering: " + shlex.join(cmd))
        rc, secs, rss = _run_logged(cmd, work / "word-cluster.out")
        if not part.is_file():
            raise PeerError(f"word-cluster failed (exit {rc}); see {work / 'word-cluster.out'}")
        os.replace(part, res)
        progress(f"word-cluster: {secs:.0f} s, peak RSS {rss:.0f} MB")
    w2c = {}
    for line in res.read_text().split("\n"):
        a = line.split()
        if len(a) >= 2:
            w2c[int(a[0])] = int(a[1])
    return w2c


def _fsmlearn_classes(data: dict, progress) -> dict:
    """{word id: class} by fsmlearn's exchange clustering (50 passes at most, as fsmlearn trf lm)."""
    import numpy as np
    from fsmlearn.trf.classes import exchange_clusters
    t = time.perf_counter()
    with open(data["train"]) as f:
        sents = [np.array(line.split(), dtype=np.int32) for line in f]
    classes, info = exchange_clusters(sents, data["vocab_size"], CLASSES, max_passes=50)
    progress(f"{CLASSES} classes by fsmlearn.trf.classes.exchange_clusters: {len(info.criterion)} passes, "
             f"{time.perf_counter() - t:.1f} s")
    return {i: int(c) for i, c in enumerate(classes)}


def prepare_classes(work: Path, bin_dir: Path, data: dict, threads: int = THREADS, clustering: str = "fsmlearn",
                    progress=print) -> Path:
    """vocab_c200[-toolkit].list: the vocabulary with a class per word (cached).

    clustering: "fsmlearn" (exchange_clusters) or "toolkit" (its word-cluster; hours).
    """
    if clustering not in ("fsmlearn", "toolkit"):
        raise PeerError(f"clustering = {clustering!r}: expected 'fsmlearn' or 'toolkit'")
    suffix = "" if clustering == "fsmlearn" else "-toolkit"
    out = work / f"vocab_c{CLASSES}{suffix}.list"
    if out.is_file():
        return out
    if clustering == "toolkit":
        w2c = _toolkit_classes(work, bin_dir, data, threads, progress)
    else:
        w2c = _fsmlearn_classes(data, progress)
    lines, used = [], set()
    for line in Path(data["vocab"]).read_text().split("\n"):
        a = line.split("\t")
        if len(a) == 2:
            c = w2c.get(int(a[0]), 0)
            used.add(c)
            lines.append(f"{a[0]}\t{a[1]}\tclass={c}")
    if used != set(range(CLASSES)):
        raise PeerError(f"the clustering left {CLASSES - len(used)} of {CLASSES} classes empty")
    _write_lines(out, lines)
    return out


def parse_log(text: str) -> dict:
    """The last ``t=.. time=..m`` line and the last ExValues of a trf-satrain log."""
    times = _TIME_RE.findall(text)
    if not times:
        raise PeerError("no 't=N epoch=... time=Xm' line in the trf-satrain log")
    t, minutes = times[-1]
    exv = _EXV_RE.findall(text)
    values = [float(x) for x in exv[-1].split()] if exv else []
    # one line per iteration; the class proposals are one per position of every sample
    # (MarkovMove sweeps the sentence once per sample), i.e. the tokens sampled
    tokens = [int(m[3]) for m in _PROPOSE_RE.findall(text)]
    return {"iteration": int(t), "minutes": float(minutes), "exvalues": values, "tokens": tokens}


def _ppl(nll_per_sentence: float, sentences: int, words: int) -> float:
    try:
        return math.exp(nll_per_sentence * sentences / (sentences + words))
    except OverflowError:
        return math.inf


def auto_max_len(train_path, limit: int = 100) -> int:
    """The largest L <= limit such that every length 1 .. L occurs in the training file.

    The toolkit's length prior is the training length histogram with lengths >= -len pooled
    and no smoothing: a valid or test sentence whose length (below -len) never occurs in
    training gets log pi = -inf, and its -LL and perplexity blow up (Brown-LM: test has
    lengths 94, 120, 124, 144 and valid 103, 172 that training lacks; 1 .. 93 all occur).
    """
    seen = set()
    with open(train_path) as f:
        for line in f:
            seen.add(len(line.split()))
    L = 0
    while L < limit and (L + 1) in seen:
        L += 1
    return max(L, 1)


def run_peer(iterations: int = 40, work_dir=None, spmilm_dir=None, *, threads: int = THREADS,
             samples: int = SAMPLES, max_len: int | None = None, clustering: str = "fsmlearn", progress=print) -> dict:
    """Train the toolkit's TRF for ``iterations`` SA iterations and time it.

    Args:
        iterations: SA iterations (>= 1).
        work_dir: the work folder (None: :func:`default_work_dir`).
        spmilm_dir: the built toolkit (None: ``$FSMLEARN_SPMILM``).
        threads, samples: the trainer's -thread and -mini-batch.
        max_len: its -len (None: :func:`auto_max_len`, 93 on Brown-LM; 0: the toolkit's default,
            the longest sentence of train/valid/test, which leaves valid/test -LL infinite).
        clustering: the 200 classes by "fsmlearn" (exchange_clusters) or "toolkit" (word-cluster).
        progress: callable(str) for progress lines.

    Returns:
        dict with "sentences_per_second", "seconds_per_iteration", "iterations", "threads",
        "command" (the trainer's command line, str) and more: "samples", "train_seconds"
        (the log's time), "wall_seconds" (the whole process), "cpu_seconds", "peak_rss_mb",
        "load_average_1min" (before, after), "sampled_tokens_per_iteration",
        "mean_sampled_length", "tokens_per_second", "exvalues" (-LL per sentence of train,
        valid, test), "valid_perplexity", "test_perplexity", "max_len", "clustering", "log".

    Raises:
        PeerError: the toolkit is missing or failed.
    """
    if iterations < 1:
        raise PeerError(f"iterations = {iterations} must be >= 1")
    bin_dir = find_bin(spmilm_dir if spmilm_dir else os.environ.get("FSMLEARN_SPMILM"))
    work = Path(work_dir) if work_dir else default_work_dir()
    work = work.resolve()
    data = prepare_data(work, progress)
    if max_len is None:
        max_len = auto_max_len(data["train"])
    vocab_c = prepare_classes(work, bin_dir, data, threads, clustering, progress)
    feat = work / FEATURE_FILE
    if not feat.is_file() or feat.read_text() != FEATURES:
        feat.write_text(FEATURES)
    name = f"trf_c{CLASSES}{'' if clustering == 'fsmlearn' else '-toolkit'}_w1-3_c1-3_len{max_len}_i{iterations}"
    log = work / f"{name}.log"
    cmd = [str(bin_dir / "trf-satrain"),
           "-vocab", str(vocab_c), "-train", data["train"], "-valid", data["valid"], "-test", data["test"],
           "-feat", str(feat), "-order", "3", "-len", str(max_len),
           "-write", str(work / f"{name}.model"), "-log", str(log),
           "-t0", str(T0), "-iter", str(iterations),
           "-gamma-lambda", GAMMA_LAMBDA, "-gamma-zeta", GAMMA_ZETA, "-L2", str(L2),
           "-mini-batch", str(samples), "-thread", str(threads), "-print-per-iter", str(iterations)]
    command = shlex.join(cmd)
    progress("training: " + command)
    log.unlink(missing_ok=True)  # never read a previous run's log
    usage: dict = {}
    load_before = os.getloadavg()[0]
    rc, wall, rss = _run_logged(cmd, work / f"{name}.out", usage)
    load_after = os.getloadavg()[0]
    # the toolkit's main returns 1 on success; judge by the log instead of the exit status
    if not log.is_file():
        raise PeerError(f"trf-satrain wrote no log (exit {rc}); see {work / (name + '.out')}")
    info = parse_log(log.read_text(errors="replace"))
    if info["iteration"] != iterations:
        raise PeerError(f"trf-satrain stopped at iteration {info['iteration']} of {iterations} (exit {rc})")
    secs = info["minutes"] * 60
    if secs <= 0:
        raise PeerError(f"trf-satrain logged time={info['minutes']}m for {iterations} iterations")
    result = {
        "sentences_per_second": samples * iterations / secs,
        "seconds_per_iteration": secs / iterations,
        "iterations": iterations,
        "threads": threads,
        "command": command,
        "samples": samples,
        "train_seconds": secs,
        "wall_seconds": wall,
        "peak_rss_mb": rss,
        "cpu_seconds": usage.get("cpu_seconds"),
        "load_average_1min": [load_before, load_after],
        "exit_status": rc,
        "exvalues": info["exvalues"],
        "sampled_tokens_per_iteration": info["tokens"],
        "mean_sampled_length": (sum(info["tokens"]) / (samples * len(info["tokens"]))
                                if info["tokens"] else None),
        "tokens_per_second": sum(info["tokens"]) / secs if info["tokens"] else None,
        "log": str(log),
        "clustering": clustering,
        "max_len": max_len,
    }
    if len(info["exvalues"]) >= 3:
        result["test_perplexity"] = _ppl(info["exvalues"][2], data["test_sentences"], data["test_words"])
        result["valid_perplexity"] = _ppl(info["exvalues"][1], data["valid_sentences"], data["valid_words"])
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spmilm", default=os.environ.get("FSMLEARN_SPMILM"),
                    help="the built SPMILM toolkit (default $FSMLEARN_SPMILM)")
    ap.add_argument("--iterations", type=int, default=40, help="SA iterations (default 40)")
    ap.add_argument("--work", default=None, help="work folder (default bench/work/trf-peer or $FSMLEARN_BENCH_DIR/trf-peer)")
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--max-len", type=int, default=None,
                    help="the trainer's -len (default: the largest L <= 100 with all lengths 1..L in training, "
                         "93 on Brown-LM; 0: the toolkit's default, the longest sentence)")
    ap.add_argument("--clustering", choices=("fsmlearn", "toolkit"), default="fsmlearn",
                    help="who makes the 200 classes (default fsmlearn; the toolkit's word-cluster takes hours)")
    args = ap.parse_args(argv)
    if not args.spmilm:
        print("trf_peer: the SPMILM toolkit is not given: pass --spmilm DIR or set FSMLEARN_SPMILM "
              "(see the docstring of bench/trf_peer.py for how to build it)", file=sys.stderr)
        return 2
    try:
        r = run_peer(args.iterations, args.work, args.spmilm, threads=args.threads, max_len=args.max_len,
                     clustering=args.clustering)
    except PeerError as e:
        print(f"trf_peer: {e}", file=sys.stderr)
        return 1
    work = Path(r["log"]).parent
    (work / f"result-{Path(r['log']).stem}.json").write_text(json.dumps(r, indent=1))
    print(f"SPMILM trf-satrain, {r['threads']} threads, {r['samples']} samples/iteration, "
          f"{r['iterations']} iterations: {r['sentences_per_second']:.1f} sentences/s, "
          f"{r['seconds_per_iteration']:.3f} s/iteration (train {r['train_seconds']:.1f} s, "
          f"process {r['wall_seconds']:.1f} s wall / {r['cpu_seconds']:.1f} s CPU, peak RSS {r['peak_rss_mb']:.0f} MB; "
          f"load average {r['load_average_1min'][0]:.1f} -> {r['load_average_1min'][1]:.1f})")
    if r["mean_sampled_length"] is not None:
        tok = r["sampled_tokens_per_iteration"]
        k = max(1, len(tok) // 10)
        print(f"  sampled sentences: mean length {r['mean_sampled_length']:.2f} ({r['tokens_per_second']:.0f} tokens/s); "
              f"first {k} iterations {sum(tok[:k]) / (k * r['samples']):.2f}, last {k} {sum(tok[-k:]) / (k * r['samples']):.2f}")
    if "test_perplexity" in r:
        print(f"  -LL/sentence train/valid/test = {' / '.join(f'{x:.2f}' for x in r['exvalues'][:3])}; "
              f"valid perplexity {r['valid_perplexity']:.4g}, test perplexity {r['test_perplexity']:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

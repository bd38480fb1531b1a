"""What the subcommand modules share: progress lines and number formatting.

Public names: DATASET_NAMES, positive_int, Progress, percent, add_quiet, add_scale, check_scale, add_threads,
check_threads, add_workers, ordered_map, ngram_sizes.
"""

from __future__ import annotations

import math
import sys
import time

#: fsmlearn.data.datasets's DATASETS (a test checks they agree), spelled out so that building
#: the parser does not import the corpus readers (about 30 ms of every command's start-up)
DATASET_NAMES = ("wsj-small", "wsj-train", "mixed-text", "brown-lm")


class Progress:
    """Progress lines on stderr with elapsed time (nothing when ``quiet``)."""

    def __init__(self, quiet: bool = False):
        self.t0 = time.time()
        self.quiet = quiet

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"[{time.time() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def percent(x) -> str:
    """``x`` (a fraction) as a percentage with two decimals; ``n/a`` for None or NaN."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"


def add_quiet(parser) -> None:
    """The ``-q/--quiet`` flag every long-running subcommand takes."""
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def add_threads(parser) -> None:
    """The ``--threads`` option every scoring command takes (default 0: all of numba's)."""
    parser.add_argument("--threads", type=int, default=0,
                        help="scoring threads; 0 for all of numba's (NUMBA_NUM_THREADS) (default: 0)")


def check_threads(threads: int) -> int:
    """``threads`` when it is >= 0, else an ArgumentError."""
    from ..errors import ArgumentError
    if threads < 0:
        raise ArgumentError(f"--threads must be >= 0, got {threads}")
    return threads


def add_workers(parser) -> None:
    """``--threads`` for commands whose work per line holds the interpreter (decoders whose kernels
    are called once per input): that many worker processes, each loading the model once."""
    parser.add_argument("--threads", type=int, default=1,
                        help="worker processes applying the model to lines in parallel, output in input order "
                             "(default 1: this process; 0: one per core)")


def ordered_map(init, init_args: tuple, work, items, workers: int, batch: int = 256):
    """``work(item)`` for every item, in order: here after ``init(*init_args)`` when ``workers`` is 1,
    else in ``workers`` spawned processes (0: one per core) that each run ``init`` once, the
    items sent in batches so that a stream is never read whole.  ``init`` and ``work`` are
    module-level functions (they are pickled by name)."""
    import itertools
    import os
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context
    n = workers if workers > 0 else (os.cpu_count() or 1)
    if n == 1:
        init(*init_args)
        for it in items:
            yield work(it)
        return
    it = iter(items)
    with ProcessPoolExecutor(n, mp_context=get_context("spawn"), initializer=init, initargs=init_args) as ex:
        while True:
            chunk = list(itertools.islice(it, batch))
            if not chunk:
                break
            yield from ex.map(work, chunk, chunksize=max(1, len(chunk) // (4 * n)))


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (argparse prints one usage line, exit 2, otherwise)."""
    import argparse
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {v}")
    return v


def ngram_sizes(sizes) -> str:
    """``1-grams 1,234, 2-grams 5,678, ...``"""
    return ", ".join(f"{k + 1}-grams {n:,}" for k, n in enumerate(sizes))


def add_scale(p, default: str | None = "local", extra: str = "") -> None:
    """``--scheduler``, ``--memory``, ``--tmp``, ``--workers`` and ``--worker-threads``: where
    partitioned work runs (``default``: the scheduler when none is given; None lets the
    command tell a given one from none, ``extra`` saying what none means)."""
    g = p.add_argument_group("where the work runs (docs/cluster.md)")
    g.add_argument("--scheduler", default=default,
                   help="local: a Dask LocalCluster started here, one worker process per core (inputs under "
                        "64 MB, without --workers or --memory, take the in-memory path); tcp://HOST:PORT: an existing Dask "
                        "cluster; synchronous: every task in this process; in-memory: the one-process path "
                        "that holds every n-gram " + (extra or f"(default: {default})"))
    g.add_argument("--memory", help="each local worker's memory budget, e.g. 2G; sizes the partitions on any "
                                    "cluster (default: 60%% of this machine's RAM shared by the workers)")
    g.add_argument("--tmp", help="folder under which a local cluster's workers spill, removed afterwards (the "
                                 "pieces of an output are written beside it) (default: the system's temporary "
                                 "folder)")
    g.add_argument("--workers", type=positive_int, default=None,
                   help="local worker processes (default: one per core)")
    g.add_argument("--worker-threads", type=positive_int, default=1,
                   help="threads in each local worker process, each running its own task (default: 1)")


def check_scale(args):
    """Check ``--scheduler``, ``--memory``, ``--tmp`` and ``--workers`` together, whichever path the
    work then takes; returns the budget in bytes (None when not given).

    Raises:
        ArgumentError: a bad value, or options that do not go together (one line each).
    """
    from ..errors import ArgumentError
    from ..lm.scale.cluster import check_scheduler, check_tmp, parse_memory
    memory = parse_memory(args.memory) if args.memory else None
    if args.tmp is not None:
        check_tmp(args.tmp)
    if args.scheduler != "in-memory":
        check_scheduler(args.scheduler)
    if args.workers and args.scheduler != "local":
        raise ArgumentError(f"--workers starts that many local workers: it needs --scheduler local, not "
                            f"{args.scheduler}")
    if getattr(args, "worker_threads", 1) != 1 and args.scheduler != "local":
        raise ArgumentError(f"--worker-threads sets the threads of local workers: it needs --scheduler local, not "
                            f"{args.scheduler}")
    if args.scheduler == "in-memory" and memory is not None:
        raise ArgumentError("--memory sets the workers' budget: the in-memory path has no workers")
    return memory

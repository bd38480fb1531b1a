"""Where the partitioned LM pipeline runs: a Dask cluster, or this process.

:func:`open_runner` gives a :class:`Runner` for a ``--scheduler`` value:

* ``local`` (the default): a ``distributed.LocalCluster`` started here, one worker
  process per core, each held to ``memory`` bytes (Dask spills a worker's data to
  ``tmp`` above 60 % of it, pauses it at 80 % and restarts it at 95 %), torn down
  with its spill directory when the work is done;
* ``tcp://HOST:PORT`` (or any address ``distributed.Client`` takes): an existing
  cluster (``dask scheduler`` / ``dask worker``), whose workers keep their own limits;
* ``synchronous``: every task run in this process, in submission order (for
  debugging and for small inputs: no process is started).

The runner's methods are Dask's futures API (``submit``, ``gather``, piece selection
on the worker that holds a result) plus progress lines with rate and ETA per stage.
Dask's scheduler does the scheduling, the data movement, the spilling and the
recomputation of results lost with a worker; nothing here replaces any of it.

Errors become one line each (:class:`~fsmlearn.errors.ArgumentError`): an unreachable
scheduler, a worker that died repeatedly on a task (its memory budget, most often),
a budget too small for one partition.

Public names: Runner, open_runner, parse_memory, default_memory, part_bytes, cores, SMALL_INPUT.
"""

from __future__ import annotations

import operator
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager

from ...errors import ArgumentError

#: the smallest worker budget the pipeline accepts: a worker process with numpy, numba, Dask and
#: the counting kernels holds about 180 MB before any data, and Dask spills above 60 % and pauses
#: the worker above 80 % of its budget
MIN_MEMORY = 1 << 30

#: seconds every worker may stay paused (over 80 % of its budget) before the job gives up
PAUSED_LIMIT = 120

#: by default the commands take the in-memory path for inputs smaller than this (no cluster is started)
SMALL_INPUT = 64 << 20

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def parse_memory(text) -> int:
    """Bytes of a size such as ``2G``, ``512M``, ``1.5GiB`` or ``1000000`` (binary units).

    Raises:
        ArgumentError: not a size, or below :data:`MIN_MEMORY`.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ArgumentError(f"--memory {text!r}: expected a size such as 2G, 512M or 1.5GiB")
    n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n < MIN_MEMORY:
        raise ArgumentError(f"--memory {text}: a worker needs at least {MIN_MEMORY >> 20} MB (its interpreter "
                            "with numpy and numba, and one partition)")
    return n


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:          # not Linux
        return max(1, os.cpu_count() or 1)


def total_memory() -> int:
    """This machine's RAM in bytes (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def default_memory(workers: int | None = None) -> int:
    """Each local worker's default budget: 60 % of this machine's RAM shared by ``workers``
    (default: one per core), leaving the rest to the client, the system and the page cache."""
    n = workers or cores()
    ram = total_memory() or (4 << 30) * n
    return max(MIN_MEMORY, int(ram * 0.6) // n)


def part_bytes(memory: int, total: int | None = None, workers: int = 1) -> int:
    """Bytes of text per counting partition for a worker budget: counting a partition to order
    5 peaks at about 40 to 50 bytes per byte of text above the interpreter (the windows'
    hash, the counts, the rows routed; measured on 5, 20 and 40 MB of the 30M-token
    stand-in, docs/cluster.md), so a partition takes about an eighth of the budget (larger
    ones counted no faster: 118 s instead of 106 s for the 200M-token stand-in with 4 times
    larger partitions); between 1 MB and 64 MB, and small enough that an input of ``total``
    bytes gives every one of ``workers`` about four partitions (so that none waits for
    another's last one)."""
    size = min(64 << 20, memory // 400)
    if total:
        size = min(size, -(-total // (4 * workers)))
    return int(max(1 << 20, size))


def human(n: float) -> str:
    """Bytes in binary units, as ``--memory`` takes them (``1.5 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


#: arrays at least this large leave a task in a file of the job's scratch folder, not as Dask data
FILE_BYTES = 1 << 9


class Saved:
    """An array a task wrote to a file (``path``, at byte ``offset``): what Dask holds and moves
    instead of the array (a few dozen bytes), read back by the task that needs it."""

    __slots__ = ("path", "offset", "dtype", "shape")

    def __init__(self, path: str, offset: int, dtype: str, shape: tuple):
        self.path, self.offset, self.dtype, self.shape = path, offset, dtype, shape

    def __reduce__(self):
        return (Saved, (self.path, self.offset, self.dtype, self.shape))

    def load(self):
        import numpy as np
        a = np.empty(self.shape, np.dtype(self.dtype))
        if a.nbytes:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                if f.readinto(memoryview(a).cast("B")) != a.nbytes:
                    raise OSError(f"{self.path}: shorter than the data written to it")
        return a


def _rebuild(x, leaf):
    """``x`` (nested dicts, lists, tuples) with ``leaf`` applied to everything else in it."""
    if isinstance(x, dict):
        return {k: _rebuild(u, leaf) for k, u in x.items()}
    if isinstance(x, list):
        return [_rebuild(u, leaf) for u in x]
    if isinstance(x, tuple):
        return tuple(_rebuild(u, leaf) for u in x)
    return leaf(x)


def _save(x, folder: str):
    """``x`` (nested dicts, lists, tuples) with every large numeric array written, one after
    another, into one new file under ``folder`` (written beside it and renamed, so a reader never
    sees it half-written), and replaced by its :class:`Saved`."""
    import uuid

    import numpy as np
    if isinstance(x, tuple):            # a task's several results: each its own file
        return tuple(_save(u, folder) for u in x)
    path = os.path.join(folder, uuid.uuid4().hex + ".bin")
    arrays = []
    end = [0]

    def leaf(v):
        if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" and v.nbytes >= FILE_BYTES:
            a = np.ascontiguousarray(v)
            arrays.append(a)
            end[0] += a.nbytes
            return Saved(path, end[0] - a.nbytes, a.dtype.str, a.shape)
        return v

    saved = _rebuild(x, leaf)
    if not arrays:
        return x
    with open(path + ".part", "wb") as f:
        for a in arrays:
            if a.size:
                f.write(memoryview(a).cast("B"))
    os.replace(path + ".part", path)
    return saved


class Later:
    """Task arguments left in their files when the task starts (``value``: a structure of
    :class:`Saved`, not futures): the task reads the parts it needs when it needs them
    (:func:`_load`), so that a large input is never in memory at once."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return (Later, (self.value,))


def _load(x):
    """``x`` with every :class:`Saved` read back (not inside a :class:`Later`)."""
    return _rebuild(x, lambda v: v.load() if isinstance(v, Saved) else v)


def _paths(x, out: set) -> set:
    """The files of the :class:`Saved` in ``x``, added to ``out``."""
    _rebuild(x, lambda v: out.add(v.path) if isinstance(v, Saved) else None)
    return out


def _filed(fn, folder: str, *args, **kwargs):
    """Run ``fn`` on its arguments read back from their files, its result's arrays written to files."""
    return _save(fn(*_load(args), **_load(kwargs)), folder)


class _Done:
    """The result of a task run in this process (a future that is already done)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class Runner:
    """Submit tasks to a Dask client (``client``) or run them here (``client=None``).

    Attributes:
        client: the ``distributed.Client`` (None: synchronous).
        memory: each worker's budget in bytes (the local cluster's, or ``memory`` as
            given for an existing cluster: it sizes the partitions).
        workers: the number of workers (1 when synchronous).
        tmp: a scratch folder that is removed when the runner closes.
        say: the progress callable.
    """

    def __init__(self, client, memory: int, workers: int, tmp: str, say, threads: int = 1):
        self.client = client
        self.memory = memory
        self.workers = workers
        self.threads = threads
        self.tmp = tmp
        self.say = say
        self._held = []
        self.data = os.path.join(tmp, "data")   # the tasks' results (made by open_runner)
        self.leftovers = []         # folders to remove when the runner closes, whatever happened
        self.one_host = False       # every worker runs on this host (a local cluster, or none)

    def release(self) -> None:
        """Let go of every task of the job (called when its results are written): until then the
        runner holds them all, so that Dask can recompute any result lost with a worker from the
        tasks before it (a task the client has let go of is forgotten and cannot be rerun)."""
        self._held = []

    @property
    def slots(self) -> int:
        """Tasks that run at once: workers times their threads."""
        return self.workers * self.threads

    @property
    def task_memory(self) -> int:
        """The budget one task's partition is sized to: a worker's, shared by its threads."""
        return self.memory // self.threads

    @property
    def distributed(self) -> bool:
        return self.client is not None

    def submit(self, fn, *args, **kwargs):
        """A future of ``fn(*args, **kwargs)``; futures among ``args`` are replaced by their
        results on the worker that runs the task (lists of futures too).  The result's large
        arrays go to files in the scratch folder (:class:`Saved`): Dask holds, moves and
        spills a few bytes per array, and a task reads only what it is given."""
        if self.client is None:
            return _Done(_filed(fn, self.data, *[_value(a) for a in args],
                                **{k: _value(v) for k, v in kwargs.items()}))
        import uuid
        f = self.client.submit(_filed, fn, self.data, *args, key=f"{fn.__name__}-{uuid.uuid4().hex}",
                               pure=False, **kwargs)
        self._held.append(f)
        return f

    def piece(self, future, i):
        """A future of ``future``'s result's item ``i``, taken where that result lies (a
        checkpointed value: its item)."""
        if not self._is_future(future):
            return future[i]
        if self.client is None:
            return _Done(future.value[i])
        f = self.client.submit(operator.getitem, future, i, pure=False)
        self._held.append(f)
        return f

    def piece2(self, future, i, j):
        """A future of ``future``'s result's item ``[i][j]`` (one task, where that result lies)."""
        if not self._is_future(future):
            return future[i][j]
        if self.client is None:
            return _Done(future.value[i][j])
        f = self.client.submit(_item2, future, i, j, pure=False)
        self._held.append(f)
        return f

    def _is_future(self, x) -> bool:
        if isinstance(x, _Done):
            return True
        if self.client is None:
            return False
        from distributed import Future
        return isinstance(x, Future)

    def checkpoint(self, futures) -> list:
        """The results of finished ``futures`` as values (their arrays are files, so these are
        small), and every finished task let go of: a worker lost from now on takes no result
        with it that a later task needs, so nothing before this point is ever computed again,
        and the files of what is no longer needed can be removed (:meth:`discard`)."""
        values = self._gather(futures)
        self._held = [f for f in self._held if f.status not in ("finished",)]
        return values

    def discard(self, values) -> None:
        """Remove the files of checkpointed results no later task reads."""
        for path in _paths(values, set()):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def share(self, value):
        """``value`` as a future that many tasks read (a vocabulary, a translation table): a task
        that returns it, so that Dask can compute it again if the worker holding it is lost
        (scattered data cannot be), fetched once by each worker that needs it."""
        if self.client is None:
            return _Done(value)
        f = self.client.submit(_identity, value, pure=False)
        self._held.append(f)
        return f

    def gather(self, futures):
        """Results of a list of futures, in order, their arrays read back (raising a task's own
        error)."""
        return _load(self._gather(futures))

    def _gather(self, futures):
        if self.client is None:
            return [f.value if isinstance(f, _Done) else f for f in futures]
        return _translate(lambda: self.client.gather(futures), self)

    def wait(self, futures, stage: str, unit: str = "tasks") -> None:
        """Wait for ``futures`` with a progress line (done/total, rate, ETA) every few seconds;
        raise the first task error (values already checkpointed are done)."""
        if self.client is None:
            return
        futures = [f for f in futures if self._is_future(f)]
        n = len(futures)
        if n == 0:
            return
        from distributed import TimeoutError as DaskTimeout
        from distributed import wait

        def run():
            t0 = last = time.time()
            pending = set(futures)
            stalled = None              # since when every worker has been paused
            while pending:
                try:
                    done, pending = wait(pending, timeout=5, return_when="FIRST_COMPLETED")
                except (TimeoutError, DaskTimeout):   # (asyncio's own class before Python 3.11)
                    done = ()
                for f in done:
                    if f.status == "error":
                        f.result()          # raises the task's own exception
                now = time.time()
                if done:
                    stalled = None
                elif self._all_paused():
                    stalled = stalled or now
                    if now - stalled > PAUSED_LIMIT:
                        raise ArgumentError(
                            f"every worker has been paused for {PAUSED_LIMIT} s, over 80 % of its memory budget "
                            f"of {human(self.memory)} with nothing left to spill: the budget is too small for "
                            f"one partition of this job; give --memory more")
                if now - last >= 5 or not pending:
                    n_done = n - len(pending)
                    rate = n_done / max(now - t0, 1e-9)
                    eta = len(pending) / rate if rate > 0 else float("inf")
                    self.say(f"{stage}: {n_done}/{n} {unit} ({rate:.2f}/s, ETA {eta:.0f} s)")
                    last = now
        _translate(run, self)

    def _all_paused(self) -> bool:
        try:
            ws = _workers(self.client)
        except Exception:           # the scheduler's answer is a hint here, never a failure
            return False
        return bool(ws) and all(str(w.get("status", "")).endswith("paused") for w in ws.values())


def _identity(x):
    return x


def _item2(x, i, j):
    return x[i][j]


def _value(a):
    if isinstance(a, _Done):
        return a.value
    if isinstance(a, list):
        return [_value(x) for x in a]
    if isinstance(a, tuple):
        return tuple(_value(x) for x in a)
    return a


def _translate(call, runner):
    """Run ``call``; a task that killed its workers becomes one clear line."""
    try:
        from distributed.scheduler import KilledWorker
    except ImportError:             # pragma: no cover (distributed is a dependency)
        return call()
    from concurrent.futures import CancelledError as FutureCancelledError   # Dask's is a subclass
    from distributed.comm.core import CommClosedError
    try:
        return call()
    except KilledWorker as e:
        task = e.args[0] if e.args else "a task"
        raise ArgumentError(f"the workers running {task} died repeatedly, most likely over their memory "
                            f"budget of {human(runner.memory)} per worker: give --memory more, or run on "
                            "more workers") from None
    except FutureCancelledError as e:
        raise ArgumentError(f"the cluster cancelled a task of this job ({str(e).splitlines()[0][:200]}): its "
                            "scheduler or workers were stopped or lost data they could not compute again") from None
    except CommClosedError as e:
        raise ArgumentError(f"lost the connection to the Dask scheduler ({e})") from None


def check_tmp(tmp) -> str:
    """The absolute path of ``--tmp`` (default: the system's temporary folder), an existing folder.

    Raises:
        ArgumentError: no such folder, or not a folder.
    """
    base = os.path.abspath(tmp or tempfile.gettempdir())
    if not os.path.exists(base):
        raise ArgumentError(f"--tmp {base}: no such folder")
    if not os.path.isdir(base):
        raise ArgumentError(f"--tmp {base}: not a folder")
    return base


def check_memory(memory: int, workers: int) -> None:
    """Refuse local workers whose budgets add up to more than this machine's RAM."""
    ram = total_memory()
    if ram and memory * workers > ram:
        raise ArgumentError(f"--memory {human(memory)} for each of {workers} local workers is more than this "
                            f"machine's {human(ram)}")


def check_scheduler(text: str) -> str:
    """``local``, ``synchronous``, or a scheduler address (``tcp://HOST:PORT``, ``HOST:PORT``)."""
    if text in ("local", "synchronous"):
        return text
    m = re.fullmatch(r"(?:(tcp|ws|wss|ucx)://)?(\[[0-9a-fA-F:]+\]|[^\s:/\[\]]+):(\d{1,5})", text)
    if m and 0 < int(m.group(3)) < 65536:
        return text
    raise ArgumentError(f"--scheduler {text!r}: expected local, synchronous, in-memory or a scheduler address "
                        "HOST:PORT such as tcp://HOST:8786")


@contextmanager
def open_runner(scheduler: str = "local", memory: int | None = None, tmp: str | None = None,
                workers: int | None = None, threads: int = 1, progress=None):
    """A :class:`Runner` for ``scheduler``, closed (cluster stopped, scratch removed) on exit.

    Args:
        scheduler: ``local``, ``synchronous`` or a scheduler address.
        memory: each local worker's budget in bytes (default :func:`default_memory`).
        tmp: the folder under which the scratch and spill folder is made (default: the
            system's temporary folder).
        workers: local workers (default: one per core).
        threads: threads per local worker.
        progress: callable(str) for progress lines.

    Raises:
        ArgumentError: an unknown scheduler, an unreachable address, a missing ``tmp``.
    """
    say = progress or (lambda msg: None)
    scheduler = check_scheduler(scheduler)
    base = check_tmp(tmp)
    try:
        scratch = tempfile.mkdtemp(prefix="fsmlearn-dask-", dir=base)
        os.mkdir(os.path.join(scratch, "data"))
    except OSError as e:
        raise ArgumentError(f"--tmp {base}: cannot make a scratch folder there: {e.strerror or e}") from None
    cluster = client = runner = None
    keep = None
    try:
        if scheduler == "synchronous":
            runner = Runner(None, memory or default_memory(1), 1, scratch, say)
            runner.one_host = True
            yield runner
            return
        import logging

        from distributed import Client, LocalCluster
        if scheduler == "local":
            # one per core, but no more than 60 % of RAM gives the smallest budget each
            n = workers or max(1, min(cores(), int(total_memory() * 0.6) // MIN_MEMORY or cores()))
            mem = memory or default_memory(n)
            check_memory(mem, n)
            dashboard = ":0"            # any free port (Dask serves its status pages there, bokeh or not)
            # the workers' own log lines (a task's error, which the command reports itself in one
            # line; a heartbeat lost while the cluster stops) are not the user's business; and a
            # Ctrl-C reaches the command alone: processes started while SIGINT is ignored keep
            # ignoring it (Python installs its handler only over the default one), and the
            # command stops them
            old = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
            # Dask closes a worker's nanny when no worker of its name is registered
            # lost-worker-timeout (15 s) after one of that name was removed; a timer started
            # by one kill can so fire while the nanny restarts its worker after a second kill,
            # and the cluster loses that worker for good. A local nanny always restarts its
            # worker, so the embedded cluster, while it lives, waits longer than any job
            keep = _keep_lost_workers()
            try:
                cluster = LocalCluster(n_workers=n, threads_per_worker=threads, processes=True,
                                       memory_limit=mem, local_directory=scratch,
                                       dashboard_address=dashboard, silence_logs=logging.CRITICAL)
            finally:
                if old is not None:
                    signal.signal(signal.SIGINT, old)
            client = Client(cluster)
            say(f"Dask LocalCluster: {n} worker processes x {threads} thread(s), {human(mem)} each, "
                f"spilling to {scratch}")
        else:
            try:
                client = Client(scheduler if "://" in scheduler else "tcp://" + scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError, TypeError) as e:
                raise ArgumentError(f"--scheduler {scheduler}: cannot reach the Dask scheduler "
                                    f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'timed out'})"
                                    ) from None
            ws = _workers(client)
            n = max(1, len(ws))
            _check_seen(client, scratch)
            limits = [w.get("memory_limit") or 0 for w in ws.values()]
            mem = memory or (min(limits) if limits and min(limits) > 0 else default_memory(n))
            say(f"Dask cluster at {scheduler}: {n} workers, {human(mem)} budget per worker, "
                f"{_threads(client)} thread(s) each")
        link = getattr(client, "dashboard_link", None) if _has_bokeh() else None
        if link:
            say(f"Dask dashboard: {link}")
        runner = Runner(client, mem, n, scratch, say, threads if scheduler == "local" else _threads(client))
        runner.one_host = scheduler == "local"
        yield runner
    finally:
        try:
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()
        finally:
            if keep is not None:
                _release_lost_workers()
            # folders the workers wrote into (the output's pieces), removed once no worker can write
            for path in ([] if runner is None else runner.leftovers) + [scratch]:
                for _ in range(5):
                    shutil.rmtree(path, ignore_errors=True)
                    if not os.path.exists(path):
                        break
                    time.sleep(0.2)


# Dask's config is the process's: the runners open at once share one setting of the
# lost-worker timeout, made by the first and undone (the user's value back) by the last
_KEEP_LOCK = threading.Lock()
_KEEP = {"open": 0, "set": None}


def _keep_lost_workers() -> bool:
    """Set lost-worker-timeout to 30 days while a local cluster lives, so that Dask's
    SpecCluster (which reads it when a worker leaves) never closes a nanny whose worker is
    restarting; released by :func:`_release_lost_workers`. Every SpecCluster of the process
    sees the setting meanwhile (a lost job of a job-queue cluster then stays until closed)."""
    import dask
    with _KEEP_LOCK:
        if _KEEP["open"] == 0:
            _KEEP["set"] = dask.config.set({"distributed.deploy.lost-worker-timeout": "30 days"})
        _KEEP["open"] += 1
    return True


def _release_lost_workers() -> None:
    """Undo one :func:`_keep_lost_workers`; the last one open gives the user's value back."""
    with _KEEP_LOCK:
        _KEEP["open"] -= 1
        if _KEEP["open"] == 0 and _KEEP["set"] is not None:
            _KEEP["set"].__exit__(None, None, None)
            _KEEP["set"] = None


def _check_seen(client, scratch: str) -> None:
    """Refuse a cluster whose workers cannot see the scratch folder (the tasks' results are
    files there: on several hosts it must be on a file system they share)."""
    seen = client.run(os.path.isdir, os.path.join(scratch, "data"))
    blind = sorted(w for w, ok in seen.items() if not ok)
    if blind:
        raise ArgumentError(f"--tmp {os.path.dirname(scratch)}: the workers at {', '.join(blind[:3])}"
                            f"{', ...' if len(blind) > 3 else ''} cannot see this folder; give --tmp a folder "
                            "on a file system every worker shares (docs/cluster.md)")


def _workers(client) -> dict:
    """Every worker's entry of the scheduler's information (some releases list only five
    unless asked for all)."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:               # a release without the argument lists them all
        info = client.scheduler_info()
    return info.get("workers", {})


def _threads(client) -> int:
    """The fewest threads of an existing cluster's workers (1 when it does not say)."""
    ts = [w.get("nthreads") or 1 for w in _workers(client).values()]
    return max(1, min(ts)) if ts else 1


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _has_bokeh() -> bool:
    import importlib.util
    return importlib.util.find_spec("bokeh") is not None

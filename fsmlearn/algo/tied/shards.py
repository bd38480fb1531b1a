"""n-gram EM's passes partitioned over Dask workers.

Smith and Eisner's n-gram EM (sections 3.3-3.5) on a count set too large for one
process: c's states are cut into k ranges of about equal work, each a
:class:`~fsmlearn.algo.tied.sweep.Part` (its arcs, exclusions and blocks), and
the three passes of :mod:`fsmlearn.algo.tied.sweep` run on the parts as Dask
tasks, with the same functions (:func:`~fsmlearn.algo.tied.sweep.pass1`,
:func:`~fsmlearn.algo.tied.sweep.pass2`, :func:`~fsmlearn.algo.tied.sweep.pass3`)
that run the one part of the one-process path.

What stays where:

* in a folder every worker sees (the scratch folder of
  :func:`fsmlearn.lm.scale.cluster.open_runner`), files the workers map: each
  part's slices of c (offsets, labels, weights, pairs) and its exclusions;
* in the memory of the worker each part's tasks go to, the part's phi entries,
  updated in place by pass 2; every ``checkpoint`` iterations (and at the start)
  the part's phi is also written to a file (``part-{p}/phi-{v}.npy``, written
  whole and renamed);
* on the client: c's per-state arrays, theta, and the statistics of the
  iteration (alpha2, G, the counts).

The iteration's arrays go through the same folder, each written whole
and renamed: the client writes the inputs of an updating iteration (M, UE and,
after pass 1, the parts' Bx added: ``in-{v}/``, kept until the next checkpoint,
107 MB an iteration on the stand-in against 1 GB of phi), each part its results
(its share of Bx, its pairs' tag mass A2c, its new shadowed blocks PhiX, G's
rows: ``out-{r}/``, removed when the client has read them).  Dask carries the
tasks, their placement and small results (the entropy, timings), and runs a
lost worker's tasks again: they read and write the same files.  A pass-2 task
that does not find its part's phi of the version it needs in its process (its
worker was killed and Dask runs it elsewhere) reads the last checkpoint and
replays the updates since from ``in-*/``: the same deterministic block updates
on the same inputs, so the result is the one the lost worker would have given.

What crosses the network (the shared folder) per iteration (N states, T tags,
S shadowed arcs with C_S block entries, P (word, destination) pairs with C_P
entries; 8 bytes a number; docs/ngram-em-scale.md gives the stand-in's sizes):
to the parts, M's rows of their own states (N (T+1) in all), the compact rows
UE (C_P, read by every part), Bx (C_S, read by every part) and every part's
PhiX entries (C_S in all, read by every part); back, each part's Bx and A2c
(C_S + C_P), its PhiX entries, and G's rows of its states (N (T+1) in all).
The forward values alpha of c are solved once, on the client
(:class:`~fsmlearn.algo.tied.structure.TiedStructure`), before the parts are
written.

Public names: ShardedPasses.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid

import numpy as np

from .kernels import balanced_cuts
from .sweep import Part, Tables, pass1, pass2, pass3, part_of, tables_of

__all__ = ["ShardedPasses"]

_ARRAYS = ("src_start", "ilabel", "weight", "wsrc", "pair", "ex_ptr", "ex_sid")
_TABLES = ("alpha", "phi_dst", "phi_w", "label_word", "wt_ptr", "wt_tag", "pair_off", "sh_arc", "sh_state", "sh_w",
           "sh_word", "sh_off", "Ax")
_LOADED: dict = {}          # per process: (folder, part) -> Part with its arrays mapped
_PHI: dict = {}             # per process: (folder, part) -> (version, phi entries) last written here
REPLAYED = {"checkpoints": 0, "updates": 0}     # per process: phi restored from checkpoints, updates replayed


def _atomic_save(path: str, a: np.ndarray) -> None:
    tmp = f"{path}.{uuid.uuid4().hex}.tmp.npy"
    np.save(tmp, a)
    os.replace(tmp, path)


def _meta(folder: str, p: int) -> dict:
    key = (folder, p, "meta")
    m = _LOADED.get(key)
    if m is None:
        with open(os.path.join(folder, f"part-{p}", "meta.json")) as f:
            m = _LOADED[key] = json.load(f)
    return m


def _load(folder: str, p: int) -> Part:
    key = (folder, p)
    part = _LOADED.get(key)
    if part is None:
        tk = (folder, "tables")
        tb = _LOADED.get(tk)
        if tb is None:
            # mapped, not read: the workers of one machine share one copy (in memory and in the
            # cache) of what every part reads at random
            d = os.path.join(folder, "tables")
            with open(os.path.join(d, "meta.json")) as f:
                meta = json.load(f)
            tb = _LOADED[tk] = Tables(*(np.load(os.path.join(d, f"{n}.npy"), mmap_mode="r") for n in _TABLES),
                                      T=meta["T"])
        d = os.path.join(folder, f"part-{p}")
        m = _meta(folder, p)
        arr = {n: np.load(os.path.join(d, f"{n}.npy"), mmap_mode="r") for n in _ARRAYS}
        part = Part(m["q0"], m["q1"], m["a0"], m["a1"], m["b0"], m["b1"], m["x0"], m["ci0"], m["ci1"],
                    arr["src_start"], arr["ilabel"], arr["weight"], arr["wsrc"], arr["pair"], arr["ex_ptr"],
                    arr["ex_sid"], tb, 1)
        _LOADED[key] = part
    return part


def _phi_path(folder, p, v):
    return os.path.join(folder, f"part-{p}", f"phi-{v}.npy")


def _in_path(folder, v, name):
    return os.path.join(folder, f"in-{v}", f"{name}.npy")


def _phi_at(folder, p, v, ckpt, take: bool, count: bool = True):
    """Part p's phi of version v: the copy this process kept (with ``take`` taken out of the
    cache: a task that updates it in place and fails half-way must not leave a half-updated
    copy behind), else the checkpoint ``ckpt`` and the updates since, replayed from the
    client's files of M, UE and Bx (pass 2 of the same part on the same inputs: the same
    numbers)."""
    kept = _PHI.pop((folder, p), None) if take else _PHI.get((folder, p))
    if kept is not None and kept[0] == v:
        return kept[1]
    _PHI.pop((folder, p), None)     # another version (the part came back here): not kept twice
    part = _load(folder, p)
    phi = np.load(_phi_path(folder, p, ckpt))
    if count:
        REPLAYED["checkpoints"] += 1
        REPLAYED["updates"] += v - ckpt
    for u in range(ckpt, v):
        pass2(part, phi, *_inputs(folder, part, u), True)
    return phi


def _out_path(folder, r, name, p):
    return os.path.join(folder, f"out-{r}", f"{name}-{p}.npy")


def _rows(folder, part, v):
    """M's rows of the part's states, version v, mapped from the client's file."""
    return np.ascontiguousarray(np.load(_in_path(folder, v, "M"), mmap_mode="r")[part.q0:part.q1])


def _inputs(folder, part, v):
    """An updating pass's inputs of version v from the client's files: M's rows of the part's
    states, UE and Bx (mapped)."""
    return (_rows(folder, part, v), np.load(_in_path(folder, v, "UE"), mmap_mode="r"),
            np.load(_in_path(folder, v, "Bx"), mmap_mode="r"))


def _task1(folder, p, v, r):
    """Pass 1 on part p: its share of Bx, written to its file of run r."""
    part = _load(folder, p)
    _atomic_save(_out_path(folder, r, "bx", p), pass1(part, _rows(folder, part, v)))


def _task2(folder, p, v, ckpt, r, update, save):
    """Pass 2 on part p from phi version v (the copy this process kept, else checkpoint
    ``ckpt`` and the updates since); with ``update`` (inputs from the client's files of version
    v) phi moves to version v + 1, kept here, and with ``save`` also written whole and renamed
    before the task ends.  The pairs' tag mass and the part's new shadowed blocks go to its
    files of run r; the task gives (G's rows of the part, which pass 3 takes through Dask,
    entropy, seconds)."""
    t0 = time.perf_counter()
    part = _load(folder, p)
    # a copy older than v here is stale: its part's tasks ran elsewhere since
    for key in [key for key, (ver, _) in _PHI.items() if key[0] == folder and ver < v]:
        del _PHI[key]
    phi = _phi_at(folder, p, v, ckpt, take=update)
    Mr, UE, Bx = _inputs(folder, part, v) if update else (None, None, None)
    t1 = time.perf_counter()
    A2c, G, ent, px = pass2(part, phi, Mr, UE, Bx, update)
    t2 = time.perf_counter()
    if update:
        if save:
            _atomic_save(_phi_path(folder, p, v + 1), phi)
        _PHI[(folder, p)] = (v + 1, phi)
    else:
        _PHI.setdefault((folder, p), (v, phi))
    _atomic_save(_out_path(folder, r, "a2c", p), A2c)
    _atomic_save(_out_path(folder, r, "px", p), px)
    return G, ent, (t1 - t0, t2 - t1, time.perf_counter() - t2)


def _small(r2):
    """What the client needs of a pass-2 result: (entropy, seconds)."""
    return r2[1], r2[2]


def _phi_task(folder, p, v, ckpt):
    return _phi_at(folder, p, v, ckpt, take=False, count=False).copy()


def _holding(folder):
    """{part: version} of the phi kept in this process."""
    return {k[1]: ver for k, (ver, _) in _PHI.items() if k[0] == folder}


def _forget(folder):
    """Drop what this process keeps of the parts in ``folder`` (phi, mapped files)."""
    for d in (_PHI, _LOADED):
        for k in [k for k in d if k[0] == folder]:
            del d[k]


def _task3(r2, folder, p, r, k):
    """Pass 3 on part p: its exclusions' tag mass leaving, added to G's rows from pass 2, read
    with every part's new shadowed blocks (their files of run r); G's rows go to the part's
    file of run r."""
    part = _load(folder, p)
    tb = part.tables
    PhiX = np.zeros(tb.sh_off[tb.sh_arc.shape[0]])
    for o in range(k):
        m = _meta(folder, o)
        PhiX[tb.sh_off[m["ci0"]]:tb.sh_off[m["ci1"]]] = np.load(_out_path(folder, r, "px", o), mmap_mode="r")
    _atomic_save(_out_path(folder, r, "G", p), pass3(part, np.array(r2[0]), PhiX))


def _cuts(cs, k: int) -> np.ndarray:
    """k + 1 state boundaries cutting c into ranges of about equal work (arcs, block entries,
    exclusions)."""
    c = cs.machine
    work = np.asarray(c.src_start, np.float64) * 5.0 + np.asarray(cs.ex_ptr, np.float64) * 2.0
    return np.unique(balanced_cuts(work, k))


class ShardedPasses:
    """The passes of n-gram EM over k parts of c, run as Dask tasks.

    Args:
        cs: the structure (alpha solved).
        client: a ``distributed.Client``.
        folder: where the parts' files go (made here; a folder every worker sees).
        parts: how many parts (default: one per worker thread; each part's passes run on one
            thread, so a part's sums do not depend on the worker that runs them).
        phi: float64 [K] the start of phi (version 0).
        progress: callable(str), told when each pass's tasks are submitted.
        checkpoint: every how many updates the parts write their phi to files (what a part
            whose worker is lost restarts from, replaying the updates since from the
            client's files of M, UE and Bx).
    """

    def __init__(self, cs, client, folder: str, parts: int | None, phi: np.ndarray, progress=None,
                 checkpoint: int = 10):
        if int(checkpoint) < 1:
            raise ValueError(f"checkpoint must be a positive number of iterations, not {checkpoint!r}")
        self.checkpoint = int(checkpoint)
        self.say = progress or (lambda msg: None)
        self.cs = cs
        self.client = client
        self.folder = folder
        # default: a part per worker thread (each part's passes run on one thread)
        k = int(parts or max(1, sum(int(w.get("nthreads", 1)) for w in
                                    client.scheduler_info().get("workers", {}).values())))
        os.makedirs(folder, exist_ok=True)
        tb = tables_of(cs)
        os.makedirs(os.path.join(folder, "tables"), exist_ok=True)
        for n in _TABLES:
            np.save(os.path.join(folder, "tables", f"{n}.npy"), np.ascontiguousarray(getattr(tb, n)))
        with open(os.path.join(folder, "tables", "meta.json"), "w") as f:
            json.dump({"T": cs.T}, f)
        self.tables = tb
        cuts = _cuts(cs, k)
        self.parts = []
        for p in range(cuts.size - 1):
            part = part_of(cs, tb, int(cuts[p]), int(cuts[p + 1]))
            d = os.path.join(folder, f"part-{p}")
            os.makedirs(d, exist_ok=True)
            for n in _ARRAYS:
                np.save(os.path.join(d, f"{n}.npy"), np.ascontiguousarray(getattr(part, n)))
            meta = {n: int(getattr(part, n)) for n in ("q0", "q1", "a0", "a1", "b0", "b1", "x0", "ci0", "ci1")}
            with open(os.path.join(d, "meta.json"), "w") as f:
                json.dump(meta, f)
            _atomic_save(_phi_path(folder, p, 0), np.ascontiguousarray(phi[part.b0:part.b1]))
            self.parts.append(meta)
        self.version = 0
        self.ckpt = 0               # the version of the parts' last phi files
        self._runs = 0              # runs of the passes (their results' folders)
        # each part's tasks go to one worker, which keeps its phi in memory (another may take
        # them, e.g. when that worker is lost: it reads the part's files)
        addrs = sorted(client.scheduler_info().get("workers", {}))
        self.home = [[addrs[p % len(addrs)]] if addrs else None for p in range(len(self.parts))]
        self.say(f"n-gram EM: c cut into {len(self.parts)} parts of states for the Dask workers, in {folder}")
        self.traffic = []           # bytes to and from the parts, per pass run

    def phi(self) -> np.ndarray:
        """float64 [K]: the current phi, gathered from the parts."""
        c, v = self.client, self.version
        fs = [c.submit(_phi_task, self.folder, p, v, self.ckpt, pure=False, workers=self.home[p],
                       allow_other_workers=True) for p in range(len(self.parts))]
        return np.concatenate(c.gather(fs))

    def run(self, M, UE, update: bool):
        """The three passes on every part (pass 1 only with ``update``): (A2c, G, entropy), as
        :func:`fsmlearn.algo.tied.sweep.sweep_parts` gives them in one process.  With
        ``update`` phi moves to the next version.  The arrays go through the parts' folder:
        the client writes the inputs (M, UE, then Bx), each part its results (its share of Bx,
        A2c, its new shadowed blocks, G's rows); Dask carries the tasks and their small
        results, and runs a lost worker's tasks again (they read and write the same files,
        whole and renamed)."""
        v, r, k = self.version, self._runs, len(self.parts)
        self._runs += 1
        os.makedirs(os.path.join(self.folder, f"out-{r}"), exist_ok=True)
        try:
            return self._run(M, UE, update, v, r, k)
        finally:
            shutil.rmtree(os.path.join(self.folder, f"out-{r}"), ignore_errors=True)

    def _run(self, M, UE, update, v, r, k):
        c = self.client
        tb = self.tables
        CS = int(tb.sh_off[tb.sh_arc.shape[0]])
        opts = [dict(pure=False, workers=self.home[p], allow_other_workers=True) for p in range(k)]
        sent = got = 0
        times = {}
        t0 = time.perf_counter()
        if update:
            d = os.path.join(self.folder, f"in-{v}")
            os.makedirs(d, exist_ok=True)
            _atomic_save(_in_path(self.folder, v, "M"), np.ascontiguousarray(M))
            _atomic_save(_in_path(self.folder, v, "UE"), np.ascontiguousarray(UE))
            sent += M.nbytes + UE.nbytes
            f1 = [c.submit(_task1, self.folder, p, v, r, **opts[p]) for p in range(k)]
            self.say("n-gram EM: pass 1 submitted")
            c.gather(f1)
            Bx = np.zeros(CS)
            for p in range(k):
                Bx += np.load(_out_path(self.folder, r, "bx", p), mmap_mode="r")
            got += CS * 8 * k
            _atomic_save(_in_path(self.folder, v, "Bx"), Bx)
            sent += Bx.nbytes
        times["pass1"] = time.perf_counter() - t0
        save = bool(update) and (v + 1) % self.checkpoint == 0
        f2 = [c.submit(_task2, self.folder, p, v, self.ckpt, r, update, save, **opts[p]) for p in range(k)]
        self.say("n-gram EM: pass 2 submitted")
        small = [c.submit(_small, f2[p], **opts[p]) for p in range(k)]
        ent = 0.0
        work = []
        for e, tt in c.gather(small):
            ent += e
            work.append(tt)
        times["pass2"] = time.perf_counter() - t0 - times["pass1"]
        times["part_load_compute_save"] = [list(map(float, tt)) for tt in work]
        f3 = [c.submit(_task3, f2[p], self.folder, p, r, k, **opts[p]) for p in range(k)]
        self.say("n-gram EM: pass 3 submitted")
        # the pairs' tag mass is added while pass 3 runs
        A2c = None
        for p in range(k):
            a2c = np.load(_out_path(self.folder, r, "a2c", p))
            A2c = a2c if A2c is None else A2c + a2c
            got += a2c.nbytes + os.path.getsize(_out_path(self.folder, r, "px", p))
        c.gather(f3)
        G = np.concatenate([np.load(_out_path(self.folder, r, "G", p)) for p in range(k)], axis=0)
        got += G.nbytes
        times["pass3"] = time.perf_counter() - t0 - times["pass1"] - times["pass2"]
        del f2, f3, small
        # where each part's phi now is (another worker, when one was lost or a task moved)
        now = v + 1 if update else v
        for addr, held in c.run(_holding, self.folder).items():
            for p, ver in held.items():
                if ver == now:
                    self.home[p] = [addr]
        if update:
            self.version = v + 1
            if save:
                # every part's phi of version v + 1 is in its file: the older files go, and the
                # inputs the updates since the last one would be replayed from
                for p in range(k):
                    old = _phi_path(self.folder, p, self.ckpt)
                    if os.path.exists(old):
                        os.remove(old)
                for u in range(self.ckpt, v + 1):
                    shutil.rmtree(os.path.join(self.folder, f"in-{u}"), ignore_errors=True)
                self.ckpt = v + 1
        self.traffic.append({"sent": sent, "received": got, "seconds": times})
        return A2c, G, ent

    def close(self) -> None:
        """Remove the parts' files and what the workers keep of them (phi, mapped files)."""
        try:
            self.client.run(_forget, self.folder)
        except Exception:   # noqa: BLE001 (a cluster already gone keeps nothing)
            pass
        shutil.rmtree(self.folder, ignore_errors=True)




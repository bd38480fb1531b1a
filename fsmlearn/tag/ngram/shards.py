"""n-gram EM's passes partitioned over Dask workers.

Smith and Eisner's n-gram EM (sections 3.3-3.5) on a count set too large for one
process: c's states are cut into k ranges of about equal work, each a
:class:`~fsmlearn.tag.ngram.sweep.Part` (its arcs, exclusions and blocks), and
the three passes of :mod:`fsmlearn.tag.ngram.sweep` run on the parts as Dask
tasks, with the same functions (:func:`~fsmlearn.tag.ngram.sweep.pass1`,
:func:`~fsmlearn.tag.ngram.sweep.pass2`, :func:`~fsmlearn.tag.ngram.sweep.pass3`)
that run the one part of the one-process path.

What stays where:

* on the workers, in files they map (a folder every worker sees: the scratch
  folder of :func:`fsmlearn.lm.scale.cluster.open_runner`): each part's slices of
  c (offsets, labels, weights, pairs), its exclusions, and its phi entries, one
  file per iteration (``phi-{v}.npy``, written whole and renamed: a task that
  runs again after its worker was killed reads the same phi and writes the same
  file);
* on the client: c's per-state arrays, theta, and the statistics of the
  iteration (alpha2, G, the counts).

Each input of several tasks (M's rows of a part, UE, Bx, PhiX) is sent once per
iteration as a task of its own, so that Dask can make it again if the worker
holding it is lost; a worker keeps the phi it wrote last in memory and reads the
file only when another worker wrote it.

What crosses the network per iteration (N states, T tags, S shadowed arcs with
C_S block entries, P (word, destination) pairs with C_P entries; 8 bytes a number;
docs/cluster.md gives the stand-in's sizes): to the parts, M's rows of their own
states (N (T+1) in all), the compact rows UE (C_P, to every part) and the table's
Bx and PhiX (C_S each, to every part); back,
each part's Bx and A2c (C_S + C_P), its PhiX entries, and G's rows of its states
(N (T+1) in all).  The forward values alpha of c are solved once, on the client
(:class:`~fsmlearn.tag.ngram.structure.CqStructure`), before the parts are written.

Public names: ShardedPasses.
"""

from __future__ import annotations

import json
import operator
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


def _atomic_save(path: str, a: np.ndarray) -> None:
    tmp = f"{path}.{uuid.uuid4().hex}.tmp.npy"
    np.save(tmp, a)
    os.replace(tmp, path)


def _worker_threads() -> int:
    try:
        from distributed import get_worker
        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


def _load(folder: str, p: int) -> Part:
    key = (folder, p)
    part = _LOADED.get(key)
    if part is None:
        tk = (folder, "tables")
        tb = _LOADED.get(tk)
        if tb is None:
            with np.load(os.path.join(folder, "tables.npz")) as z:
                meta = json.loads(str(z["meta"]))
                tb = _LOADED[tk] = Tables(*(z[n] for n in _TABLES), T=meta["T"])
        d = os.path.join(folder, f"part-{p}")
        with open(os.path.join(d, "meta.json")) as f:
            m = json.load(f)
        arr = {n: np.load(os.path.join(d, f"{n}.npy"), mmap_mode="r") for n in _ARRAYS}
        part = Part(m["q0"], m["q1"], m["a0"], m["a1"], m["b0"], m["b1"], m["x0"], m["ci0"], m["ci1"],
                    arr["src_start"], arr["ilabel"], arr["weight"], arr["wsrc"], arr["pair"], arr["ex_ptr"],
                    arr["ex_sid"], tb, _worker_threads())
        _LOADED[key] = part
    return part


def _phi_path(folder, p, v):
    return os.path.join(folder, f"part-{p}", f"phi-{v}.npy")


def _value(x):
    """A task that gives its argument: an input of several tasks, sent once and kept with
    its lineage (a copy lost with a worker is made again from the graph)."""
    return x


def _task1(folder, p, M_rows):
    return pass1(_load(folder, p), M_rows)


def _task2(folder, p, v, M_rows, UE, Bx, update):
    """Pass 2 on part p from phi version v (the copy this process wrote last, else its file);
    with ``update`` version v + 1 is written whole and renamed before the task ends."""
    t0 = time.perf_counter()
    part = _load(folder, p)
    # the copy kept here is updated in place: dropped first, so that a task that fails half-way
    # and runs again (here or elsewhere) reads version v from its file
    kept = _PHI.pop((folder, p), None)
    phi = kept[1] if kept is not None and kept[0] == v else np.load(_phi_path(folder, p, v))
    t1 = time.perf_counter()
    out = pass2(part, phi, M_rows, UE, Bx, update)
    t2 = time.perf_counter()
    if update:
        _atomic_save(_phi_path(folder, p, v + 1), phi)
        _PHI[(folder, p)] = (v + 1, phi)
    return out + ((t1 - t0, t2 - t1, time.perf_counter() - t2),)


def _task3(r2, folder, p, PhiX):
    return pass3(_load(folder, p), np.array(r2[1]), PhiX)


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
        parts: how many parts (default: the cluster's workers).
        phi: float64 [K] the start of phi (version 0).
        progress: callable(str), told when each pass's tasks are submitted.
    """

    def __init__(self, cs, client, folder: str, parts: int | None, phi: np.ndarray, progress=None):
        self.say = progress or (lambda msg: None)
        self.cs = cs
        self.client = client
        self.folder = folder
        k = int(parts or max(1, len(client.scheduler_info().get("workers", {}))))
        os.makedirs(folder, exist_ok=True)
        tb = tables_of(cs)
        np.savez(os.path.join(folder, "tables.npz"), meta=json.dumps({"T": cs.T}),
                 **{n: getattr(tb, n) for n in _TABLES})
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
        # each part's tasks go to one worker, which keeps its phi in memory (another may take
        # them, e.g. when that worker is lost: it reads the part's files)
        addrs = sorted(client.scheduler_info().get("workers", {}))
        self.home = [[addrs[p % len(addrs)]] if addrs else None for p in range(len(self.parts))]
        self.say(f"n-gram EM: c cut into {len(self.parts)} parts of states for the Dask workers, in {folder}")
        self.traffic = []           # bytes to and from the parts, per pass run

    def phi(self) -> np.ndarray:
        """float64 [K]: the current phi, gathered from the parts' files."""
        return np.concatenate([np.load(_phi_path(self.folder, p, self.version)) for p in range(len(self.parts))])

    def run(self, M, UE, update: bool):
        """The three passes on every part (pass 1 only with ``update``): (A2c, G, entropy), as
        :func:`fsmlearn.tag.ngram.sweep.sweep_parts` gives them in one process.  With
        ``update`` phi moves to the next version.  Each input of several tasks is sent once
        (a task that gives it, so that Dask can make it again if a worker is lost)."""
        c = self.client
        tb = self.tables
        S = tb.sh_arc.shape[0]
        CS = int(tb.sh_off[S])
        v = self.version
        k = len(self.parts)
        sent = got = 0
        times = {}
        t0 = time.perf_counter()
        if update:
            rows = [c.submit(_value, M[m["q0"]:m["q1"]], pure=False) for m in self.parts]
            sent += M.nbytes
            f1 = [c.submit(_task1, self.folder, p, rows[p], pure=False, workers=self.home[p],
                           allow_other_workers=True) for p in range(k)]
            self.say("n-gram EM: pass 1 submitted")
            Bx = np.zeros(CS)
            for b in c.gather(f1):
                Bx += b
            got += CS * 8 * k
            uef = c.submit(_value, UE, pure=False)
            bxf = c.submit(_value, Bx, pure=False)
            sent += UE.nbytes + Bx.nbytes
        else:
            rows = [np.zeros((0, 0))] * k
            f1 = []
            uef = bxf = np.zeros(0)
        times["pass1"] = time.perf_counter() - t0
        f2 = [c.submit(_task2, self.folder, p, v, rows[p], uef, bxf, update, pure=False, workers=self.home[p],
                       allow_other_workers=True) for p in range(k)]
        self.say("n-gram EM: pass 2 submitted")
        small = [c.submit(_small, f, pure=False) for f in f2]
        A2c = None
        ent = 0.0
        PhiX = np.zeros(CS)
        work = []
        for m, (a2c, e, px, tt) in zip(self.parts, c.gather(small)):
            A2c = a2c if A2c is None else A2c + a2c
            ent += e
            PhiX[tb.sh_off[m["ci0"]]:tb.sh_off[m["ci1"]]] = px
            got += a2c.nbytes + px.nbytes
            work.append(tt)
        times["pass2"] = time.perf_counter() - t0 - times["pass1"]
        times["part_load_compute_save"] = [list(map(float, tt)) for tt in work]
        pxf = c.submit(_value, PhiX, pure=False)
        sent += PhiX.nbytes
        f3 = [c.submit(_task3, f2[p], self.folder, p, pxf, pure=False, workers=self.home[p],
                       allow_other_workers=True) for p in range(k)]
        self.say("n-gram EM: pass 3 submitted")
        G = np.concatenate(c.gather(f3), axis=0)
        got += G.nbytes
        times["pass3"] = time.perf_counter() - t0 - times["pass1"] - times["pass2"]
        del f1, f2, f3, small, rows
        if update:
            self.version = v + 1
            for p in range(k):
                old = _phi_path(self.folder, p, v)
                if os.path.exists(old):
                    os.remove(old)
        self.traffic.append({"sent": sent, "received": got, "seconds": times})
        return A2c, G, ent

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _small(r2):
    """The part of a pass-2 result the client needs: (A2c, entropy, PhiX entries)."""
    return operator.itemgetter(0, 2, 3, 4)(r2)

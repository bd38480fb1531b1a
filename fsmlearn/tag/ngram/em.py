"""Training an HMM tagger from an approximate corpus (n-gram EM).

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
2-3.5: :class:`NGramEM` maximises the bound (5) over theta (a bigram HMM) and
phi (the variational tag blocks of cq, the engine's tied product
:mod:`fsmlearn.algo.tied`), by approximate variational EM (a parallel block
update of phi, then the closed-form M-step :func:`mstep`) or by gradient ascent
on softmax parameters of theta and phi (section 3.5).  Everything about phi
(its expected counts, the bound, its update and gradient) comes from the
engine's :class:`~fsmlearn.algo.tied.TiedEStep`, which picks the schedule: fused
passes in this process or on Dask workers, the per-event kernels, a CUDA device,
blocks conditioned on the previous tag (footnote 7).

Public names: NGramEM, IterationRecord, mstep.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from ...algo.cuda import check_device
from ...algo.tied import CondBlocks, TiedEStep, TiedStructure
from ...algo.tied.objective import Stats, dot_log
from ...errors import ArgumentError

__all__ = ["NGramEM", "IterationRecord", "mstep"]


@dataclass
class IterationRecord:
    """One iteration of :meth:`NGramEM.run`: its number (0: the start), the bound after it,
    its wall time, and what a callback adds (accuracy, held-out log-likelihood, ``extra``)."""
    iteration: int
    bound: float
    seconds: float
    accuracy: float | None = None
    heldout_loglik: float | None = None
    extra: dict = field(default_factory=dict)


class NGramEM:
    """n-gram EM (n_q = 1, n_p = 2): variational EM or gradient ascent on the bound.

    Args:
        cs: the prepared cq structure.
        allowed: bool [V+1, T] tag dictionary mask.
        log_trans, log_emit: the initial theta.
        optimizer: ``"vem"`` (approximate variational EM: one parallel
            block update of phi, then the closed-form M-step) or ``"gradient"``
            (gradient ascent on softmax parameters of theta and phi with a
            backtracking step).
        estep_passes: parallel block updates per vEM iteration (the paper: 1).
        cond: which blocks are also conditioned on the previous tag
            (:meth:`CondBlocks.build`): ``"none"`` (n_q = 1, the paper),
            ``"roots"``, ``"all"`` or a bool [N] mask of source states.
        threads: threads of the n_q = 1 vEM kernels (default: numba's
            thread count; 1 runs the single-threaded kernels).
        device: ``"cpu"`` (default) or ``"cuda"``: the bound, its gradient
            and the E-step run on the device (:mod:`fsmlearn.algo.cuda.tied`;
            phi, alpha2 and G stay there, only theta's M-step runs on the
            host); n_q = 1 blocks only (``cond="none"``).
        scheduler: None (default: this process) or where the passes of
            variational EM run partitioned over Dask workers
            (:mod:`fsmlearn.algo.tied.shards`): ``"local"`` (a LocalCluster), a
            scheduler's address, or a ``distributed.Client``; ``workers``,
            ``memory`` (bytes per worker), ``tmp`` (the folder the parts' files go
            under) and ``parts`` (default: one per worker) size it; ``checkpoint``
            is every how many iterations the parts write their phi to files (a
            part whose worker is lost restarts from there and replays the
            updates since).  n_q = 1, vEM, CPU only.  Call :meth:`close` (or use
            ``with``) to stop the cluster.

    Raises:
        ArgumentError: a bad optimizer or device, conditioned blocks on "cuda", or a scheduler
            with conditioned blocks, the gradient optimizer or "cuda".
        FsmError: device="cuda" without a CUDA device or numba's simulator.
    """

    def __init__(self, cs: TiedStructure, allowed, log_trans, log_emit, optimizer: str = "vem",
                 estep_passes: int = 1, step: float = 1.0, cond="none", threads: int | None = None,
                 device: str = "cpu", scheduler=None, workers: int | None = None, memory: int | None = None,
                 tmp: str | None = None, parts: int | None = None, progress=None, checkpoint: int = 10):
        if optimizer not in ("vem", "gradient"):
            raise ArgumentError(f"optimizer must be 'vem' or 'gradient', got {optimizer!r}")
        device = check_device(device)
        cb = None if isinstance(cond, str) and cond == "none" else CondBlocks.build(cs, cond)
        if cb is not None and cb.K2 == 0:
            cb = None                   # no block conditioned: n_q = 1
        conditioned = cb is not None
        if conditioned and optimizer != "vem":
            raise ArgumentError("blocks conditioned on the previous tag need optimizer='vem'")
        if scheduler is not None and (conditioned or optimizer != "vem" or device != "cpu"):
            got = ", ".join(x for x in (f"cond={cond!r}" if conditioned else "",
                                        f"optimizer={optimizer!r}" if optimizer != "vem" else "",
                                        f"device={device!r}" if device != "cpu" else "") if x)
            raise ArgumentError(f"scheduler={scheduler!r} runs n-gram EM's variational EM on the CPU with n_q = 1 "
                                f"blocks, not with {got}; use optimizer='vem', cond='none', device='cpu' or no "
                                "scheduler")
        self.cs = cs
        self.allowed = np.asarray(allowed, bool)
        self.log_trans = np.asarray(log_trans, np.float64).copy()
        self.log_emit = np.asarray(log_emit, np.float64).copy()
        self.optimizer = optimizer
        self.estep_passes = int(estep_passes)
        self.step = float(step)
        self.stats = None
        self.history: list[IterationRecord] = []
        self._stack = None
        kw = dict(cond=cb if conditioned else "none", gradients=optimizer == "gradient", threads=threads,
                  device=device)
        if scheduler is not None:
            self.estep = self._open_shards(scheduler, workers, memory, tmp, parts, progress, checkpoint, kw)
        else:
            self.estep = TiedEStep(cs, **kw)
        self.device = self.estep.device
        self.cond = self.estep.cond

    def _open_shards(self, scheduler, workers, memory, tmp, parts, progress, checkpoint, kw):
        import contextlib
        import tempfile

        self._stack = contextlib.ExitStack()
        try:
            if isinstance(scheduler, str):
                from ...lm.scale.cluster import open_runner
                runner = self._stack.enter_context(open_runner(scheduler, memory=memory, tmp=tmp, workers=workers,
                                                               progress=progress))
                if runner.client is None:
                    raise ArgumentError(f"scheduler {scheduler!r} has no workers to partition n-gram EM over; "
                                        "leave it out to run in this process")
                client, base = runner.client, runner.tmp
            else:
                client, base = scheduler, tempfile.mkdtemp(prefix="fsmlearn-ngram-", dir=tmp)
                self._stack.callback(__import__("shutil").rmtree, base, True)
            est = TiedEStep(self.cs, client=client, folder=os.path.join(base, "ngram-em"), parts=parts,
                            checkpoint=checkpoint, progress=progress, **kw)
            self._stack.callback(est.close)
            return est
        except BaseException:
            self._stack.close()
            raise

    @property
    def shards(self):
        """The Dask parts (:class:`fsmlearn.algo.tied.shards.ShardedPasses`), or None in one process."""
        return self.estep.shards

    def close(self) -> None:
        """Stop the cluster and remove the parts' files (a sharded trainer; nothing otherwise)."""
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def parts(self) -> int:
        """How many parts (threads) the fused passes split c's arcs into (0: not that schedule)."""
        return self.estep.parts

    @property
    def phi(self) -> np.ndarray:
        """float64 [K]: the variational parameters (a host copy when they live on the device
        or the workers)."""
        return self.estep.phi

    @phi.setter
    def phi(self, value):
        self.estep.phi = value

    @property
    def phi2(self):
        """float64 [K2, T+1]: the blocks conditioned on the previous tag (None without)."""
        return self.estep.phi2

    @phi2.setter
    def phi2(self, value):
        self.estep.phi2 = value

    def bound(self) -> float:
        self.stats = self.estep.stats(self.log_trans, self.log_emit)
        return self.stats.bound

    def iterate(self) -> float:
        """One iteration; returns the bound after it."""
        if self.optimizer != "vem":
            self._gradient_step()
            return self.bound()
        st = self.stats
        for _ in range(self.estep_passes):
            st = self.estep.update(self.log_trans, self.log_emit, st)
        if st is None:
            st = self.estep.stats(self.log_trans, self.log_emit)
        self.log_trans, self.log_emit = mstep(st.trans, st.emit, self.allowed)
        if self.cond is not None:
            return self.bound()
        # the counts depend on phi alone: only the bound moves with theta
        b = dot_log(st.trans, self.log_trans) + dot_log(st.emit, self.log_emit) + st.entropy
        self.stats = Stats(st.trans, st.emit, st.entropy, b, st.alpha2, st.G)
        return b

    def _gradient_step(self):
        # gradient of r in softmax coordinates: d r / d eta = p (g - E_p g)
        cs = self.cs
        est = self.estep
        st = self.stats or est.stats(self.log_trans, self.log_emit)
        r0 = st.bound
        phi = self.phi
        g_phi = est.d_bound_d_phi(self.log_trans, self.log_emit)
        a2 = st.alpha2
        a2_total = float((a2.copy_to_host() if hasattr(a2, "copy_to_host") else a2).sum())
        arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
        Eg = np.zeros(cs.machine.num_arcs)
        np.add.at(Eg, arc_of, phi * g_phi)
        geta = phi * (g_phi - Eg[arc_of])
        # theta rows: d r / d log theta = counts; softmax: counts - p * row total
        Pt = np.exp(self.log_trans)
        gt = st.trans - Pt * st.trans.sum(1, keepdims=True)
        Pe = np.exp(self.log_emit)
        ge = np.where(self.allowed.T, st.emit - Pe * st.emit.sum(1, keepdims=True), 0.0)
        scale = max(float(np.abs(st.trans).sum()), 1e-300)
        lr = self.step
        with np.errstate(divide="ignore"):
            eta = np.log(np.maximum(phi, 1e-300))
        for _ in range(30):
            phi_new = _block_softmax(eta + lr * geta / np.maximum(a2_total / scale, 1e-300),
                                     cs.blk_start, arc_of)
            lt = _row_log_softmax(self.log_trans + lr * gt / scale)
            le = _row_log_softmax(np.where(self.allowed.T, self.log_emit + lr * ge / scale, -np.inf))
            s_new = est.stats_of(phi_new, lt, le)
            if s_new.bound >= r0:
                self.phi, self.log_trans, self.log_emit = phi_new, lt, le
                self.step = lr * 1.5
                self.stats = s_new
                return
            lr *= 0.5
        self.step = lr

    def run(self, iterations: int, callback=None):
        """Run iterations; ``callback(record)`` may add accuracy etc. to each record."""
        t0 = time.time()
        b = self.bound()
        rec = IterationRecord(0, b, 0.0)
        if callback:
            callback(rec, self)
        self.history.append(rec)
        for it in range(1, iterations + 1):
            t0 = time.time()
            b = self.iterate()
            rec = IterationRecord(it, b, time.time() - t0)
            if callback:
                callback(rec, self)
            self.history.append(rec)
        return self.history


def _block_softmax(eta, blk_start, arc_of):
    mx = np.full(blk_start.shape[0] - 1, -np.inf)
    np.maximum.at(mx, arc_of, eta)
    e = np.exp(eta - mx[arc_of])
    z = np.zeros(blk_start.shape[0] - 1)
    np.add.at(z, arc_of, e)
    return e / z[arc_of]


def _row_log_softmax(x):
    mx = np.max(np.where(np.isfinite(x), x, -np.inf), axis=1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return x - mx - np.log(np.exp(x - mx).sum(1, keepdims=True))


def mstep(trans: np.ndarray, emit: np.ndarray, allowed: np.ndarray, floor: float = 0.0):
    """Closed-form theta from expected counts: (log_trans, log_emit).

    Transitions out of every tag and the start are normalised rows of
    ``trans`` (column T is the end of the sentence); emissions are rows of
    ``emit`` restricted to ``allowed`` (transposed: [V+1, T] mask).
    ``floor`` is added to every allowed count (0: maximum likelihood).
    """
    tr = np.maximum(trans, 0.0) + floor
    tr[-1, -1] = max(trans[-1, -1], 0.0)   # start -> end only if c has empty sentences
    em = np.where(allowed.T, np.maximum(emit, 0.0) + floor, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lt = np.log(tr) - np.log(tr.sum(1, keepdims=True))
        le = np.log(em) - np.log(em.sum(1, keepdims=True))
    lt = np.where(np.isfinite(lt), lt, -np.inf)
    le = np.where(np.isfinite(le), le, -np.inf)
    return lt, le

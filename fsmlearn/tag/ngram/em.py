"""Training an HMM tagger from an approximate corpus (n-gram EM).

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
2-3.5: :class:`NGramEM` maximises the bound (5) over theta (a bigram HMM) and
phi (the variational tag blocks of cq, :mod:`fsmlearn.tag.ngram.structure`),
by approximate variational EM (a parallel block update of phi, then the
closed-form M-step; :mod:`fsmlearn.tag.ngram.objective`) or by gradient
ascent on softmax parameters of theta and phi (section 3.5), on the CPU or
(``device="cuda"``) on a CUDA device (:mod:`fsmlearn.tag.ngram.cuda`).  Blocks may also
be conditioned on the previous tag (footnote 7, :mod:`fsmlearn.tag.ngram.cond`).

Public names: NGramEM, IterationRecord.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from ...algo.cuda import check_device
from ...errors import ArgumentError
from .cond import CondBlocks, estep_parallel_cond, expected_stats_cond
from .objective import Stats, d_bound_d_phi, dot_log, estep_parallel, expected_stats, mstep
from .kernels import ParIndex
from .structure import CqStructure
from .sweep import finish_pass, pass_inputs, sweep_bounds, sweep_parts

__all__ = ["NGramEM", "IterationRecord"]


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
            and the E-step run on the device (:mod:`fsmlearn.tag.ngram.cuda`;
            phi, alpha2 and G stay there, only theta's M-step runs on the
            host); n_q = 1 blocks only (``cond="none"``).
        scheduler: None (default: this process) or where the passes of
            variational EM run partitioned over Dask workers
            (:mod:`fsmlearn.tag.ngram.shards`): ``"local"`` (a LocalCluster), a
            scheduler's address, or a ``distributed.Client``; ``workers``,
            ``memory`` (bytes per worker), ``tmp`` (the folder the parts' files go
            under) and ``parts`` (default: one per worker) size it; ``checkpoint``
            is every how many iterations the parts write their phi to files (a
            part whose worker is lost restarts from there and replays the
            updates since).  n_q = 1, vEM, CPU only.  Call :meth:`close` (or use
            ``with``) to stop the cluster.

    Raises:
        ArgumentError: a bad optimizer or device, or conditioned blocks on "cuda".
        FsmError: device="cuda" without a CUDA device or numba's simulator.
    """

    def __init__(self, cs: CqStructure, allowed, log_trans, log_emit, optimizer: str = "vem",
                 estep_passes: int = 1, step: float = 1.0, cond="none", threads: int | None = None,
                 device: str = "cpu", scheduler=None, workers: int | None = None, memory: int | None = None,
                 tmp: str | None = None, parts: int | None = None, progress=None, checkpoint: int = 10):
        if optimizer not in ("vem", "gradient"):
            raise ArgumentError(f"optimizer must be 'vem' or 'gradient', got {optimizer!r}")
        self.device = check_device(device)
        self._cq = None
        self._phi_host = None
        self._phi_d = None
        # (n_q = 1 alone needs none of the per-event arrays CondBlocks reads)
        self.cond = None if isinstance(cond, str) and cond == "none" else CondBlocks.build(cs, cond)
        if self.cond is not None and self.cond.K2 == 0:
            self.cond = None
        elif self.cond is not None and optimizer != "vem":
            raise ArgumentError("blocks conditioned on the previous tag need optimizer='vem'")
        if self.cond is not None and self.device == "cuda":
            raise ArgumentError("blocks conditioned on the previous tag have no CUDA path; use device='cpu' "
                                "or cond='none'")
        if self.device == "cuda":
            from .cuda import cuda_cq
            self._cq = cuda_cq(cs)
        self.phi2 = self.cond.uniform(cs) if self.cond is not None else None
        self._U = None              # the adjoint of the last E-step (warm start of the next)
        self._A2 = None             # alpha2 of the last statistics (warm start of the next)
        self.cs = cs
        self.allowed = np.asarray(allowed, bool)
        self.log_trans = np.asarray(log_trans, np.float64).copy()
        self.log_emit = np.asarray(log_emit, np.float64).copy()
        self.phi = cs.uniform_phi()
        self.optimizer = optimizer
        self.estep_passes = int(estep_passes)
        self.step = float(step)
        self.stats = None
        self.history: list[IterationRecord] = []
        # n_q = 1 variational EM on the CPU: one fused pass per iteration (fsmlearn.tag.ngram.sweep)
        # over every thread numba has (threads=1: one); the other paths use the per-event kernels
        self.px = None
        self._sw = None
        self._sh = None
        self._stack = None
        if scheduler is not None and not (self.cond is None and optimizer == "vem" and self._cq is None):
            raise ArgumentError("a scheduler runs n-gram EM's variational EM on the CPU with n_q = 1 blocks; "
                                "use optimizer='vem', cond='none', device='cpu'")
        if scheduler is not None:
            self._open_shards(scheduler, workers, memory, tmp, parts, progress, checkpoint)
            self._phi_host = None       # phi lives in the workers (checkpoints in the parts' files)
        elif self.cond is None and optimizer == "vem" and self._cq is None:
            import numba
            self._sw = sweep_bounds(cs, threads or numba.get_num_threads())
        elif self.cond is None and (threads is None or threads > 1) and self._cq is None:
            px = ParIndex(cs, threads)
            self.px = px if px.threads > 1 else None

    def _open_shards(self, scheduler, workers, memory, tmp, parts, progress, checkpoint):
        import contextlib
        import tempfile

        from .shards import ShardedPasses
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
            self._sh = ShardedPasses(self.cs, client, os.path.join(base, "ngram-em"), parts, self.cs.uniform_phi(),
                                     progress, checkpoint)
            self._stack.callback(self._sh.close)
        except BaseException:
            self._stack.close()
            raise

    @property
    def shards(self):
        """The Dask parts (:class:`fsmlearn.tag.ngram.shards.ShardedPasses`), or None in one process."""
        return self._sh

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
        """How many parts (threads) the fused pass splits c's arcs into (0: not that path)."""
        if self._sh is not None:
            return len(self._sh.parts)
        return 0 if self._sw is None else self._sw.threads

    @property
    def phi(self) -> np.ndarray:
        """float64 [K]: the variational parameters (a host copy when they live on the device)."""
        if self._phi_d is not None:
            return self._phi_d.copy_to_host()
        if getattr(self, "_sh", None) is not None:
            return self._sh.phi()
        return self._phi_host

    @phi.setter
    def phi(self, value):
        if self._cq is not None:
            self._phi_d = self._cq.put(value)
        else:
            self._phi_host = value

    def _expected(self, phi, lt, le):
        """expected_stats on this trainer's device (phi: host, or device on "cuda")."""
        if self._cq is not None:
            return self._cq.expected_stats(phi, lt, le)
        if self._sw is not None or self._sh is not None:
            return self._pass(None, lt, le)
        return expected_stats(self.cs, phi, lt, le, self.px)

    def _pass(self, stats, lt, le):
        """The passes of :mod:`fsmlearn.tag.ngram.sweep` (on this process's part, or on the
        Dask parts): with ``stats`` of the current phi the block update, then the statistics."""
        update = stats is not None
        M, UE = pass_inputs(self.cs, stats, lt, le) if update else (None, None)
        if self._sh is not None:
            A2c, G, ent = self._sh.run(M, UE, update)
        else:
            A2c, G, ent = sweep_parts(self._sw, self._phi_host, M, UE, update)
        return finish_pass(self.cs, A2c, G, ent, lt, le)

    def _phi_now(self):
        return self._phi_d if self._cq is not None else self._phi_host

    def _stats(self):
        if self.cond is None:
            return self._expected(self._phi_now(), self.log_trans, self.log_emit)
        warm = self.stats.alpha2 if self.stats is not None else self._A2
        st = expected_stats_cond(self.cs, self.cond, self.phi, self.phi2, self.log_trans, self.log_emit,
                                 warm=warm)
        self._A2 = st.alpha2
        return st

    def bound(self) -> float:
        self.stats = self._stats()
        return self.stats.bound

    def iterate(self) -> float:
        """One iteration; returns the bound after it."""
        if self.optimizer == "vem" and self.cond is not None:
            for _ in range(self.estep_passes):
                st = self.stats if self.stats is not None else self._stats()
                self.phi, self.phi2, self._U = estep_parallel_cond(
                    self.cs, self.cond, self.phi, self.phi2, self.log_trans, self.log_emit, st.alpha2,
                    warm_u=self._U, G=st.G)
                self.stats = None
            st = self._stats()
            self.log_trans, self.log_emit = mstep(st.trans, st.emit, self.allowed)
        elif self.optimizer == "vem" and (self._sw is not None or self._sh is not None):
            st = self.stats
            for _ in range(self.estep_passes):
                if st is None:
                    st = self._pass(None, self.log_trans, self.log_emit)
                st = self._pass(st, self.log_trans, self.log_emit)
            self.log_trans, self.log_emit = mstep(st.trans, st.emit, self.allowed)
            b = dot_log(st.trans, self.log_trans) + dot_log(st.emit, self.log_emit) + st.entropy
            self.stats = Stats(st.trans, st.emit, st.entropy, b, st.alpha2, st.G)
            return b
        elif self.optimizer == "vem":
            for _ in range(self.estep_passes):
                a2 = self.stats.alpha2 if self.stats is not None else None
                G = self.stats.G if self.stats is not None else None
                if self._cq is not None:
                    self._phi_d = self._cq.estep(self._phi_d, self.log_trans, self.log_emit, a2, G)
                else:
                    self.phi = estep_parallel(self.cs, self.phi, self.log_trans, self.log_emit, a2, self.px, G)
                self.stats = None
            st = self._expected(self._phi_now(), self.log_trans, self.log_emit)
            self.log_trans, self.log_emit = mstep(st.trans, st.emit, self.allowed)
            # the counts depend on phi alone: only the bound moves with theta
            b = dot_log(st.trans, self.log_trans) + dot_log(st.emit, self.log_emit) + st.entropy
            self.stats = Stats(st.trans, st.emit, st.entropy, b, st.alpha2, st.G)
            return b
        else:
            self._gradient_step()
        return self.bound()

    def _gradient_step(self):
        # gradient of r in softmax coordinates: d r / d eta = p (g - E_p g)
        cs = self.cs
        st = self.stats or self._expected(self._phi_now(), self.log_trans, self.log_emit)
        r0 = st.bound
        phi = self.phi
        if self._cq is not None:
            g_phi = self._cq.d_bound_d_phi(self._phi_d, self.log_trans, self.log_emit)
            a2_total = float(st.alpha2.copy_to_host().sum())
        else:
            g_phi = d_bound_d_phi(cs, phi, self.log_trans, self.log_emit)
            a2_total = float(st.alpha2.sum())
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
            s_new = self._expected(phi_new, lt, le)
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

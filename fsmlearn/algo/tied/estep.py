"""The variational E-step of a tied product, on the schedule the engine picks.

A *tied product* (:class:`~fsmlearn.algo.tied.structure.TiedStructure`) is the
tagged product of :mod:`fsmlearn.algo.product` whose blocks are tied to the
arcs' labels (each label class allows a fixed list of tags), normalised and
independent of the previous tag (or, for chosen states, conditioned on it):
the variational family q_phi of Smith and Eisner, "Unsupervised learning on an
approximate corpus", section 3.  Against a target product with entry values
``log theta(w | t)`` and transition values ``log theta(t | t')`` (a bigram
HMM), the engine gives the blocks' statistics (the expected transition and
entry counts, the entropy and the bound (5), ``E_q[log p_theta] + H(q)``) and
their parallel block update (section 3.5: each block replaced by
``softmax(g / m)``, g the gradient of the expectation in the block's entries
and m the block's expected uses: :func:`fsmlearn.algo.product_block_update`).

:class:`TiedEStep` holds the blocks and picks how these run:

* ``"sweep"``: the update and the statistics fused into three passes over the
  machine, in this process, split over its threads
  (:mod:`fsmlearn.algo.tied.sweep`: c's forward values are fixed and the blocks
  normalised, so the product's backward values are 1 and no solve is needed);
* ``"shards"``: the same passes on parts of the machine held by Dask workers
  (:mod:`fsmlearn.algo.tied.shards`; the one-process sweep is its one-part case);
* ``"cuda"``: the per-event kernels on a CUDA device (:mod:`fsmlearn.algo.cuda.tied`);
* ``"cond"``: blocks conditioned on the previous tag (:mod:`fsmlearn.algo.tied.cond`);
* ``"events"``: the per-event kernels on the CPU (:mod:`fsmlearn.algo.tied.objective`),
  which also give the gradient and the statistics of any blocks;
* ``"general"``: the engine's generic routines over the implicit product
  (:mod:`fsmlearn.algo.tied.general`: forward and backward solves, posteriors,
  the expectation and its gradient), the reference the others are checked
  against.

``schedule="auto"`` picks ``cuda`` on that device, ``cond`` for conditioned
blocks, ``shards`` with a Dask client, ``events`` when the caller asks for
gradients, and ``sweep`` otherwise.  The n_q = 1 schedules give the same numbers:
the tests hold ``sweep`` (one thread and two), ``events`` and ``general`` to 1e-9
against each other, ``shards`` to 1e-9 against one process, and ``cuda`` (in numba's
simulator) to 1e-6 against the CPU; ``cond`` is checked against the materialised
machine of its blocks.

Public names: TiedEStep, SCHEDULES.
"""

from __future__ import annotations

import numpy as np

from ...errors import ArgumentError
from ..cuda import check_device
from .cond import CondBlocks, d_bound_d_phi_cond, estep_parallel_cond, expected_stats_cond
from .kernels import ParIndex
from .objective import MIN_BLOCK_MASS, Stats, d_bound_d_phi, estep_parallel, expected_stats
from .structure import TiedStructure
from .sweep import finish_pass, pass_inputs, sweep_bounds, sweep_parts

__all__ = ["TiedEStep", "SCHEDULES"]

SCHEDULES = ("auto", "sweep", "shards", "cuda", "cond", "events", "general")


class TiedEStep:
    """The blocks phi of a tied product, their statistics and their parallel update.

    Args:
        ts: the tied product's structure.
        phi: float64 [K], the start (default: uniform blocks).
        cond: which blocks are also conditioned on the previous tag
            (:meth:`CondBlocks.build`): ``"none"``, ``"roots"``, ``"all"``, a bool [N]
            mask of source states, or a built :class:`CondBlocks`.
        gradients: the caller needs :meth:`d_bound_d_phi` and the statistics of blocks
            other than the current ones (:meth:`stats_of`).
        threads: CPU threads of the passes (default: numba's thread count).
        device: ``"cpu"`` or ``"cuda"``.
        client: a ``distributed.Client``: the passes run on parts of the machine held by
            its workers; ``folder`` is where the parts' files go, ``parts`` how many
            (default: one per worker thread), ``checkpoint`` every how many updates the
            parts write their blocks to files, ``progress`` a callable(str).
        schedule: one of :data:`SCHEDULES` (``"auto"``: the engine's choice).

    Raises:
        ArgumentError: a schedule that cannot run these blocks (conditioned blocks on the
            device or on Dask, gradients from the fused passes, an unknown name).
        FsmError: device="cuda" without a CUDA device or numba's simulator.
    """

    def __init__(self, ts: TiedStructure, phi=None, *, cond="none", gradients: bool = False,
                 threads: int | None = None, device: str = "cpu", client=None, folder: str | None = None,
                 parts: int | None = None, checkpoint: int = 10, progress=None, schedule: str = "auto"):
        if schedule not in SCHEDULES:
            raise ArgumentError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
        self.ts = ts
        self.device = check_device(device)
        if isinstance(cond, CondBlocks):
            self.cond = cond
        else:
            self.cond = None if isinstance(cond, str) and cond == "none" else CondBlocks.build(ts, cond)
        if self.cond is not None and self.cond.K2 == 0:
            self.cond = None
        self.schedule = self._pick(schedule, gradients, client)
        phi = ts.uniform_phi() if phi is None else np.asarray(phi, np.float64)
        self.phi2 = self.cond.uniform(ts) if self.cond is not None else None
        self._phi = None
        self._cq = None
        self._sw = None
        self._sh = None
        self.px = None
        self._U = None              # the adjoint of the last conditioned update (its next warm start)
        self._A2 = None             # alpha2 of the last conditioned statistics (their next warm start)
        s = self.schedule
        if s == "cuda":
            from ..cuda.tied import cuda_cq
            self._cq = cuda_cq(ts)
            self._phi = self._cq.put(phi)
        elif s == "shards":
            if folder is None:
                raise ArgumentError("the shards schedule needs a folder for the parts' files")
            from .shards import ShardedPasses
            self._sh = ShardedPasses(ts, client, folder, parts, phi, progress, checkpoint)
        else:
            self._phi = phi
            if s == "sweep":
                import numba
                self._sw = sweep_bounds(ts, threads or numba.get_num_threads())
            elif s == "events" and (threads is None or threads > 1):
                px = ParIndex(ts, threads)
                self.px = px if px.threads > 1 else None

    def _pick(self, schedule, gradients, client):
        if schedule == "auto":
            if self.device == "cuda":
                schedule = "cuda"
            elif self.cond is not None:
                schedule = "cond"
            elif client is not None:
                schedule = "shards"
            else:
                schedule = "events" if gradients else "sweep"
        if self.cond is not None and schedule == "cuda":
            raise ArgumentError("blocks conditioned on the previous tag have no CUDA path; use device='cpu' "
                                "or cond='none'")
        if self.cond is not None and schedule != "cond":
            raise ArgumentError(f"blocks conditioned on the previous tag run on the 'cond' schedule (CPU, one "
                                f"process), not {schedule!r}; use cond='none' for the others")
        if self.cond is None and schedule == "cond":
            raise ArgumentError("the 'cond' schedule needs blocks conditioned on the previous tag (cond=...)")
        if (self.device == "cuda") != (schedule == "cuda"):
            raise ArgumentError(f"device {self.device!r} does not run the {schedule!r} schedule")
        if (client is not None) != (schedule == "shards"):
            raise ArgumentError("the 'shards' schedule and a Dask client go together")
        if gradients and schedule in ("sweep", "shards"):
            raise ArgumentError(f"the {schedule!r} schedule gives no gradients; use 'events' (or 'auto')")
        return schedule

    # ------------------------------------------------------------------ the blocks

    @property
    def phi(self) -> np.ndarray:
        """float64 [K]: the blocks (a host copy when they live on the device or the workers)."""
        if self._sh is not None:
            return self._sh.phi()
        if self._cq is not None:
            return self._phi.copy_to_host()
        return self._phi

    @phi.setter
    def phi(self, value):
        if self._sh is not None:
            raise ArgumentError("the blocks of a sharded E-step live in its workers: give them at construction")
        value = np.asarray(value, np.float64)
        self._phi = self._cq.put(value) if self._cq is not None else value

    @property
    def parts(self) -> int:
        """How many parts the fused passes split the machine into (0: not those schedules)."""
        if self._sh is not None:
            return len(self._sh.parts)
        return 0 if self._sw is None else self._sw.threads

    @property
    def shards(self):
        """The Dask parts (:class:`fsmlearn.algo.tied.shards.ShardedPasses`), or None."""
        return self._sh

    def close(self) -> None:
        """Make the workers forget the parts (the shards schedule; nothing otherwise)."""
        if self._sh is not None:
            self._sh.close()

    # ------------------------------------------------------------------ statistics and updates

    def stats(self, log_trans, log_emit) -> Stats:
        """The statistics of the current blocks against theta: expected transition counts
        [T+1, T+1], entry counts [T, V+1], entropy, the bound (5), alpha2 and G."""
        s = self.schedule
        if s in ("sweep", "shards"):
            return self._pass(None, log_trans, log_emit)
        if s == "cond":
            st = expected_stats_cond(self.ts, self.cond, self._phi, self.phi2, log_trans, log_emit, warm=self._A2)
            self._A2 = st.alpha2
            return st
        return self.stats_of(self._phi, log_trans, log_emit)

    def stats_of(self, phi, log_trans, log_emit) -> Stats:
        """The statistics of blocks ``phi`` (not the current ones) against theta."""
        s = self.schedule
        if s == "cuda":
            return self._cq.expected_stats(phi, log_trans, log_emit)
        if s == "events":
            return expected_stats(self.ts, phi, log_trans, log_emit, self.px)
        if s == "general":
            from .general import stats_product
            return stats_product(self.ts, phi, log_trans, log_emit)
        if s == "sweep":
            A2c, G, ent = sweep_parts(self._sw, np.asarray(phi, np.float64), None, None, False)
            return finish_pass(self.ts, A2c, G, ent, log_trans, log_emit)
        raise ArgumentError(f"the {s!r} schedule gives the statistics of its own blocks only")

    def update(self, log_trans, log_emit, stats: Stats | None = None) -> Stats:
        """One parallel block update of every block against theta (section 3.5), given the
        statistics of the current blocks (computed when None); returns those of the new."""
        s = self.schedule
        ts = self.ts
        if s in ("sweep", "shards"):
            if stats is None:
                stats = self._pass(None, log_trans, log_emit)
            return self._pass(stats, log_trans, log_emit)
        if s == "cond":
            st = stats if stats is not None else self.stats(log_trans, log_emit)
            self._phi, self.phi2, self._U = estep_parallel_cond(ts, self.cond, self._phi, self.phi2, log_trans,
                                                                log_emit, st.alpha2, warm_u=self._U, G=st.G)
            return self.stats(log_trans, log_emit)
        a2 = None if stats is None else stats.alpha2
        G = None if stats is None else stats.G
        if s == "cuda":
            self._phi = self._cq.estep(self._phi, log_trans, log_emit, a2, G)
        elif s == "events":
            self._phi = estep_parallel(ts, self._phi, log_trans, log_emit, a2, self.px, G)
        else:
            from .general import block_update_product
            self._phi = block_update_product(ts, self._phi, log_trans, log_emit, MIN_BLOCK_MASS)
        return self.stats(log_trans, log_emit)

    def d_bound_d_phi(self, log_trans, log_emit) -> np.ndarray:
        """d r / d phi at the current blocks (phi's shape; the conditioned schedule: the pair
        (d r / d phi, d r / d phi2))."""
        s = self.schedule
        if s == "cuda":
            return self._cq.d_bound_d_phi(self._phi, log_trans, log_emit)
        if s == "events":
            return d_bound_d_phi(self.ts, self._phi, log_trans, log_emit)
        if s == "cond":
            return d_bound_d_phi_cond(self.ts, self.cond, self._phi, self.phi2, log_trans, log_emit)
        if s == "general":
            from .general import d_bound_d_phi_product
            return d_bound_d_phi_product(self.ts, self._phi, log_trans, log_emit)
        raise ArgumentError(f"the {s!r} schedule gives no gradients; use 'events' (or 'auto' with gradients=True)")

    def _pass(self, stats, lt, le):
        """The fused passes (:mod:`fsmlearn.algo.tied.sweep`) on this process's part or on the
        Dask parts: with ``stats`` of the current blocks the update, then the statistics."""
        update = stats is not None
        M, UE = pass_inputs(self.ts, stats, lt, le) if update else (None, None)
        if self._sh is not None:
            A2c, G, ent = self._sh.run(M, UE, update)
        else:
            A2c, G, ent = sweep_parts(self._sw, self._phi, M, UE, update)
        return finish_pass(self.ts, A2c, G, ent, lt, le)

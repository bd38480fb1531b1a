"""The engine over a batch of machines (:class:`~fsmlearn.fsm.MachineBatch`) in one call.

A batch is the disjoint union of its machines, so every generic routine runs
once over the union's arrays (one schedule, one pass of each kernel, on the CPU
or, for the solves and forward-backward, the CUDA path) and answers for every
machine:

* forward values start from every machine's own start state (each gets the
  semiring's one), so the union's forward value of a state is its forward value
  in its own machine; backward values need nothing (no arc leaves a machine);
* totals are the backward values at the starts: ``Z_b = beta(start_b)``;
* arc flows divide by the Z of the machine that owns the arc,
  ``alpha(s) w beta(d) / Z_b`` (:func:`fsmlearn.algo.posteriors.fb_core`);
* expectations and entropies read the expectation semiring's backward rows at
  the starts (Eisner 2002; Li and Eisner 2009, section 3 and 4.1);
* best paths follow one tropical solve's back-pointers from each machine's best
  final state; samples are drawn from each start over one backward solve.

On cyclic machines the stopping rule of :mod:`fsmlearn.algo.convergence`
applies to the union's rows as a whole (the largest relative change of any
row), so every machine is solved to the batch's tolerance; acyclic batches
(sentence lattices) take one pass.

The public functions of :mod:`fsmlearn.algo` (``forward``, ``backward``,
``total_weight``, ``forward_backward``, ``arc_posteriors``,
``final_posteriors``, ``expectation``, ``entropy``, ``best_path``,
``sample_paths``) call these when given a batch.

Public names: BatchForwardBackward, batch_values, batch_total_weight,
batch_forward_backward, batch_expectation, batch_entropy, batch_best_paths,
batch_best_path, batch_sample_paths.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..errors import ArgumentError, MachineError, NoAcceptingPathError, SemiringError
from ..fsm.batch import MachineBatch
from .paths import Path, Samples, _sample_kernel, _Sampler
from .posteriors import ForwardBackward
from .score import label_hash

__all__ = ["BatchForwardBackward", "batch_values", "batch_total_weight", "batch_forward_backward",
           "batch_expectation", "batch_entropy", "batch_best_paths", "batch_best_path", "batch_sample_paths"]


def _check(batch, func: str) -> MachineBatch:
    if not isinstance(batch, MachineBatch):
        raise ArgumentError(f"{func}: expected a fsmlearn.MachineBatch, got {type(batch).__name__}")
    return batch


def batch_values(batch: MachineBatch, semiring="log", reverse: bool = False, **kwargs) -> np.ndarray:
    """Forward (or backward) values of every state of every machine, flat [Q] in the
    union's numbering (``batch.split(values)`` gives one array per machine); the
    keyword arguments are :func:`fsmlearn.algo.shortest_distance`'s."""
    from .shortest import solve_values
    _check(batch, "forward" if not reverse else "backward")
    return_info = kwargs.pop("return_info", False)
    sr, V, info, extra = solve_values(batch.machine, semiring, reverse, starts=None if reverse else batch.starts,
                                      output=True, **kwargs)
    out = extra["output"] if V is None else sr.output(V)
    return (out, info) if return_info else out


def batch_total_weight(batch: MachineBatch, semiring="log", **kwargs) -> np.ndarray:
    """float64 [B]: each machine's total weight (its start's backward value; the
    semiring's zero for a machine without a start).  In the expectation semiring
    [B, 1+R]."""
    from .shortest import solve_values
    _check(batch, "total_weight")
    sr, V, _, _ = solve_values(batch.machine, semiring, True, **kwargs)
    st = batch.starts
    rows = sr.zero_rows(st.shape[0])
    ok = st >= 0
    rows[ok] = V[st[ok]]
    return sr.output(rows)


class BatchForwardBackward(ForwardBackward):
    """Forward-backward over a batch (log semiring), one Z per machine: a
    :class:`~fsmlearn.algo.posteriors.ForwardBackward` whose ``cost`` and
    ``log_partition`` are arrays.

    Attributes:
        batch: the MachineBatch.
        cost: float64 [B], -ln Z of each machine (inf: no accepting path).
        posteriors: float64 [E]: each arc's expected count in its own machine
            (the union's arc numbering; ``batch.split(x, "arcs")`` splits it).
        final_posteriors: float64 [Q]: the probability that a path of its machine
            ends at each state.
        alpha, beta: float64 [Q] forward and backward values (-ln) of every state
            within its own machine (computed on first access).
        info: (forward SolveInfo, backward SolveInfo) of the union's solves.
    """

    __slots__ = ("batch",)

    def __init__(self, batch, alpha, beta, cost, posteriors, final_posteriors, info):
        self.batch = batch
        self._alpha = alpha
        self._beta = beta
        self.cost = cost
        self.posteriors = posteriors
        self.final_posteriors = final_posteriors
        self.info = info

    def __repr__(self) -> str:
        return f"BatchForwardBackward({len(self.cost)} machines, total cost {float(np.sum(self.cost)):.6g})"


def batch_forward_backward(batch: MachineBatch, *, tol: float = 1e-11, max_sweeps: int = 100_000,
                           init_alpha=None, init_beta=None, phi: str = "failure", phi_final: bool = True,
                           device: str = "cpu", allow_empty: bool = False) -> BatchForwardBackward:
    """Forward values, backward values and arc posteriors of every machine of the batch.

    The arguments are :func:`fsmlearn.algo.forward_backward`'s; ``init_alpha`` and
    ``init_beta`` are flat [Q] arrays.

    Raises:
        NoAcceptingPathError: a machine with Z = 0 (the message names the first),
            unless ``allow_empty`` (its posteriors are then zero and its cost inf).
    """
    from .posteriors import fb_core
    _check(batch, "forward_backward")
    m = batch.machine
    sr, A, Bt, costs, post, fpost, infos = fb_core(m, batch.starts, batch.state_ptr, tol, max_sweeps, init_alpha,
                                                   init_beta, phi, phi_final, device, allow_empty,
                                                   "forward_backward", batch=True)
    return BatchForwardBackward(batch, lambda: sr.output(A), lambda: sr.output(Bt), costs, post, fpost, infos)


def _expectation_rows(batch: MachineBatch, func: str, arc_values, final_values=None, **kwargs):
    """(cost [B], E [B, R]) of the additive values, one expectation-semiring solve."""
    from .posteriors import expectation_backward
    # final values ride on arcs to one new state past the union's: backward values (all that
    # is read here) stay per machine, and the starts keep their numbers
    sr, Bt = expectation_backward(batch.machine, arc_values, final_values, **kwargs)
    st = batch.starts
    rows = sr.zero_rows(st.shape[0])
    rows[st >= 0] = Bt[st[st >= 0]]
    out = sr.output(rows)
    empty = ~(out[:, 0] < math.inf)
    if empty.any():
        b = int(np.flatnonzero(empty)[0])
        raise NoAcceptingPathError(f"{func}: machine {b} of the batch has no accepting path (Z = 0; "
                                   f"{int(empty.sum())} of {len(st)} such): its {func} is undefined")
    return out[:, 0], out[:, 1:]


def batch_expectation(batch: MachineBatch, arc_values, final_values=None, **kwargs) -> np.ndarray:
    """float64 [B, R]: each machine's expectation of the additive values under its own path
    distribution (see :func:`fsmlearn.algo.expectation`; values flat over the union's arcs
    and states)."""
    _check(batch, "expectation")
    return _expectation_rows(batch, "expectation", arc_values, final_values, **kwargs)[1]


def batch_entropy(batch: MachineBatch, **kwargs) -> np.ndarray:
    """float64 [B]: each machine's path entropy in nats, ``ln Z + E[cost]`` (Li and Eisner
    2009, section 4.1; see :func:`fsmlearn.algo.entropy`)."""
    _check(batch, "entropy")
    w, f = batch.machine.neglog_weights()
    with np.errstate(invalid="ignore"):
        arc_cost = np.where(np.isfinite(w), w, 0.0)
        final_cost = np.where(np.isfinite(f), f, 0.0)
    cost, e = _expectation_rows(batch, "entropy", arc_cost, final_cost, **kwargs)
    return e[:, 0] - cost


# ---------------------------------------------------------------- best paths

@nb.njit(cache=True)
def _trace_best(total, bp, arc_src, state_ptr, starts):
    """Each machine's best final state and its back-pointer path.

    Returns (ptr int64 [B+1], arcs int64 (union numbering, in path order), cost [B],
    status, machine): status 0 ok, 1 a back-pointer cycle, 2 a path that does not end
    at the machine's start; ``machine`` names the one that failed.  A machine with no
    accepting path has cost inf and no arcs.
    """
    B = starts.shape[0]
    best = np.full(B, -1, np.int64)
    cost = np.full(B, np.inf)
    lens = np.zeros(B, np.int64)
    for b in range(B):
        if starts[b] < 0:
            continue
        for q in range(state_ptr[b], state_ptr[b + 1]):
            if total[q] < cost[b]:
                cost[b] = total[q]
                best[b] = q
        if best[b] < 0:
            continue
        s = best[b]
        n_b = state_ptr[b + 1] - state_ptr[b]
        L = 0
        while bp[s] >= 0:
            s = arc_src[bp[s]]
            L += 1
            if L > n_b:
                return np.zeros(B + 1, np.int64), np.empty(0, np.int64), cost, 1, b
        if s != starts[b]:
            return np.zeros(B + 1, np.int64), np.empty(0, np.int64), cost, 2, b
        lens[b] = L
    ptr = np.zeros(B + 1, np.int64)
    for b in range(B):
        ptr[b + 1] = ptr[b] + lens[b]
    arcs = np.empty(ptr[B], np.int64)
    for b in range(B):
        if best[b] < 0:
            continue
        s = best[b]
        i = ptr[b + 1]
        while bp[s] >= 0:
            i -= 1
            arcs[i] = bp[s]
            s = arc_src[bp[s]]
    return ptr, arcs, cost, 0, -1


def batch_best_paths(batch: MachineBatch, allow_empty: bool = False):
    """Every machine's best path (tropical semiring), flat: (ptr int64 [B+1], arcs int64 in
    the union's numbering, cost float64 [B]); machine b's path is ``arcs[ptr[b]:ptr[b+1]]``.

    Raises:
        NoAcceptingPathError: a machine accepts nothing (named), unless ``allow_empty``
            (its cost is then inf and its path empty).
        SemiringError: phi arcs (use ``phi_expand`` on the machines first).
        MachineError: back-pointers that form a cycle (zero-weight cycle ties).
    """
    from .shortest import solve_values
    _check(batch, "best_path")
    m = batch.machine
    if m.has_phi:
        raise SemiringError("best_path over phi machines needs their phi-free expansions: "
                            "MachineBatch.from_machines([phi_expand(m) for m in machines])")
    _, V, _, ex = solve_values(m, "tropical", False, starts=batch.starts)
    _, f = m.neglog_weights()
    total = V[:, 0] + f
    ptr, arcs, cost, status, b = _trace_best(total, ex["bp"], m.arc_src, batch.state_ptr, batch.starts)
    if status == 1:
        raise MachineError(f"best_path: machine {b} of the batch: back-pointers form a cycle "
                           "(zero-weight cycle ties)")
    if status == 2:
        raise MachineError(f"best_path: machine {b} of the batch: internal error, its back-pointers do not "
                           "end at its start state")
    empty = ~(cost < math.inf)
    if empty.any() and not allow_empty:
        b = int(np.flatnonzero(empty)[0])
        raise NoAcceptingPathError(f"best_path: machine {b} of the batch accepts no string "
                                   f"({int(empty.sum())} of {len(cost)} such): it has no best path; "
                                   "pass allow_empty=True to get None for such machines")
    return ptr, arcs, cost


def batch_best_path(batch: MachineBatch, allow_empty: bool = False) -> list:
    """list of B :class:`~fsmlearn.algo.paths.Path` (each in its own machine's numbering,
    as ``batch[b]`` numbers it; None for a machine that accepts nothing when
    ``allow_empty``)."""
    ptr, arcs, cost = batch_best_paths(batch, allow_empty)
    m = batch.machine
    out = []
    for b in range(len(batch)):
        if not cost[b] < math.inf:
            out.append(None)
            continue
        a = arcs[ptr[b]:ptr[b + 1]]
        s0 = batch.state_ptr[b]
        states = np.concatenate([[batch.starts[b]], m.dst[a]]).astype(np.int64) - s0
        out.append(Path(a - batch.arc_ptr[b], states, float(cost[b]), m.ilabel[a].copy(), m.olabel[a].copy()))
    return out


# ---------------------------------------------------------------- sampling

@nb.njit(cache=True)
def _sample_batch(num, seeds, starts, src_start, dst, ilabel, arc_p, arc_cum, final_p, phi_arc, phi_p,
                  has_final, T, mask, L, max_len, phi_final):
    """``num`` paths from each start (paths._sample_kernel per machine, its own seed).

    Returns (ptr int64 [B*num+1], arcs, status, machine, sample)."""
    B = starts.shape[0]
    ptr = np.zeros(B * num + 1, np.int64)
    out = np.empty(1024, np.int64)
    n_out = 0
    for b in range(B):
        p, a, done, err = _sample_kernel(num, seeds[b], starts[b], src_start, dst, ilabel, arc_p, arc_cum,
                                         final_p, phi_arc, phi_p, has_final, T, mask, L, max_len, phi_final)
        if err != 0:
            return ptr, out[:n_out], err, b, done
        if n_out + a.shape[0] > out.shape[0]:
            bigger = np.empty(max(2 * out.shape[0], n_out + a.shape[0]), np.int64)
            bigger[:n_out] = out[:n_out]
            out = bigger
        out[n_out:n_out + a.shape[0]] = a
        for i in range(num):
            ptr[b * num + i + 1] = n_out + p[i + 1]
        n_out += a.shape[0]
    return ptr, out[:n_out], 0, -1, 0


def batch_sample_paths(batch: MachineBatch, num: int, seed: int = 0, max_length: int | None = None,
                       phi_final: bool = True, normalised: bool = False) -> list:
    """list of B :class:`~fsmlearn.algo.paths.Samples`: ``num`` paths of each machine, drawn
    in proportion to their weight (see :func:`fsmlearn.algo.sample_paths`), arc ids in each
    machine's own numbering.  One backward solve over the union; machine b draws with the
    seed ``(seed * 2654435761 + 97 * (b + 1)) mod 2**32``, so the result is a function of
    (seed, num) and the batch.

    Raises:
        NoAcceptingPathError: a machine accepts nothing (named).
        MachineError: a path reaches a dead end; ArgumentError: num < 0, or a path longer
            than ``max_length``.
    """
    _check(batch, "sample_paths")
    if num < 0:
        raise ArgumentError(f"num must be >= 0, got {num}")
    m = batch.machine
    sp = batch.cached(("sampler", bool(phi_final), bool(normalised)),
                      lambda: _Sampler(m, phi_final, bool(normalised), starts=batch.starts))
    T, mask, L = label_hash(m) if m.has_phi else (np.full((1, 3), -1.0), 0, 1)
    seed = int(seed) & 0xFFFFFFFF
    B = len(batch)
    seeds = (seed * 2654435761 + 97 * (np.arange(B, dtype=np.uint64) + 1)) & 0xFFFFFFFF
    num = int(num)
    ptr, arcs, err, b, done = _sample_batch(num, seeds.astype(np.int64), batch.starts, m.src_start, m.dst,
                                            m.ilabel, sp.arc_p, sp.arc_cum, sp.final_p, sp.phi, sp.phi_p,
                                            sp.has_final, T, mask, L, int(max_length or 0), bool(phi_final))
    if err == 1:
        raise MachineError(f"machine {b} of the batch, sample {done}: reached a state with no way to continue "
                           "(weights do not sum to the backward value; is the machine consistent?)")
    if err == 2:
        raise MachineError(f"machine {b} of the batch: phi chain longer than 63 levels while sampling")
    if err == 3:
        raise ArgumentError(f"machine {b} of the batch, sample {done}: path longer than max_length={max_length}")
    out = []
    for b in range(B):
        p = ptr[b * num:(b + 1) * num + 1]
        out.append(Samples(p - p[0], arcs[p[0]:p[-1]] - batch.arc_ptr[b]))
    return out

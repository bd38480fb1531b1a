"""Host drivers of the CUDA path: forward / backward values and arc flows on the device.

:func:`solve_plain_machine` and :func:`solve_phi_system` are what
:func:`fsmlearn.algo.shortest.solve_values` runs with ``device="cuda"`` for the
linear semirings (real, log, expectation): the same scaled rows out, the same
errors.

* A phi-free acyclic machine takes one level-synchronous pass over the
  longest-path layering (each level's states read only earlier levels): a
  wide level (2048 states or more) is one grid launch
  (:func:`~fsmlearn.algo.cuda.kernels.pull_level`), a run of narrower levels
  one single-block launch synchronised between levels
  (:func:`~fsmlearn.algo.cuda.kernels.pull_levels_block`), so a deep machine
  does not pay one launch per level.
* A phi-free cyclic machine is solved by Jacobi sweeps
  (:func:`~fsmlearn.algo.cuda.kernels.jacobi_sweep`) from its inputs or a
  warm start, the least solution of ``x = b (+) x (x) W`` (Mohri 2002).
  After each sweep the device reduces the rows' changes to three numbers and
  :func:`fsmlearn.algo.convergence.rate_step` decides, as on the CPU: converged
  (estimated remaining relative error ``change * r / (1 - r) <= tol``),
  diverged (a settled rate >= 1, or a row not finite or beyond 2**1000 of the
  inputs: :class:`~fsmlearn.errors.DivergenceError`), Aitken's extrapolation
  (real and log), or go on; the sweep limit raises
  :class:`~fsmlearn.errors.NotConvergedError`.
* A phi machine (exact failure semantics) runs the iteration of
  :func:`fsmlearn.algo.solve_phi.phi_solver` on the signed linear system of
  :mod:`fsmlearn.algo.phi`: per sweep one pull over the own and exclusion arcs
  and one level-synchronous pass over the phi forest, plain rows, the same
  stopping rule; own self-loops are applied exactly (their star), as on the
  CPU, and one of total weight >= 1 is the same ``DivergenceError``.

:func:`flows_cuda` computes the arc posteriors of :func:`fsmlearn.algo.posteriors.forward_backward`
on the device (phi systems: own arcs scattered to the machine's arcs, each
exclusion's negative flow added along its backoff chain, atomically).

Public names: solve_plain_machine, solve_phi_system, flows_cuda, device_arc_rows, device_arc_ends, final_flows_cuda,
threads_for, launch, forest_levels, forest_pass_rows, reduce_sum, level_runs,
plain_sweep_decision.
"""

from __future__ import annotations

import warnings

import numba as nb
import numpy as np
from numba import cuda

from ...semiring.ops import P2
from ..convergence import (_JITTER, _UNBOUNDED, RATE_EXTRAPOLATE, STATUS_DIVERGED, STATUS_NOT_CONVERGED, STATUS_OK,
                           WHY_NONFINITE, WHY_STAR, new_rate_state, raise_for_status, rate_step, stop_status)
from ..phi import phi_depths
from . import kernels as K

__all__ = ["solve_plain_machine", "solve_phi_system", "flows_cuda", "device_arc_rows", "device_arc_ends", "final_flows_cuda", "threads_for", "launch",
           "forest_levels", "forest_pass_rows", "reduce_sum", "level_runs", "plain_sweep_decision"]

# numba.cuda warns at every launch of a grid smaller than the device could fill; this
# path launches such grids on purpose (narrow levels, small machines, reductions), and
# on a GPU an n-gram EM iteration printed dozens of these warnings
warnings.filterwarnings("ignore", message=r"Grid size \d+ will likely result in GPU under-utilization")

_TPB = 128          # threads per block on a device (the simulator gets exactly as many as there is work)
_FACTOR = 6         # convergence.FACTOR: the field of the rate state holding Aitken's factor


def threads_for(n: int):
    """(blocks, threads per block) covering n items; at least one thread."""
    n = max(int(n), 1)
    tpb = min(_TPB, n)
    return (n + tpb - 1) // tpb, tpb


def launch(kernel, n, *args):
    """Run ``kernel`` with one thread per item of n (nothing for n = 0)."""
    if n > 0:
        b, t = threads_for(n)
        kernel[b, t](*args)


_launch = launch


def reduce_sum(x) -> float:
    """The sum of a float64 device vector, reduced on the device in chunks of kernels.CHUNK."""
    n = x.shape[0]
    if n == 0:
        return 0.0
    part = cuda.device_array((n + K.CHUNK - 1) // K.CHUNK)
    launch(K.chunk_sums, part.shape[0], x, part)
    while part.shape[0] > 1:
        nxt = cuda.device_array((part.shape[0] + K.CHUNK - 1) // K.CHUNK)
        launch(K.chunk_sums, nxt.shape[0], part, nxt)
        part = nxt
    return float(part.copy_to_host()[0])


_P2_DEV = {}


def _p2_device():
    d = _P2_DEV.get(0)
    if d is None:
        d = _P2_DEV[0] = cuda.to_device(P2)
    return d


# ---------------------------------------------------------------- host-side structure (cached per machine)

@nb.njit(cache=True)
def _levels(n, ptr, nbr):
    """Longest-path level of every state when each state pulls from nbr[ptr[t]:ptr[t+1]];
    returns (level int64 [n], ok): ok False when the pull graph has a cycle (self-loops too)."""
    # out-degree in the pull graph = the number of states that pull from s
    pulled_by_ptr = np.zeros(n + 1, np.int64)
    for t in range(n):
        for j in range(ptr[t], ptr[t + 1]):
            pulled_by_ptr[nbr[j] + 1] += 1
    for s in range(n):
        pulled_by_ptr[s + 1] += pulled_by_ptr[s]
    fill = pulled_by_ptr[:-1].copy()
    pulled_by = np.empty(pulled_by_ptr[n], np.int64)
    for t in range(n):
        for j in range(ptr[t], ptr[t + 1]):
            s = nbr[j]
            pulled_by[fill[s]] = t
            fill[s] += 1
    need = np.zeros(n, np.int64)
    for t in range(n):
        need[t] = ptr[t + 1] - ptr[t]
    level = np.zeros(n, np.int64)
    queue = np.empty(n, np.int64)
    qh = 0
    qt = 0
    for t in range(n):
        if need[t] == 0:
            queue[qt] = t
            qt += 1
    while qh < qt:
        s = queue[qh]
        qh += 1
        for j in range(pulled_by_ptr[s], pulled_by_ptr[s + 1]):
            t = pulled_by[j]
            if level[s] + 1 > level[t]:
                level[t] = level[s] + 1
            need[t] -= 1
            if need[t] == 0:
                queue[qt] = t
                qt += 1
    return level, qt == n


def _pull_csr(m, reverse: bool):
    """(ptr, nbr, arc) int64: the arcs each state pulls (backward: its own CSR; forward: by destination)."""
    def build():
        if reverse:
            ptr = np.asarray(m.src_start, np.int64)
            return ptr, np.asarray(m.dst, np.int64), np.arange(m.num_arcs, dtype=np.int64)
        order = np.argsort(m.dst, kind="stable").astype(np.int64)
        ptr = np.zeros(m.num_states + 1, np.int64)
        np.cumsum(np.bincount(m.dst, minlength=m.num_states), out=ptr[1:])
        return ptr, np.asarray(m.arc_src, np.int64)[order], order
    return m.cached(("cuda_pull_csr", reverse), build)


_WIDE = 2048        # a level with this many states gets a grid of its own; narrower ones share one block
_BLOCK = 256        # threads of the block that runs a run of narrow levels


def level_runs(level_ptr):
    """[(l0, l1, wide, width)]: levels 1 .. L (level 0 pulls nothing) cut into single wide
    levels and maximal runs of narrow ones, each run with its widest level's width."""
    widths = np.diff(level_ptr)
    runs = []
    lv = 1
    L = widths.size
    while lv < L:
        if widths[lv] >= _WIDE:
            runs.append((lv, lv + 1, True, int(widths[lv])))
            lv += 1
            continue
        l1 = lv
        while l1 < L and widths[l1] < _WIDE:
            l1 += 1
        runs.append((lv, l1, False, int(widths[lv:l1].max())))
        lv = l1
    return runs


def _device_graph(m, reverse: bool):
    """Device copies of the pull CSR and, for an acyclic machine, its levels (cached per machine).

    Returns a dict: ptr, nbr, arc (device int64), acyclic (bool), and for
    acyclic machines states (device int64 [n], by level) and level_ptr (host
    int64 [L+1]).
    """
    def build():
        ptr, nbr, arc = _pull_csr(m, reverse)
        level, acyclic = _levels(m.num_states, ptr, nbr)
        g = {"ptr": cuda.to_device(ptr), "nbr": cuda.to_device(nbr), "arc": cuda.to_device(arc),
             "acyclic": bool(acyclic)}
        if acyclic:
            order = np.argsort(level, kind="stable").astype(np.int64)
            lp = np.zeros(int(level.max(initial=0)) + 2, np.int64)
            np.cumsum(np.bincount(level, minlength=lp.size - 1), out=lp[1:])
            g["states"] = cuda.to_device(order)
            g["level_ptr"] = lp
            g["level_ptr_d"] = cuda.to_device(lp)
            g["runs"] = level_runs(lp)
        return g
    return m.cached(("cuda_graph", reverse), build)


def _on_device(x, dtype=None):
    """x itself when it is already a device array, else a device copy of it."""
    if hasattr(x, "copy_to_host"):
        return x
    return cuda.to_device(np.ascontiguousarray(x, dtype))


def device_arc_rows(m, sr):
    """The arc rows of machine ``m`` in semiring ``sr`` (no arc values), on the device,
    converted and copied once per machine (machines are immutable, so the rows cannot go
    stale; the CPU path caches its converted rows the same way)."""
    return m.cached(("cuda_arc_rows", sr.name),
                    lambda: cuda.to_device(np.ascontiguousarray(sr.arc_rows(m.weight, m.semiring, None))))


def device_arc_ends(m):
    """(tail, head) of the machine's arcs as device int64 arrays, cached per machine."""
    return m.cached("cuda_arc_ends", lambda: (cuda.to_device(np.ascontiguousarray(m.arc_src, np.int64)),
                                              cuda.to_device(np.ascontiguousarray(m.dst, np.int64))))


# ---------------------------------------------------------------- phi-free machines

def _reduce(dn, sd, bad, part_d):
    _launch(K.reduce_change, part_d.shape[0], dn, sd, bad, part_d)
    part = part_d.copy_to_host()
    first = part[:, 2]
    badrows = first[first >= 0]
    return float(part[:, 0].max()), float(part[:, 1].sum()), (int(badrows[0]) if badrows.size else -1)


def _jacobi(dg, W_d, B, X0, R, tol, max_sweeps, stats, fstats):
    """Jacobi sweeps of a phi-free system on scaled rows from X0 (None: from B); returns
    (status, rows on the device)."""
    n = B.shape[0]
    P2d = _p2_device()
    B_d = cuda.to_device(B)
    KE = B.shape[1] - 1
    if X0 is None:              # start from the inputs (a device-side copy)
        X = cuda.device_array_like(B)
        X.copy_to_device(B_d)
        nz = np.any(B[:, :KE] != 0.0, axis=1)
        kref = float(np.max(B[nz, KE])) if nz.any() else 0.0
    else:
        X = cuda.to_device(X0)
        nz = np.any(B[:, :KE] != 0.0, axis=1) | np.any(X0[:, :KE] != 0.0, axis=1)
        kref = float(np.max(np.maximum(B[nz, KE], X0[nz, KE]))) if nz.any() else 0.0
    Y = cuda.device_array_like(B)
    dn, sd, bad, part = _change_buffers(n)
    rs = new_rate_state(0.0)
    status = STATUS_NOT_CONVERGED
    while stats[0] < max_sweeps:
        _launch(K.jacobi_sweep, n, Y, X, B_d, dg["ptr"], dg["nbr"], dg["arc"], W_d, P2d, kref, dn, sd, bad)
        stats[0] += 1
        d, s, first_bad = _reduce(dn, sd, bad, part)
        fstats[0] = d
        if first_bad >= 0:
            stats[4] = WHY_NONFINITE
            stats[5] = first_bad
            X, Y = Y, X
            status = STATUS_DIVERGED
            break
        decision = rate_step(rs, d, s, tol, R == 0, True, R > 0, stats, fstats)
        if decision == RATE_EXTRAPOLATE:
            _launch(K.extrapolate_scaled, n, Y, X, float(rs[_FACTOR]), P2d)
            stats[1] += 1
        X, Y = Y, X
        if stop_status(decision) >= 0:
            status = stop_status(decision)
            break
    return status, X


def solve_plain_machine(m, sr, reverse, W, F, init, tol, max_sweeps, info, starts=None):
    """Values of a phi-free machine on the device: (host scaled rows [n, K], device rows).

    W: float64 [E, K] scaled arc rows (host, or already on the device:
    :func:`device_arc_rows`); F: float64 [n, K] final rows; init: a warm start
    in the semiring's output convention, or None; starts: several start states
    (a batch's; forward only) instead of ``m.start``.
    """
    n = m.num_states
    dg = _device_graph(m, reverse)
    W_d = _on_device(W)
    if reverse:
        B = np.ascontiguousarray(F)
    else:
        B = sr.zero_rows(n)
        B[m.start if starts is None else starts] = sr.one_row()
    info.components = 1
    info.cyclic = not dg["acyclic"]
    if dg["acyclic"]:
        V_d = cuda.to_device(B)
        lp = dg["level_ptr"]
        P2d = _p2_device()
        for l0, l1, wide, width in dg["runs"]:    # level 0 pulls nothing: its rows are its inputs
            if wide:
                s0, s1 = int(lp[l0]), int(lp[l1])
                _launch(K.pull_level, s1 - s0, V_d, dg["states"], s0, s1, dg["ptr"], dg["nbr"], dg["arc"], W_d, P2d)
            else:
                K.pull_levels_block[1, min(_BLOCK, width)](V_d, dg["states"], dg["level_ptr_d"], l0, l1, dg["ptr"],
                                                           dg["nbr"], dg["arc"], W_d, P2d)
        info.sweeps = 1
        return V_d.copy_to_host(), V_d
    if init is not None:
        X0 = sr.rows_from_output(init)
        if X0.shape[0] != n:
            from ...errors import SemiringError
            raise SemiringError(f"init has {X0.shape[0]} rows for {n} states")
        X0 = np.ascontiguousarray(X0)
    else:
        X0 = None
    stats = np.zeros(6, np.int64)
    fstats = np.zeros(4)
    status, V_d = _jacobi(dg, W_d, B, X0, sr.R, float(tol), int(max_sweeps), stats, fstats)
    info.sweeps, info.extrapolations = int(stats[0]), int(stats[1])
    info.last_change, info.rate = float(fstats[0]), float(fstats[2])
    raise_for_status(status, stats, fstats, what="backward" if reverse else "forward",
                     where="the machine's cycles (CUDA Jacobi sweeps)", tol=tol, max_sweeps=max_sweeps,
                     num_states=n)
    return V_d.copy_to_host(), V_d


# ---------------------------------------------------------------- phi systems

def forest_levels(parent) -> dict:
    """A forest (int64 [n] parent of each node, -1 for roots) by depth, on the device.

    Returns a dict: states (device int64 [n], by increasing depth), level_ptr
    (host int64 [L+2]: depth d's states are states[level_ptr[d]:level_ptr[d+1]]),
    cptr / child (device CSR of each node's children) and phi_t (device parents).
    """
    parent = np.asarray(parent, np.int64)
    n = parent.shape[0]
    depth, order = phi_depths(parent, n)
    lp = np.zeros(int(depth.max(initial=0)) + 2, np.int64)
    np.cumsum(np.bincount(depth, minlength=lp.size - 1), out=lp[1:])
    kids = np.flatnonzero(parent >= 0)
    korder = kids[np.argsort(parent[kids], kind="stable")].astype(np.int64)
    cptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(parent[kids], minlength=n), out=cptr[1:])
    return {"states": cuda.to_device(np.asarray(order, np.int64)), "level_ptr": lp,
            "cptr": cuda.to_device(cptr), "child": cuda.to_device(korder), "phi_t": cuda.to_device(parent)}


def forest_pass_rows(X, fo, w, transpose: bool) -> None:
    """In place on the device, the forest's pass over matrix rows X [n, m] with weights w [n]:
    ``P X`` (each row times its weight added to its parent's, deepest first) or, transposed,
    ``P^T X`` (each row receives its parent's, shallowest first); the twin of
    :func:`fsmlearn.algo.product.phi_pass_rows`.  ``fo``: :func:`forest_levels`."""
    lp = fo["level_ptr"]
    if transpose:
        for lv in range(1, lp.size - 1):
            s0, s1 = int(lp[lv]), int(lp[lv + 1])
            _launch(K.forest_down_rows, s1 - s0, X, fo["states"], s0, s1, fo["phi_t"], w)
    else:
        for lv in range(lp.size - 3, -1, -1):
            s0, s1 = int(lp[lv]), int(lp[lv + 1])
            _launch(K.forest_up_rows, s1 - s0, X, fo["states"], s0, s1, fo["cptr"], fo["child"], w)


def _phi_forest(m, phi_t):
    """:func:`forest_levels` of a machine's phi forest (cached per machine)."""
    return m.cached("cuda_phi_forest", lambda: forest_levels(phi_t))


def _phi_up(Z, fo, Wphi_d):
    """Z <- (I - Phi^T)^{-1} Z: each row's mass also flows to its backoff states (deepest first)."""
    lp = fo["level_ptr"]
    for lv in range(lp.size - 3, -1, -1):    # a level pulls from the one below it
        s0, s1 = int(lp[lv]), int(lp[lv + 1])
        _launch(K.phi_up_level, s1 - s0, Z, fo["states"], s0, s1, fo["cptr"], fo["child"], Wphi_d)


def _phi_down(Z, fo, Wphi_d, D_d, self_d):
    """Z <- (I - Phi)^{-1} Z with the self-loop stars: each row adds its backoff state's row, then
    takes its own loops' star (shallowest first; roots take only their stars)."""
    lp = fo["level_ptr"]
    for lv in range(0, lp.size - 1):
        s0, s1 = int(lp[lv]), int(lp[lv + 1])
        _launch(K.phi_down_level, s1 - s0, Z, fo["states"], s0, s1, fo["phi_t"], Wphi_d, D_d, self_d)


def solve_phi_system(m, phi_t, row_ptr, col, Wp, self_arc, Wphi, B, X0, forward, R, tol, max_sweeps, stats,
                     fstats):
    """Jacobi iteration of a phi system on the device (plain rows); returns (status, host rows).

    The arrays are those of :func:`fsmlearn.algo.shortest._solve_phi_system`:
    row_ptr / col int64 CSR of the own (non-phi) and exclusion arcs by row, Wp
    their plain rows, self_arc which of them are own self-loops, Wphi [n, R+1]
    each state's phi arc (zero: none), B the inputs, X0 the start (gamma for
    forward).  Forward returns alpha = (I - Phi^T)^{-1} gamma.
    """
    n = X0.shape[0]
    KE = R + 1
    # own self-loops: each row's total D (applied as its star), and one of weight >= 1 diverges
    rows = np.repeat(np.arange(n), np.diff(row_ptr))
    D = np.zeros((n, KE))
    np.add.at(D, rows[self_arc], Wp[self_arc])
    has_self = np.bincount(rows[self_arc], minlength=n) > 0
    badl = np.flatnonzero(has_self & ~(D[:, 0] < 1.0))
    if badl.size:
        stats[4] = WHY_STAR
        stats[5] = int(badl[0])
        return STATUS_DIVERGED, None
    D_d = cuda.to_device(D)
    self_d = cuda.to_device(has_self.astype(np.int64))
    sa_d = cuda.to_device(np.asarray(self_arc).astype(np.int64))
    fo = _phi_forest(m, phi_t)
    ptr_d = cuda.to_device(np.asarray(row_ptr, np.int64))
    col_d = cuda.to_device(np.asarray(col, np.int64))
    W_d = cuda.to_device(np.ascontiguousarray(Wp))
    Wphi_d = cuda.to_device(np.ascontiguousarray(Wphi))
    B_d = cuda.to_device(np.ascontiguousarray(B))
    X = cuda.to_device(np.ascontiguousarray(X0))
    Y = cuda.device_array_like(X)
    Z = cuda.device_array_like(X) if forward else None
    D = cuda.device_array_like(X)
    rows = cuda.device_array((n, 4))
    rs = new_rate_state(0.0)
    status = STATUS_NOT_CONVERGED
    while stats[0] < max_sweeps:
        if forward:
            Z.copy_to_device(X)
            _phi_up(Z, fo, Wphi_d)
            _launch(K.phi_pull, n, Y, Z, X, B_d, ptr_d, col_d, W_d, sa_d, D_d, self_d, True)
        else:
            _launch(K.phi_pull, n, Y, X, X, B_d, ptr_d, col_d, W_d, sa_d, D_d, self_d, False)
            _phi_down(Y, fo, Wphi_d, D_d, self_d)
        stats[0] += 1
        # the rule of convergence.measure_change, as the CPU's phi solve takes it: changes at
        # the rounding level of the largest value left out (a phi system cancels large terms)
        _launch(K.row_changes, n, X, Y, D, rows)
        d, s, diverged = change_rule(rows.copy_to_host(), stats)
        fstats[0] = d
        if diverged:
            status = STATUS_DIVERGED
            break
        stop = plain_sweep_decision(rs, d, s, tol, KE == 1, KE > 1, X, D, stats, fstats)
        if stop is not None:
            status = stop
            break
    if status == STATUS_OK and forward:
        _phi_up(X, fo, Wphi_d)
    return status, X.copy_to_host()


def change_rule(rows, stats):
    """(dn, sd, diverged) of a step from its rows' (largest value, largest change, L1
    change, not finite) (:func:`fsmlearn.algo.cuda.kernels.row_changes`, on the host): the
    rule of :func:`fsmlearn.algo.convergence.measure_change`, changes below 16 ulps of the
    largest value left out; on a value not finite or beyond 2**1000, stats[4] =
    WHY_NONFINITE and stats[5] the first such row (or 0)."""
    mx, d, s, bad = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    sd = float(s.sum())
    bad_rows = np.flatnonzero(bad > 0)
    big = float(mx.max(initial=0.0)) if not bad_rows.size else np.inf
    if bad_rows.size or big > _UNBOUNDED:
        stats[4] = WHY_NONFINITE
        stats[5] = int(bad_rows[0]) if bad_rows.size else 0
        return 0.0, sd, True
    keep = d > _JITTER * big
    rel = np.where(mx[keep] > 0.0, d[keep] / np.where(mx[keep] > 0.0, mx[keep], 1.0), 1.0)
    return float(rel.max(initial=0.0)), sd, False


def _change_buffers(n):
    """Device arrays a sweep's change is measured in: per row (largest relative change, L1
    change, bad flag) and :func:`_reduce`'s partial sums."""
    return (cuda.device_array(n), cuda.device_array(n), cuda.device_array(n, np.int64),
            cuda.device_array(((n + K.CHUNK - 1) // K.CHUNK, 3)))


def plain_sweep_decision(rs, d, s, tol, extrapolate, tail2, X, D, stats, fstats):
    """The engine's stopping rule after a sweep on plain device rows: STATUS_OK or
    STATUS_DIVERGED to stop, None to go on (Aitken's step on the device, ``X += factor D``,
    when :func:`fsmlearn.algo.convergence.rate_step` asks for it)."""
    decision = rate_step(rs, d, s, tol, extrapolate, True, tail2, stats, fstats)
    if stop_status(decision) >= 0:
        return stop_status(decision)
    if decision == RATE_EXTRAPOLATE:
        _launch(K.extrapolate_plain, X.shape[0], X, D, float(rs[_FACTOR]))
        stats[1] += 1
    return None


# ---------------------------------------------------------------- flows

def _z_arrays(zp, zk, state_ptr, n):
    zp = np.atleast_1d(np.asarray(zp, np.float64))
    zk = np.atleast_1d(np.asarray(zk, np.float64))
    sp = np.array([0, n], np.int64) if state_ptr is None else np.asarray(state_ptr, np.int64)
    return cuda.to_device(zp), cuda.to_device(zk), _on_device(sp, np.int64)


def flows_cuda(A, W, Bt, tail, head, zp, zk, post_size=None, system=None, state_ptr=None):
    """float64 flows of every arc, ``alpha[tail] w beta[head] / Z``, computed on the device.

    Z = ``zp 2**zk``: scalars for one machine, or arrays [B] for a batch whose
    machines own the states ``state_ptr[b]:state_ptr[b+1]`` (each arc takes the
    Z of its tail state's machine).  With ``system`` (a dict: kind, ref, Wm, F,
    and the PhiStructure ``st``) the flows of a phi system's arcs are mapped to
    the machine's ``post_size`` arcs on the device: own arcs scattered, each
    exclusion arc's and final adjustment's negative flow added to every arc of
    its backoff chain.  Each of A, W, Bt, tail and head may already be on the device.
    """
    E = tail.shape[0]
    A_d = _on_device(A)
    Bt_d = _on_device(Bt)
    zp_d, zk_d, sp_d = _z_arrays(zp, zk, state_ptr, A.shape[0])
    out = cuda.device_array(E)
    _launch(K.arc_flows, E, A_d, _on_device(W), Bt_d, _on_device(tail, np.int64), _on_device(head, np.int64),
            zp_d, zk_d, sp_d, out)
    if system is None:
        return out.copy_to_host()
    post = cuda.to_device(np.zeros(post_size))
    _launch(K.scatter_flows, E, post, out, cuda.to_device(np.ascontiguousarray(system["kind"], np.int64)),
            cuda.to_device(np.ascontiguousarray(system["ref"], np.int64)))
    st = system["st"]
    Wm_d = cuda.to_device(np.ascontiguousarray(system["Wm"]))
    F_d = cuda.to_device(np.ascontiguousarray(system["F"]))
    for tail_s, ptr, chain, head_s, Hd in ((st.neg_tail, st.neg_ptr, st.neg_chain, st.neg_head, Bt_d),
                                           (st.nf_state, st.nf_ptr, st.nf_chain, st.nf_final, F_d)):
        if len(tail_s):
            _launch(K.chain_flows, len(tail_s), A_d, Wm_d, Hd, cuda.to_device(np.asarray(tail_s, np.int64)),
                    cuda.to_device(np.asarray(ptr, np.int64)), cuda.to_device(np.asarray(chain, np.int64)),
                    cuda.to_device(np.asarray(head_s, np.int64)), zp_d, zk_d, sp_d, post)
    return post.copy_to_host()


def final_flows_cuda(A, F, zp, zk, state_ptr=None):
    """float64 [n]: the probability of stopping at each state, alpha[q] F[q] / Z, on the device
    (Z per machine as in :func:`flows_cuda`; A may already be on the device)."""
    n = A.shape[0]
    zp_d, zk_d, sp_d = _z_arrays(zp, zk, state_ptr, n)
    out = cuda.device_array(n)
    _launch(K.final_flows, n, _on_device(A), _on_device(F), zp_d, zk_d, sp_d, out)
    return out.copy_to_host()

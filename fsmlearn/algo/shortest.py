"""Forward and backward values (shortest distance) in any semiring.

``shortest_distance(m, semiring, reverse)`` returns, for every state, the sum
(in the semiring) over all paths from the start state to it (forward), or
from it to a final state including the final weight (``reverse=True``,
backward), in the convention of ``pynini.shortestdistance`` on the same
machine: negative logs for the log and tropical semirings.

Acyclic machines take one pass in topological order; cyclic ones are solved by
relaxation (see :mod:`fsmlearn.algo.solve_linear`), warm-startable with ``init``.
Phi machines follow exact failure semantics (:mod:`fsmlearn.algo.phi`) in the
linear semirings; ``phi="epsilon"`` treats phi arcs as ordinary arcs instead
(an approximation that double-counts paths; never the default).

Public names: shortest_distance, forward, backward, total_weight,
SolveInfo, solve_values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numba as nb
import numpy as np

from ..errors import ArgumentError, SemiringError
from ..fsm.batch import MachineBatch
from ..fsm.chain import ChainBatch
from ..fsm.machine import PHI, Machine
from ..semiring import Semiring, get_semiring
from ..semiring.ops import PAR_ROWS, fma, neg_scaled, times_scaled
from .phi import LinearSystem, linear_system, phi_depths
from .schedule import Schedule, csr_is_forward_ordered, schedule_for
from .convergence import STATUS_NOT_CONVERGED, STATUS_OK, WHY_STAR, raise_for_status
from .cuda import check_device
from ._check import require_machine
from .solve_acyclic import (NOT_ORDERED, PIPE_CHUNK, PLAIN_DECLINED, PLAIN_DONE, acyclic_neglog,
                            acyclic_neglog_piped, acyclic_neglog_plain, neglog_plain)
from .bands import band_order, band_widths, bands_for, no_bands
from .solve_linear import gather, gather_par, gather_rows, linear_solver
from .solve_phi import phi_solver
from .solve_tropical import tropical_solver

DEFAULT_TOL = 1e-11
DEFAULT_MAX_SWEEPS = 100_000


@dataclass
class SolveInfo:
    """What a solve did: sweeps, extrapolations, components, contraction rate."""
    sweeps: int = 0
    extrapolations: int = 0
    repotentials: int = 0
    components: int = 0
    cyclic: bool = False
    last_change: float = 0.0
    rate: float = 0.0
    krylov: int = 0          # GMRES matrix-vector products (plain phi systems with slow modes)


def _graph(m: Machine, sr: Semiring, phi: str, phi_final: bool):
    if phi not in ("failure", "epsilon"):
        raise SemiringError(f"phi must be 'failure' or 'epsilon', got {phi!r}")
    if not m.has_phi or phi == "epsilon":
        return m
    if not sr.linear:
        raise SemiringError(
            f"the {sr.name} semiring cannot sum over a phi machine with failure semantics "
            "(it needs subtraction); use phi_expand(machine) first, or phi='epsilon'")
    return linear_system(m, phi_final)


def _check_arc_values(m: Machine, sr: Semiring, arc_values):
    if arc_values is None:
        if sr.R:
            raise SemiringError("the expectation semiring needs arc_values")
        return None
    v = np.asarray(arc_values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.shape != (m.num_arcs, sr.R):
        raise SemiringError(f"arc_values has shape {v.shape}; expected ({m.num_arcs}, {sr.R})")
    bad = np.flatnonzero(~np.isfinite(v).all(axis=1))
    if bad.size:
        raise SemiringError(f"arc_values of arc {int(bad[0])} is not finite: {v[bad[0]]}")
    return np.ascontiguousarray(v)


def _system_rows(g, m: Machine, sr: Semiring, arc_values):
    """Arc rows [E_sys, K] and adjusted final rows [N, K] of a phi system."""
    Wm = sr.arc_rows(m.weight, m.semiring, arc_values)
    F = sr.final_rows(m.final, m.semiring)
    st = g.phi
    kernels = _phi_kernels(sr.R)
    W = kernels.system_rows(Wm, g.kind, g.ref, st.neg_ptr, st.neg_chain)
    kernels.final_adjust(F, Wm, st.nf_state, st.nf_final, st.nf_ptr, st.nf_chain)
    return W, F


@nb.njit(cache=True)
def _phi_system_rows(Wm, kind, ref, neg_ptr, neg_chain):
    """Scaled rows of a phi system's arcs: an own arc's row, or minus the product of an
    exclusion arc's chain (rows of Wm, float64 [arcs, R + 2])."""
    K = Wm.shape[1]
    E = kind.shape[0]
    W = np.empty((E, K))
    for i in range(E):
        r = ref[i]
        if kind[i] == 0:
            for j in range(K):
                W[i, j] = Wm[r, j]
        else:
            c0 = neg_ptr[r]
            for j in range(K):
                W[i, j] = Wm[neg_chain[c0], j]
            for c in range(c0 + 1, neg_ptr[r + 1]):
                times_scaled(W, i, W, i, Wm, neg_chain[c])
            neg_scaled(W, i)
    return W


@nb.njit(cache=True)
def _phi_final_adjust(F, Wm, nf_state, nf_final, nf_ptr, nf_chain):
    """F[q] -= chain (x) F0[r] for each adjustment, reading the original finals F0."""
    K = F.shape[1]
    F0 = F.copy()
    T = np.empty((1, K))
    for i in range(nf_state.shape[0]):
        c0 = nf_ptr[i]
        for j in range(K):
            T[0, j] = Wm[nf_chain[c0], j]
        for c in range(c0 + 1, nf_ptr[i + 1]):
            times_scaled(T, 0, T, 0, Wm, nf_chain[c])
        neg_scaled(T, 0)
        fma(F, nf_state[i], T, 0, F0, nf_final[i])


_PHI_KERNELS = SimpleNamespace(system_rows=_phi_system_rows, final_adjust=_phi_final_adjust)


def _phi_kernels(R: int = 0):
    """The phi system's row kernels (module-level, the same for every R)."""
    return _PHI_KERNELS


def _gather(a, idx):
    """a[idx] in numba, on numba's threads from PAR_ROWS indices (the same array)."""
    return (gather_par if idx.shape[0] >= PAR_ROWS else gather)(a, idx)


def _ordered_rows(g, m: Machine, sr: Semiring, sched: Schedule, arc_values, W, arc_rows=None, banded=None):
    """Arc rows in the schedule's external / internal / self-loop order.

    With ``banded`` (rows for the linear solver's one-column sweeps, where it bands a
    component: the band widths in force, :func:`fsmlearn.algo.bands.band_widths`) a banded
    component's internal rows come in band order (:func:`fsmlearn.algo.bands.band_order`),
    as the solver reads them.
    For a machine (not a phi system) without arc values the converted rows are
    cached per schedule, semiring and order; with arc values the raw weights are permuted
    once per schedule and order and cached, so that later calls convert them sequentially.
    ``arc_rows`` (the machine's arcs already converted, in arc order) are
    permuted instead of converting again.
    """
    def int_arc():
        return band_order(g, sched) if banded is not None else sched.int_arc
    if g is m and arc_rows is not None:
        if sched.forward_ordered and not sched.backward:
            we = arc_rows
        else:
            we = gather_rows(arc_rows, sched.ext_arc)
        return we, gather_rows(arc_rows, int_arc()), gather_rows(arc_rows, sched.self_arc)
    if g is m:
        def ext_self():
            if sched.forward_ordered and not sched.backward:
                return m.weight, _gather(m.weight, sched.self_arc)
            return _gather(m.weight, sched.ext_arc), _gather(m.weight, sched.self_arc)

        def perm():
            we, ws = ext_self()
            return we, _gather(m.weight, int_arc()), ws
        if arc_values is None:
            # the machine's own weights: converted once per schedule and semiring (machines
            # are immutable; the CUDA path keeps its converted rows on the device likewise)
            def rows():
                we, ws = ext_self()
                # a linear semiring gathers and converts the internal weights in one pass
                wi = (sr.arc_rows_at(m.weight, int_arc(), m.semiring) if sr.linear
                      else sr.arc_rows(_gather(m.weight, int_arc()), m.semiring, None))
                return sr.arc_rows(we, m.semiring, None), wi, sr.arc_rows(ws, m.semiring, None)
            return m.cached(("ordered_rows", sched.backward, sr.name, banded), rows)
        we, wi, ws = m.cached(("perm_weights", sched.backward, banded), perm)
        ve = arc_values if (sched.forward_ordered and not sched.backward) else arc_values[sched.ext_arc]
        vi, vs = arc_values[int_arc()], arc_values[sched.self_arc]
        return (sr.arc_rows(we, m.semiring, ve), sr.arc_rows(wi, m.semiring, vi),
                sr.arc_rows(ws, m.semiring, vs))
    return gather_rows(W, sched.ext_arc), gather_rows(W, int_arc()), gather_rows(W, sched.self_arc)


_NO_COPY = np.empty(0)
_NO_ROWS = np.empty((0, 2))
#: machines with this many arcs or more are solved on two threads (one converts the weights,
#: the other passes over them: acyclic_neglog_piped) when numba has this many threads
_PIPE_MIN_ARCS = 1 << 20
_PIPE_MIN_THREADS = 2


def _plain_weights(w):
    """exp(-w) in plain float64, or False where a weight is out of the plain pass's range."""
    Q = np.empty_like(w)
    return Q if neglog_plain(w, Q) else False


def _plain_pass(m: Machine, V, out, F, starts, w, reverse):
    """The acyclic plain pass (``acyclic_neglog_plain``: from value one at ``starts``
    forward, from the final rows ``F`` backward, into ``V`` or ``out``); its result.

    The first time a machine is solved, its weights are converted as the pass goes (on
    two threads for a large machine, ``acyclic_neglog_piped``) and nothing is kept; the
    second time, the converted weights are kept too (8 bytes an arc, made on the way
    for a large machine), and later solves read them.  A machine solved once (a fresh
    re-weighting in EM, say) never holds the copy.  A copy that cannot be made (a
    weight outside the plain pass's range) is cached as False, and later solves
    convert as they go."""
    args = (V, out, F, starts, m.src_start, m.dst, w)
    Q = m.cached_value("plain_weights")
    if Q is not None and Q is not False:
        return acyclic_neglog_plain(*args, Q, reverse)
    keep = Q is None and bool(m.cached_value("plain_solved"))
    m.cached("plain_solved", lambda: True)
    if m.num_arcs >= _PIPE_MIN_ARCS and nb.get_num_threads() >= _PIPE_MIN_THREADS:
        copy = np.empty_like(w) if keep else _NO_COPY
        status, converted = acyclic_neglog_piped(*args, copy, reverse, PIPE_CHUNK)
        if keep and status == PLAIN_DONE:
            m.cached("plain_weights", lambda: copy if converted else False)
        return status
    if keep:
        Q = m.cached("plain_weights", lambda: _plain_weights(w))
        if Q is not False:
            return acyclic_neglog_plain(*args, Q, reverse)
    return acyclic_neglog_plain(*args, _NO_COPY, reverse)


def solve_values(m: Machine, semiring="log", reverse: bool = False, *, arc_values=None,
                 tol: float = DEFAULT_TOL, max_sweeps: int = DEFAULT_MAX_SWEEPS, init=None,
                 phi: str = "failure", phi_final: bool = True, arc_rows=None, device: str = "cpu",
                 starts=None, output: bool = False):
    """Internal rows of forward/backward values, in state order.

    ``output``: the caller wants only ``sr.output(V)``.  Where the acyclic plain pass
    solves the machine in the log semiring, it writes that output directly (the same
    values, bit for bit, without the rows): then ``V`` is None and ``extra["output"]``
    holds it.

    ``starts`` (forward only; int64 [B], -1 for none): several start states
    instead of ``m.start``, each given the value one: the forward values of a
    :class:`~fsmlearn.fsm.MachineBatch`'s union, every machine from its own start.

    ``device``: "cpu" (numba kernels) or "cuda" (the numba.cuda twins of
    :mod:`fsmlearn.algo.cuda`, linear semirings only); with "cuda" and a
    phi-free machine ``extra["device_rows"]`` holds the rows on the device.

    ``arc_rows`` (optional, a phi-free machine only): the machine's arc rows
    in this semiring, ``sr.arc_rows(m.weight, m.semiring, arc_values)``, to
    reuse between the two directions of a forward-backward pass.

    Returns:
        (sr, V, info, extra): the semiring; float64 [N, K] rows (scaled for
        linear semirings, costs for tropical), or None where ``output`` was
        asked for and written; a SolveInfo; and a dict with
        ``graph`` (the machine or its phi system), ``F`` (final rows; None for
        a forward solve of a machine without phi arcs on the CPU),
        ``arc_values`` (checked [E, R] array or None), a ``system_rows()``
        callable giving the graph's arc rows, for the tropical semiring
        ``bp`` (int64 [N] back-pointer arc of each state, -1 for none), and
        ``output`` (float64 [N], ``sr.output`` of the rows) where V is None.
    """
    require_machine(m, "solve_values", "m")
    device = check_device(device)
    sr = get_semiring(semiring, arc_values)
    if device == "cuda" and not sr.linear:
        raise SemiringError(f"device='cuda' covers the real, log and expectation semirings, not {sr.name}; "
                            "use device='cpu'")
    g = _graph(m, sr, phi, phi_final)
    if not (tol > 0 and math.isfinite(tol)):
        raise SemiringError(f"tol must be a positive number, got {tol!r}")
    if int(max_sweeps) < 1:
        raise SemiringError(f"max_sweeps must be at least 1, got {max_sweeps!r}")
    n = m.num_states
    arc_values = _check_arc_values(m, sr, arc_values)
    # (a forward solve of a machine without phi arcs on the CPU never reads the final rows)
    F = sr.final_rows(m.final, m.semiring) if reverse or g is not m or device == "cuda" else None
    W = None
    if g is not m:
        W, F = _system_rows(g, m, sr, arc_values)
    info = SolveInfo()
    if g is not m:
        arc_rows = None
    extra = {"graph": g, "F": F, "arc_values": arc_values,
             "system_rows": (lambda: W) if W is not None else
             (lambda: arc_rows) if arc_rows is not None else
             (lambda: sr.arc_rows(m.weight, m.semiring, arc_values))}
    if starts is not None:
        starts = np.asarray(starts, np.int64)
        starts = starts[starts >= 0]
        if starts.size and int(starts.max()) >= n:
            # (the kernels index by them unchecked)
            raise ArgumentError(f"a start state {int(starts.max())} of a machine of {n} states")
    # (backward values need no start state: a batch's union may have none of its own)
    if n == 0 or (not reverse and (m.start < 0 if starts is None else starts.size == 0)):
        V = F.copy() if reverse else sr.zero_rows(n)
        if not sr.linear:
            extra["bp"] = np.full(n, -1, np.int64)
        return sr, V, info, extra
    if g is not m:
        V = _solve_phi_system(g, m, sr, W, F, reverse, init, tol, max_sweeps, info, device, starts)
        return sr, V, info, extra
    if device == "cuda":
        from .cuda.solve import device_arc_rows, solve_plain_machine
        rows = (arc_rows if arc_rows is not None else device_arc_rows(m, sr) if arc_values is None
                else sr.arc_rows(m.weight, m.semiring, arc_values))
        V, extra["device_rows"] = solve_plain_machine(m, sr, reverse, rows, F, init, tol, max_sweeps, info,
                                                      starts)
        return sr, V, info, extra
    if (sr.linear and sr.R == 0 and g is m and arc_rows is None and m.semiring != "real"
            and m.cached_value("forward_ordered") is not False):
        # perhaps topologically numbered (acyclic): one fused pass over the CSR arcs, which
        # checks the numbering as it goes (a machine found not to be falls through to the
        # schedule).  The plain pass declines where it could lose a value, and a machine
        # where it declined once goes straight to the scaled pass after.
        # (the rows, or the output alone, are written only when the pass is done)
        direct = output and sr.name == "log"
        out = np.empty(n) if direct else _NO_COPY
        V = _NO_ROWS if direct else np.empty((n, sr.K))
        first = np.array([m.start], np.int64) if starts is None else starts
        w = np.ascontiguousarray(m.weight, dtype=np.float64)
        declined = m.cached("plain_declined", dict)        # direction -> True
        status = (PLAIN_DECLINED if declined.get(reverse) else
                  _plain_pass(m, V, out, F if reverse else _NO_ROWS, first, w, reverse))
        # a pass that stopped early has not seen every arc
        ordered = status == PLAIN_DONE or (status != NOT_ORDERED and m.cached(
            "forward_ordered", lambda: csr_is_forward_ordered(m.src_start, m.dst)))
        m.cached("forward_ordered", lambda: ordered)
        if ordered:
            info.components = 1
            if status == PLAIN_DONE:
                if direct:
                    extra["output"] = out
                    return sr, None, info, extra
                return sr, V, info, extra
            declined[reverse] = True
            if reverse:
                V = F.copy()
            else:
                V = sr.zero_rows(n)
                V[first] = sr.one_row()
            acyclic_neglog(V, m.src_start, m.dst, w, reverse)
            return sr, V, info, extra
    sched = schedule_for(g, reverse)
    info.components = sched.num_components
    info.cyclic = sched.cyclic
    if reverse:
        V = F.copy()
    else:
        V = sr.zero_rows(n)
        V[m.start if starts is None else starts] = sr.one_row()
    bands = bands_for(g, sched) if sr.linear and sr.R == 0 else no_bands()
    banded = bands[4].shape[0] > 0
    Wext, Wint, Wself = _ordered_rows(g, m, sr, sched, arc_values, W, arc_rows, band_widths() if banded else None)
    if sr.linear:
        if init is not None:
            warm = sr.rows_from_output(init)
            if warm.shape[0] != n:
                raise SemiringError(f"init has {warm.shape[0]} rows for {n} states")
            use_warm = True
        else:
            warm = np.empty((0, sr.K))
            use_warm = False
        stats = np.zeros(6, np.int64)
        fstats = np.zeros(4)
        status = linear_solver(sr.R)(V, Wext, sched.ext_tail, sched.ext_head, sched.ext_ptr, Wint,
                                     sched.int_tail, sched.int_head, sched.int_ptr, Wself,
                                     sched.self_loc, sched.self_ptr, sched.comp_ptr, sched.comp_states,
                                     sched.trivial, warm, use_warm, g is not m, float(tol), int(max_sweeps),
                                     stats, fstats, bands, banded and nb.get_num_threads() >= 2)
        info.sweeps, info.extrapolations, info.repotentials = int(stats[0]), int(stats[1]), int(stats[2])
        info.last_change, info.rate = float(fstats[0]), float(fstats[2])
        if status != STATUS_OK:
            _raise_solver(status, stats, fstats, sched, m, reverse, max_sweeps, tol)
    else:
        bp = np.full(n, -1, np.int64)
        stats = np.zeros(6, np.int64)
        status = tropical_solver()(V, bp, Wext, sched.ext_tail, sched.ext_head, sched.ext_arc,
                                   sched.ext_ptr, Wint, sched.int_tail, sched.int_head, sched.int_arc,
                                   sched.int_ptr, Wself, sched.self_loc, sched.self_ptr,
                                   sched.comp_ptr, sched.comp_states, sched.trivial,
                                   int(max_sweeps), stats)
        info.sweeps = int(stats[0])
        if status != STATUS_OK:
            _raise_solver(status, stats, np.zeros(4), sched, m, reverse, max_sweeps, tol)
        extra["bp"] = bp
    return sr, V, info, extra


def _phi_index(g: LinearSystem, m: Machine, reverse: bool):
    """Cached arrays of the phi solver: the A - N arcs by row, and the phi forest."""
    def build():
        st = g.phi
        is_phi = (g.kind == 0) & (m.ilabel[np.where(g.kind == 0, g.ref, 0)] == PHI)
        keep = np.flatnonzero(~is_phi)
        n = g.num_states
        if reverse:   # rows are sources: the system CSR order already
            rows = g.arc_src[keep]
            cols = g.dst[keep]
            order = np.arange(keep.size)
        else:         # rows are destinations
            rows = g.dst[keep]
            cols = g.arc_src[keep]
            order = np.argsort(rows, kind="stable")
        idx = keep[order]
        row_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=row_ptr[1:])
        col = np.ascontiguousarray(cols[order], dtype=np.int64)
        phi_t = np.where(st.phi_arc >= 0, m.dst[np.maximum(st.phi_arc, 0)], -1).astype(np.int64)
        _, dorder = phi_depths(phi_t, n)
        # system arc id of each state's phi arc
        sys_of_arc = np.full(m.num_arcs, -1, np.int64)
        k0 = np.flatnonzero(g.kind == 0)
        sys_of_arc[g.ref[k0]] = k0
        phi_sys = np.where(st.phi_arc >= 0, sys_of_arc[np.maximum(st.phi_arc, 0)], -1)
        # own (not exclusion) self-loops: the solver applies them exactly
        self_arc = (g.arc_src[idx] == g.dst[idx]) & (g.kind[idx] == 0)
        return row_ptr, col, idx, phi_t, dorder, phi_sys, self_arc
    return g.cached(("phi_index", reverse), build)


_KRYLOV_AFTER = 30       # Jacobi sweeps before a plain phi system switches to GMRES


def _krylov(solver, X, B, args, tol):
    """Solve the fixed point X = F(X) (F affine: one Jacobi step of the phi system,
    self-loops exact) by restarted GMRES on (I - J) x = F(0), from X.

    Returns (rows, matrix-vector products used)."""
    from scipy.sparse.linalg import LinearOperator, gmres
    n = X.shape[0]
    zero_b = np.zeros_like(B)
    f0 = solver.step(np.zeros_like(X), B, *args)[:, 0].copy()
    count = [0]

    def matvec(v):
        count[0] += 1
        v = np.ascontiguousarray(v, np.float64).reshape(n, 1)
        return (v - solver.step(v, zero_b, *args))[:, 0]

    op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    x, _ = gmres(op, f0, x0=X[:, 0].copy(), rtol=min(1e-13, float(tol)), atol=0.0, restart=60, maxiter=10)
    return np.ascontiguousarray(x, np.float64).reshape(n, 1), count[0]


def _phi_relax(solver, X, B, args, KE, tol, max_sweeps, stats, fstats, info):
    """The phi solver's sweeps from X (overwritten), with GMRES for slow scalar modes; (status, X)."""
    first = int(max_sweeps) if KE > 1 else min(int(max_sweeps), _KRYLOV_AFTER)
    status = solver(X, B, *args, float(tol), first, stats, fstats)
    if status == STATUS_NOT_CONVERGED and KE == 1 and int(max_sweeps) > first:
        # slow modes (an LM's '= - = -' loop keeps its mass with probability
        # 0.9992): GMRES on the fixed-point map, then the sweeps check it
        X, mv = _krylov(solver, X, B, args, tol)
        more = np.zeros(6, np.int64)
        status = solver(X, B, *args, float(tol), max(int(max_sweeps) - first - mv, 1), more, fstats)
        stats[0] += more[0] + mv
        stats[1] += more[1]
        stats[4:] = more[4:]
        info.krylov = mv
    return status, X


def _solve_phi_system(g: LinearSystem, m: Machine, sr: Semiring, W, F, reverse, init, tol, max_sweeps,
                      info: SolveInfo, device: str = "cpu", starts=None):
    row_ptr, col, idx, phi_t, dorder, phi_sys, self_arc = _phi_index(g, m, reverse)
    n = m.num_states
    KE = sr.K - 1
    Wp = _plain_rows(W[idx])
    Wphi = np.zeros((n, KE))
    has = phi_sys >= 0
    Wphi[has] = _plain_rows(W[phi_sys[has]])
    if reverse:
        B = _plain_rows(F)
    else:
        B = np.zeros((n, KE))
        B[m.start if starts is None else starts, 0] = 1.0
    solver = phi_solver(sr.R)
    if init is not None:
        X = _plain_rows(sr.rows_from_output(init))
        if X.shape[0] != n:
            raise SemiringError(f"init has {X.shape[0]} rows for {n} states")
        if not reverse:
            X = solver.gamma_from_alpha(X, dorder, phi_t, Wphi)
    else:
        X = B.copy()
    stats = np.zeros(6, np.int64)
    fstats = np.zeros(4)

    def relax(star):
        # star: the own self-loops' flags, or none (the plain Jacobi step)
        if device == "cuda":
            from .cuda.solve import solve_phi_system
            st, Xc = solve_phi_system(m, phi_t, row_ptr, col, Wp, star, Wphi, B, X, not reverse, sr.R,
                                      float(tol), int(max_sweeps), stats, fstats)
            return st, (X if Xc is None else Xc)
        args = (row_ptr, col, Wp, star, dorder, phi_t, Wphi, not reverse)
        return _phi_relax(solver, X.copy(), B, args, KE, tol, max_sweeps, stats, fstats, info)

    status, Xs = relax(self_arc)
    if status != STATUS_OK and stats[4] != WHY_STAR and self_arc.any():
        # Applying the own self-loops exactly (x <- D* rest) changes the splitting of the
        # signed system: with exclusion arcs (negative) and backoff weights above 1 the
        # iteration can diverge or oscillate (spectral radius 1.0-5.6 on 4% of the
        # tests' random normalised backoff machines) where Jacobi on the phi-free
        # expansion converges (0.70-0.82 on the same).  Start again without the star:
        # the plain Jacobi step's matrix is the expansion's, so it converges whenever
        # the machine's weights do.  (Both devices: the CUDA solve's sweeps are the same
        # Jacobi steps.)
        spent = int(stats[0])
        stats[:] = 0
        fstats[:] = 0.0
        status, Xs = relax(np.zeros_like(self_arc))
        stats[0] += spent
    X = Xs
    info.sweeps, info.extrapolations = int(stats[0]), int(stats[1])
    info.last_change, info.rate = float(fstats[0]), float(fstats[2])
    info.components = 1
    info.cyclic = True
    raise_for_status(status, stats, fstats, what="backward" if reverse else "forward", where="the phi machine",
                     tol=tol, max_sweeps=max_sweeps, num_states=n)
    V = np.empty((n, sr.K))
    _plain_to_scaled(X, V)
    return V


@nb.njit(cache=True)
def _plain_to_scaled(X, V):
    KE = V.shape[1] - 1
    for i in range(X.shape[0]):
        m = 0.0
        for j in range(KE):
            m = max(m, abs(X[i, j]))
        if m == 0.0:
            for j in range(KE):
                V[i, j] = 0.0
            V[i, KE] = -1.0e9
        else:
            _, e = math.frexp(m)
            for j in range(KE):
                V[i, j] = math.ldexp(X[i, j], -e)   # (2**-e overflows for a subnormal m)
            V[i, KE] = e


@nb.njit(cache=True)
def _plain_rows_kernel(W, out):
    KE = W.shape[1] - 1
    for i in range(W.shape[0]):
        e = int(min(max(W[i, KE], -2200.0), 2200.0))
        for j in range(KE):
            out[i, j] = math.ldexp(W[i, j], e)


def _plain_rows(W: np.ndarray) -> np.ndarray:
    """Plain rows (values, no exponent column) of scaled rows."""
    out = np.empty((W.shape[0], W.shape[1] - 1))
    _plain_rows_kernel(np.ascontiguousarray(W), out)
    return out


def _raise_solver(status, stats, fstats, sched: Schedule, m: Machine, reverse, max_sweeps, tol):
    c = int(stats[3])
    states = np.sort(sched.comp_states[sched.comp_ptr[c]:sched.comp_ptr[c + 1]]) \
        if 0 <= c < sched.num_components else np.array([], np.int32)
    shown = ", ".join(str(int(s)) for s in states[:8]) + (", ..." if states.size > 8 else "")
    where = f"the cycle through states {shown} ({states.size} states)"
    raise_for_status(status, stats, fstats, what="backward" if reverse else "forward", where=where, tol=tol,
                     max_sweeps=max_sweeps, num_states=m.num_states)


def shortest_distance(machine: Machine, semiring="log", reverse: bool = False, *, arc_values=None,
                      tol: float = DEFAULT_TOL, max_sweeps: int = DEFAULT_MAX_SWEEPS, init=None,
                      phi: str = "failure", phi_final: bool = True, return_info: bool = False,
                      device: str = "cpu"):
    """Forward (or backward) value of every state.

    Args:
        machine: the machine.
        semiring: "log" (default), "real", "tropical", "expectation" or a
            Semiring instance.
        reverse: backward values (to the final states, final weights
            included) instead of forward values.
        arc_values: [E] or [E, R] additive arc values for the expectation
            semiring.
        tol: relative error bound at which relaxation stops (cyclic machines).
        max_sweeps: sweep limit of the relaxation.
        init: a previous result (same shape and convention) to warm-start
            the relaxation from.
        phi: "failure" (exact semantics, default) or "epsilon".
        phi_final: final weights fail over like labels (see algo.phi).
        return_info: also return a :class:`SolveInfo`.
        device: "cpu" (default) or "cuda": the numba.cuda kernels of
            :mod:`fsmlearn.algo.cuda` (real, log and expectation semirings;
            level-synchronous passes for acyclic machines, Jacobi sweeps
            under the same stopping rule and errors for cyclic ones).

    Returns:
        float64 [N] (log, tropical: negative logs; real: values), or for the
        expectation semiring [N, 1+R]: -ln p then r/p.  Unreachable states get
        the semiring zero (inf for log and tropical).  Given a
        :class:`~fsmlearn.fsm.MachineBatch`, the values of the union's states, each
        within its own machine (forward values from each machine's start;
        ``batch.split(values)`` gives one array per machine).

    Raises:
        DivergenceError: the weights of a cycle diverge.
        NotConvergedError: relaxation did not converge within max_sweeps.
        SemiringError: a bad semiring name or argument (or the tropical semiring on "cuda").
        ArgumentError: a device other than "cpu" or "cuda".
        FsmError: device="cuda" without a CUDA device or numba's simulator.
        NotAMachineError: not a Machine (convert a pynini.Fst with Machine.from_pynini).
    """
    if isinstance(machine, MachineBatch):
        from .batch import batch_values
        return batch_values(machine, semiring, reverse, arc_values=arc_values, tol=tol, max_sweeps=max_sweeps,
                            init=init, phi=phi, phi_final=phi_final, return_info=return_info, device=device)
    require_machine(machine, "shortest_distance")
    sr, V, info, extra = solve_values(machine, semiring, reverse, arc_values=arc_values, tol=tol,
                                      max_sweeps=max_sweeps, init=init, phi=phi, phi_final=phi_final,
                                      device=device, output=True)
    out = extra["output"] if V is None else sr.output(V)
    return (out, info) if return_info else out


def forward(machine: Machine, semiring="log", **kwargs):
    """Forward values; see :func:`shortest_distance`."""
    if not isinstance(machine, MachineBatch):
        require_machine(machine, "forward")
    return shortest_distance(machine, semiring, False, **kwargs)


def backward(machine: Machine, semiring="log", **kwargs):
    """Backward values (final weights included); see :func:`shortest_distance`."""
    if not isinstance(machine, MachineBatch):
        require_machine(machine, "backward")
    return shortest_distance(machine, semiring, True, **kwargs)


def _chain_total(chains: ChainBatch, semiring, kwargs):
    from .chain import chain_best_paths, chain_total_weight
    if kwargs:
        raise ArgumentError(f"total_weight of a ChainBatch takes no {', '.join(sorted(kwargs))} (its dense-chain "
                            "schedule is one exact pass; chains.materialise() gives a MachineBatch)")
    if semiring == "log":
        return chain_total_weight(chains)
    if semiring == "real":
        return np.exp(-chain_total_weight(chains))
    if semiring == "tropical":
        return chain_best_paths(chains, allow_empty=True).cost
    raise SemiringError(f"total_weight of a ChainBatch is in the log, real or tropical semiring, not {semiring!r} "
                        "(chains.materialise() gives a MachineBatch for the others)")


def total_weight(machine: Machine, semiring="log", **kwargs):
    """The semiring sum of the weights of all accepting paths.

    Computed as the backward value of the start state.  Returns a float (or,
    for the expectation semiring, an array [1+R]: -ln Z then the expected
    additive values); for a :class:`~fsmlearn.fsm.MachineBatch` one per machine
    ([B], or [B, 1+R]); for a :class:`~fsmlearn.fsm.ChainBatch` one per chain ([S]) in the
    log, real or tropical semiring, by the dense-chain schedule (:mod:`fsmlearn.algo.chain`).
    """
    if isinstance(machine, ChainBatch):
        return _chain_total(machine, semiring, kwargs)
    if isinstance(machine, MachineBatch):
        from .batch import batch_total_weight
        return batch_total_weight(machine, semiring, **kwargs)
    require_machine(machine, "total_weight")
    if machine.start < 0:
        sr = get_semiring(semiring, kwargs.get("arc_values"))
        z = sr.output(sr.zero_rows(1))
        return z[0] if z.ndim == 1 else z[0]
    b = shortest_distance(machine, semiring, True, **kwargs)
    return b[machine.start]

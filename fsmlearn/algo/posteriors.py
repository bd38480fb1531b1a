"""Arc posteriors (expected arc counts), gradients, expectations and entropy.

For a machine with total weight Z, the posterior of arc a from s to d is
``alpha(s) w_a beta(d) / Z``: the expected number of times a path drawn in
proportion to its weight takes ``a``.  It is also the gradient
``d ln Z / d ln w_a`` (so ``d ln Z / d w_a = -posterior`` for weights
stored as negative logs).  Expectations of additive values on arcs and on
final weights come from the expectation semiring (Eisner 2002, "Parameter
estimation for probabilistic finite-state transducers"; Li and Eisner 2009,
"First- and second-order expectation semirings", section 3): the second
component of the total weight over the first.  The entropy of the path
distribution is one such expectation (Li and Eisner 2009, section 4.1):
``H = ln Z - E[ln w(path)]``, the path weight with its final weight.

Names say their sign: ``log_partition`` is ln Z, ``cost`` is -ln Z (the
machine's negative-log convention, what :func:`total_weight` returns for a
log machine).

On a phi machine the flows of the signed linear system (see
:mod:`fsmlearn.algo.phi`) are mapped back to the machine's arcs: an exclusion
arc's (negative) flow is added to every arc of its chain, so each arc's
posterior is the flow that really passes through it under failure semantics.

A machine with no accepting path of nonzero weight (Z = 0) has no path
distribution: :func:`expectation`, :func:`entropy` and (unless
``allow_empty=True``) :func:`forward_backward` raise
:class:`~fsmlearn.errors.NoAcceptingPathError`.

Public names: arc_posteriors, final_posteriors, log_partition_gradient, expectation,
entropy, ForwardBackward, forward_backward.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..errors import ArgumentError, NoAcceptingPathError, SemiringError
from ..fsm.batch import MachineBatch
from ..fsm.chain import ChainBatch
from ..fsm.machine import PHI, Machine
from ..semiring import get_semiring
from ._check import require_machine
from .flow_arith import arc_flow_py, chain_flow_py, final_flow_py, owner_py
from .shortest import SolveInfo, solve_values

_LN2 = math.log(2.0)


_owner = nb.njit(cache=True)(owner_py)
_arc_flow = nb.njit(cache=True)(arc_flow_py)
_chain_flow = nb.njit(cache=True)(chain_flow_py)
_final_flow = nb.njit(cache=True)(final_flow_py)


# The flow kernels run on one thread: forward_backward starts no thread pool of numba's (OpenMP),
# so that a process may still fork workers after calling it (the decipherment and speech
# experiments do; a child of a process that has started GNU OpenMP's pool hangs in it).

@nb.njit(cache=True)
def _flows(A, W, Bt, tail, head, zp, zk, state_ptr, out):
    """Real flow alpha[tail] * W * beta[head] / Z of every arc (scaled rows, p-part); Z =
    zp[b] 2**zk[b] of the machine b owning the tail state (``state_ptr`` [B+1]; one
    machine: [0, n]).  Tails mostly rise (CSR order), so the owner is searched for only
    where it changes."""
    b = 0
    for i in range(tail.shape[0]):
        t = tail[i]
        if t < state_ptr[b] or t >= state_ptr[b + 1]:
            b = _owner(state_ptr, t)
        out[i] = _arc_flow(A, W, Bt, i, t, head[i], zp[b], zk[b])


@nb.njit(cache=True)
def _machine_flows(A, W, Bt, tail, head, zp, zk, arc_ptr, out):
    """:func:`_flows` for a machine's own arcs, grouped by machine (``arc_ptr`` [B+1]; one
    machine: [0, E]), so no arc looks up its owner."""
    for b in range(arc_ptr.shape[0] - 1):
        p = zp[b]
        k = zk[b]
        for i in range(arc_ptr[b], arc_ptr[b + 1]):
            out[i] = _arc_flow(A, W, Bt, i, tail[i], head[i], p, k)


@nb.njit(cache=True)
def _final_flows(A, F, zp, zk, state_ptr, out):
    """The probability of stopping at each state, ``alpha[q] F[q] / Z`` of q's machine."""
    B = state_ptr.shape[0] - 1
    for b in range(B):
        for q in range(state_ptr[b], state_ptr[b + 1]):
            out[q] = _final_flow(A, F, q, zp[b], zk[b])


@nb.njit(cache=True)
def _chain_flows(A, W_m, Hd, tail_state, ptr, chain, head_state, zp, zk, state_ptr, out_arc):
    """Add the (negative) flow of each exclusion arc / final adjustment to its chain's arcs
    (Hd: the backward rows, or the final rows for final adjustments; Z of the machine owning
    the tail state, as in :func:`_flows`)."""
    for i in range(tail_state.shape[0]):
        q = tail_state[i]
        b = _owner(state_ptr, q)
        v = _chain_flow(A, W_m, Hd, q, ptr[i], ptr[i + 1], chain, head_state[i], zp[b], zk[b])
        if v != 0.0:
            for c in range(ptr[i], ptr[i + 1]):
                out_arc[chain[c]] += v


class ForwardBackward:
    """Forward-backward results in the log semiring.

    Attributes:
        alpha: float64 [N] forward values (-ln).
        beta: float64 [N] backward values (-ln, final weights included).
        log_partition: float, ln Z, the natural log of the total weight Z
            (-inf when Z = 0, which only ``forward_backward(..., allow_empty=True)``
            returns).
        cost: float, -ln Z (the total weight in the machine's negative-log
            convention: ``total_weight(m)`` of a log machine).
        posteriors: float64 [E] expected count of each arc.
        final_posteriors: float64 [N] probability of stopping at each state.
        info: (forward SolveInfo, backward SolveInfo).

    ``alpha`` and ``beta`` may be given as callables; they are then
    converted on first access (one log per state), so callers that only need
    posteriors (EM) do not pay for them.

    There is no ``logz``: a name whose sign (ln Z or -ln Z) a reader must guess.
    """

    __slots__ = ("_alpha", "_beta", "cost", "posteriors", "final_posteriors", "info")

    def __init__(self, alpha, beta, cost, posteriors, final_posteriors, info):
        self._alpha = alpha
        self._beta = beta
        self.cost = float(cost) + 0.0      # (no -0.0)
        self.posteriors = posteriors
        self.final_posteriors = final_posteriors
        self.info = info

    @property
    def log_partition(self) -> float:
        """ln Z (float): minus :attr:`cost`."""
        return -self.cost

    @property
    def logz(self):
        raise AttributeError("ForwardBackward has no attribute 'logz' (its sign was ambiguous): "
                             "use .log_partition for ln Z or .cost for -ln Z")

    @property
    def alpha(self) -> np.ndarray:
        if callable(self._alpha):
            self._alpha = self._alpha()
        return self._alpha

    @property
    def beta(self) -> np.ndarray:
        if callable(self._beta):
            self._beta = self._beta()
        return self._beta

    def __repr__(self) -> str:
        return (f"ForwardBackward(log_partition={self.log_partition!r}, {self.posteriors.shape[0]} arc "
                f"posteriors, {self.final_posteriors.shape[0]} states)")


def _no_path(func: str, m: Machine) -> NoAcceptingPathError:
    why = "it has no start state" if m.start < 0 else \
        f"no path from its start state {m.start} reaches a final state with nonzero weight"
    return NoAcceptingPathError(f"{func}: the machine ({m.num_states} states, {m.num_arcs} arcs) has no "
                                f"accepting path: {why}, so its total weight is Z = 0 and there is no "
                                "distribution over its paths")


def forward_backward(m: Machine, *, tol: float = 1e-11, max_sweeps: int = 100_000,
                     init_alpha=None, init_beta=None, phi: str = "failure",
                     phi_final: bool = True, device: str = "cpu",
                     allow_empty: bool = False) -> ForwardBackward:
    """Forward values, backward values and arc posteriors (log semiring).

    Args:
        m: the machine.
        tol, max_sweeps: relaxation settings for cyclic machines.
        init_alpha, init_beta: warm starts (previous alpha / beta arrays).
        phi, phi_final: failure-arc handling (see shortest_distance).
        device: "cpu" (default) or "cuda": both solves and the arc flows
            (the posteriors, mapped to the machine's arcs on a phi machine)
            run on the device (:mod:`fsmlearn.algo.cuda`).
        allow_empty: with a machine that has no accepting path (Z = 0), return
            a result with ``log_partition`` -inf, ``cost`` inf and all
            posteriors zero instead of raising.

    Returns:
        A :class:`ForwardBackward`; for a :class:`~fsmlearn.fsm.MachineBatch`, a
        :class:`~fsmlearn.algo.batch.BatchForwardBackward` (one Z per machine, each
        arc's posterior in its own machine); for a :class:`~fsmlearn.fsm.ChainBatch`, a
        :class:`~fsmlearn.algo.chain.ChainForwardBackward` by the dense-chain schedule
        (one Z per chain, the expected use of each table entry and the node posteriors;
        the relaxation and phi settings do not apply).

    Raises:
        NoAcceptingPathError: Z = 0 (unless ``allow_empty``).
        NotAMachineError: ``m`` is not a Machine (a pynini.Fst: convert it with
            ``Machine.from_pynini``).
        DivergenceError, NotConvergedError: as :func:`shortest_distance`.
    """
    if isinstance(m, ChainBatch):
        from .chain import chain_forward_backward
        return chain_forward_backward(m, allow_empty=allow_empty, device=device)
    if isinstance(m, MachineBatch):
        from .batch import batch_forward_backward
        return batch_forward_backward(m, tol=tol, max_sweeps=max_sweeps, init_alpha=init_alpha,
                                      init_beta=init_beta, phi=phi, phi_final=phi_final, device=device,
                                      allow_empty=allow_empty)
    require_machine(m, "forward_backward", "m")
    sr, A, Bt, costs, post, fpost, infos = fb_core(m, None, None, tol, max_sweeps, init_alpha, init_beta, phi,
                                                   phi_final, device, allow_empty, "forward_backward")
    return ForwardBackward(lambda: sr.output(A), lambda: sr.output(Bt), float(costs[0]), post, fpost, infos)


def fb_core(m: Machine, starts, state_ptr, tol, max_sweeps, init_alpha, init_beta, phi, phi_final, device,
            allow_empty, func, batch=False):
    """Both solves and the flows of a machine, or of a batch's union (``starts`` int64 [B],
    ``state_ptr`` int64 [B+1]; each machine's flows over its own Z).

    Returns:
        (sr, A, Bt, costs float64 [B] (-ln Z of each machine, inf for none), arc
        posteriors [E], final posteriors [N], (forward info, backward info)); a
        machine with Z = 0 has zero posteriors.

    Raises:
        NoAcceptingPathError: a machine with Z = 0, unless ``allow_empty`` (a batch's
            message names the first such machine).
    """
    n = m.num_states
    st = np.array([m.start], np.int64) if starts is None else starts
    sp = np.array([0, n], np.int64) if state_ptr is None else state_ptr
    rows = None
    if (not m.has_phi or phi == "epsilon") and device != "cuda":   # the device keeps its own copy
        # convert the arc weights once; both directions and the flows reuse them
        rows = get_semiring("log").arc_rows(m.weight, m.semiring)
    sr, A, ia, ex = solve_values(m, "log", False, tol=tol, max_sweeps=max_sweeps, init=init_alpha,
                                 phi=phi, phi_final=phi_final, arc_rows=rows, device=device, starts=starts)
    _, Bt, ib, exb = solve_values(m, "log", True, tol=tol, max_sweeps=max_sweeps, init=init_beta,
                                  phi=phi, phi_final=phi_final, arc_rows=rows, device=device)
    B = st.shape[0]
    valid = st >= 0
    costs = np.full(B, math.inf)
    zp = np.ones(B)
    zk = np.zeros(B)
    if valid.any():
        rows_at = Bt[st[valid]]
        costs[valid] = sr.output(rows_at)
        zp[valid] = rows_at[:, 0]
        zk[valid] = rows_at[:, -1]
    empty = ~(costs < math.inf)
    zp[empty] = 1.0
    zk[empty] = 0.0
    if empty.any() and not allow_empty:
        if not batch:
            raise _no_path(func, m)
        b = int(np.flatnonzero(empty)[0])
        raise NoAcceptingPathError(
            f"{func}: machine {b} of the batch " + (
                "has no start state" if st[b] < 0 else
                f"has no path from its start state {int(st[b])} to a final state with nonzero weight")
            + f" ({int(empty.sum())} of {B} such): its total weight is Z = 0; pass allow_empty=True to get "
              "zero posteriors for such machines")
    if empty.all():
        return sr, A, Bt, costs, np.zeros(m.num_arcs), np.zeros(n), (ia, ib)
    g = ex["graph"]
    F = exb["F"]            # the backward solve's final rows (the forward one may not make them)
    if device == "cuda":
        from .cuda.solve import final_flows_cuda, flows_cuda
        if g is m:
            from .cuda.solve import device_arc_ends, device_arc_rows
            tail, head = device_arc_ends(m)
            post = flows_cuda(ex.get("device_rows", A), device_arc_rows(m, sr), exb.get("device_rows", Bt),
                              tail, head, zp, zk, state_ptr=sp)
        else:
            W = ex["system_rows"]()
            # a final adjustment's flow is the chain times r's own final weight, not the
            # adjusted one (the system is built from the original finals too)
            system = {"kind": g.kind, "ref": g.ref, "st": g.phi, "F": sr.final_rows(m.final, m.semiring),
                      "Wm": sr.arc_rows(m.weight, m.semiring)}
            post = flows_cuda(A, W, Bt, g.arc_src, g.dst, zp, zk, m.num_arcs, system, state_ptr=sp)
        fpost = final_flows_cuda(ex.get("device_rows", A), F, zp, zk, state_ptr=sp)
    else:
        W = ex["system_rows"]()
        flows = np.empty(W.shape[0])
        if g is m:
            _machine_flows(A, W, Bt, g.arc_src, g.dst, zp, zk, m.src_start[sp], flows)
            post = flows
        else:
            _flows(A, W, Bt, g.arc_src, g.dst, zp, zk, sp, flows)
            post = np.zeros(m.num_arcs)
            kind0 = g.kind == 0
            np.add.at(post, g.ref[kind0], flows[kind0])
            phs = g.phi
            Wm = sr.arc_rows(m.weight, m.semiring)
            _chain_flows(A, Wm, Bt, phs.neg_tail, phs.neg_ptr, phs.neg_chain, phs.neg_head, zp, zk, sp, post)
            # a final adjustment's flow: the chain times r's own final weight (not the adjusted one)
            _chain_flows(A, Wm, sr.final_rows(m.final, m.semiring), phs.nf_state, phs.nf_ptr, phs.nf_chain,
                         phs.nf_final, zp, zk, sp, post)
        fpost = np.empty(n)
        _final_flows(A, F, zp, zk, sp, fpost)
    if empty.any():             # machines with Z = 0 have no path distribution: zero posteriors
        post[np.repeat(empty, np.diff(m.src_start[sp]))] = 0.0
        fpost[np.repeat(empty, np.diff(sp))] = 0.0
    return sr, A, Bt, costs, post, fpost, (ia, ib)


def arc_posteriors(m: Machine, **kwargs) -> np.ndarray:
    """float64 [E]: expected count of each arc (see :func:`forward_backward`)."""
    if not isinstance(m, MachineBatch):
        require_machine(m, "arc_posteriors", "m")
    return forward_backward(m, **kwargs).posteriors


def final_posteriors(m: Machine, **kwargs) -> np.ndarray:
    """float64 [N]: probability that an accepting path ends at each state.

    On a phi machine these are the final flows of its signed linear system (a state's
    final weight less its adjustments, :mod:`fsmlearn.algo.phi`); the probability that a
    path ends by each state's own final weight (failing over to it included) is
    ``-log_partition_gradient(m)[1]`` for a negative-log machine.
    """
    if not isinstance(m, MachineBatch):
        require_machine(m, "final_posteriors", "m")
    return forward_backward(m, **kwargs).final_posteriors


def log_partition_gradient(m: Machine, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of ln Z (the log-partition, not -ln Z) with respect to the machine's arc
    and final weights as stored.

    Args:
        m: the machine.
        **kwargs: passed to :func:`forward_backward`.

    Returns:
        (d ln Z / d weight, float64 [E]; d ln Z / d final, float64 [N]) in the
        machine's own convention: ``-posterior`` for negative-log weights (raising
        a cost lowers ln Z), ``posterior / w`` for real weights (0 where w = 0).
        The gradient of the cost -ln Z is minus this.  On a phi machine a final
        weight's gradient counts the paths that fail over to it (phi_final).

    Raises:
        NoAcceptingPathError: Z = 0 (ln Z is -inf and has no gradient).
    """
    require_machine(m, "log_partition_gradient", "m")
    fb = forward_backward(m, **kwargs)
    use = fb.final_posteriors
    if m.has_phi and kwargs.get("phi", "failure") == "failure":
        use = _final_weight_use(m, fb, bool(kwargs.get("phi_final", True)))
    if m.semiring == "real":
        with np.errstate(divide="ignore", invalid="ignore"):
            ga = np.where(m.weight > 0, fb.posteriors / np.where(m.weight > 0, m.weight, 1), 0.0)
            gf = np.where(m.final > 0, use / np.where(m.final > 0, m.final, 1), 0.0)
        return ga, gf
    return -fb.posteriors, -use


def _final_weight_use(m: Machine, fb: ForwardBackward, phi_final: bool) -> np.ndarray:
    """float64 [N]: the probability that a path ends by state r's own final weight, on a phi machine.

    A path that fails over from q to r's final weight uses r's, so this (d ln Z / d ln f_r)
    differs from ``final_posteriors`` (the final flows of the signed system, in which a state's
    final adjustment stays at that state).  In the signed system (phi arcs as ordinary arcs)
    ``alpha(r) f(r) / Z`` counts every path that reaches r and stops there, the invalid ones
    too (through the phi arc of a state that has its own final weight, or any phi arc with
    ``phi_final`` false); each final adjustment (q, chain, r) of :mod:`fsmlearn.algo.phi` is
    the weight of those, ``alpha(q) w(chain) f(r) / Z``, and is subtracted from r.
    """
    from .phi import phi_structure
    w, f = m.neglog_weights()
    a = fb.alpha
    with np.errstate(over="ignore", invalid="ignore"):
        use = np.where(np.isfinite(f), np.exp(fb.cost - a - f), 0.0)
        st = phi_structure(m, phi_final)
        if st.nf_state.size:
            chain = np.add.reduceat(w[st.nf_chain], st.nf_ptr[:-1])
            v = np.exp(fb.cost - a[st.nf_state] - chain - f[st.nf_final])
            np.subtract.at(use, st.nf_final, np.where(np.isfinite(v), v, 0.0))
        use = np.where(np.isfinite(use), use, 0.0)
    return use


def _with_final_arcs(m: Machine, arc_values: np.ndarray, final_values: np.ndarray, phi_final: bool):
    """m with its final weights moved onto arcs, so that values can ride on them.

    Each state q with a nonzero final weight f(q) gets an arc labelled with a
    fresh label ``x`` to one new state S (the only final state, weight one),
    carrying f(q) and the value ``final_values[q]``.  On a phi machine the
    fresh label fails over exactly as final weights do with ``phi_final``
    true; with ``phi_final`` false every other state that has a phi arc gets
    an ``x`` arc of weight zero, which blocks the failover (final weights do
    not fail over).  The paths of the result are those of ``m`` with one more
    arc each, of the same weights.

    Returns:
        (machine, values float64 [E + k, R]).
    """
    n, E = m.num_states, m.num_arcs
    real = m.semiring == "real"
    zero, one = (0.0, 1.0) if real else (math.inf, 0.0)
    has_final = m.final != zero
    extra = has_final.copy()
    if m.has_phi and not phi_final:
        has_phi = np.zeros(n, bool)
        has_phi[m.arc_src[m.ilabel == PHI]] = True
        extra |= has_phi
    k = np.concatenate([[0], np.cumsum(extra)])
    top = int(m.ilabel.max()) if E else 0
    if top >= np.iinfo(np.int32).max:
        raise ArgumentError(f"final_values: the machine uses label {top}, leaving no fresh label for its "
                            "final weights")
    x = max(top, 0) + 1
    q = np.flatnonzero(extra)
    Ek = E + q.size
    src_start = m.src_start + k
    old = np.arange(E) + k[m.arc_src]
    new = m.src_start[q + 1] + k[q]
    dst = np.empty(Ek, np.int32)
    il = np.empty(Ek, np.int32)
    w = np.empty(Ek)
    dst[old], il[old], w[old] = m.dst, m.ilabel, m.weight
    dst[new], il[new], w[new] = n, x, m.final[q]
    v = np.zeros((Ek, arc_values.shape[1]))
    v[old] = arc_values
    v[new] = np.where(has_final[q, None], final_values[q], 0.0)
    final = np.full(n + 1, zero)
    final[n] = one
    src_start = np.concatenate([src_start, [Ek]])
    out = Machine(start=m.start, final=final, src_start=src_start, dst=dst, ilabel=il, weight=w,
                  semiring=m.semiring)
    return out, v


def _as_values(values, rows: int, what: str, R: int | None = None) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2 or v.shape[0] != rows or (R is not None and v.shape[1] != R):
        want = f"({rows},) or ({rows}, R)" if R is None else f"({rows},)" if R == 1 else f"({rows}, {R})"
        raise SemiringError(f"{what} has shape {np.shape(values)}; expected {want}")
    bad = np.flatnonzero(~np.isfinite(v).all(axis=1))
    if bad.size:
        raise SemiringError(f"{what} of {'arc' if what == 'arc_values' else 'state'} {int(bad[0])} "
                            f"is not finite: {v[bad[0]]}")
    return v


def expectation_backward(m: Machine, arc_values, final_values=None, **kwargs):
    """(sr, Bt): the expectation semiring's backward rows of the machine with the values on
    its arcs (and, with ``final_values``, on its final weights, moved onto arcs to one new
    state numbered after m's, so that m's states keep their numbers)."""
    v = _as_values(arc_values, m.num_arcs, "arc_values")
    g = m
    if final_values is not None:
        fv = _as_values(final_values, m.num_states, "final_values", v.shape[1])
        g, v = _with_final_arcs(m, v, fv, kwargs.get("phi_final", True))
    sr = get_semiring("expectation", v)
    _, Bt, _, _ = solve_values(g, sr, True, arc_values=v, **kwargs)
    return sr, Bt


def _expectation_total(m: Machine, func: str, arc_values, final_values=None, **kwargs):
    """(cost -ln Z, E [R]) of the additive values in one expectation-semiring solve."""
    if m.start < 0:
        _as_values(arc_values, m.num_arcs, "arc_values")      # a bad argument is named first
        raise _no_path(func, m)
    sr, Bt = expectation_backward(m, arc_values, final_values, **kwargs)
    out = sr.output(Bt[m.start:m.start + 1])[0]
    if not out[0] < math.inf:
        raise _no_path(func, m)
    return float(out[0]), out[1:]


def _chain_expectation(chains: ChainBatch, arc_values, final_values, kwargs):
    from .chain import chain_expectation
    device = kwargs.pop("device", "cpu")
    if kwargs or final_values is not None or not (isinstance(arc_values, tuple) and len(arc_values) == 2):
        raise ArgumentError("expectation of a ChainBatch takes arc_values=(transition_values, entry_values), the "
                            "values tied to its table entries (the end's in the transition table's column V), and "
                            "no final_values or solver settings")
    return chain_expectation(chains, *arc_values, device=device)


def expectation(m: Machine, arc_values, final_values=None, **kwargs) -> np.ndarray:
    """E[sum of the values along the path] under the machine's path distribution.

    A path of arcs a_1..a_L ending at state q has value ``sum_i arc_values[a_i]
    + final_values[q]``, and probability ``w(path) / Z`` with its final weight
    included.  Computed in the expectation semiring (Eisner 2002; Li and Eisner
    2009): the total weight <Z, r> gives r / Z.  Final values ride on arcs to a
    new final state that carry the final weights (on a phi machine they fail over
    as the final weights do, see ``phi_final``).

    Args:
        m: the machine.
        arc_values: float [E] or [E, R] additive values of the arcs.
        final_values: float [N] or [N, R] (R as ``arc_values``) additive values of
            the final weights: ``final_values[r]`` is added when a path ends by the
            final weight of state r: r's own, or on a phi machine that of the state r
            that q's failure chain reaches when the path stops at q (the value of the
            weight used, not of q).  None: no values on final weights.
        **kwargs: passed to shortest_distance (tol, max_sweeps, phi, phi_final, device).

    Returns:
        float64 [R] (shape (1,) for 1-D values); for a
        :class:`~fsmlearn.fsm.MachineBatch` (values flat over its union), [B, R]; for a
        :class:`~fsmlearn.fsm.ChainBatch`, ``arc_values`` is the pair (transition values
        [V+1, V+1(, R)], row-entry values [nnz(, R)]) of :func:`fsmlearn.algo.chain.chain_expectation`
        and the result [S, R], by the dense-chain schedule.

    Raises:
        NoAcceptingPathError: the machine has no accepting path (Z = 0), so the
            expectation is undefined.
        NotAMachineError: ``m`` is not a Machine.
        SemiringError: values of the wrong shape, or not finite.
    """
    if isinstance(m, ChainBatch):
        return _chain_expectation(m, arc_values, final_values, kwargs)
    if isinstance(m, MachineBatch):
        from .batch import batch_expectation
        return batch_expectation(m, arc_values, final_values, **kwargs)
    require_machine(m, "expectation", "m")
    return _expectation_total(m, "expectation", arc_values, final_values, **kwargs)[1]


def entropy(m: Machine, **kwargs) -> float:
    """Entropy in nats of the distribution over the machine's accepting paths.

    A path's probability is its weight over Z, with its final weight included:
    ``p(path) = w(a_1) ... w(a_L) f(q) / Z``.  Then
    ``H = -sum p ln p = ln Z - E[ln w(path)] = ln Z + E[c(path)]`` with c the
    path's cost (-ln weight), computed in one expectation-semiring solve with the
    arcs' costs as arc values and the final weights' costs as final values (Li
    and Eisner 2009, "First- and second-order expectation semirings with
    applications to minimum-risk training on translation forests", section 4.1;
    Eisner 2002).  It is the entropy of the paths; for an unambiguous machine it
    is also that of the label strings.  On a phi machine paths follow failure
    semantics (phi arcs' weights included), with ``phi_final`` as in
    :func:`shortest_distance`.

    Args:
        m: the machine (any weight convention; a tropical one is read as -ln
            probabilities, like a log one).
        **kwargs: passed to shortest_distance (tol, max_sweeps, phi, phi_final, device).

    Returns:
        H >= 0 (float, nats); to the solver's tolerance on a cyclic machine; for a
        :class:`~fsmlearn.fsm.MachineBatch`, float64 [B]; for a :class:`~fsmlearn.fsm.ChainBatch`,
        float64 [S] by the dense-chain schedule.

    Raises:
        NoAcceptingPathError: the machine has no accepting path (Z = 0).
        NotAMachineError: ``m`` is not a Machine.
        DivergenceError: the total weight is infinite.
    """
    if isinstance(m, ChainBatch):
        device = kwargs.pop("device", "cpu")
        if kwargs:
            raise ArgumentError(f"entropy of a ChainBatch takes no {', '.join(sorted(kwargs))} (its dense-chain "
                                "schedule is one exact pass; chains.materialise() gives a MachineBatch)")
        from .chain import chain_entropy
        return chain_entropy(m, device=device)
    if isinstance(m, MachineBatch):
        from .batch import batch_entropy
        return batch_entropy(m, **kwargs)
    require_machine(m, "entropy", "m")
    w, f = m.neglog_weights()
    with np.errstate(invalid="ignore"):
        arc_cost = np.where(np.isfinite(w), w, 0.0)
        final_cost = np.where(np.isfinite(f), f, 0.0)
    cost, e = _expectation_total(m, "entropy", arc_cost, final_cost, **kwargs)
    return float(e[0] - cost)

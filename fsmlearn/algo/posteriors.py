"""Arc posteriors (expected arc counts), gradients and expectations.

For a machine with total weight Z, the posterior of arc a from s to d is
``alpha(s) w_a beta(d) / Z``: the expected number of times a path drawn in
proportion to its weight takes ``a``.  It is also the gradient
``d log Z / d log w_a`` (so ``d log Z / d w_a = -posterior`` for weights
stored as negative logs).  Expectations of additive arc values come from the
expectation semiring (Eisner 2002): the second component of the total weight
over the first.

On a phi machine the flows of the signed linear system (see
:mod:`fsmlearn.algo.phi`) are mapped back to the machine's arcs: an exclusion
arc's (negative) flow is added to every arc of its chain, so each arc's
posterior is the flow that really passes through it under failure semantics.

Public names: arc_posteriors, final_posteriors, logz_gradient, expectation,
ForwardBackward, forward_backward.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..fsm.machine import Machine
from ..semiring import get_semiring
from .shortest import SolveInfo, solve_values

_LN2 = math.log(2.0)


@nb.njit(cache=True)
def _flows(A, W, Bt, tail, head, zp, zk, out):
    """Real flow alpha[tail] * W * beta[head] / Z of every arc (scaled rows, p-part)."""
    KA = A.shape[1] - 1
    KW = W.shape[1] - 1
    KB = Bt.shape[1] - 1
    for i in range(tail.shape[0]):
        t = tail[i]
        h = head[i]
        m = A[t, 0] * W[i, 0] * Bt[h, 0] / zp
        if m == 0.0:
            out[i] = 0.0
            continue
        e = A[t, KA] + W[i, KW] + Bt[h, KB] - zk
        if e < -2200.0:
            out[i] = 0.0
        else:
            out[i] = math.ldexp(m, int(min(e, 2200.0)))


@nb.njit(cache=True)
def _chain_flows(A, W_m, F, Bt_unused, tail_state, ptr, chain, head_state, zp, zk, is_final, out_arc):
    """Add the (negative) flow of each exclusion arc / final adjustment to its chain's arcs."""
    K = W_m.shape[1] - 1
    for i in range(tail_state.shape[0]):
        q = tail_state[i]
        m = A[q, 0] / zp
        e = A[q, A.shape[1] - 1] - zk
        for c in range(ptr[i], ptr[i + 1]):
            a = chain[c]
            m *= W_m[a, 0]
            e += W_m[a, K]
            if m != 0.0:
                fr, ex = math.frexp(m)
                m = fr
                e += ex
        r = head_state[i]
        if is_final:
            m *= F[r, 0]
            e += F[r, F.shape[1] - 1]
        else:
            m *= Bt_unused[r, 0]
            e += Bt_unused[r, Bt_unused.shape[1] - 1]
        if m == 0.0 or e < -2200.0:
            continue
        v = -math.ldexp(m, int(min(e, 2200.0)))
        for c in range(ptr[i], ptr[i + 1]):
            out_arc[chain[c]] += v


class ForwardBackward:
    """Forward-backward results in the log semiring.

    Attributes:
        alpha: float64 [N] forward values (-ln).
        beta: float64 [N] backward values (-ln, final weights included).
        logz: float64, -ln Z (the total weight).
        posteriors: float64 [E] expected count of each arc.
        final_posteriors: float64 [N] probability of stopping at each state.
        info: (forward SolveInfo, backward SolveInfo).

    ``alpha`` and ``beta`` may be given as callables; they are then
    converted on first access (one log per state), so callers that only need
    posteriors (EM) do not pay for them.
    """

    __slots__ = ("_alpha", "_beta", "logz", "posteriors", "final_posteriors", "info")

    def __init__(self, alpha, beta, logz, posteriors, final_posteriors, info):
        self._alpha = alpha
        self._beta = beta
        self.logz = logz
        self.posteriors = posteriors
        self.final_posteriors = final_posteriors
        self.info = info

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
        return (f"ForwardBackward(logz={self.logz!r}, {self.posteriors.shape[0]} arc posteriors, "
                f"{self.final_posteriors.shape[0]} states)")


def forward_backward(m: Machine, *, tol: float = 1e-11, max_sweeps: int = 100_000,
                     init_alpha=None, init_beta=None, phi: str = "failure",
                     phi_final: bool = True, device: str = "cpu") -> ForwardBackward:
    """Forward values, backward values and arc posteriors (log semiring).

    Args:
        m: the machine.
        tol, max_sweeps: relaxation settings for cyclic machines.
        init_alpha, init_beta: warm starts (previous alpha / beta arrays).
        phi, phi_final: failure-arc handling (see shortest_distance).
        device: "cpu" (default) or "cuda": both solves and the arc flows
            (the posteriors, mapped to the machine's arcs on a phi machine)
            run on the device (:mod:`fsmlearn.algo.cuda`).

    Returns:
        A :class:`ForwardBackward`.  If the total weight is zero, posteriors
        are all zero and ``logz`` is inf.
    """
    rows = None
    if not m.has_phi or phi == "epsilon":
        # convert the arc weights once; both directions and the flows reuse them
        rows = get_semiring("log").arc_rows(m.weight, m.semiring)
    sr, A, ia, ex = solve_values(m, "log", False, tol=tol, max_sweeps=max_sweeps, init=init_alpha,
                                 phi=phi, phi_final=phi_final, arc_rows=rows, device=device)
    _, Bt, ib, _ = solve_values(m, "log", True, tol=tol, max_sweeps=max_sweeps, init=init_beta,
                                phi=phi, phi_final=phi_final, arc_rows=rows, device=device)
    E = m.num_arcs
    post = np.zeros(E)
    fpost = np.zeros(m.num_states)
    logz = float(sr.output(Bt[m.start:m.start + 1])[0]) if m.start >= 0 else math.inf
    if math.isfinite(logz):
        zp = Bt[m.start, 0]
        zk = Bt[m.start, -1]
        g = ex["graph"]
        W = ex["system_rows"]()
        F = ex["F"]
        if device == "cuda":
            from .cuda.solve import final_flows_cuda, flows_cuda
            if g is m:
                post = flows_cuda(A, W, Bt, g.arc_src, g.dst, zp, zk)
            else:
                system = {"kind": g.kind, "ref": g.ref, "st": g.phi, "F": F,
                          "Wm": sr.arc_rows(m.weight, m.semiring)}
                post = flows_cuda(A, W, Bt, g.arc_src, g.dst, zp, zk, m.num_arcs, system)
            fpost = final_flows_cuda(A, F, zp, zk)
            return ForwardBackward(lambda: sr.output(A), lambda: sr.output(Bt), logz, post, fpost, (ia, ib))
        flows = np.empty(W.shape[0])
        _flows(A, W, Bt, g.arc_src, g.dst, zp, zk, flows)
        if g is m:
            post = flows
        else:
            kind0 = g.kind == 0
            np.add.at(post, g.ref[kind0], flows[kind0])
            st = g.phi
            Wm = sr.arc_rows(m.weight, m.semiring)
            _chain_flows(A, Wm, F, Bt, st.neg_tail, st.neg_ptr, st.neg_chain, st.neg_head,
                         zp, zk, False, post)
            _chain_flows(A, Wm, F, Bt, st.nf_state, st.nf_ptr, st.nf_chain, st.nf_final,
                         zp, zk, True, post)
        idx = np.arange(m.num_states, dtype=np.int32)
        fflows = np.empty(m.num_states)
        ones = np.zeros((m.num_states, A.shape[1]))
        ones[:, 0] = 0.5
        ones[:, -1] = 1.0
        _flows(A, F, ones, idx, idx, zp, zk, fflows)
        fpost = fflows
    return ForwardBackward(lambda: sr.output(A), lambda: sr.output(Bt), logz, post, fpost, (ia, ib))


def arc_posteriors(m: Machine, **kwargs) -> np.ndarray:
    """float64 [E]: expected count of each arc (see :func:`forward_backward`)."""
    return forward_backward(m, **kwargs).posteriors


def final_posteriors(m: Machine, **kwargs) -> np.ndarray:
    """float64 [N]: probability that an accepting path ends at each state."""
    return forward_backward(m, **kwargs).final_posteriors


def logz_gradient(m: Machine, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of ln Z with respect to the machine's arc and final weights.

    Returns:
        (d ln Z / d weight [E], d ln Z / d final [N]) in the machine's own
        convention: ``-posterior`` for negative-log weights, ``posterior / w``
        for real weights.
    """
    fb = forward_backward(m, **kwargs)
    if m.semiring == "real":
        with np.errstate(divide="ignore", invalid="ignore"):
            ga = np.where(m.weight > 0, fb.posteriors / np.where(m.weight > 0, m.weight, 1), 0.0)
            gf = np.where(m.final > 0, fb.final_posteriors / np.where(m.final > 0, m.final, 1), 0.0)
        return ga, gf
    return -fb.posteriors, -fb.final_posteriors


def expectation(m: Machine, arc_values, **kwargs) -> np.ndarray:
    """E[sum of arc_values along the path] under the machine's path distribution.

    Computed in the expectation semiring: the total weight <Z, r> gives r / Z.

    Args:
        m: the machine.
        arc_values: [E] or [E, R] additive values.
        **kwargs: passed to shortest_distance (tol, phi, ...).

    Returns:
        float64 [R] (a scalar array of shape (1,) for 1-D values).
    """
    v = np.asarray(arc_values, dtype=np.float64)
    sr = get_semiring("expectation", v)
    _, Bt, _, _ = solve_values(m, sr, True, arc_values=v, **kwargs)
    if m.start < 0:
        return np.zeros(sr.R)
    return sr.output(Bt[m.start:m.start + 1])[0, 1:]

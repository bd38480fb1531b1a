"""The lifted tree-reweighted bound and its dual decomposition (Jernite, Rush and Sontag 2015,
sections 4.3-5).

With edge appearance probabilities rho = 1/(K+1) (the K + 1 forests of rotated stars,
section 4.4) the lifted TRW upper bound on the log-partition of the cyclic model is

    A(theta) <= bar-A(theta) = N / (K+1) min_delta max_{mu in LC} O^delta(theta, mu)   (eq. 15)

where, for fixed dual variables delta [K, C], max_mu O^delta is the log-partition of the
(K+1)-node star of Figure 4 (a tree, so belief propagation is exact): the centre V^0 with
log-potential theta^0 - sum_l delta^l, the leaves V^l with theta^0 + delta^l, and the edge
(V^0, V^l) with (K+1) theta^l[x_0, x_l] (eq. 17).  Hence, per position,

    L(theta; delta) = <hat-mu, theta> - log Z_star(theta, delta) / (K+1)

is a lower bound on (1/N) log p_cycl(x) for *every* delta (section 5), concave in
(theta, delta), and

- d L / d delta^l = -(mu^l_V - mu^0_V) / (K+1): the subgradient of eq. 16, used by
  :func:`tighten` (Algorithm 1, the step schedule of section 6: alpha = alpha0 / 2^t, t the
  number of steps that did not decrease the dual);
- d L / d theta^0 = hat-mu^0 - (1/(K+1)) sum_{l=0..K} mu^l_V and d L / d theta^l = hat-mu^l -
  mu^l_E (eq. 18; at the optimal delta all mu^l_V agree and this is eq. 18 exactly);
- for theta^l = U W^l^T (eq. 5) the chain rule of eq. 19: dL/dU = sum_l G^l W^l and
  dL/dW^l = G^l^T U with G^l = hat-mu^l - mu^l_E; mu^l_E = diag(a) E^l diag(b) is never formed.

The dense kernel is E^l = exp((K+1) theta^l - s_l) [C, C] (s_l its max, float32 for large
C); one BP pass is 2K matrix-vector products, O(K C^2) (section 4.4).

Public names: StarPotentials, star_potentials, StarResult, star_bp, star_marginals, copies_gap, TightenState,
tighten, LiftedBound, lifted_bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, NotConvergedError
from .model import Moments, MRFModel

__all__ = ["StarPotentials", "star_potentials", "StarResult", "star_bp", "star_marginals", "copies_gap", "TightenState",
           "tighten", "LiftedBound", "lifted_bound"]


@dataclass
class StarPotentials:
    """The potentials of the star of Figure 4 that do not depend on delta (eq. 17).

    Attributes:
        theta0: float64 [C].
        E: [K, C, C] (float32 or float64), exp((K+1) theta^l - shift[l]).
        shift: float64 [K].
    """
    theta0: np.ndarray
    E: np.ndarray
    shift: np.ndarray

    @property
    def K(self) -> int:
        return int(self.E.shape[0])

    @property
    def C(self) -> int:
        return int(self.theta0.size)


def star_potentials(model: MRFModel, dtype=np.float64) -> StarPotentials:
    """exp of the star's edge log-potentials (K+1) theta^l (eq. 17), one shift per edge.

    Args:
        model: the model.
        dtype: np.float64 (exact work, small C) or np.float32 (half the memory and
            bandwidth; entries more than ~87 nats below an edge's maximum become 0).
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ArgumentError(f"dtype {dtype}; expected float32 or float64")
    K, C = model.K, model.C
    E = np.empty((K, C, C), dtype)
    shift = np.empty(K)
    for l in range(1, K + 1):
        t = E[l - 1]
        t[...] = model.pairwise(l, dtype)
        t *= dtype.type(K + 1)
        s = float(t.max())
        shift[l - 1] = s
        t -= dtype.type(s)
        np.exp(t, out=t)
    return StarPotentials(model.theta0.copy(), E, shift)


def _scaled_exp(v):
    m = float(v.max())
    return np.exp(v - m), m


def copies_gap(mu: np.ndarray) -> float:
    """max_l sum_x |mu^l(x) - mu^0(x)| of node marginals mu [copies, states] (copy 0 the centre):
    how far the copies are from agreeing (eq. 13)."""
    return float(np.abs(mu[1:] - mu[0]).sum(axis=1).max())


@dataclass
class StarResult:
    """Exact BP on the star for one delta.

    Attributes:
        log_partition: float, ln Z_star(theta, delta) = max_mu O^delta(theta, mu) (eq. 14).
        mu: float64 [K+1, C], the node marginals mu^0_V (centre) and mu^l_V (leaves).
        a, b: float64 [K, C]: the edge marginal mu^l_E[x0, xl] = a[l-1, x0] E^l[x0, xl] b[l-1, xl].
        delta: float64 [K, C], the dual variables it was computed for.
    """
    log_partition: float
    mu: np.ndarray
    a: np.ndarray
    b: np.ndarray
    delta: np.ndarray

    @property
    def gap(self) -> float:
        """:func:`copies_gap` of the node marginals (eq. 13)."""
        return copies_gap(self.mu)

    def edge_marginal(self, pot: StarPotentials, l: int) -> np.ndarray:
        """mu^l_E, float64 [C, C] (dense: small C only)."""
        return self.a[l - 1][:, None] * pot.E[l - 1].astype(np.float64) * self.b[l - 1][None, :]


def star_bp(pot: StarPotentials, delta) -> StarResult:
    """Belief propagation on the star of Figure 4 with the log-potentials of eq. 17.

    Args:
        pot: from :func:`star_potentials`.
        delta: float64 [K, C].

    Returns:
        :class:`StarResult` (log-partition, node and edge marginals).
    """
    K, C = pot.K, pot.C
    delta = np.asarray(delta, np.float64)
    if delta.shape != (K, C):
        raise ArgumentError(f"delta has shape {delta.shape}; expected [{K}, {C}]")
    unary = np.vstack([pot.theta0 - delta.sum(axis=0), pot.theta0[None, :] + delta])
    logz, mu, a, phis = star_marginals(unary, pot.E, pot.shift)
    return StarResult(logz, mu, a, phis, delta.copy())


def star_marginals(unary, E, shift):
    """Exact BP on a star: a centre joined to K leaves, each edge l by the potential
    ``exp(shift[l]) E[l][x_centre, x_leaf]`` (E scaled, float64 or float32), node l (0: the
    centre) by the log-potential ``unary[l]``.  Vectors stay in the log domain and the
    matrix-vector products run in the scaled linear domain (a float32 E that underflows is
    redone in float64).  The one star routine of the lifted bounds: the LM's star
    (:func:`star_bp`) and the tagger's trees (:func:`fsmlearn.mrf.tagger.tree_bp`).

    Args:
        unary: float64 [K+1, C] (C may differ between centre and leaves only through
            E's shape: here all nodes have C states).
        E: [K, C, C]; shift: float64 [K].

    Returns:
        (ln Z, mu float64 [K+1, C] node marginals, a float64 [K, C], b float64 [K, C]): the
        edge marginal of edge l is ``a[l][:, None] * E[l] * b[l][None, :]``.

    Raises:
        NotConvergedError: a message underflows (potentials too far apart).
    """
    K = E.shape[0]
    C = unary.shape[1]
    dt = E.dtype
    logphi0 = unary[0]
    phis = np.empty((K, C))
    logmsg = np.empty((K, C))
    logscale = 0.0
    with np.errstate(divide="ignore"):
        for l in range(K):
            phis[l], ml = _scaled_exp(unary[l + 1])
            msg = (E[l] @ phis[l].astype(dt)).astype(np.float64)        # leaf l -> centre
            mx = float(msg.max())
            if not mx > 0:        # every product underflowed in float32: redo this one in float64
                msg = E[l].astype(np.float64) @ phis[l]
                mx = float(msg.max())
                if not mx > 0:
                    raise NotConvergedError(f"edge {l + 1}: the star's messages underflow "
                                            "(potentials too far apart)")
            logmsg[l] = np.log(msg / mx)
            logscale += ml + math.log(mx) + float(shift[l])
    lb0 = logphi0 + logmsg.sum(axis=0)
    m = float(lb0.max())
    b0 = np.exp(lb0 - m)
    S = float(b0.sum())
    mu = np.empty((K + 1, C))
    mu[0] = b0 / S
    a = np.empty((K, C))
    for l in range(K):
        lc = logphi0 + np.delete(logmsg, l, axis=0).sum(axis=0)
        c = np.exp(lc - float(lc.max()))                             # centre -> leaf l, max 1
        r = (c.astype(dt) @ E[l]).astype(np.float64)
        q = phis[l] * r
        qs = float(q.sum())
        if not qs > 0:
            r = c @ E[l].astype(np.float64)
            q = phis[l] * r
            qs = float(q.sum())
            if not qs > 0:
                raise NotConvergedError(f"edge {l + 1}: the message to leaf {l + 1} underflows "
                                        "(potentials too far apart for the stored edge potentials)")
        mu[l + 1] = q / qs
        a[l] = c / qs
    return math.log(S) + m + logscale, mu, a, phis


@dataclass
class TightenState:
    """The dual variables and step size carried from one tightening to the next (warm start).

    Attributes:
        delta: float64 [K, C].
        alpha: the current step size of Algorithm 1.
        iterations: BP passes done so far (all calls).
    """
    delta: np.ndarray
    alpha: float = 1e3
    iterations: int = 0

    @classmethod
    def zeros(cls, K: int, C: int, alpha: float = 1e3) -> "TightenState":
        return cls(np.zeros((K, C)), float(alpha))


def tighten(pot, state: TightenState, *, max_iter: int = 200, tol: float = 1e-3,
            alpha0: float = 1e3, method: str = "subgradient", bp=None) -> StarResult:
    """Algorithm 1: minimise log Z_star over delta, from ``state.delta`` (updated in place).

    ``method="subgradient"``: steps delta^l <- delta^l - alpha (mu^l_V - mu^0_V) (eq. 16) with
    alpha = alpha0 / 2^t, t the number of steps so far that did not decrease the dual
    (section 6); a step that does not decrease it is not taken (the next one starts from the
    best delta with half the step).  At each call alpha first doubles (up to alpha0), so a
    warm start can recover from steps shrunk by an earlier theta.
    ``method="lbfgs"``: scipy's L-BFGS-B on the same smooth dual (the authors' implementation,
    appendix B).  Stops when the copies agree within ``tol`` (eq. 13: max_l ||mu^l - mu^0||_1)
    or after ``max_iter`` BP passes.  ``bp(pot, delta)`` is the exact inference on the tree
    (default :func:`star_bp`; the tagger's tree passes its own), returning an object with
    ``log_partition``, ``mu`` [K+1, ...] (the centre copy first), ``gap`` and ``delta``.

    Returns:
        The :class:`StarResult` of the best delta (``state.delta`` is set to it).
    """
    if method not in ("subgradient", "lbfgs"):
        raise ArgumentError(f"method {method!r}; expected 'subgradient' or 'lbfgs'")
    if max_iter < 0 or not tol > 0 or not alpha0 > 0:
        raise ArgumentError(f"max_iter = {max_iter}, tol = {tol}, alpha0 = {alpha0}; expected >= 0, > 0, > 0")
    bp = star_bp if bp is None else bp
    best = bp(pot, state.delta)
    state.iterations += 1
    if method == "lbfgs":
        return _tighten_lbfgs(pot, state, best, max_iter, tol, bp)
    alpha = min(alpha0, 2 * state.alpha)
    it = 0
    while it < max_iter and best.gap > tol and alpha > 1e-12:
        it += 1
        try:
            cand = bp(pot, best.delta - alpha * (best.mu[1:] - best.mu[0]))
        except NotConvergedError:       # a step so long that the messages underflow: shorten it
            alpha /= 2
            continue
        if cand.log_partition < best.log_partition:
            best = cand
        else:
            alpha /= 2
    state.iterations += it
    state.alpha = alpha
    state.delta = best.delta.copy()
    return best


def _tighten_lbfgs(pot, state, best, max_iter, tol, bp):
    from scipy.optimize import minimize
    shape = best.delta.shape
    cache = {"best": best}

    def f(d):
        r = bp(pot, d.reshape(shape))
        state.iterations += 1
        if r.log_partition < cache["best"].log_partition:
            cache["best"] = r
        return r.log_partition, (r.mu[1:] - r.mu[0]).ravel()

    if best.gap > tol and max_iter > 0:
        class _Done(Exception):
            pass

        def cb(_):
            if cache["best"].gap <= tol:
                raise _Done
        try:
            minimize(f, best.delta.ravel(), jac=True, method="L-BFGS-B", callback=cb,
                     options={"maxfun": max_iter, "maxiter": max_iter, "gtol": 0.0, "ftol": 1e-15})
        except _Done:
            pass
    best = cache["best"]
    state.delta = best.delta.copy()
    return best


@dataclass
class LiftedBound:
    """The lifted bound per position and its gradient.

    Attributes:
        value: float, L(theta; delta) = <hat-mu, theta> - log Z_star / (K+1): (1/N) times a
            lower bound on log p_cycl(x) (section 5).
        log_partition: float, N log Z_star / (K+1), an upper bound on A(theta) (eq. 15).
        grad: float64 [num_params], dL/dparameters (order of MRFModel.to_vector; eqs. 18-19).
        star: the :class:`StarResult` it was computed from.
        N: the corpus length.
    """
    value: float
    log_partition: float
    grad: np.ndarray | None
    star: StarResult
    N: int = 0


def lifted_bound(model: MRFModel, moments: Moments, delta=None, *, pot: StarPotentials | None = None,
                 star: StarResult | None = None, gradient: bool = True) -> LiftedBound:
    """The bound L(theta; delta) of section 5 for a fixed delta, and its gradient in theta.

    Args:
        model: the model.
        moments: the corpus moments (:func:`~fsmlearn.mrf.model.collect_moments`).
        delta: float64 [K, C] (default zeros), ignored when ``star`` is given.
        pot: the star potentials of ``model`` (built in float64 when None).
        star: a BP result already computed for ``pot`` (e.g. by :func:`tighten`).
        gradient: also compute the gradient (eqs. 18-19).

    Returns:
        :class:`LiftedBound`.
    """
    K, C = model.K, model.C
    if moments.K != K or moments.C != C:
        raise ArgumentError(f"moments of C = {moments.C}, K = {moments.K} against a model of C = {C}, K = {K}")
    if pot is None:
        pot = star_potentials(model)
    if star is None:
        star = star_bp(pot, np.zeros((K, C)) if delta is None else delta)
    value = moments.dot(model) - star.log_partition / (K + 1)
    logpart = moments.N * star.log_partition / (K + 1)
    grad = None
    if gradient:
        mu0_hat, pair_hat = moments.means()
        g0 = mu0_hat - star.mu.mean(axis=0)
        dt = pot.E.dtype
        if model.pair is not None:
            gp = np.empty((K, C, C))
            for l in range(K):
                gp[l] = pair_hat[l].toarray() - star.edge_marginal(pot, l + 1)
            grad = np.concatenate([g0, gp.ravel()])
        else:
            U, W = model.U, model.W
            gU = np.zeros_like(U)
            gW = np.empty_like(W)
            for l in range(K):
                a, b, E = star.a[l], star.b[l], pot.E[l]
                # G^l W^l = hat-mu^l W^l - diag(a) E diag(b) W^l; G^l^T U likewise (eq. 19)
                gU += pair_hat[l] @ W[l] - a[:, None] * (E @ (b[:, None] * W[l]).astype(dt)).astype(np.float64)
                gW[l] = pair_hat[l].T @ U - b[:, None] * (E.T @ (a[:, None] * U).astype(dt)).astype(np.float64)
            grad = np.concatenate([g0, gU.ravel(), gW.ravel()])
    return LiftedBound(value, logpart, grad, star, moments.N)

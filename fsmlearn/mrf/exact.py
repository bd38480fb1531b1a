"""The cyclic model compiled into a machine: exact log-partition and moments by the engine
(small C and K only).

The log-partition of the cyclic order-K model over N positions (section 4.1),

    A(theta) = log sum_{y in X^N} exp( sum_i theta^0[y_i] + sum_l theta^l[y_i, y_{i+l mod N}] ),

is a cycle sum: the trace of the N-th power of the transfer matrix over K-tuples.  The
machine of :class:`CycleStructure` unrolls the cycle: its states remember the first K
symbols p and the last K symbols w at position t (C^{2K} N states at most), an arc reads
y_t with weight theta^0[y_t] + sum_l theta^l[y_{t-l}, y_t], and the closing arc to the one
final state adds the K(K+1)/2 wrap-around edges between w and p.  The engine's
``total_weight`` (log semiring) is then A(theta) and its ``arc_posteriors``, summed through
each arc's features, the expected moments E[mu] (the gradient of A).  Restricting the
symbols allowed at each position gives the conditional model of eq. 3 / Lemma 1
(p_cycl(x | x in S), the separators fixed), whose log-likelihood
:func:`conditional_log_likelihood` computes with its gradient (the paper's "exact
gradients" of Figure 5).

Public names: CycleStructure, cycle_machine, exact_log_partition, exact_moments,
conditional_log_likelihood, cycle_log_partition.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp

from ..algo import arc_posteriors, total_weight
from ..errors import ArgumentError
from ..fsm import Machine
from ..fsm.buffers import grow
from .model import MRFModel

__all__ = ["CycleStructure", "cycle_machine", "exact_log_partition", "exact_moments",
           "conditional_log_likelihood", "cycle_log_partition"]


def _full_theta(model: MRFModel) -> np.ndarray:
    """[theta^0, theta^1.ravel(), ..., theta^K.ravel()]: the feature weights of the arcs."""
    return np.concatenate([model.theta0] + [model.pairwise(l).ravel() for l in range(1, model.K + 1)])


@nb.njit(cache=True)
def _digit(code, i, C, K):
    """Symbol i (0: the oldest) of a K-tuple coded in base C, the oldest most significant."""
    return (code // C ** (K - 1 - i)) % C


@nb.njit(cache=True)
def _pair(l, u, v, C):
    """The column of theta^l[u, v] in the arcs' features."""
    return C + (l - 1) * C * C + u * C + v


@nb.njit(cache=True)
def _add_arc(s, d, label, src, dst, lab, e):
    src = grow(src, e)
    dst = grow(dst, e)
    lab = grow(lab, e)
    src[e] = s
    dst[e] = d
    lab[e] = label
    return src, dst, lab


@nb.njit(cache=True)
def _add_feature(e, f, frow, fcol, n):
    frow = grow(frow, n)
    fcol = grow(fcol, n)
    frow[n] = e
    fcol[n] = f
    return frow, fcol


@nb.njit(cache=True)
def _unroll(C, K, N, ok):
    """The unrolled cycle (the class docstring): states (p, w) per position, numbered in the
    order they are found with each position's states taken in order of (p, w) (base C, the
    oldest symbol most significant).  Returns (src, dst, label, feature rows, feature columns,
    arcs, features, the final state)."""
    CK = C ** K
    src = np.empty(64, np.int64)
    dst = np.empty(64, np.int64)
    lab = np.empty(64, np.int64)
    frow = np.empty(64, np.int64)
    fcol = np.empty(64, np.int64)
    e = 0
    n = 0
    cur = np.full(CK * CK, -1, np.int64)
    nid = 1                                     # 0 is the start
    k = 0
    for p in range(CK):                         # the first K symbols, in itertools.product order
        good = True
        for i in range(K):
            if not ok[i, _digit(p, i, C, K)]:
                good = False
        if not good:
            continue
        cur[p * CK + p] = nid
        src, dst, lab = _add_arc(0, nid, k + 1, src, dst, lab, e)
        nid += 1
        for i in range(K):
            frow, fcol = _add_feature(e, _digit(p, i, C, K), frow, fcol, n)
            n += 1
        for i in range(K):
            for l in range(1, K):
                if i + l < K:
                    f = _pair(l, _digit(p, i, C, K), _digit(p, i + l, C, K), C)
                    frow, fcol = _add_feature(e, f, frow, fcol, n)
                    n += 1
        e += 1
        k += 1
    for t in range(K, N):
        nxt = np.full(CK * CK, -1, np.int64)
        for key in range(CK * CK):
            s = cur[key]
            if s < 0:
                continue
            p = key // CK
            w = key % CK
            for y in range(C):
                if not ok[t, y]:
                    continue
                w2 = (w * C + y) % CK
                k2 = p * CK + w2
                if nxt[k2] < 0:
                    nxt[k2] = nid
                    nid += 1
                src, dst, lab = _add_arc(s, nxt[k2], y + 1, src, dst, lab, e)
                frow, fcol = _add_feature(e, y, frow, fcol, n)
                n += 1
                for l in range(1, K + 1):
                    frow, fcol = _add_feature(e, _pair(l, _digit(w, K - l, C, K), y, C), frow, fcol, n)
                    n += 1
                e += 1
        cur = nxt
    final = nid
    for key in range(CK * CK):
        s = cur[key]
        if s < 0:
            continue
        p = key // CK
        w = key % CK
        src, dst, lab = _add_arc(s, final, C + 1, src, dst, lab, e)
        # y_i = w[i - (N-K)] for i in N-K..N-1; edges (i, i+l) with i + l >= N end at p[i+l-N]
        for j in range(K):
            for l in range(1, K + 1):
                if j + l >= K:
                    f = _pair(l, _digit(w, j, C, K), _digit(p, j + l - K, C, K), C)
                    frow, fcol = _add_feature(e, f, frow, fcol, n)
                    n += 1
        e += 1
    return src, dst, lab, frow, fcol, e, n, final


class CycleStructure:
    """The topology of the unrolled cycle and the features of its arcs (weights set per model).

    Args:
        C: states; K: order; N: positions (>= 2K).
        allowed: None (every symbol everywhere) or a bool [N, C] mask of the symbols allowed
            at each position.

    Attributes:
        features: scipy CSR float64 [arcs, C + K C^2]: how many times each arc uses each
            potential (theta^0[v] at column v, theta^l[u, v] at C + (l-1) C^2 + u C + v).
    """

    def __init__(self, C: int, K: int, N: int, allowed=None):
        if K < 1 or C < 1 or N < 2 * K:
            raise ArgumentError(f"C = {C}, K = {K}, N = {N}; expected C, K >= 1 and N >= 2K")
        if C ** (2 * K) * N > 5_000_000:
            raise ArgumentError(f"C = {C}, K = {K}, N = {N} unrolls into up to {C ** (2 * K) * N:,} states; "
                                "the exact machine is for small C and K")
        self.C, self.K, self.N = C, K, N
        ok = np.ones((N, C), bool) if allowed is None else np.asarray(allowed, bool)
        if ok.shape != (N, C):
            raise ArgumentError(f"allowed has shape {ok.shape}; expected [{N}, {C}]")
        nf = C + K * C * C
        src, dst, lab, frow, fcol, E, F, final = _unroll(C, K, N, np.ascontiguousarray(ok))
        self.num_states = final + 1
        self.src = src[:E].copy()
        self.dst = dst[:E].copy()
        self.label = lab[:E].astype(np.int32)
        self.final_state = final
        ptr = np.zeros(E + 1, np.int64)          # the features come arc by arc
        np.cumsum(np.bincount(frow[:F], minlength=E), out=ptr[1:])
        self.features = sp.csr_matrix((np.ones(F), fcol[:F].copy(), ptr), shape=(E, nf))
        self.features.sum_duplicates()

    def machine(self, model: MRFModel) -> Machine:
        """The log-semiring machine (weights: negated log-potentials) of ``model``."""
        if model.C != self.C or model.K != self.K:
            raise ArgumentError(f"a model of C = {model.C}, K = {model.K} on a structure of C = {self.C}, "
                                f"K = {self.K}")
        w = -(self.features @ _full_theta(model))
        final = np.full(self.num_states, np.inf)
        final[self.final_state] = 0.0
        return Machine.from_arcs(self.num_states, 0, final, self.src, self.dst, self.label, weight=w,
                                 semiring="log")

    def log_partition(self, model: MRFModel) -> float:
        """A(theta) by the engine's total weight (log semiring)."""
        return -float(total_weight(self.machine(model), "log"))

    def expected_counts(self, model: MRFModel):
        """E[counts] under the model: (float64 [C] unary, float64 [K, C, C] pairs), by the
        engine's arc posteriors."""
        post = arc_posteriors(self.machine(model))
        f = self.features.T @ post
        C, K = self.C, self.K
        return f[:C], f[C:].reshape(K, C, C)


def cycle_log_partition(unary, pairwise, N: int) -> float:
    """A of the cyclic model with explicit potentials: ``unary`` float64 [C] and
    ``pairwise`` float64 [K, C, C] (theta^l[u, v] joins y_i = u to y_{i+l} = v), over N
    positions, by the engine's total weight on :class:`CycleStructure`'s machine.

    Raises:
        ArgumentError: shapes that do not fit, or a cycle too large to unroll.
    """
    unary = np.asarray(unary, np.float64)
    pairwise = np.asarray(pairwise, np.float64)
    C = unary.shape[0]
    if unary.ndim != 1 or pairwise.ndim != 3 or pairwise.shape[1:] != (C, C) or pairwise.shape[0] < 1:
        raise ArgumentError(f"unary {unary.shape} and pairwise {pairwise.shape}: expected [C] and [K, C, C]")
    cs = CycleStructure(C, pairwise.shape[0], N)
    w = -(cs.features @ np.concatenate([unary, pairwise.ravel()]))
    final = np.full(cs.num_states, np.inf)
    final[cs.final_state] = 0.0
    m = Machine.from_arcs(cs.num_states, 0, final, cs.src, cs.dst, cs.label, weight=w, semiring="log")
    return -float(total_weight(m, "log"))


def cycle_machine(model: MRFModel, N: int, allowed=None) -> Machine:
    """The machine whose total weight is the cyclic model's partition function (see the module
    docstring); ``allowed`` restricts the symbols per position."""
    return CycleStructure(model.C, model.K, N, allowed).machine(model)


def exact_log_partition(model: MRFModel, N: int, allowed=None) -> float:
    """A(theta) of the cyclic model over N positions, by the engine (small C, K)."""
    return CycleStructure(model.C, model.K, N, allowed).log_partition(model)


def exact_moments(model: MRFModel, N: int, allowed=None):
    """The model's expected moments per position (mu0 [C], mu_pair [K, C, C]), i.e. dA/dtheta / N."""
    u, p = CycleStructure(model.C, model.K, N, allowed).expected_counts(model)
    return u / N, p / N


def separator_mask(x, C: int, sep: int) -> np.ndarray:
    """bool [N, C]: the set S of Lemma 1 for the sequence x: the separator where x has one,
    any other symbol elsewhere."""
    x = np.asarray(x)
    ok = np.ones((x.size, C), bool)
    ok[:, sep] = False
    ok[x == sep] = False
    ok[x == sep, sep] = True
    return ok


def conditional_log_likelihood(model: MRFModel, x, sep: int, structure: CycleStructure | None = None,
                               gradient: bool = False):
    """log p_cycl(x | x in S) (eq. 3 and Lemma 1: the product of the sentence likelihoods
    p^{M_i}(t^i)), and optionally its gradient in the model's parameter vector.

    Args:
        model: the model (full or low rank).
        x: int [N], the corpus sequence (separators at fixed positions).
        sep: the separator's state id.
        structure: a :class:`CycleStructure` built with :func:`separator_mask` (built when None).
        gradient: also return the gradient (observed minus expected counts, eq. 18's exact
            counterpart, through eq. 19 for a low-rank model).

    Returns:
        float, or (float, float64 [num_params]).
    """
    x = np.asarray(x, np.int64)
    N, C, K = x.size, model.C, model.K
    if structure is None:
        structure = CycleStructure(C, K, N, separator_mask(x, C, sep))
    ll = model.score(x) - structure.log_partition(model)
    if not gradient:
        return ll
    eu, ep = structure.expected_counts(model)
    ou = np.bincount(x, minlength=C).astype(np.float64)
    op = np.zeros((K, C, C))
    for l in range(1, K + 1):
        np.add.at(op[l - 1], (x, np.roll(x, -l)), 1.0)
    gu, gp = ou - eu, op - ep
    if model.pair is not None:
        return ll, np.concatenate([gu, gp.ravel()])
    gU = sum(gp[l] @ model.W[l] for l in range(K))
    gW = np.stack([gp[l].T @ model.U for l in range(K)])
    return ll, np.concatenate([gu, gU.ravel(), gW.ravel()])

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
conditional_log_likelihood.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp

from ..algo import arc_posteriors, total_weight
from ..errors import ArgumentError
from ..fsm import Machine
from .model import MRFModel

__all__ = ["CycleStructure", "cycle_machine", "exact_log_partition", "exact_moments",
           "conditional_log_likelihood"]


def _full_theta(model: MRFModel) -> np.ndarray:
    """[theta^0, theta^1.ravel(), ..., theta^K.ravel()]: the feature weights of the arcs."""
    return np.concatenate([model.theta0] + [model.pairwise(l).ravel() for l in range(1, model.K + 1)])


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
        ids: dict = {}

        def state(key):
            s = ids.get(key)
            if s is None:
                s = ids[key] = len(ids) + 1          # 0 is the start
            return s

        src, dst, lab, frow, fcol = [], [], [], [], []

        def arc(s, d, label, feats):
            src.append(s)
            dst.append(d)
            lab.append(label)
            j = len(src) - 1
            for f in feats:
                frow.append(j)
                fcol.append(f)

        pair = lambda l, u, v: C + (l - 1) * C * C + u * C + v
        choices = [np.flatnonzero(ok[i]).tolist() for i in range(N)]
        for k, p in enumerate(itertools.product(*choices[:K])):
            feats = list(p) + [pair(l, p[i], p[i + l]) for i in range(K) for l in range(1, K) if i + l < K]
            arc(0, state((p, p, K)), k + 1, feats)
        frontier = {key for key in ids}
        for t in range(K, N):
            nxt = set()
            for key in sorted(frontier):
                p, w, _ = key
                s = ids[key]
                for y in choices[t]:
                    w2 = w[1:] + (y,)
                    d = state((p, w2, t + 1))
                    nxt.add((p, w2, t + 1))
                    arc(s, d, y + 1, [y] + [pair(l, w[K - l], y) for l in range(1, K + 1)])
            frontier = nxt
        final = len(ids) + 1
        for key in sorted(frontier):
            p, w, _ = key
            # y_i = w[i - (N-K)] for i in N-K..N-1; edges (i, i+l) with i + l >= N end at p[i+l-N]
            feats = [pair(l, w[j], p[j + l - K]) for j in range(K) for l in range(1, K + 1) if j + l >= K]
            arc(ids[key], final, C + 1, feats)
        E = len(src)
        self.num_states = final + 1
        self.src = np.asarray(src, np.int64)
        self.dst = np.asarray(dst, np.int64)
        self.label = np.asarray(lab, np.int32)
        self.final_state = final
        self.features = sp.csr_matrix((np.ones(len(frow)), (frow, fcol)), shape=(E, nf))

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

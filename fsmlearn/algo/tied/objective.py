"""The bound of n-gram EM with n_q = 1, its expected counts, gradient and E-step.

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
3.3-3.5.  The bound (5) is

    r = E_cq[ log p_theta(w, t) - log q_phi(t | w) ]

for a bigram HMM p_theta (n_p = 2).  How it is computed (the Z_a
construction of section 3.3, n_p - n_q = 1): the forward mass per incoming
tag, ``alpha2[h, t]`` (Z_a: the paths to h split by their last tag), is one
pass over the events of :class:`~fsmlearn.algo.tied.structure.TiedStructure`
plus one pass down the phi forest.  The second component of the
expectation-semiring forward value, summed at the final states, is then a sum
over arcs (Li and Eisner 2009, section 4.2; footnote 14 of the paper: with
beta = 1 the forward in the expectation semiring and this sum are the same
number):

    r = sum_a sum_t  k_a phi[a, t] ( sum_t' alpha2[src, t'] log theta(t | t')
                                      + alpha[src] (log theta(w | t) - log phi[a, t]) )
        + sum_h F(h) sum_t' alpha2[h, t'] log theta(</s> | t')

Gradients (section 3.4).  d r / d log theta is the expected count of each
transition and emission.  With n_q = 1 a tag affects only the next
transition, so d r / d phi[a, t] needs no second relaxation:

    d r / d phi[a, t] = B[a, t] - A[a] (log phi[a, t] + 1)
    A[a]    = sum_e k_e alpha[src_e]                      (expected uses of a)
    B[a, t] = sum_e k_e ( M[src_e, t] + alpha[src_e] (log theta(w | t) + U[dst_e, t]) )

over the events e that use a's block (a itself and the exclusion arcs that
shadow it), where ``M = alpha2 @ log theta`` and ``U[h, t]`` is the derivative
of r with respect to tag mass arriving at h (the expected log transition out
of h, passed down the phi forest).  The block optimum holding the other blocks
fixed is ``phi[a, .] = softmax(B[a, .] / A[a])`` (section 3.5), exactly when
a's destination does not back off to a's source (otherwise the block also
feeds its own source's tag mass, and this is the stationary point of the
objective linearised in that feedback); the approximate variational E-step
(:func:`estep_parallel`) applies it to all blocks in parallel (the M-step, which
normalises the expected counts, is the model's: :func:`fsmlearn.tag.ngram.em.mstep`).

Public names: Stats, expected_stats, phi_gradient, d_bound_d_phi,
estep_parallel, dot_log, one_thread_index, NEG_LOG, MIN_BLOCK_MASS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import SolveInfo
from . import kernels as par
from .kernels import ParIndex
from .structure import TiedStructure

__all__ = ["Stats", "expected_stats", "phi_gradient", "d_bound_d_phi", "estep_parallel", "dot_log",
           "one_thread_index", "NEG_LOG", "MIN_BLOCK_MASS"]

NEG_LOG = -1e250         # stands in for log 0 in products with zero masses
MIN_BLOCK_MASS = 1e-300  # a block used at most this much (expected uses) keeps its phi in an E-step


@dataclass
class Stats:
    """Expected counts and the bound for one (theta, phi)."""
    trans: np.ndarray     # [T+1, T+1] (row T: sentence start; column T: sentence end)
    emit: np.ndarray      # [T, V+1]
    entropy: float        # E[-log q(t | w)]
    bound: float          # the objective r (per sentence of c)
    alpha2: np.ndarray    # [N, T+1]
    G: np.ndarray | None = None   # [N, T+1] tag mass of the n_q = 1 events leaving each state, reused
    solve_info: SolveInfo | None = None   # alpha2's relaxation (conditioned blocks only)


def one_thread_index(cs: TiedStructure) -> ParIndex:
    """The kernels' index with one part (built once per structure)."""
    px = cs.kernel_index.get(1)
    if px is None:
        px = cs.kernel_index[1] = ParIndex(cs, 1)
    return px


def expected_stats(cs: TiedStructure, phi: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray,
                   px=None) -> Stats:
    """Expected counts under cq_phi and the bound r at (theta, phi).

    ``px``: a :class:`fsmlearn.algo.tied.kernels.ParIndex` giving the parts the
    kernels split their work into (one per thread); None for one part."""
    px = px or one_thread_index(cs)
    A2 = par.alpha2(cs, px, phi)
    G = par.state_tag_mass(cs, px, phi)
    emit, ent = par.emit_entropy(cs, px, phi, log_emit.shape[1])
    trans = A2.T @ G
    bound = dot_log(trans, log_trans) + dot_log(emit, log_emit) + ent
    return Stats(trans, emit, ent, bound, A2, G)


def dot_log(counts, logp):
    with np.errstate(invalid="ignore"):
        nz = counts != 0.0
        if np.any(nz & ~np.isfinite(logp)):
            return -math.inf
        return float((counts[nz] * logp[nz]).sum())


def phi_gradient(cs: TiedStructure, phi, log_trans, log_emit, alpha2=None, px=None, G=None):
    """(A [E], B [K]): d r / d phi[j] = B[j] - A[arc of j] (log phi[j] + 1).

    ``alpha2`` and ``G`` (the forward mass per tag and the tag mass leaving
    each state, :class:`Stats`) may be passed when known for this phi."""
    px = px or one_thread_index(cs)
    if alpha2 is None:
        alpha2 = par.alpha2(cs, px, phi)
    lt = np.maximum(log_trans, NEG_LOG)
    le = np.maximum(log_emit, NEG_LOG)
    if G is None:
        G = par.state_tag_mass(cs, px, phi)
    U = par.adjoint(cs, G, lt)
    return par.block_scores(cs, px, alpha2 @ lt, U, np.ascontiguousarray(le.T))


def d_bound_d_phi(cs: TiedStructure, phi, log_trans, log_emit) -> np.ndarray:
    """float64 [K]: the gradient of r with respect to phi (unconstrained coordinates)."""
    A, B = phi_gradient(cs, phi, log_trans, log_emit)
    arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
    with np.errstate(divide="ignore"):
        lp = np.where(phi > 0, np.log(np.where(phi > 0, phi, 1.0)), -np.inf)
    return B - A[arc_of] * (lp + 1.0)


def estep_parallel(cs: TiedStructure, phi, log_trans, log_emit, alpha2=None, px=None, G=None) -> np.ndarray:
    """One parallel block update of every phi block (section 3.5)."""
    A, B = phi_gradient(cs, phi, log_trans, log_emit, alpha2, px, G)
    return par.softmax_blocks(cs, px or one_thread_index(cs), A, B, phi, MIN_BLOCK_MASS)

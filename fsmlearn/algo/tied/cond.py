"""n-gram EM with phi blocks also conditioned on the previous tag (footnote 7).

A richer variational family than the paper's n_q = 1 (Smith and Eisner,
"Unsupervised learning on an approximate corpus", footnote 7), selectable
with ``NGramEM(cond=...)``: the blocks of chosen arcs (``"roots"``: those
leaving the backoff roots, e.g. an LM's unigram state; ``"all"``: every arc,
n_q = 2) are also conditioned on the previous tag (:class:`CondBlocks`,
``phi2``).  alpha2 and U then depend on themselves through those arcs and are
solved by the engine's relaxation of block systems
(:func:`fsmlearn.algo.relax_block_system`, warm-started, the engine's stopping
rule and errors); the bound, counts and gradients are
checked against the materialised machine
(:mod:`fsmlearn.algo.tied.materialise`).  Measured on WSJ-train (5-grams,
cutoff 3) it gains little (82.37% vs 82.12% after 10 iterations with
"roots", at about 10x the time per iteration), so the default stays the
paper's n_q = 1 (``"none"``).

Public names: CondBlocks, COND_MODES, expected_stats_cond, phi_gradient_cond,
d_bound_d_phi_cond, estep_parallel_cond.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..product import relax_block_system
from ...errors import ArgumentError
from . import kernels as par
from .objective import MIN_BLOCK_MASS, NEG_LOG, Stats, dot_log, one_thread_index
from .structure import TiedStructure

__all__ = ["CondBlocks", "COND_MODES", "expected_stats_cond", "phi_gradient_cond", "d_bound_d_phi_cond",
           "estep_parallel_cond"]


# A richer variational family: the blocks of a chosen set of arcs of c (by
# default those leaving the backoff roots, the states every failure chain
# ends in) are conditioned on the previous tag as well (n_q = 2 there), the
# others keep n_q = 1.  q stays a conditional Markov model that is locally
# normalised, so cq preserves c's marginal and (5) stays a lower bound.
# The forward mass per (state, last tag) then depends on itself through
# the conditioned arcs (a cyclic linear system, solved by relaxation), and
# so does the adjoint U.  The unconditioned events are the n_q = 1 kernels'
# (:mod:`fsmlearn.algo.tied.kernels`, run with the conditioned events' weights
# zeroed); the kernels below see the conditioned events ``cev`` only.
#
# phi2: float64 [K2, T+1]; row ``crow[a] + (j - blk_start[a])`` holds entry j
# of conditioned arc a given the previous tag (column T: sentence start).

@nb.njit(cache=True)
def _cond_event_flags(ea, crow):
    out = np.empty(ea.shape[0], np.bool_)
    for e in range(ea.shape[0]):
        out[e] = crow[ea[e]] >= 0
    return out


@nb.njit(inline="always")
def _event(e, es, ed, ea, ek, arc_word, crow, blk_start):
    """Conditioned event e: (source, destination, arc, weight, word, offset of its arc's
    phi2 rows: block entry j is phi2 row ``offset + j``)."""
    a = ea[e]
    return es[e], ed[e], a, ek[e], arc_word[a], crow[a] - blk_start[a]


@nb.njit(cache=True)
def _cond_counts(T, V1, A2, cev, es, ea, ek, blk_start, blk_tag, phi2, crow, arc_word):
    """(trans [T+1, T+1], emit [T, V1], entropy) of the conditioned events."""
    trans = np.zeros((T + 1, T + 1))
    emit = np.zeros((T, V1))
    ent = 0.0
    for i in range(cev.shape[0]):
        s, _, a, k, w, r0 = _event(cev[i], es, es, ea, ek, arc_word, crow, blk_start)
        for tp in range(T + 1):
            x = A2[s, tp] * k
            if x == 0.0:
                continue
            for j in range(blk_start[a], blk_start[a + 1]):
                q = phi2[r0 + j, tp]
                if q == 0.0:
                    continue
                t = blk_tag[j]
                emit[t, w] += x * q
                trans[tp, t] += x * q
                ent -= x * q * math.log(q)
    return trans, emit, ent


@nb.njit(cache=True)
def _add_cond_local(out, logT, logE, cev, es, ea, ek, blk_start, blk_tag, phi2, crow, arc_word):
    """In place: out[s, t'] += the U-independent part of d r / d (tag mass t' at s) of the
    conditioned events leaving s (their transitions, emissions and entropy)."""
    T1 = out.shape[1]
    for i in range(cev.shape[0]):
        s, _, a, k, w, r0 = _event(cev[i], es, es, ea, ek, arc_word, crow, blk_start)
        for tp in range(T1):
            acc = 0.0
            for j in range(blk_start[a], blk_start[a + 1]):
                q = phi2[r0 + j, tp]
                if q == 0.0:
                    continue
                t = blk_tag[j]
                acc += q * (logT[tp, t] + logE[t, w] - math.log(q))
            out[s, tp] += k * acc


@nb.njit(cache=True)
def _cond_block_scores(A2, U, logT, logE, cev, es, ed, ea, ek, blk_start, blk_tag, crow, arc_word, K2):
    """(Aw [K2, T+1], B2 [K2, T+1]): the conditioned blocks' expected uses (per row, the same
    in every row of a block) and scores, as ``block_scores`` for each previous tag."""
    T1 = A2.shape[1]
    Aw = np.zeros((K2, T1))
    B2 = np.zeros((K2, T1))
    for i in range(cev.shape[0]):
        s, d, a, k, w, r0 = _event(cev[i], es, ed, ea, ek, arc_word, crow, blk_start)
        for tp in range(T1):
            x = A2[s, tp] * k
            if x == 0.0:
                continue
            for j in range(blk_start[a], blk_start[a + 1]):
                t = blk_tag[j]
                Aw[r0 + j, tp] += x
                B2[r0 + j, tp] += x * (logT[tp, t] + logE[t, w] + U[d, t])
    return Aw, B2


def _relax(cs: TiedStructure, cb: CondBlocks, phi2, base, init, transpose, tol, max_sweeps, what):
    """alpha2 = P(base + A alpha2) or U = P^T(base + A^T U): the conditioned events as block arcs
    (block = the event's arc, rows = its phi2 rows, columns = their tags) over the phi forest,
    solved by the engine's :func:`~fsmlearn.algo.relax_block_system`."""
    ev = cb.cev
    return relax_block_system(base, cs.ev_src[ev], cs.ev_dst[ev], cs.ev_k[ev], cs.ev_arc[ev], cs.blk_start,
                              cs.blk_tag, phi2, cb.crow - cs.blk_start[:-1], cs.phi_dst, cs.phi_k, cs.down,
                              transpose=transpose, tol=tol, max_sweeps=max_sweeps, init=init, what=what)


# ------------------------------------------------ conditioned blocks: Python API
COND_MODES = ("none", "roots", "all")


@dataclass
class CondBlocks:
    """Which arcs' phi blocks are also conditioned on the previous tag.

    Attributes:
        crow: int64 [E] first row in phi2 of each conditioned arc's block, -1 elsewhere.
        econd: bool [X] whether each signed event uses a conditioned block.
        K2: number of rows of phi2.
        cev: int64 [Xc] the signed events that use a conditioned block, in event order.
        ek_plain: float64 [X] the events' weights with the conditioned events' set to 0: the
            n_q = 1 kernels of :mod:`fsmlearn.algo.tied.kernels` run on the other events with it.
        arc_mass_plain: float64 [E] each arc's expected uses, 0 on the conditioned arcs.
        blk2_start: int64 [(T+1) * n + 1] (n conditioned arcs) the blocks of phi2 transposed
            and flattened (``phi2.T.ravel()``): block (t', i-th conditioned arc) is block
            ``t' * n + i``; they cover 0..(T+1)*K2 in order.
    """
    crow: np.ndarray
    econd: np.ndarray
    K2: int
    cev: np.ndarray
    ek_plain: np.ndarray
    arc_mass_plain: np.ndarray
    blk2_start: np.ndarray

    @classmethod
    def build(cls, cs: TiedStructure, which="roots") -> "CondBlocks":
        """The conditioned blocks of ``cs``.

        Args:
            cs: the structure.
            which: "roots" (arcs leaving backoff roots: states with no failure
                arc that some failure arc reaches, e.g. an LM's unigram state), "all",
                "none", or a bool [N] mask of source states.

        Raises:
            ArgumentError: another name, or a mask of the wrong shape.
        """
        c = cs.machine
        N = c.num_states
        if isinstance(which, str):
            if which not in COND_MODES:
                raise ArgumentError(f"conditioned blocks must be one of {COND_MODES} or a state mask, got {which!r}")
            if which == "all":
                mask = np.ones(N, bool)
            elif which == "none":
                mask = np.zeros(N, bool)
            else:
                mask = np.zeros(N, bool)
                tgt = cs.phi_dst[cs.phi_dst >= 0]
                mask[tgt] = True
                mask &= cs.phi_dst < 0
        else:
            mask = np.asarray(which, bool)
            if mask.shape != (N,):
                raise ArgumentError(f"state mask has shape {mask.shape}, expected ({N},)")
        n = np.diff(cs.blk_start)
        on = mask[c.arc_src] & (n > 0)
        crow = np.full(c.num_arcs, -1, np.int64)
        sizes = np.where(on, n, 0)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        crow[on] = starts[on]
        econd = _cond_event_flags(cs.ev_arc, crow)
        K2 = int(sizes.sum())
        ek_plain = np.where(econd, 0.0, cs.ev_k)
        arc_mass_plain = np.where(crow >= 0, 0.0, one_thread_index(cs).arc_mass)
        T1 = cs.T + 1
        blk2 = (np.arange(T1, dtype=np.int64)[:, None] * K2 + crow[crow >= 0][None, :]).ravel()
        return cls(crow, econd, K2, np.flatnonzero(econd).astype(np.int64), ek_plain, arc_mass_plain,
                   np.append(blk2, np.int64(T1 * K2)))

    def uniform(self, cs: TiedStructure) -> np.ndarray:
        """float64 [K2, T+1]: uniform tag distributions in every conditioned block."""
        phi2 = np.empty((self.K2, cs.T + 1))
        n = np.diff(cs.blk_start)
        on = self.crow >= 0
        vals = np.repeat(1.0 / np.maximum(n[on], 1), n[on])
        phi2[:] = vals[:, None]     # rows are laid out in arc order
        return phi2

    def full(self, cs: TiedStructure, phi: np.ndarray, phi2: np.ndarray) -> np.ndarray:
        """float64 [K, T+1]: every block given the previous tag (for the materialised machine)."""
        out = np.repeat(np.asarray(phi, np.float64)[:, None], cs.T + 1, axis=1)
        for a in np.flatnonzero(self.crow >= 0):
            lo, hi = cs.blk_start[a], cs.blk_start[a + 1]
            out[lo:hi] = phi2[self.crow[a]:self.crow[a] + hi - lo]
        return out


def expected_stats_cond(cs: TiedStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit, *,
                        warm=None, tol: float = 1e-13, max_sweeps: int = 1000) -> Stats:
    """:func:`~fsmlearn.algo.tied.objective.expected_stats` when the blocks ``cb`` are
    conditioned on the previous tag (phi2).

    Args:
        warm: optional float64 [N, T+1] alpha2 to start the relaxation from.
        tol, max_sweeps: the relaxation's tolerance and sweep limit.

    Returns:
        :class:`~fsmlearn.algo.tied.objective.Stats` with the relaxation's
        :class:`~fsmlearn.algo.SolveInfo` in ``solve_info``.

    Raises:
        NotConvergedError: the relaxation did not reach tol within max_sweeps.
        DivergenceError: its values became unbounded.
    """
    T = cs.T
    px = one_thread_index(cs)
    base = par.alpha2_local(cs, px, phi, cb.ek_plain)
    A2, info = _relax(cs, cb, phi2, base, warm, False, tol, max_sweeps,
                      "alpha2 (forward mass per tag, conditioned blocks)")
    V1 = log_emit.shape[1]
    G = par.state_tag_mass(cs, px, phi, cb.ek_plain)
    emit, ent = par.emit_entropy(cs, px, phi, V1, cb.arc_mass_plain)
    trans = A2.T @ G
    t2, e2, ent2 = _cond_counts(T, V1, A2, cb.cev, cs.ev_src, cs.ev_arc, cs.ev_k, cs.blk_start, cs.blk_tag,
                                phi2, cb.crow, cs.arc_word)
    trans += t2
    emit += e2
    ent += ent2
    bound = dot_log(trans, log_trans) + dot_log(emit, log_emit) + ent
    return Stats(trans, emit, ent, bound, A2, G, solve_info=info)


def phi_gradient_cond(cs: TiedStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit, alpha2=None, *,
                      G=None, warm_u=None, tol: float = 1e-13, max_sweeps: int = 1000):
    """(A [E], B [K], Aw [K2, T+1], B2 [K2, T+1], U [N, T+1], info): d r / d phi[j] = B[j] -
    A[arc] (log phi[j] + 1) and d r / d phi2[i, t'] = B2[i, t'] - Aw[i, t'] (log phi2[i, t'] + 1);
    ``info`` the :class:`~fsmlearn.algo.SolveInfo` of U's relaxation.

    ``alpha2`` and ``G`` (:class:`~fsmlearn.algo.tied.objective.Stats`) may be passed when
    known for this phi; ``warm_u`` starts the adjoint's relaxation; ``tol`` and ``max_sweeps``
    are its tolerance and sweep limit.

    Raises:
        NotConvergedError: a relaxation did not reach tol within max_sweeps.
        DivergenceError: its values became unbounded.
    """
    px = one_thread_index(cs)
    if alpha2 is None:
        alpha2 = expected_stats_cond(cs, cb, phi, phi2, log_trans, log_emit).alpha2
    lt = np.maximum(log_trans, NEG_LOG)
    le = np.maximum(log_emit, NEG_LOG)
    if G is None:
        G = par.state_tag_mass(cs, px, phi, cb.ek_plain)
    base = par.out_scores(G, lt)
    _add_cond_local(base, lt, le, cb.cev, cs.ev_src, cs.ev_arc, cs.ev_k, cs.blk_start, cs.blk_tag, phi2, cb.crow,
                    cs.arc_word)
    U, info = _relax(cs, cb, phi2, base, warm_u, True, tol, max_sweeps, "U (adjoint per tag, conditioned blocks)")
    A, B = par.block_scores(cs, px, alpha2 @ lt, U, np.ascontiguousarray(le.T), cb.ek_plain, cb.arc_mass_plain)
    Aw, B2 = _cond_block_scores(alpha2, U, lt, le, cb.cev, cs.ev_src, cs.ev_dst, cs.ev_arc, cs.ev_k, cs.blk_start,
                                cs.blk_tag, cb.crow, cs.arc_word, cb.K2)
    return A, B, Aw, B2, U, info


def d_bound_d_phi_cond(cs: TiedStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit):
    """(g [K], g2 [K2, T+1]): the gradient of r with respect to phi and phi2."""
    A, B, Aw, B2, _, _ = phi_gradient_cond(cs, cb, phi, phi2, log_trans, log_emit)
    arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
    with np.errstate(divide="ignore"):
        lp = np.where(phi > 0, np.log(np.where(phi > 0, phi, 1.0)), -np.inf)
        lp2 = np.where(phi2 > 0, np.log(np.where(phi2 > 0, phi2, 1.0)), -np.inf)
    return B - A[arc_of] * (lp + 1.0), B2 - Aw * (lp2 + 1.0)


def softmax_blocks_cond(cs: TiedStructure, cb: CondBlocks, Aw, B2, phi2_old, min_mass: float):
    """float64 [K2, T+1]: phi2[a, ., t'] = softmax over a's entries of B2 / Aw (the n_q = 1
    softmax kernel on phi2's blocks); light (arc, t') blocks keep phi2_old."""
    if cb.K2 == 0:
        return phi2_old.copy()
    T1 = cs.T + 1
    A_blk = np.ascontiguousarray(Aw[cb.crow[cb.crow >= 0]].T).ravel()
    out = par.softmax_ranges(A_blk, np.ascontiguousarray(B2.T).ravel(), cb.blk2_start,
                             np.ascontiguousarray(phi2_old.T).ravel(), min_mass)
    return np.ascontiguousarray(out.reshape(T1, cb.K2).T)


def estep_parallel_cond(cs: TiedStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit, alpha2=None,
                        warm_u=None, G=None):
    """One parallel block update of every phi and phi2 block: (phi, phi2, U)."""
    A, B, Aw, B2, U, _ = phi_gradient_cond(cs, cb, phi, phi2, log_trans, log_emit, alpha2, G=G, warm_u=warm_u)
    return (par.softmax_blocks(cs, one_thread_index(cs), A, B, phi, MIN_BLOCK_MASS),
            softmax_blocks_cond(cs, cb, Aw, B2, phi2, MIN_BLOCK_MASS), U)

"""n-gram EM with phi blocks also conditioned on the previous tag (footnote 7).

A richer variational family than the paper's n_q = 1 (Smith and Eisner,
"Unsupervised learning on an approximate corpus", footnote 7), selectable
with ``NGramEM(cond=...)``: the blocks of chosen arcs (``"roots"``: those
leaving the backoff roots, e.g. an LM's unigram state; ``"all"``: every arc,
n_q = 2) are also conditioned on the previous tag (:class:`CondBlocks`,
``phi2``).  alpha2 and U then depend on themselves through those arcs and are
solved by relaxation (warm-started); the bound, counts and gradients are
checked against the materialised machine
(:mod:`fsmlearn.tag.ngram_materialise`).  Measured on WSJ-train (5-grams,
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

from . import ngram_par as par
from .ngram_objective import NEG_LOG, Stats, dot_log, one_thread_index
from .ngram_structure import CqStructure

__all__ = ["CondBlocks", "COND_MODES", "expected_stats_cond", "phi_gradient_cond", "d_bound_d_phi_cond",
           "estep_parallel_cond"]


@nb.njit(cache=True)
def _change_and_scale(new, old):
    """(largest |new - old|, largest |new|) over two [N, T] arrays: a relaxation's stopping test."""
    diff = 0.0
    scale = 0.0
    for q in range(new.shape[0]):
        for t in range(new.shape[1]):
            dd = abs(new[q, t] - old[q, t])
            if dd > diff:
                diff = dd
            if abs(new[q, t]) > scale:
                scale = abs(new[q, t])
    return diff, scale


# ------------------------------------------- previous-tag blocks at chosen arcs (footnote 7)
# A richer variational family: the blocks of a chosen set of arcs of c (by
# default those leaving the backoff roots, the states every failure chain
# ends in) are conditioned on the previous tag as well (n_q = 2 there), the
# others keep n_q = 1.  q stays a conditional Markov model that is locally
# normalised, so cq preserves c's marginal and (5) stays a lower bound.
# The forward mass per (state, last tag) then depends on itself through
# the conditioned arcs (a cyclic linear system, solved by relaxation), and
# so does the adjoint U.
#
# phi2: float64 [K2, T+1]; row ``crow[a] + (j - blk_start[a])`` holds entry j
# of conditioned arc a given the previous tag (column T: sentence start).

@nb.njit(cache=True)
def _cond_event_flags(ea, crow):
    out = np.empty(ea.shape[0], np.bool_)
    for e in range(ea.shape[0]):
        out[e] = crow[ea[e]] >= 0
    return out


@nb.njit(cache=True)
def _alpha2_mixed(N, T, start, alpha, es, ed, ea, ek, econd, blk_start, blk_tag, phi, phi2, crow,
                  down, phi_dst, phi_k, A2_init, tol, max_sweeps):
    """Forward mass per (state, last tag) with conditioned blocks; (A2, sweeps)."""
    T1 = T + 1
    base = np.zeros((N, T1))
    base[start, T] += 1.0
    for e in range(es.shape[0]):
        if econd[e]:
            continue
        b = alpha[es[e]] * ek[e]
        if b == 0.0:
            continue
        d = ed[e]
        a = ea[e]
        for j in range(blk_start[a], blk_start[a + 1]):
            base[d, blk_tag[j]] += b * phi[j]
    A2 = A2_init.copy()
    sweeps = 0
    while True:
        new = base.copy()
        for e in range(es.shape[0]):
            if not econd[e]:
                continue
            s = es[e]
            k = ek[e]
            d = ed[e]
            a = ea[e]
            r0 = crow[a] - blk_start[a]
            for tp in range(T1):
                x = A2[s, tp] * k
                if x == 0.0:
                    continue
                for j in range(blk_start[a], blk_start[a + 1]):
                    new[d, blk_tag[j]] += x * phi2[r0 + j, tp]
        for i in range(N):
            q = down[i]
            r = phi_dst[q]
            if r >= 0:
                kk = phi_k[q]
                for t in range(T1):
                    new[r, t] += kk * new[q, t]
        sweeps += 1
        diff, scale = _change_and_scale(new, A2)
        A2 = new
        if diff <= tol * max(scale, 1.0) or sweeps >= max_sweeps:
            break
    return A2, sweeps


@nb.njit(cache=True)
def _counts_mixed(T, V1, alpha, A2, es, ea, ek, econd, blk_start, blk_tag, phi, phi2, crow, arc_word,
                  fs, fk):
    trans = np.zeros((T + 1, T + 1))
    emit = np.zeros((T, V1))
    ent = 0.0
    for e in range(es.shape[0]):
        s = es[e]
        a = ea[e]
        k = ek[e]
        w = arc_word[a]
        if not econd[e]:
            al = alpha[s]
            for j in range(blk_start[a], blk_start[a + 1]):
                p = k * phi[j]
                if p == 0.0:
                    continue
                t = blk_tag[j]
                emit[t, w] += al * p
                ent -= al * p * math.log(phi[j])
                for tp in range(T + 1):
                    trans[tp, t] += A2[s, tp] * p
        else:
            r0 = crow[a] - blk_start[a]
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
    for f in range(fs.shape[0]):
        q = fs[f]
        k = fk[f]
        for tp in range(T + 1):
            trans[tp, T] += A2[q, tp] * k
    return trans, emit, ent


@nb.njit(cache=True)
def _adjoint_mixed(N, T, logT, logE, es, ed, ea, ek, econd, blk_start, blk_tag, phi, phi2, crow,
                   arc_word, fs, fk, down, phi_dst, phi_k, U_init, tol, max_sweeps):
    """U[h, t']: d r / d (tag mass t' arriving at h), with conditioned blocks; (U, sweeps)."""
    T1 = T + 1
    G = np.zeros((N, T1))
    for e in range(es.shape[0]):
        if econd[e]:
            continue
        s = es[e]
        a = ea[e]
        k = ek[e]
        for j in range(blk_start[a], blk_start[a + 1]):
            G[s, blk_tag[j]] += k * phi[j]
    for f in range(fs.shape[0]):
        G[fs[f], T] += fk[f]
    base = np.zeros((N, T1))
    for h in range(N):
        for tp in range(T1):
            acc = 0.0
            for t in range(T1):
                g = G[h, t]
                if g != 0.0:
                    acc += g * logT[tp, t]
            base[h, tp] = acc
    # the local (U-independent) part of the conditioned events
    for e in range(es.shape[0]):
        if not econd[e]:
            continue
        s = es[e]
        a = ea[e]
        k = ek[e]
        w = arc_word[a]
        r0 = crow[a] - blk_start[a]
        for tp in range(T1):
            acc = 0.0
            for j in range(blk_start[a], blk_start[a + 1]):
                q = phi2[r0 + j, tp]
                if q == 0.0:
                    continue
                t = blk_tag[j]
                acc += q * (logT[tp, t] + logE[t, w] - math.log(q))
            base[s, tp] += k * acc
    U = U_init.copy()
    sweeps = 0
    while True:
        new = base.copy()
        for e in range(es.shape[0]):
            if not econd[e]:
                continue
            s = es[e]
            a = ea[e]
            k = ek[e]
            d = ed[e]
            r0 = crow[a] - blk_start[a]
            for tp in range(T1):
                acc = 0.0
                for j in range(blk_start[a], blk_start[a + 1]):
                    q = phi2[r0 + j, tp]
                    if q != 0.0:
                        acc += q * U[d, blk_tag[j]]
                new[s, tp] += k * acc
        for i in range(N - 1, -1, -1):
            q = down[i]
            r = phi_dst[q]
            if r >= 0:
                kk = phi_k[q]
                for tp in range(T1):
                    new[q, tp] += kk * new[r, tp]
        sweeps += 1
        diff, scale = _change_and_scale(new, U)
        U = new
        if diff <= tol * max(scale, 1.0) or sweeps >= max_sweeps:
            break
    return U, sweeps


@nb.njit(cache=True)
def _block_scores_mixed(T, alpha, A2, U, logT, logE, es, ed, ea, ek, econd, blk_start, blk_tag,
                        crow, arc_word, E, K2):
    """A [E], B [K] of the n_q = 1 blocks and A2w [K2, T+1] (per row's arc), B2 [K2, T+1]."""
    T1 = T + 1
    A = np.zeros(E)
    B = np.zeros(blk_tag.shape[0])
    Aw = np.zeros((K2, T1))
    B2 = np.zeros((K2, T1))
    for e in range(es.shape[0]):
        s = es[e]
        a = ea[e]
        k = ek[e]
        d = ed[e]
        w = arc_word[a]
        if not econd[e]:
            al = alpha[s]
            A[a] += k * al
            for j in range(blk_start[a], blk_start[a + 1]):
                t = blk_tag[j]
                m = 0.0
                for tp in range(T1):
                    x = A2[s, tp]
                    if x != 0.0:
                        m += x * logT[tp, t]
                B[j] += k * (m + al * (logE[t, w] + U[d, t]))
        else:
            r0 = crow[a] - blk_start[a]
            for tp in range(T1):
                x = A2[s, tp] * k
                if x == 0.0:
                    continue
                for j in range(blk_start[a], blk_start[a + 1]):
                    t = blk_tag[j]
                    Aw[r0 + j, tp] += x
                    B2[r0 + j, tp] += x * (logT[tp, t] + logE[t, w] + U[d, t])
    return A, B, Aw, B2


@nb.njit(cache=True)
def _softmax_blocks2(Aw, B2, blk_start, crow, phi2_old, min_mass):
    """phi2[a, ., t'] = softmax over a's entries of B2 / Aw; light (arc, t') rows keep phi2_old."""
    out = phi2_old.copy()
    T1 = Aw.shape[1]
    for a in range(crow.shape[0]):
        if crow[a] < 0:
            continue
        lo = crow[a]
        hi = lo + blk_start[a + 1] - blk_start[a]
        if hi == lo:
            continue
        for tp in range(T1):
            m = Aw[lo, tp]
            if m <= min_mass:
                continue
            mx = -np.inf
            for r in range(lo, hi):
                v = B2[r, tp] / m
                if v > mx:
                    mx = v
            if mx == -np.inf:
                continue
            z = 0.0
            for r in range(lo, hi):
                z += math.exp(B2[r, tp] / m - mx)
            for r in range(lo, hi):
                out[r, tp] = math.exp(B2[r, tp] / m - mx) / z
    return out


# ------------------------------------------------ conditioned blocks: Python API
COND_MODES = ("none", "roots", "all")


@dataclass
class CondBlocks:
    """Which arcs' phi blocks are also conditioned on the previous tag.

    Attributes:
        crow: int64 [E] first row in phi2 of each conditioned arc's block, -1 elsewhere.
        econd: bool [X] whether each signed event uses a conditioned block.
        K2: number of rows of phi2.
    """
    crow: np.ndarray
    econd: np.ndarray
    K2: int

    @classmethod
    def build(cls, cs: CqStructure, which="roots") -> "CondBlocks":
        """``which``: "roots" (arcs leaving backoff roots: states with no failure
        arc that some failure arc reaches, e.g. an LM's unigram state), "all",
        "none", or a bool [N] mask of source states."""
        c = cs.machine
        N = c.num_states
        if isinstance(which, str):
            if which not in COND_MODES:
                raise ValueError(f"conditioned blocks must be one of {COND_MODES} or a state mask, got {which!r}")
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
                raise ValueError(f"state mask has shape {mask.shape}, expected ({N},)")
        n = np.diff(cs.blk_start)
        on = mask[c.arc_src] & (n > 0)
        crow = np.full(c.num_arcs, -1, np.int64)
        sizes = np.where(on, n, 0)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        crow[on] = starts[on]
        return cls(crow, _cond_event_flags(cs.ev_arc, crow), int(sizes.sum()))

    def uniform(self, cs: CqStructure) -> np.ndarray:
        """float64 [K2, T+1]: uniform tag distributions in every conditioned block."""
        phi2 = np.empty((self.K2, cs.T + 1))
        n = np.diff(cs.blk_start)
        on = self.crow >= 0
        vals = np.repeat(1.0 / np.maximum(n[on], 1), n[on])
        phi2[:] = vals[:, None]     # rows are laid out in arc order
        return phi2

    def full(self, cs: CqStructure, phi: np.ndarray, phi2: np.ndarray) -> np.ndarray:
        """float64 [K, T+1]: every block given the previous tag (for the materialised machine)."""
        out = np.repeat(np.asarray(phi, np.float64)[:, None], cs.T + 1, axis=1)
        for a in np.flatnonzero(self.crow >= 0):
            lo, hi = cs.blk_start[a], cs.blk_start[a + 1]
            out[lo:hi] = phi2[self.crow[a]:self.crow[a] + hi - lo]
        return out


def expected_stats_cond(cs: CqStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit, *,
                        warm=None, tol: float = 1e-13, max_sweeps: int = 1000) -> Stats:
    """:func:`expected_stats` when the blocks ``cb`` are conditioned on the previous tag (phi2)."""
    c = cs.machine
    T = cs.T
    init = warm if warm is not None else np.zeros((c.num_states, T + 1))
    A2, sw = _alpha2_mixed(c.num_states, T, c.start, cs.alpha, cs.ev_src, cs.ev_dst, cs.ev_arc, cs.ev_k,
                           cb.econd, cs.blk_start, cs.blk_tag, phi, phi2, cb.crow, cs.down, cs.phi_dst,
                           cs.phi_k, init, tol, max_sweeps)
    V1 = log_emit.shape[1]
    trans, emit, ent = _counts_mixed(T, V1, cs.alpha, A2, cs.ev_src, cs.ev_arc, cs.ev_k, cb.econd,
                                     cs.blk_start, cs.blk_tag, phi, phi2, cb.crow, cs.arc_word,
                                     cs.fin_state, cs.fin_k)
    bound = dot_log(trans, log_trans) + dot_log(emit, log_emit) + ent
    st = Stats(trans, emit, ent, bound, A2)
    st.sweeps = sw
    return st


def phi_gradient_cond(cs: CqStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit, alpha2=None, *,
                      warm_u=None, tol: float = 1e-13, max_sweeps: int = 1000):
    """(A [E], B [K], Aw [K2, T+1], B2 [K2, T+1], U): d r / d phi[j] = B[j] - A[arc] (log phi[j] + 1)
    and d r / d phi2[i, t'] = B2[i, t'] - Aw[i, t'] (log phi2[i, t'] + 1)."""
    c = cs.machine
    T = cs.T
    if alpha2 is None:
        alpha2 = expected_stats_cond(cs, cb, phi, phi2, log_trans, log_emit).alpha2
    lt = np.maximum(log_trans, NEG_LOG)
    le = np.maximum(log_emit, NEG_LOG)
    init = warm_u if warm_u is not None else np.zeros((c.num_states, T + 1))
    U, _ = _adjoint_mixed(c.num_states, T, lt, le, cs.ev_src, cs.ev_dst, cs.ev_arc, cs.ev_k, cb.econd,
                          cs.blk_start, cs.blk_tag, phi, phi2, cb.crow, cs.arc_word, cs.fin_state,
                          cs.fin_k, cs.down, cs.phi_dst, cs.phi_k, init, tol, max_sweeps)
    A, B, Aw, B2 = _block_scores_mixed(T, cs.alpha, alpha2, U, lt, le, cs.ev_src, cs.ev_dst, cs.ev_arc,
                                       cs.ev_k, cb.econd, cs.blk_start, cs.blk_tag, cb.crow, cs.arc_word,
                                       c.num_arcs, cb.K2)
    return A, B, Aw, B2, U


def d_bound_d_phi_cond(cs: CqStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit):
    """(g [K], g2 [K2, T+1]): the gradient of r with respect to phi and phi2."""
    A, B, Aw, B2, _ = phi_gradient_cond(cs, cb, phi, phi2, log_trans, log_emit)
    arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
    with np.errstate(divide="ignore"):
        lp = np.where(phi > 0, np.log(np.where(phi > 0, phi, 1.0)), -np.inf)
        lp2 = np.where(phi2 > 0, np.log(np.where(phi2 > 0, phi2, 1.0)), -np.inf)
    return B - A[arc_of] * (lp + 1.0), B2 - Aw * (lp2 + 1.0)


def estep_parallel_cond(cs: CqStructure, cb: CondBlocks, phi, phi2, log_trans, log_emit, alpha2=None,
                        warm_u=None):
    """One parallel block update of every phi and phi2 block: (phi, phi2, U)."""
    A, B, Aw, B2, U = phi_gradient_cond(cs, cb, phi, phi2, log_trans, log_emit, alpha2, warm_u=warm_u)
    return (par.softmax_blocks(cs, one_thread_index(cs), A, B, phi, 1e-300),
            _softmax_blocks2(Aw, B2, cs.blk_start, cb.crow, phi2, 1e-300), U)

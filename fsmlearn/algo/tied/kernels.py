"""The kernels of n-gram EM, on one thread or several: the one copy of each computation.

The sums of Smith and Eisner, "Unsupervised learning on an approximate
corpus", section 3.3-3.5, over the signed events of
:class:`~fsmlearn.algo.tied.structure.TiedStructure` (formulas in
:mod:`fsmlearn.algo.tied.objective`): the forward mass per tag alpha2 and its
pass up the phi forest, the tag mass leaving each state, the emission counts
and entropy, the adjoint U and its pass down the phi forest, the block scores
and the block softmax.  The conditioned path (:mod:`fsmlearn.algo.tied.cond`)
runs them on its unconditioned events by zeroing the others' weights.

Each kernel splits its work into parts (one per thread; one part runs
single-threaded, :func:`fsmlearn.algo.tied.objective.one_thread_index`) so
that no two threads write the same memory: scatters into small arrays (forward mass per (state,
tag), emission counts) get a private copy per thread that is summed
afterwards; the events are sorted by source state, so the mass leaving each
state splits at state boundaries; the block scores and the softmax run over
arcs, with each arc's events gathered by an arc-major index built once.

Public names: ParIndex, balanced_cuts, alpha2, alpha2_local, state_tag_mass, emit_entropy,
out_scores, adjoint, block_scores, softmax_blocks, softmax_ranges.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..product import phi_pass_rows
from .arith import arc_emit_entropy_py, block_scores_py, block_softmax_py, event_scatter_py


def balanced_cuts(weights_cum: np.ndarray, parts: int) -> np.ndarray:
    """int64 [parts + 1]: boundaries (indices into the items) splitting a cumulative work array
    (``weights_cum[i]``: the work before item i, ``weights_cum[-1]`` the total) evenly."""
    total = weights_cum[-1]
    cuts = np.searchsorted(weights_cum, np.linspace(0, total, parts + 1)[1:-1], side="left")
    return np.concatenate([[0], cuts, [weights_cum.size - 1]]).astype(np.int64)


class ParIndex:
    """Per-structure index of the parallel kernels (built once per TiedStructure)."""

    def __init__(self, cs, threads: int | None = None):
        self.threads = int(threads or nb.get_num_threads())
        P = self.threads
        es = cs.ev_src
        E = cs.machine.num_arcs
        # events by source (already sorted): split at state boundaries
        b = np.linspace(0, es.size, P + 1).astype(np.int64)
        for i in range(1, P):
            while 0 < b[i] < es.size and es[b[i]] == es[b[i] - 1]:
                b[i] += 1
        self.ev_bounds = np.maximum.accumulate(b)
        # events by arc
        self.ev_of_arc = np.argsort(cs.ev_arc, kind="stable").astype(np.int64)
        self.arc_ev_ptr = np.zeros(E + 1, np.int64)
        np.cumsum(np.bincount(cs.ev_arc, minlength=E), out=self.arc_ev_ptr[1:])
        work = self.arc_ev_ptr + cs.blk_start          # events + block entries up to each arc
        self.arc_bounds = balanced_cuts(work, P)
        # expected uses of each arc's block (it depends on c alone): sum over its events of k alpha[src]
        self.arc_mass = _arc_mass(cs.alpha, cs.ev_src, cs.ev_k, self.ev_of_arc, self.arc_ev_ptr)
        # parts of the per-arc kernels that need no event: block entries up to each arc
        self.blk_bounds = balanced_cuts(cs.blk_start.astype(np.float64), P)


@nb.njit(cache=True)
def _arc_mass(alpha, es, ek, ev_of_arc, arc_ev_ptr):
    E = arc_ev_ptr.shape[0] - 1
    A = np.zeros(E)
    for a in range(E):
        acc = 0.0
        for i in range(arc_ev_ptr[a], arc_ev_ptr[a + 1]):
            e = ev_of_arc[i]
            acc += ek[e] * alpha[es[e]]
        A[a] = acc
    return A


@nb.njit(parallel=True, cache=True)
def _alpha2_scatter(N, T, alpha, es, ed, ea, ek, blk_start, blk_tag, phi, bounds):
    P = bounds.shape[0] - 1
    part = np.zeros((P, N, T + 1))
    for p in nb.prange(P):
        for e in range(bounds[p], bounds[p + 1]):
            _event_scatter(e, alpha, es, ed, ea, ek, blk_start, blk_tag, phi, part[p])
    return part


@nb.njit(cache=True)
def _sum_parts(part, start, T):
    """The parts' [N, T+1] scatters summed, plus the start's unit mass at (start, T)."""
    P, N, _ = part.shape
    A2 = part[0].copy()
    for p in range(1, P):
        for i in range(N):
            for t in range(T + 1):
                A2[i, t] += part[p, i, t]
    A2[start, T] += 1.0
    return A2


@nb.njit(cache=True)
def _out_scores(G, logT):
    """S[h, t'] = sum_t G[h, t] logT[t', t]: the expected log transition out of h per incoming tag t'."""
    N = G.shape[0]
    T1 = G.shape[1]
    S = np.zeros((N, T1))
    for h in range(N):
        for tp in range(T1):
            acc = 0.0
            for t in range(T1):
                g = G[h, t]
                if g != 0.0:
                    acc += g * logT[tp, t]
            S[h, tp] = acc
    return S


def alpha2_local(cs, px: ParIndex, phi, ek=None):
    """float64 [N, T+1]: the tag mass the events bring to each state, plus the start (no phi pass).

    ``ek``: the events' weights (default ``cs.ev_k``; zero to leave an event out)."""
    c = cs.machine
    part = _alpha2_scatter(c.num_states, cs.T, cs.alpha, cs.ev_src, cs.ev_dst, cs.ev_arc,
                           cs.ev_k if ek is None else ek, cs.blk_start, cs.blk_tag, phi, px.ev_bounds)
    return _sum_parts(part, c.start, cs.T)


def alpha2(cs, px: ParIndex, phi):
    """float64 [N, T+1]: alpha2[h, t], the forward mass of the paths to h whose last tag is t (n_q = 1)."""
    A2 = alpha2_local(cs, px, phi)
    phi_pass_rows(A2, cs.down, cs.phi_dst, cs.phi_k, False)
    return A2


def out_scores(G, logT):
    """float64 [N, T+1]: ``S[h, t'] = sum_t G[h, t] logT[t', t]`` (G: tag mass leaving each state)."""
    return _out_scores(G, logT)


def adjoint(cs, G, logT):
    """float64 [N, T+1]: U[h, t'] = d r / d (tag mass t' arriving at h) for n_q = 1: the expected
    log transition out of h (:func:`out_scores`) passed down the phi forest."""
    U = _out_scores(G, logT)
    phi_pass_rows(U, cs.down, cs.phi_dst, cs.phi_k, True)
    return U


@nb.njit(parallel=True, cache=True)
def _state_tag_mass(N, T, es, ea, ek, blk_start, blk_tag, phi, fs, fk, bounds):
    G = np.zeros((N, T + 1))
    P = bounds.shape[0] - 1
    for p in nb.prange(P):
        for e in range(bounds[p], bounds[p + 1]):
            s = es[e]
            a = ea[e]
            k = ek[e]
            for j in range(blk_start[a], blk_start[a + 1]):
                G[s, blk_tag[j]] += k * phi[j]
    for f in range(fs.shape[0]):
        G[fs[f], T] += fk[f]
    return G


def state_tag_mass(cs, px: ParIndex, phi, ek=None):
    """float64 [N, T+1]: G[h, t], the weight of the events leaving h with tag t (column T: the
    signed final weights).  ``ek`` as for :func:`alpha2_local`."""
    return _state_tag_mass(cs.machine.num_states, cs.T, cs.ev_src, cs.ev_arc, cs.ev_k if ek is None else ek,
                           cs.blk_start, cs.blk_tag, phi, cs.fin_state, cs.fin_k, px.ev_bounds)


@nb.njit(parallel=True, cache=True)
def _emit_entropy(T, V1, A, blk_start, blk_tag, phi, arc_word, bounds):
    """(emit [T, V1], entropy): :func:`~fsmlearn.algo.tied.arith.arc_emit_entropy_py` over the
    arcs, each part of ``bounds`` into a word-major table of its own, summed after."""
    P = bounds.shape[0] - 1
    part = np.zeros((P, V1, T))
    ents = np.zeros(P)
    for p in nb.prange(P):
        ent = 0.0
        for a in range(bounds[p], bounds[p + 1]):
            ent += _arc_emit_entropy(a, A, blk_start, blk_tag, phi, arc_word, part[p])
        ents[p] = ent
    emit = part[0].copy()
    for p in range(1, P):
        emit += part[p]
    return emit.T.copy(), ents.sum()


def emit_entropy(cs, px: ParIndex, phi, V1, arc_mass=None):
    """(emit float64 [T, V1], entropy): expected emission counts and E[-log q(t | w)] of the blocks.

    ``arc_mass``: float64 [E] each arc's expected uses (default ``px.arc_mass``; zero to leave an
    arc out)."""
    return _emit_entropy(cs.T, V1, px.arc_mass if arc_mass is None else arc_mass, cs.blk_start, cs.blk_tag,
                         phi, cs.arc_word, px.blk_bounds)


@nb.njit(parallel=True, cache=True)
def _block_scores(alpha, M, U, logE, es, ed, ek, blk_start, blk_tag, arc_word, ev_of_arc, arc_ev_ptr,
                  arc_bounds):
    B = np.zeros(blk_tag.shape[0])
    P = arc_bounds.shape[0] - 1
    for p in nb.prange(P):
        for a in range(arc_bounds[p], arc_bounds[p + 1]):
            _block_scores_arc(B, a, alpha, M, U, logE, es, ed, ek, blk_start, blk_tag, arc_word, ev_of_arc,
                              arc_ev_ptr)
    return B


def block_scores(cs, px: ParIndex, M, U, logE_wt, ek=None, arc_mass=None):
    """(A float64 [E], B float64 [K]): each arc's expected uses (constant, from the index) and its
    block scores ``B[j] = sum_e k_e (M[src_e, t] + alpha[src_e] (logE[w, t] + U[dst_e, t]))``.

    ``ek`` as for :func:`alpha2_local`, ``arc_mass`` as for :func:`emit_entropy` (the two must agree)."""
    return (px.arc_mass if arc_mass is None else arc_mass,
            _block_scores(cs.alpha, M, U, logE_wt, cs.ev_src, cs.ev_dst, cs.ev_k if ek is None else ek,
                          cs.blk_start, cs.blk_tag, cs.arc_word, px.ev_of_arc, px.arc_ev_ptr, px.arc_bounds))


_block_softmax = nb.njit(cache=True, inline="always")(block_softmax_py)
_block_scores_arc = nb.njit(cache=True, inline="always")(block_scores_py)
_arc_emit_entropy = nb.njit(cache=True, inline="always")(arc_emit_entropy_py)
_event_scatter = nb.njit(cache=True, inline="always")(event_scatter_py)


@nb.njit(parallel=True, cache=True)
def _softmax_blocks(A, B, blk_start, phi_old, min_mass, arc_bounds):
    out = phi_old.copy()
    P = arc_bounds.shape[0] - 1
    for p in nb.prange(P):
        for a in range(arc_bounds[p], arc_bounds[p + 1]):
            _block_softmax(out, A[a], B, blk_start[a], blk_start[a + 1], min_mass)
    return out


def softmax_blocks(cs, px: ParIndex, A, B, phi_old, min_mass):
    """float64 [K]: phi[a, .] = softmax(B[a, .] / A[a]) in every block; blocks with A[a] <= min_mass
    keep phi_old."""
    return _softmax_blocks(A, B, cs.blk_start, phi_old, min_mass, px.arc_bounds)


def softmax_ranges(A, B, starts, phi_old, min_mass):
    """float64 [K]: the same softmax over blocks given by their boundaries ``starts`` (int64
    [n+1]), on one thread."""
    return _softmax_blocks(A, B, starts, phi_old, min_mass, np.array([0, starts.shape[0] - 1], np.int64))

"""n-gram EM's iteration as three passes over c: the E-step and the next statistics, fused.

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
3.3-3.5, with n_q = 1 (formulas in :mod:`fsmlearn.tag.ngram.objective`).  The
events that use arc a's block are a itself and the exclusion arcs that shadow
it (:class:`~fsmlearn.tag.ngram.structure.CqStructure`); they all end at a's
destination d.  An exclusion arc from q shadows an arc of q's backoff chain, and
the arcs shadowed form a small table (most are the unigram state's), so an
iteration is:

1. over the exclusions, state by state (q in order, reading ``M[q]`` once): each
   shadowed arc's share of the block scores from the states that shadow it,
   ``Bx[a, t] = sum_x k_x M[q_x, t]`` (and, once, ``Ax[a] = sum_x k_x alpha[q_x]``);
2. over the arcs: ``A[a] = k_a alpha[s] + Ax[a]``, the block scores
   ``B[a, t] = k_a M[s, t] + Bx[a, t] + A[a] (log theta(w | t) + U[d, t])``, the parallel
   block update ``phi[a, .] = softmax(B[a, .] / A[a])`` (section 3.5) in place, and with
   the new block the forward mass per tag arriving at d (``alpha2[d, t] += A[a] phi[a, t]``,
   the Z_a construction of section 3.3), the tag mass leaving s (``G[s, t] += k_a phi[a, t]``),
   the emission counts ``A[a] phi[a, t]`` and the entropy ``-A[a] sum_t phi log phi``; a
   shadowed arc's new block is copied to the table (``PhiX``);
3. over the exclusions again: the tag mass leaving each q by them,
   ``G[q, t] += k_x PhiX[a, t]``.

M and U (``alpha2 @ log theta`` and the adjoint) come from the previous
iteration's alpha2 and G.  The table's arrays (Ax, Bx, PhiX: a few numbers per
shadowed arc) are the only quantities one part of the arcs needs of another:
parts of the states (passes 1 and 3) and of the arcs (pass 2) run on threads
here, each pass-2 part scattering into its own dense [N, T+1] and [V+1, T] sums,
added afterwards.  Nothing of size K (the block entries) is held but phi itself.

Public names: Sweep, sweep_parts, sweep_bounds, pass_inputs, finish_pass, one_pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from ...algo.relax_blocks import phi_pass_rows
from .kernels import adjoint
from .objective import MIN_BLOCK_MASS, NEG_LOG, Stats, dot_log

__all__ = ["Sweep", "sweep_parts", "sweep_bounds", "pass_inputs", "finish_pass", "one_pass"]


@nb.njit(cache=True, inline="always")
def _chain_k(q, s, weight_a, phi_dst, phi_w):
    """The signed weight of the exclusion arc from q that shadows an arc of weight ``weight_a``
    at s: minus the product of q's backoff chain up to s and the arc (weights summed in the
    chain's order, as :func:`fsmlearn.algo.phi.phi_structure` lists them)."""
    lw = 0.0
    r = q
    while r != s:
        lw += phi_w[r]
        r = phi_dst[r]
    return -math.exp(-(lw + weight_a))


@nb.njit(cache=True)
def _exclusion_part(q0, q1, mode, ex_ptr, ex_sid, sh_arc, sh_state, sh_off, weight, wsrc, label_word, wt_ptr,
                    wt_tag, phi_dst, phi_w, alpha, M, PhiX, Ax, Bx, G):
    """States [q0, q1)'s exclusions: mode 0 adds k_x alpha[q] to Ax, mode 1 adds k_x M[q, t] to
    Bx (pass 1), mode 2 adds k_x PhiX[a, t] to G[q, t] (pass 3)."""
    for q in range(q0, q1):
        for x in range(ex_ptr[q], ex_ptr[q + 1]):
            sid = ex_sid[x]
            a = sh_arc[sid]
            kx = _chain_k(q, sh_state[sid], weight[a], phi_dst, phi_w)
            if mode == 0:
                Ax[sid] += kx * alpha[q]
                continue
            w = label_word[wsrc[a]]
            lo = wt_ptr[w]
            off = sh_off[sid]
            n = sh_off[sid + 1] - off
            if mode == 1:
                for i in range(n):
                    Bx[off + i] += kx * M[q, wt_tag[lo + i]]
            else:
                for i in range(n):
                    v = PhiX[off + i]
                    if v != 0.0:
                        G[q, wt_tag[lo + i]] += kx * v


@nb.njit(parallel=True, cache=True)
def _exclusions(q_bounds, mode, ex_ptr, ex_sid, sh_arc, sh_state, sh_off, weight, wsrc, label_word, wt_ptr,
                wt_tag, phi_dst, phi_w, alpha, M, PhiX, G):
    """Passes 1 and 3 over parts of the states (mode as :func:`_exclusion_part`); the table's
    sums (modes 0 and 1) are the parts' private copies added, G (mode 2) is added in place
    (the parts' rows are disjoint).  Returns (Ax, Bx)."""
    P = q_bounds.shape[0] - 1
    S = sh_arc.shape[0]
    nA = S if mode == 0 else 0
    nB = sh_off[S] if mode == 1 else 0
    Axp = np.zeros((P, nA))
    Bxp = np.zeros((P, nB))
    for p in nb.prange(P):
        _exclusion_part(q_bounds[p], q_bounds[p + 1], mode, ex_ptr, ex_sid, sh_arc, sh_state, sh_off, weight, wsrc,
                        label_word, wt_ptr, wt_tag, phi_dst, phi_w, alpha, M, PhiX, Axp[p], Bxp[p], G)
    Ax = np.zeros(nA)
    Bx = np.zeros(nB)
    for p in range(P):
        for i in nb.prange(nA):
            Ax[i] += Axp[p, i]
        for i in nb.prange(nB):
            Bx[i] += Bxp[p, i]
    return Ax, Bx


@nb.njit(cache=True)
def _arc_part(update, s, a0, a1, j, ci, src_start, pair, pair_off, ilabel, weight, wsrc, label_word, wt_ptr, wt_tag,
              sh_arc, sh_off, Ax, Bx, PhiX, alpha, phi, M, UE, min_mass, A2c, G, buf):
    """Pass 2 over arcs [a0, a1): the first at state s, its block at phi entry j, ``ci`` the
    first entry of the shadowed-arc table at or after a0.  ``UE`` holds, per (word,
    destination) pair and tag, ``log theta(w | t) + U[d, t]``; ``A2c`` receives the tag mass
    each pair brings to its destination.  Returns the entropy."""
    ent = 0.0
    S = sh_arc.shape[0]
    for a in range(a0, a1):
        while src_start[s + 1] <= a:
            s += 1
        if ilabel[a] <= 0:
            continue
        w = label_word[wsrc[a]]
        lo = wt_ptr[w]
        n = wt_ptr[w + 1] - lo
        jb = j
        j += n
        k = math.exp(-weight[a])
        po = pair_off[pair[a]]
        A = k * alpha[s]
        shadowed = ci < S and sh_arc[ci] == a
        off = 0
        if shadowed:
            A += Ax[ci]
            off = sh_off[ci]
        fresh = False
        if update and A > min_mass:
            if n == 1:
                phi[jb] = 1.0
                buf[0] = 0.0
                fresh = True
            else:
                mx = -np.inf
                for i in range(n):
                    b = k * M[s, wt_tag[lo + i]] + A * UE[po + i]
                    if shadowed:
                        b += Bx[off + i]
                    v = b / A
                    buf[i] = v
                    if v > mx:
                        mx = v
                if mx != -np.inf:
                    z = 0.0
                    for i in range(n):
                        e = math.exp(buf[i] - mx)
                        phi[jb + i] = e
                        z += e
                    lz = math.log(z)
                    for i in range(n):
                        phi[jb + i] /= z
                        buf[i] = buf[i] - mx - lz          # log phi, without a log per entry
                    fresh = True
        h = 0.0
        for i in range(n):
            qv = phi[jb + i]
            if qv != 0.0:
                G[s, wt_tag[lo + i]] += k * qv
                if A != 0.0:
                    A2c[po + i] += A * qv
                    if qv > 0.0:
                        h -= qv * (buf[i] if fresh else math.log(qv))
        ent += A * h
        if shadowed:
            for i in range(n):
                PhiX[off + i] = phi[jb + i]
            ci += 1
    return ent


@nb.njit(parallel=True, cache=True)
def _arcs(update, p_state, p_arc, p_blk, p_sh, src_start, pair, pair_off, ilabel, weight, wsrc, label_word, wt_ptr,
          wt_tag, sh_arc, sh_off, Ax, Bx, PhiX, alpha, phi, M, UE, min_mass, N, T):
    P = p_arc.shape[0] - 1
    C = pair_off[pair_off.shape[0] - 1]
    A2p = np.zeros((P, C))
    Gp = np.zeros((P, N, T + 1))
    ents = np.zeros(P)
    for p in nb.prange(P):
        buf = np.empty(T + 1)
        ents[p] = _arc_part(update, p_state[p], p_arc[p], p_arc[p + 1], p_blk[p], p_sh[p], src_start, pair, pair_off,
                            ilabel, weight, wsrc, label_word, wt_ptr, wt_tag, sh_arc, sh_off, Ax, Bx, PhiX, alpha,
                            phi, M, UE, min_mass, A2p[p], Gp[p], buf)
    A2c = A2p[0]
    G = Gp[0]
    for p in range(1, P):
        for i in nb.prange(C):
            A2c[i] += A2p[p, i]
        for r in nb.prange(N):
            for t in range(T + 1):
                G[r, t] += Gp[p, r, t]
    return A2c, G, ents.sum()


@nb.njit(cache=True)
def _pair_rows(pair_dst, pair_word, pair_off, wt_ptr, wt_tag, U, logE):
    """UE: per (word, destination) pair and tag of the word, log theta(w | t) + U[d, t]."""
    UE = np.empty(pair_off[pair_off.shape[0] - 1])
    for p in range(pair_dst.shape[0]):
        w = pair_word[p]
        if w < 0:
            continue
        d = pair_dst[p]
        lo = wt_ptr[w]
        for i in range(pair_off[p + 1] - pair_off[p]):
            t = wt_tag[lo + i]
            UE[pair_off[p] + i] = logE[w, t] + U[d, t]
    return UE


@nb.njit(cache=True)
def _unpack(A2c, pair_dst, pair_word, pair_off, wt_ptr, wt_tag, N, T, V1):
    """The pairs' tag mass as alpha2's arc part [N, T+1] (by destination) and the emission
    counts [T, V+1] (by word)."""
    A2 = np.zeros((N, T + 1))
    emit = np.zeros((T, V1))
    for p in range(pair_dst.shape[0]):
        w = pair_word[p]
        if w < 0:
            continue
        d = pair_dst[p]
        lo = wt_ptr[w]
        for i in range(pair_off[p + 1] - pair_off[p]):
            t = wt_tag[lo + i]
            v = A2c[pair_off[p] + i]
            A2[d, t] += v
            emit[t, w] += v
    return A2, emit


@nb.njit(cache=True)
def _arc_bounds(src_start, ilabel, wsrc, label_word, wt_ptr, sh_arc, parts):
    """Cut c's arcs into ``parts`` ranges of about equal work (1 + block entries per arc):
    (first state, first arc, first block entry, first shadowed-arc entry) of each, and the end."""
    E = ilabel.shape[0]
    total = 0
    for a in range(E):
        total += 1
        if ilabel[a] > 0:
            w = label_word[wsrc[a]]
            total += wt_ptr[w + 1] - wt_ptr[w]
    p_state = np.empty(parts + 1, np.int64)
    p_arc = np.empty(parts + 1, np.int64)
    p_blk = np.empty(parts + 1, np.int64)
    p_sh = np.empty(parts + 1, np.int64)
    done = 0
    s = 0
    j = 0
    ci = 0
    p = 0
    for a in range(E):
        while src_start[s + 1] <= a:
            s += 1
        while ci < sh_arc.shape[0] and sh_arc[ci] < a:
            ci += 1
        while p < parts and done * parts >= total * p:
            p_state[p] = s
            p_arc[p] = a
            p_blk[p] = j
            p_sh[p] = ci
            p += 1
        done += 1
        if ilabel[a] > 0:
            w = label_word[wsrc[a]]
            n = wt_ptr[w + 1] - wt_ptr[w]
            j += n
            done += n
    while p <= parts:
        p_state[p] = s
        p_arc[p] = E
        p_blk[p] = j
        p_sh[p] = sh_arc.shape[0]
        p += 1
    return p_state, p_arc, p_blk, p_sh


def _state_bounds(ex_ptr, parts):
    """Cut the states into ``parts`` ranges of about equal exclusions (and states)."""
    work = ex_ptr + np.arange(ex_ptr.shape[0])
    cuts = np.searchsorted(work, np.linspace(0, work[-1], parts + 1)[1:-1], side="left")
    return np.concatenate([[0], cuts, [ex_ptr.shape[0] - 1]]).astype(np.int64)


@dataclass
class Sweep:
    """What the passes read besides phi, M and U: c, its structure, the parts of its arcs and
    states the threads take, and the shadowed arcs' expected uses by exclusion ``Ax``
    (constant: computed once)."""
    cs: object
    arc_bounds: tuple
    state_bounds: np.ndarray
    Ax: np.ndarray

    @property
    def parts(self) -> int:
        return int(self.arc_bounds[1].shape[0] - 1)


def sweep_bounds(cs, parts: int) -> Sweep:
    """The passes' arrays for structure ``cs`` with its arcs and states cut into ``parts``."""
    c = cs.machine
    parts = max(int(parts), 1)
    ab = _arc_bounds(c.src_start, c.ilabel, cs.wsrc, cs.label_word, cs.wt_ptr, cs.sh_arc, parts)
    sb = _state_bounds(cs.ex_ptr, parts)
    Ax, _ = _exclusions(sb, 0, cs.ex_ptr, cs.ex_sid, cs.sh_arc, cs.sh_state, cs.sh_off, c.weight, cs.wsrc,
                        cs.label_word, cs.wt_ptr, cs.wt_tag, cs.phi_dst, cs.phi_w, cs.alpha, _NONE2, _NONE1,
                        _NONE2)
    return Sweep(cs, ab, sb, Ax)


_NONE1 = np.zeros(0)
_NONE2 = np.zeros((0, 0))


def sweep_parts(sw: Sweep, phi, M, UE, update: bool, min_mass: float):
    """The three passes (see the module docstring) in this process, on every part.

    Args:
        sw: :func:`sweep_bounds`.
        phi: float64 [K], updated in place when ``update``.
        M: float64 [N, T+1] ``alpha2 @ log theta``; UE: float64 per (word, destination) pair
            and tag, ``log theta(w | t) + U[d, t]`` (:func:`pass_inputs`; both ignored
            without ``update``).
        update: apply the parallel block update before taking the statistics.
        min_mass: blocks used at most this much keep their phi.

    Returns:
        (A2c: the tag mass each (word, destination) pair brings, G [N, T+1] the tag mass
        leaving each state (before the final weights), entropy).
    """
    cs = sw.cs
    c = cs.machine
    S = cs.sh_arc.shape[0]
    if update:
        _, Bx = _exclusions(sw.state_bounds, 1, cs.ex_ptr, cs.ex_sid, cs.sh_arc, cs.sh_state, cs.sh_off, c.weight,
                            cs.wsrc, cs.label_word, cs.wt_ptr, cs.wt_tag, cs.phi_dst, cs.phi_w, cs.alpha, M, _NONE1,
                            _NONE2)
    else:
        M = _NONE2
        UE = Bx = _NONE1
    PhiX = np.zeros(cs.sh_off[S])
    p_state, p_arc, p_blk, p_sh = sw.arc_bounds
    A2c, G, ent = _arcs(bool(update), p_state, p_arc, p_blk, p_sh, c.src_start, cs.pair, cs.pair_off, c.ilabel,
                        c.weight, cs.wsrc, cs.label_word, cs.wt_ptr, cs.wt_tag, cs.sh_arc, cs.sh_off, sw.Ax, Bx, PhiX,
                        cs.alpha, phi, M, UE, float(min_mass), c.num_states, cs.T)
    _exclusions(sw.state_bounds, 2, cs.ex_ptr, cs.ex_sid, cs.sh_arc, cs.sh_state, cs.sh_off, c.weight, cs.wsrc,
                cs.label_word, cs.wt_ptr, cs.wt_tag, cs.phi_dst, cs.phi_w, cs.alpha, _NONE2, PhiX, G)
    return A2c, G, ent


def pass_inputs(cs, stats: Stats, log_trans, log_emit):
    """(M, UE): what an updating pass reads besides phi, from the statistics of the current
    phi (``stats.alpha2``, ``stats.G``) and theta: ``M = alpha2 @ log theta`` and, per
    (word, destination) pair and tag, ``log theta(w | t) + U[d, t]`` with U the adjoint
    (:func:`fsmlearn.tag.ngram.kernels.adjoint`); log 0 is clamped to NEG_LOG."""
    lt = np.maximum(log_trans, NEG_LOG)
    le = np.ascontiguousarray(np.maximum(log_emit, NEG_LOG).T)
    U = adjoint(cs, stats.G, lt)
    return stats.alpha2 @ lt, _pair_rows(cs.pair_dst, cs.pair_word, cs.pair_off, cs.wt_ptr, cs.wt_tag, U, le)


def finish_pass(cs, A2c, G, entropy, log_trans, log_emit) -> Stats:
    """The statistics of a pass, once its parts' sums are added: alpha2's arc part and the
    emission counts from the pairs' tag mass, the start's unit mass and the phi forest's
    pass up for alpha2, the signed final weights for G's column T, the transition counts
    ``alpha2^T G`` and the bound (5) at theta."""
    A2, emit = _unpack(A2c, cs.pair_dst, cs.pair_word, cs.pair_off, cs.wt_ptr, cs.wt_tag, cs.machine.num_states,
                       cs.T, cs.wt_ptr.shape[0] - 1)
    A2[cs.machine.start, cs.T] += 1.0
    phi_pass_rows(A2, cs.down, cs.phi_dst, cs.phi_k, False)
    np.add.at(G[:, cs.T], cs.fin_state, cs.fin_k)
    trans = A2.T @ G
    bound = dot_log(trans, log_trans) + dot_log(emit, log_emit) + entropy
    return Stats(trans, emit, float(entropy), bound, A2, G)


def one_pass(cs, sw: Sweep, phi, log_trans, log_emit, stats: Stats | None = None) -> Stats:
    """One pass in one process: with ``stats`` (of the current phi) the parallel block update
    of every block, in place, then the statistics of the result; without, the statistics of
    phi alone."""
    if stats is None:
        A2c, G, ent = sweep_parts(sw, phi, None, None, False, MIN_BLOCK_MASS)
    else:
        M, UE = pass_inputs(cs, stats, log_trans, log_emit)
        A2c, G, ent = sweep_parts(sw, phi, M, UE, True, MIN_BLOCK_MASS)
    return finish_pass(cs, A2c, G, ent, log_trans, log_emit)

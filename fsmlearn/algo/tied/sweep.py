"""n-gram EM's iteration as three passes over c: the E-step and the next statistics, fused.

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
3.3-3.5, with n_q = 1 (formulas in :mod:`fsmlearn.algo.tied.objective`).  The
events that use arc a's block are a itself and the exclusion arcs that shadow
it (:class:`~fsmlearn.algo.tied.structure.TiedStructure`); they all end at a's
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
iteration's alpha2 and G.

A :class:`Part` is a range of c's states with their arcs, their exclusions and
their blocks: the passes run on a part with its own arrays (views of c's, or
the slices a Dask worker reads, :mod:`fsmlearn.algo.tied.shards`) and need of
the others only the table's arrays (Bx and PhiX: a few numbers per shadowed
arc), M's rows of its own states, and the compact rows UE; they give back the
table's sums (Bx; PhiX of its own shadowed arcs), the pairs' tag mass A2c and
G's rows of its own states.  In one process the whole machine is one part, and
each pass splits it further over the threads.  Nothing of size K (the block
entries) is held but phi itself, updated in place.

Public names: Part, Tables, tables_of, part_of, whole_part, pass1, pass2, pass3, sweep_bounds,
sweep_parts, pass_inputs, finish_pass, one_pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..product import phi_pass_rows
from .kernels import adjoint, balanced_cuts
from .objective import MIN_BLOCK_MASS, NEG_LOG, Stats, dot_log
from .structure import exclusion_weight

__all__ = ["Part", "Tables", "tables_of", "part_of", "whole_part", "pass1", "pass2", "pass3", "sweep_bounds",
           "sweep_parts", "pass_inputs", "finish_pass", "one_pass"]


@nb.njit(cache=True)
def _exclusion_part(q0, q1, mode, qbase, xbase, ex_ptr, ex_sid, sh_state, sh_w, sh_word, sh_off, wt_ptr, wt_tag,
                    phi_dst, phi_w, alpha, M, PhiX, Ax, Bx, G):
    """States [q0, q1)'s exclusions: mode 0 adds k_x alpha[q] to Ax, mode 1 adds k_x M[q, t] to
    Bx (pass 1), mode 2 adds k_x PhiX[a, t] to G[q, t] (pass 3).  ``ex_ptr``, ``M`` and ``G``
    start at state ``qbase``, ``ex_sid`` at exclusion ``xbase``."""
    for q in range(q0, q1):
        for x in range(ex_ptr[q - qbase], ex_ptr[q + 1 - qbase]):
            sid = ex_sid[x - xbase]
            kx = exclusion_weight(q, sh_state[sid], sh_w[sid], phi_dst, phi_w)
            if mode == 0:
                Ax[sid] += kx * alpha[q]
                continue
            lo = wt_ptr[sh_word[sid]]
            off = sh_off[sid]
            n = sh_off[sid + 1] - off
            if mode == 1:
                for i in range(n):
                    Bx[off + i] += kx * M[q - qbase, wt_tag[lo + i]]
            else:
                for i in range(n):
                    v = PhiX[off + i]
                    if v != 0.0:
                        G[q - qbase, wt_tag[lo + i]] += kx * v


@nb.njit(parallel=True, cache=True)
def _exclusions(q_bounds, mode, qbase, xbase, ex_ptr, ex_sid, sh_state, sh_w, sh_word, sh_off, wt_ptr, wt_tag,
                phi_dst, phi_w, alpha, M, PhiX, G):
    """Passes 1 and 3 over sub-ranges of the states (mode as :func:`_exclusion_part`); the
    table's sums (modes 0 and 1) are the sub-ranges' private copies added, G (mode 2) is added
    in place (their rows are disjoint).  Returns (Ax, Bx)."""
    P = q_bounds.shape[0] - 1
    S = sh_state.shape[0]
    nA = S if mode == 0 else 0
    nB = sh_off[S] if mode == 1 else 0
    Axp = np.zeros((P, nA))
    Bxp = np.zeros((P, nB))
    for p in nb.prange(P):
        _exclusion_part(q_bounds[p], q_bounds[p + 1], mode, qbase, xbase, ex_ptr, ex_sid, sh_state, sh_w, sh_word,
                        sh_off, wt_ptr, wt_tag, phi_dst, phi_w, alpha, M, PhiX, Axp[p], Bxp[p], G)
    Ax = np.zeros(nA)
    Bx = np.zeros(nB)
    for p in range(P):
        for i in nb.prange(nA):
            Ax[i] += Axp[p, i]
        for i in nb.prange(nB):
            Bx[i] += Bxp[p, i]
    return Ax, Bx


@nb.njit(cache=True)
def _arc_part(update, s, a0, a1, j, ci, sbase, abase, bbase, src_start, pair, pair_off, ilabel, weight, wsrc,
              label_word, wt_ptr, wt_tag, sh_arc, sh_off, Ax, Bx, PhiX, alpha, phi, M, UE, min_mass, A2c, G, buf):
    """Pass 2 over arcs [a0, a1): the first at state s, its block at phi entry j, ``ci`` the
    first entry of the shadowed-arc table at or after a0.  Arc arrays start at arc ``abase``,
    ``src_start``, M and G at state ``sbase``, phi at entry ``bbase``.  ``UE`` holds, per
    (word, destination) pair and tag, ``log theta(w | t) + U[d, t]``; ``A2c`` receives the tag
    mass each pair brings to its destination.  Returns the entropy."""
    ent = 0.0
    S = sh_arc.shape[0]
    for a in range(a0, a1):
        while src_start[s + 1 - sbase] <= a:
            s += 1
        ia = a - abase
        if ilabel[ia] <= 0:
            continue
        w = label_word[wsrc[ia]]
        lo = wt_ptr[w]
        n = wt_ptr[w + 1] - lo
        jb = j - bbase
        j += n
        k = math.exp(-weight[ia])
        po = pair_off[pair[ia]]
        A = k * alpha[s]
        sr = s - sbase
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
                    b = k * M[sr, wt_tag[lo + i]] + A * UE[po + i]
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
                G[sr, wt_tag[lo + i]] += k * qv
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
def _arcs(update, p_state, p_arc, p_blk, p_sh, sbase, abase, bbase, src_start, pair, pair_off, ilabel, weight, wsrc,
          label_word, wt_ptr, wt_tag, sh_arc, sh_off, Ax, Bx, PhiX, alpha, phi, M, UE, min_mass, nrows, T):
    """Pass 2 over sub-ranges of the arcs, each into private sums, added: (A2c, G rows, entropy)."""
    P = p_arc.shape[0] - 1
    C = pair_off[pair_off.shape[0] - 1]
    A2p = np.zeros((P, C))
    Gp = np.zeros((P, nrows, T + 1))
    ents = np.zeros(P)
    for p in nb.prange(P):
        buf = np.empty(T + 1)
        ents[p] = _arc_part(update, p_state[p], p_arc[p], p_arc[p + 1], p_blk[p], p_sh[p], sbase, abase, bbase,
                            src_start, pair, pair_off, ilabel, weight, wsrc, label_word, wt_ptr, wt_tag, sh_arc,
                            sh_off, Ax, Bx, PhiX, alpha, phi, M, UE, min_mass, A2p[p], Gp[p], buf)
    A2c = A2p[0]
    G = Gp[0]
    for p in range(1, P):
        for i in nb.prange(C):
            A2c[i] += A2p[p, i]
        for r in nb.prange(nrows):
            for t in range(T + 1):
                G[r, t] += Gp[p, r, t]
    return A2c, G, ents.sum()


@nb.njit(cache=True, inline="always")
def _pair_span(p, pair_dst, pair_word, pair_off, wt_ptr):
    """Pair p's (d, w, lo, off, n): its destination and word, w's first tag in ``wt_tag``, and
    its n entries from ``off`` on (w's tags in order; none for a pair without a word, w < 0)."""
    w = pair_word[p]
    if w < 0:
        return pair_dst[p], w, 0, pair_off[p], 0
    return pair_dst[p], w, wt_ptr[w], pair_off[p], pair_off[p + 1] - pair_off[p]


@nb.njit(cache=True)
def _pair_rows(pair_dst, pair_word, pair_off, wt_ptr, wt_tag, U, logE):
    """UE: per (word, destination) pair and tag of the word, log theta(w | t) + U[d, t]."""
    UE = np.empty(pair_off[pair_off.shape[0] - 1])
    for p in range(pair_dst.shape[0]):
        d, w, lo, off, n = _pair_span(p, pair_dst, pair_word, pair_off, wt_ptr)
        for i in range(n):
            t = wt_tag[lo + i]
            UE[off + i] = logE[w, t] + U[d, t]
    return UE


@nb.njit(cache=True)
def _unpack(A2c, pair_dst, pair_word, pair_off, wt_ptr, wt_tag, N, T, V1):
    """The pairs' tag mass as alpha2's arc part [N, T+1] (by destination) and the emission
    counts [T, V+1] (by word)."""
    A2 = np.zeros((N, T + 1))
    emit = np.zeros((T, V1))
    for p in range(pair_dst.shape[0]):
        d, w, lo, off, n = _pair_span(p, pair_dst, pair_word, pair_off, wt_ptr)
        for i in range(n):
            t = wt_tag[lo + i]
            v = A2c[off + i]
            A2[d, t] += v
            emit[t, w] += v
    return A2, emit


@nb.njit(cache=True)
def _arc_bounds(q0, q1, sbase, abase, src_start, ilabel, wsrc, label_word, wt_ptr, sh_arc, ci0, j0, parts):
    """Cut the arcs of states [q0, q1) into ``parts`` sub-ranges of about equal work (1 + block
    entries per arc): (first state, first arc, first block entry, first shadowed-arc entry)
    of each, and the end."""
    a0 = src_start[q0 - sbase]
    a1 = src_start[q1 - sbase]
    total = 0
    for a in range(a0, a1):
        total += 1
        if ilabel[a - abase] > 0:
            w = label_word[wsrc[a - abase]]
            total += wt_ptr[w + 1] - wt_ptr[w]
    p_state = np.empty(parts + 1, np.int64)
    p_arc = np.empty(parts + 1, np.int64)
    p_blk = np.empty(parts + 1, np.int64)
    p_sh = np.empty(parts + 1, np.int64)
    done = 0
    s = q0
    j = j0
    ci = ci0
    p = 0
    S = sh_arc.shape[0]
    for a in range(a0, a1):
        while src_start[s + 1 - sbase] <= a:
            s += 1
        while ci < S and sh_arc[ci] < a:
            ci += 1
        while p < parts and done * parts >= total * p:
            p_state[p] = s
            p_arc[p] = a
            p_blk[p] = j
            p_sh[p] = ci
            p += 1
        done += 1
        if ilabel[a - abase] > 0:
            w = label_word[wsrc[a - abase]]
            n = wt_ptr[w + 1] - wt_ptr[w]
            j += n
            done += n
    while ci < S and sh_arc[ci] < a1:
        ci += 1
    while p <= parts:
        p_state[p] = q1 if p == parts else s
        p_arc[p] = a1
        p_blk[p] = j
        p_sh[p] = ci
        p += 1
    return p_state, p_arc, p_blk, p_sh


def _state_bounds(ex_ptr, q0, q1, parts):
    """Cut states [q0, q1) (``ex_ptr`` from q0) into ``parts`` ranges of about equal
    exclusions and states."""
    n = q1 - q0
    return q0 + balanced_cuts((ex_ptr[:n + 1] - ex_ptr[0]) + np.arange(n + 1), parts)


@dataclass
class Tables:
    """What every part reads whole: per-state arrays, the word/tag tables, the pairs' offsets
    and the shadowed-arc table (with ``Ax``, the table's expected uses by exclusion, constant)."""
    alpha: np.ndarray
    phi_dst: np.ndarray
    phi_w: np.ndarray
    label_word: np.ndarray
    wt_ptr: np.ndarray
    wt_tag: np.ndarray
    pair_off: np.ndarray
    sh_arc: np.ndarray
    sh_state: np.ndarray
    sh_w: np.ndarray
    sh_word: np.ndarray
    sh_off: np.ndarray
    Ax: np.ndarray
    T: int


@dataclass
class Part:
    """A range of c's states [q0, q1) with their arcs [a0, a1), blocks [b0, b1), exclusions and
    shadowed-arc entries [ci0, ci1).  Its arrays start where the range does (``src_start`` and
    ``ex_ptr`` hold global offsets, from state q0 to q1 inclusive)."""
    q0: int
    q1: int
    a0: int
    a1: int
    b0: int
    b1: int
    x0: int
    ci0: int
    ci1: int
    src_start: np.ndarray
    ilabel: np.ndarray
    weight: np.ndarray
    wsrc: np.ndarray
    pair: np.ndarray
    ex_ptr: np.ndarray
    ex_sid: np.ndarray
    tables: Tables
    threads: int = 1
    _bounds: dict = field(default_factory=dict, repr=False)

    def bounds(self):
        """(state sub-ranges, arc sub-ranges) for this part's threads (computed once)."""
        b = self._bounds.get(self.threads)
        if b is None:
            tb = self.tables
            sb = _state_bounds(self.ex_ptr, self.q0, self.q1, self.threads)
            ab = _arc_bounds(self.q0, self.q1, self.q0, self.a0, self.src_start, self.ilabel, self.wsrc,
                             tb.label_word, tb.wt_ptr, tb.sh_arc, self.ci0, self.b0, self.threads)
            b = self._bounds[self.threads] = (sb, ab)
        return b


_NONE1 = np.zeros(0)
_NONE2 = np.zeros((0, 0))


def _table_Ax(cs, threads):
    c = cs.machine
    sb = _state_bounds(cs.ex_ptr, 0, c.num_states, threads)
    Ax, _ = _exclusions(sb, 0, 0, 0, cs.ex_ptr, cs.ex_sid, cs.sh_state, c.weight[cs.sh_arc], _sh_word(cs), cs.sh_off,
                        cs.wt_ptr, cs.wt_tag, cs.phi_dst, cs.phi_w, cs.alpha, _NONE2, _NONE1, _NONE2)
    return Ax


def _sh_word(cs):
    c = cs.machine
    return cs.label_word[cs.wsrc[cs.sh_arc]].astype(np.int32) if cs.sh_arc.size else np.zeros(0, np.int32)


def tables_of(cs, threads: int = 1) -> Tables:
    """The arrays every part of ``cs`` reads whole."""
    c = cs.machine
    return Tables(cs.alpha, cs.phi_dst, cs.phi_w, cs.label_word, cs.wt_ptr, cs.wt_tag, cs.pair_off, cs.sh_arc,
                  cs.sh_state, np.ascontiguousarray(c.weight[cs.sh_arc]), _sh_word(cs), cs.sh_off,
                  _table_Ax(cs, threads), cs.T)


def part_of(cs, tables: Tables, q0: int, q1: int, threads: int = 1, copy: bool = False) -> Part:
    """States [q0, q1) of ``cs`` as a part (views of its arrays; ``copy``: copies, for a file)."""
    c = cs.machine
    a0, a1 = int(c.src_start[q0]), int(c.src_start[q1])
    x0, x1 = int(cs.ex_ptr[q0]), int(cs.ex_ptr[q1])
    # block entries before a0 and up to a1; shadowed arcs in [a0, a1)
    blk = _blocks_before(c.ilabel, cs.wsrc, cs.label_word, cs.wt_ptr, np.array([a0, a1], np.int64))
    ci0, ci1 = (int(x) for x in np.searchsorted(cs.sh_arc, [a0, a1]))
    cp = np.array if copy else (lambda x: x)
    wsrc = cs.wsrc[a0:a1] if cs.wsrc is not c.ilabel else None
    ilab = cp(c.ilabel[a0:a1])
    return Part(q0, q1, a0, a1, int(blk[0]), int(blk[1]), x0, ci0, ci1, cp(c.src_start[q0:q1 + 1]), ilab,
                cp(c.weight[a0:a1]), ilab if wsrc is None else cp(wsrc), cp(cs.pair[a0:a1]),
                cp(cs.ex_ptr[q0:q1 + 1]), cp(cs.ex_sid[x0:x1]), tables, threads)


@nb.njit(cache=True)
def _blocks_before(ilabel, wsrc, label_word, wt_ptr, arcs):
    """Block entries before each of ``arcs`` (sorted)."""
    out = np.zeros(arcs.shape[0], np.int64)
    j = 0
    i = 0
    for a in range(ilabel.shape[0] + 1):
        while i < arcs.shape[0] and arcs[i] == a:
            out[i] = j
            i += 1
        if i == arcs.shape[0] or a == ilabel.shape[0]:
            break
        if ilabel[a] > 0:
            w = label_word[wsrc[a]]
            j += wt_ptr[w + 1] - wt_ptr[w]
    return out


def whole_part(cs, threads: int) -> Part:
    """All of c as one part, split over ``threads`` in each pass (the one-process path)."""
    return part_of(cs, tables_of(cs, threads), 0, cs.machine.num_states, max(int(threads), 1))


def pass1(part: Part, M_rows):
    """Pass 1 on a part: Bx, the part's exclusions' share of the shadowed arcs' block scores
    (table-sized; the parts' are added).  ``M_rows``: M's rows of the part's states."""
    tb = part.tables
    sb, _ = part.bounds()
    _, Bx = _exclusions(sb, 1, part.q0, part.x0, part.ex_ptr, part.ex_sid, tb.sh_state, tb.sh_w, tb.sh_word,
                        tb.sh_off, tb.wt_ptr, tb.wt_tag, tb.phi_dst, tb.phi_w, tb.alpha, M_rows, _NONE1, _NONE2)
    return Bx


def pass2(part: Part, phi, M_rows, UE, Bx, update: bool, min_mass: float = MIN_BLOCK_MASS):
    """Pass 2 on a part: with ``update`` its blocks' parallel update, in ``phi`` (the part's
    entries) in place, then their statistics.  Returns (A2c: the pairs' tag mass, G's rows of
    the part's states, entropy, PhiX: the new blocks of the part's shadowed arcs, in table
    order from entry ``sh_off[ci0]``)."""
    tb = part.tables
    _, ab = part.bounds()
    if not update:
        M_rows = _NONE2
        UE = Bx = _NONE1
    S = tb.sh_arc.shape[0]
    PhiX = np.zeros(tb.sh_off[S])
    p_state, p_arc, p_blk, p_sh = ab
    A2c, G, ent = _arcs(bool(update), p_state, p_arc, p_blk, p_sh, part.q0, part.a0, part.b0, part.src_start,
                        part.pair, tb.pair_off, part.ilabel, part.weight, part.wsrc, tb.label_word, tb.wt_ptr,
                        tb.wt_tag, tb.sh_arc, tb.sh_off, tb.Ax, Bx, PhiX, tb.alpha, phi, M_rows, UE, float(min_mass),
                        part.q1 - part.q0, tb.T)
    return A2c, G, ent, PhiX[tb.sh_off[part.ci0]:tb.sh_off[part.ci1]].copy()


def pass3(part: Part, G_rows, PhiX):
    """Pass 3 on a part: its exclusions' tag mass leaving, added to ``G_rows`` in place
    (``PhiX``: every part's new shadowed blocks, table-sized)."""
    tb = part.tables
    sb, _ = part.bounds()
    _exclusions(sb, 2, part.q0, part.x0, part.ex_ptr, part.ex_sid, tb.sh_state, tb.sh_w, tb.sh_word, tb.sh_off,
                tb.wt_ptr, tb.wt_tag, tb.phi_dst, tb.phi_w, tb.alpha, _NONE2, PhiX, G_rows)
    return G_rows


def sweep_bounds(cs, parts: int) -> Part:
    """The one-process path's part: all of c, each pass split into ``parts`` sub-ranges."""
    return whole_part(cs, parts)


def sweep_parts(part: Part, phi, M, UE, update: bool, min_mass: float = MIN_BLOCK_MASS):
    """The three passes on one part in this process (the one-partition case): (A2c, G, entropy)."""
    Bx = pass1(part, M) if update else _NONE1
    A2c, G, ent, PhiX_own = pass2(part, phi, M, UE, Bx, update, min_mass)
    tb = part.tables
    PhiX = np.zeros(tb.sh_off[tb.sh_arc.shape[0]])
    PhiX[tb.sh_off[part.ci0]:tb.sh_off[part.ci1]] = PhiX_own
    pass3(part, G, PhiX)
    return A2c, G, ent


def pass_inputs(cs, stats: Stats, log_trans, log_emit):
    """(M, UE): what an updating pass reads besides phi, from the statistics of the current
    phi (``stats.alpha2``, ``stats.G``) and theta: ``M = alpha2 @ log theta`` and, per
    (word, destination) pair and tag, ``log theta(w | t) + U[d, t]`` with U the adjoint
    (:func:`fsmlearn.algo.tied.kernels.adjoint`); log 0 is clamped to NEG_LOG."""
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


def one_pass(cs, sw: Part, phi, log_trans, log_emit, stats: Stats | None = None) -> Stats:
    """One pass in one process: with ``stats`` (of the current phi) the parallel block update
    of every block, in place, then the statistics of the result; without, the statistics of
    phi alone."""
    if stats is None:
        A2c, G, ent = sweep_parts(sw, phi, None, None, False, MIN_BLOCK_MASS)
    else:
        M, UE = pass_inputs(cs, stats, log_trans, log_emit)
        A2c, G, ent = sweep_parts(sw, phi, M, UE, True, MIN_BLOCK_MASS)
    return finish_pass(cs, A2c, G, ent, log_trans, log_emit)

"""Training an HMM tagger from an approximate corpus (n-gram EM).

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
2-3.  The training distribution c(w) is a backoff LM compiled to an acceptor
with failure arcs (:mod:`fsmlearn.lm`).  The variational family is the tagged
transducer cq_phi: with n_q = 1 its states are those of c, and each word arc
a of c becomes one arc per allowed tag t (tag dictionary) with weight
``c(w | h) * phi[a, t]``; phi arcs become ``phi:epsilon`` arcs with value 0.
The bound (5) is

    r = E_cq[ log p_theta(w, t) - log q_phi(t | w) ]

for a bigram HMM p_theta (n_p = 2).

How it is computed (the Z_a construction of section 3.3, n_p - n_q = 1).
cq preserves c's marginal, so the first components of its forward values are
the forward values ``alpha`` of c itself: the expected number of visits to
each state.  They do not depend on theta or phi, so the engine's relaxation
(:func:`fsmlearn.algo.forward` with exact failure semantics) solves them once
per machine, and they are reused (warm) by every iteration.  The forward mass
per incoming tag, ``alpha2[h, t]`` (Z_a: the paths to h split by their last
tag), is one pass over the arcs plus one pass down the phi forest.  The
second component of the expectation-semiring forward value, summed at the
final states, is then a sum over arcs (Li and Eisner 2009, section 4.2;
footnote 14 of the paper: with beta = 1 the forward in the expectation
semiring and this sum are the same number):

    r = sum_a sum_t  k_a phi[a, t] ( sum_t' alpha2[src, t'] log theta(t | t')
                                      + alpha[src] (log theta(w | t) - log phi[a, t]) )
        + sum_h F(h) sum_t' alpha2[h, t'] log theta(</s> | t')

Exact failure semantics come from the engine's signed linear system
(:func:`fsmlearn.algo.linear_system`): an *exclusion arc* per label a state
shadows, carrying minus the weight of the backoff chain that would otherwise
serve it, and a signed final adjustment per state whose own final weight
hides its chain's.  Each exclusion arc uses the phi block of the arc it
shadows, so every sum above runs over the same signed events.

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
objective linearised in that feedback); the
approximate variational E-step applies it to all blocks in parallel, and the
M-step normalises the expected counts.  Gradient ascent on softmax
parameters of theta and phi (section 3.5) is the other optimiser.

n_q = 2 (one phi block per (arc, previous tag)) is supported by materialising
cq as a machine over (state, tag) pairs and running the engine's
expectation-semiring forward on it (:func:`materialise`); with n_q = n_p the
E-step can take phi from the posteriors of the joint machine c * p_theta,
which is the optimum when c is a union of straight-line sentences (an
ordinary corpus), so that n-gram EM reduces to EM.

A richer family (footnote 7), selectable with ``NGramEM(cond=...)``: the
blocks of chosen arcs (``"roots"``: those leaving the backoff roots, e.g. an
LM's unigram state; ``"all"``: every arc, n_q = 2) are also conditioned on the
previous tag (:class:`CondBlocks`, ``phi2``).  alpha2 and U then depend on
themselves through those arcs and are solved by relaxation (warm-started);
the bound, counts and gradients are checked against the materialised
machine.  Measured on WSJ-train (5-grams, cutoff 3) it gains little
(82.37% vs 82.12% after 10 iterations with "roots", at about 10x the time per
iteration), so the default stays the paper's n_q = 1 (``"none"``).

Public names: CqStructure, CondBlocks, NGramEM, IterationRecord, materialise,
joint_posterior_phi, bound_materialised, expected_stats_cond,
d_bound_d_phi_cond, estep_parallel_cond.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..algo.phi import linear_system
from ..algo.shortest import forward
from ..algo.solve import phi_depths
from . import ngram_par as par
from .ngram_par import ParIndex
from ..errors import FsmError, MachineError
from ..fsm.machine import EPSILON, PHI, Machine

_NEG = -1e250   # stands in for log 0 in products with zero masses


# ----------------------------------------------------------------- structure
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


@nb.njit(cache=True)
def _events(src_start, arc_src, dst, kind, ref, ilabel, weight, neg_ptr, neg_chain):
    """Signed word events of the linear system: (src, dst, arc whose block, k)."""
    X = dst.shape[0]
    n = 0
    for i in range(X):
        if kind[i] == 0:
            if ilabel[ref[i]] > 0:
                n += 1
        else:
            n += 1
    es = np.empty(n, np.int32)
    ed = np.empty(n, np.int32)
    ea = np.empty(n, np.int64)
    ek = np.empty(n)
    j = 0
    for i in range(X):
        if kind[i] == 0:
            a = ref[i]
            if ilabel[a] <= 0:
                continue
            es[j] = arc_src[i]
            ed[j] = dst[i]
            ea[j] = a
            ek[j] = math.exp(-weight[a])
            j += 1
        else:
            x = ref[i]
            lw = 0.0
            last = -1
            for c in range(neg_ptr[x], neg_ptr[x + 1]):
                lw += weight[neg_chain[c]]
                last = neg_chain[c]
            es[j] = arc_src[i]
            ed[j] = dst[i]
            ea[j] = last
            ek[j] = -math.exp(-lw)
            j += 1
    return es, ed, ea, ek


@nb.njit(cache=True)
def _final_events(final, nf_state, nf_final, nf_ptr, nf_chain, weight):
    n = 0
    for q in range(final.shape[0]):
        if final[q] != np.inf:
            n += 1
    fs = np.empty(n + nf_state.shape[0], np.int32)
    fk = np.empty(n + nf_state.shape[0])
    j = 0
    for q in range(final.shape[0]):
        if final[q] != np.inf:
            fs[j] = q
            fk[j] = math.exp(-final[q])
            j += 1
    for i in range(nf_state.shape[0]):
        lw = final[nf_final[i]]
        for c in range(nf_ptr[i], nf_ptr[i + 1]):
            lw += weight[nf_chain[c]]
        fs[j] = nf_state[i]
        fk[j] = -math.exp(-lw)
        j += 1
    return fs, fk


@dataclass
class CqStructure:
    """c with its tag blocks: everything about cq that does not change in training.

    Attributes:
        machine: c (log semiring, labels > 0 are words, phi arcs allowed).
        T: number of tags (index T is the sentence boundary).
        alpha: float64 [N] forward values of c (expected visits), solved once.
        ev_src, ev_dst: int32 [X] signed word events (arcs and exclusion arcs).
        ev_arc: int64 [X] the arc of c whose phi block each event uses.
        ev_k: float64 [X] signed event weights.
        fin_state, fin_k: int32 / float64 [Y] signed final events.
        phi_dst: int64 [N] backoff state of each state (-1 for none).
        phi_k: float64 [N] its phi weight.
        down: int64 [N] states by decreasing phi depth (longest histories first).
        arc_word: int32 [E] word id (of the tagger's vocabulary) of each word arc, -1 otherwise.
        blk_start: int64 [E+1] each arc's block in the phi arrays.
        blk_tag: int32 [K] the tag of each block entry.
        solve_seconds: time spent solving alpha.
    """
    machine: Machine
    T: int
    alpha: np.ndarray
    ev_src: np.ndarray
    ev_dst: np.ndarray
    ev_arc: np.ndarray
    ev_k: np.ndarray
    fin_state: np.ndarray
    fin_k: np.ndarray
    phi_dst: np.ndarray
    phi_k: np.ndarray
    down: np.ndarray
    arc_word: np.ndarray
    blk_start: np.ndarray
    blk_tag: np.ndarray
    solve_seconds: float = 0.0

    @classmethod
    def build(cls, c: Machine, arc_word: np.ndarray, allowed: np.ndarray, *, alpha=None,
              tol: float = 1e-10, max_sweeps: int = 100_000) -> "CqStructure":
        """Prepare cq for machine ``c``.

        Args:
            c: the acceptor (log semiring; word labels > 0; phi arcs with
                failure semantics, final weights failing over; no epsilons).
            arc_word: int [E] word id of each arc of c in the tagger's
                vocabulary (ignored for phi arcs).
            allowed: bool [V+1, T] the tags each word may take.
            alpha: optional precomputed forward values of c (probabilities).
            tol, max_sweeps: relaxation settings for alpha.

        Raises:
            MachineError: epsilon arcs, a word arc without an allowed tag,
                or no start state.
        """
        if not isinstance(c, Machine):
            raise MachineError(f"expected a fsmlearn Machine, got {type(c).__name__}")
        if c.start < 0:
            raise MachineError("c has no start state")
        if c.semiring != "log":
            raise MachineError(f"c must be a log-semiring machine, got {c.semiring!r}")
        if np.any(c.ilabel == EPSILON):
            raise MachineError(f"c has epsilon arcs (arc {int(np.flatnonzero(c.ilabel == EPSILON)[0])}); "
                               "n-gram EM needs every path step to carry a word or a phi")
        allowed = np.asarray(allowed, bool)
        V1, T = allowed.shape
        arc_word = np.asarray(arc_word, np.int32)
        if arc_word.shape != (c.num_arcs,):
            raise MachineError(f"arc_word has shape {arc_word.shape}, expected ({c.num_arcs},)")
        words = c.ilabel > 0
        aw = np.where(words, arc_word, -1).astype(np.int32)
        bad = np.flatnonzero(words & ((aw < 0) | (aw >= V1)))
        if bad.size:
            raise MachineError(f"arc {int(bad[0])} has word id {int(arc_word[bad[0]])}, outside [0, {V1})")
        n_tags = np.where(words, allowed.sum(1)[np.maximum(aw, 0)], 0)
        bad = np.flatnonzero(words & (n_tags == 0))
        if bad.size:
            raise MachineError(f"word id {int(aw[bad[0]])} (arc {int(bad[0])}) has no allowed tag")
        blk_start = np.zeros(c.num_arcs + 1, np.int64)
        np.cumsum(n_tags, out=blk_start[1:])
        wt_ptr = np.zeros(V1 + 1, np.int64)
        np.cumsum(allowed.sum(1), out=wt_ptr[1:])
        wt_tag = np.nonzero(allowed)[1].astype(np.int32)
        blk_tag = _block_tags(aw, wt_ptr, wt_tag, blk_start)
        t0 = time.time()
        if alpha is None:
            a = forward(c, "log", tol=tol, max_sweeps=max_sweeps)
            alpha = np.exp(-a)
        alpha = np.asarray(alpha, np.float64)
        secs = time.time() - t0
        g = linear_system(c, True)
        ps = g.phi
        w = c.weight
        es, ed, ea, ek = _events(g.src_start, g.arc_src, g.dst, g.kind, g.ref, c.ilabel, w,
                                 ps.neg_ptr, ps.neg_chain)
        fs, fk = _final_events(c.final, ps.nf_state, ps.nf_final, ps.nf_ptr, ps.nf_chain, w)
        phi_dst = np.full(c.num_states, -1, np.int64)
        phi_k = np.zeros(c.num_states)
        has = ps.phi_arc >= 0
        phi_dst[has] = c.dst[ps.phi_arc[has]]
        phi_k[has] = np.exp(-w[ps.phi_arc[has]])
        _, order = phi_depths(phi_dst, c.num_states)
        return cls(c, T, alpha, es, ed, ea, ek, fs, fk, phi_dst, phi_k, order[::-1].copy(), aw,
                   blk_start, blk_tag, secs)

    @property
    def num_params(self) -> int:
        """Number of variational parameters (block entries)."""
        return int(self.blk_tag.shape[0])

    def uniform_phi(self) -> np.ndarray:
        """float64 [K]: uniform tag distributions in every block."""
        n = np.diff(self.blk_start)
        return np.repeat(1.0 / np.maximum(n, 1), n)


@nb.njit(cache=True)
def _block_tags(aw, wt_ptr, wt_tag, blk_start):
    out = np.empty(blk_start[-1], np.int32)
    for a in range(aw.shape[0]):
        w = aw[a]
        if w < 0:
            continue
        p = blk_start[a]
        for j in range(wt_ptr[w], wt_ptr[w + 1]):
            out[p] = wt_tag[j]
            p += 1
    return out


# ------------------------------------------------------------------- kernels
@nb.njit(cache=True)
def _adjoint(G, logT, down, phi_dst, phi_k):
    """U[h, t']: d r / d (tag mass t' arriving at h)."""
    N = G.shape[0]
    T1 = G.shape[1]
    U = np.zeros((N, T1))
    for h in range(N):
        for tp in range(T1):
            acc = 0.0
            for t in range(T1):
                g = G[h, t]
                if g != 0.0:
                    acc += g * logT[tp, t]
            U[h, tp] = acc
    # pass down the phi forest: shortest histories first
    for i in range(N - 1, -1, -1):
        q = down[i]
        r = phi_dst[q]
        if r >= 0:
            k = phi_k[q]
            for tp in range(T1):
                U[q, tp] += k * U[r, tp]
    return U



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


def _safe_log(p):
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), _NEG)


# --------------------------------------------------------------- computation
@dataclass
class Stats:
    """Expected counts and the bound for one (theta, phi)."""
    trans: np.ndarray     # [T+1, T+1] (row T: sentence start; column T: sentence end)
    emit: np.ndarray      # [T, V+1]
    entropy: float        # E[-log q(t | w)]
    bound: float          # the objective r (per sentence of c)
    alpha2: np.ndarray    # [N, T+1]
    G: np.ndarray | None = None   # [N, T+1] tag mass leaving each state (n_q = 1), reused by the next E-step


def _one_thread(cs: CqStructure) -> ParIndex:
    """The kernels' index with one part (built once per structure)."""
    px = getattr(cs, "_px1", None)
    if px is None:
        px = cs._px1 = ParIndex(cs, 1)
    return px


def expected_stats(cs: CqStructure, phi: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray,
                   px=None) -> Stats:
    """Expected counts under cq_phi and the bound r at (theta, phi).

    ``px``: a :class:`fsmlearn.tag.ngram_par.ParIndex` giving the parts the
    kernels split their work into (one per thread); None for one part."""
    px = px or _one_thread(cs)
    A2 = par.alpha2(cs, px, phi)
    G = par.state_tag_mass(cs, px, phi)
    emit, ent = par.emit_entropy(cs, px, phi, log_emit.shape[1])
    trans = A2.T @ G
    bound = _dot_log(trans, log_trans) + _dot_log(emit, log_emit) + ent
    return Stats(trans, emit, ent, bound, A2, G)


def _dot_log(counts, logp):
    with np.errstate(invalid="ignore"):
        nz = counts != 0.0
        if np.any(nz & ~np.isfinite(logp)):
            return -math.inf
        return float((counts[nz] * logp[nz]).sum())


def phi_gradient(cs: CqStructure, phi, log_trans, log_emit, alpha2=None, px=None, G=None):
    """(A [E], B [K]): d r / d phi[j] = B[j] - A[arc of j] (log phi[j] + 1).

    ``alpha2`` and ``G`` (the forward mass per tag and the tag mass leaving
    each state, :class:`Stats`) may be passed when known for this phi."""
    px = px or _one_thread(cs)
    if alpha2 is None:
        alpha2 = par.alpha2(cs, px, phi)
    lt = np.maximum(log_trans, _NEG)
    le = np.maximum(log_emit, _NEG)
    if G is None:
        G = par.state_tag_mass(cs, px, phi)
    U = _adjoint(G, lt, cs.down, cs.phi_dst, cs.phi_k)
    return par.block_scores(cs, px, alpha2 @ lt, U, np.ascontiguousarray(le.T))


def d_bound_d_phi(cs: CqStructure, phi, log_trans, log_emit) -> np.ndarray:
    """float64 [K]: the gradient of r with respect to phi (unconstrained coordinates)."""
    A, B = phi_gradient(cs, phi, log_trans, log_emit)
    arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
    with np.errstate(divide="ignore"):
        lp = np.where(phi > 0, np.log(np.where(phi > 0, phi, 1.0)), -np.inf)
    return B - A[arc_of] * (lp + 1.0)


def estep_parallel(cs: CqStructure, phi, log_trans, log_emit, alpha2=None, px=None, G=None) -> np.ndarray:
    """One parallel block update of every phi block (section 3.5)."""
    A, B = phi_gradient(cs, phi, log_trans, log_emit, alpha2, px, G)
    return par.softmax_blocks(cs, px or _one_thread(cs), A, B, phi, 1e-300)


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
    bound = _dot_log(trans, log_trans) + _dot_log(emit, log_emit) + ent
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
    lt = np.maximum(log_trans, _NEG)
    le = np.maximum(log_emit, _NEG)
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
    return (par.softmax_blocks(cs, _one_thread(cs), A, B, phi, 1e-300),
            _softmax_blocks2(Aw, B2, cs.blk_start, cb.crow, phi2, 1e-300), U)


def mstep(trans: np.ndarray, emit: np.ndarray, allowed: np.ndarray, floor: float = 0.0):
    """Closed-form theta from expected counts: (log_trans, log_emit).

    Transitions out of every tag and the start are normalised rows of
    ``trans`` (column T is the end of the sentence); emissions are rows of
    ``emit`` restricted to ``allowed`` (transposed: [V+1, T] mask).
    ``floor`` is added to every allowed count (0: maximum likelihood).
    """
    tr = np.maximum(trans, 0.0) + floor
    tr[-1, -1] = max(trans[-1, -1], 0.0)   # start -> end only if c has empty sentences
    em = np.where(allowed.T, np.maximum(emit, 0.0) + floor, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lt = np.log(tr) - np.log(tr.sum(1, keepdims=True))
        le = np.log(em) - np.log(em.sum(1, keepdims=True))
    lt = np.where(np.isfinite(lt), lt, -np.inf)
    le = np.where(np.isfinite(le), le, -np.inf)
    return lt, le


# ------------------------------------------------------ materialised (tests, n_q = 2)
def _materialise(cs: CqStructure, phi2, log_trans, log_emit, eos_label=None):
    """(machine, values, prev_tag, tag, word, entry) per arc of the materialised cq.

    ``prev_tag``/``tag`` are -1 on phi arcs, ``tag`` is T on end-of-sentence
    arcs; ``word`` and ``entry`` (the phi block entry) are -1 where none.
    A Python loop over arcs: meant for small machines (tests, references).
    """
    c = cs.machine
    T = cs.T
    T1 = T + 1
    phi2 = np.asarray(phi2, np.float64)
    if phi2.ndim == 1:
        phi2 = np.repeat(phi2[:, None], T1, axis=1)
    if eos_label is None:
        eos_label = int(c.ilabel.max(initial=0)) + 1
    N = c.num_states
    F = N * T1
    src, dst, lab, wt, val, tp_, t_, w_, j_ = [], [], [], [], [], [], [], [], []

    def arc(s, d, x, weight, value, tp, t, w, j):
        src.append(s)
        dst.append(d)
        lab.append(x)
        wt.append(weight)
        val.append(value)
        tp_.append(tp)
        t_.append(t)
        w_.append(w)
        j_.append(j)

    for a in range(c.num_arcs):
        s = int(c.arc_src[a])
        d = int(c.dst[a])
        x = int(c.ilabel[a])
        if x == PHI:
            for tp in range(T1):
                arc(s * T1 + tp, d * T1 + tp, PHI, c.weight[a], 0.0, -1, -1, -1, -1)
            continue
        w = int(cs.arc_word[a])
        for j in range(cs.blk_start[a], cs.blk_start[a + 1]):
            t = int(cs.blk_tag[j])
            for tp in range(T1):
                p = phi2[j, tp]
                if p <= 0.0:
                    continue
                arc(s * T1 + tp, d * T1 + t, x, c.weight[a] - math.log(p),
                    log_trans[tp, t] + log_emit[t, w] - math.log(p), tp, t, w, j)
    for q in range(N):
        if c.final[q] == np.inf:
            continue
        for tp in range(T1):
            arc(q * T1 + tp, F, eos_label, c.final[q], log_trans[tp, T], tp, T, -1, -1)
    final = np.full(F + 1, np.inf)
    final[F] = 0.0
    src = np.array(src, np.int64)
    m = Machine.from_arcs(F + 1, c.start * T1 + T, final, src, np.array(dst, np.int64),
                          np.array(lab, np.int32), weight=np.array(wt, np.float64))
    # from_arcs sorts stably by source; carry the per-arc data along
    order = np.argsort(src, kind="stable")
    # log 0 (a transition theta forbids, e.g. from unreachable (state, start) pairs)
    # as a huge finite value, so that zero-mass paths contribute 0 * value = 0
    values = np.maximum(np.asarray(val, np.float64)[order], _NEG)
    meta = [np.asarray(v, np.int64)[order] for v in (tp_, t_, w_, j_)]
    return (m, values, *meta)


def materialise(cs: CqStructure, phi2: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray,
                eos_label: int | None = None):
    """cq with n_q = 2 (or the larger FST of n_q = 1) as a machine with arc values.

    States are (state of c, last tag) pairs, ``q * (T+1) + t`` (t = T: the
    sentence start).  Each word arc a of c with block entry j (tag t) gives,
    from every (src, t'), an arc to (dst, t) with weight ``k_a * phi2[j, t']``
    and value ``log theta(t | t') + log theta(w | t) - log phi2[j, t']``;
    phi arcs are copied per tag with value 0.  Final weights become arcs
    labelled ``eos_label`` (a fresh label) to one new final state, with value
    ``log theta(</s> | t')``, so that they fail over like words.

    Args:
        phi2: float64 [K, T+1]: phi[j] given the previous tag (columns); a
            [K] array is broadcast (n_q = 1).

    Returns:
        (machine, values [E']); ``expectation(machine, values, phi_final=False)``
        is the bound r.
    """
    m, values, *_ = _materialise(cs, phi2, log_trans, log_emit, eos_label)
    return m, values


def bound_materialised(cs: CqStructure, phi2, log_trans, log_emit) -> float:
    """The bound r by the engine's expectation-semiring relaxation on the materialised cq."""
    from ..algo.posteriors import expectation
    m, v = materialise(cs, phi2, log_trans, log_emit)
    return float(expectation(m, v, phi_final=False)[0])


def joint_posterior_phi(cs: CqStructure, log_trans, log_emit) -> np.ndarray:
    """phi2 [K, T+1] (n_q = 2) from the posteriors of the joint machine c * p_theta.

    The joint machine is the materialised cq with phi = 1 and the HMM's
    transition and emission weights; phi[j, t'] is the posterior probability
    of tag t on arc a given the previous tag t', from the engine's
    forward-backward.  When c is a union of straight-line sentences this is
    p_theta(t_i | t_{i-1}, w), the optimum, and the bound equals the corpus
    log-likelihood.
    """
    from ..algo.posteriors import forward_backward
    c = cs.machine
    T1 = cs.T + 1
    K = cs.num_params
    m, v, tp, _, _, j = _materialise(cs, np.ones((K, T1)), log_trans, log_emit)
    # weights of the joint: c's weight minus log theta (the value is log theta here)
    fb = forward_backward(m.replace(weight=m.weight - v), phi_final=False)
    keep = j >= 0
    P = np.zeros(K * T1)
    np.add.at(P, j[keep] * T1 + tp[keep], fb.posteriors[keep])
    P = P.reshape(K, T1)
    # normalise within each (arc, previous tag) block
    arc_of = np.repeat(np.arange(c.num_arcs), np.diff(cs.blk_start))
    Z = np.zeros((c.num_arcs, T1))
    np.add.at(Z, arc_of, P)
    n = np.diff(cs.blk_start)[arc_of][:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(Z[arc_of] > 0, P / np.where(Z[arc_of] > 0, Z[arc_of], 1.0), 1.0 / n)
    return out


def stats_materialised(cs: CqStructure, phi2, log_trans, log_emit):
    """(trans, emit, bound) for n_q = 2 from the engine's forward-backward on the materialised cq."""
    from ..algo.posteriors import expectation, forward_backward
    T = cs.T
    T1 = T + 1
    m, v, tp, t, w, _ = _materialise(cs, phi2, log_trans, log_emit)
    post = forward_backward(m, phi_final=False).posteriors
    trans = np.zeros((T1, T1))
    emit = np.zeros((T, log_emit.shape[1]))
    k = tp >= 0
    np.add.at(trans, (tp[k], t[k]), post[k])
    k2 = k & (t < T)
    np.add.at(emit, (t[k2], w[k2]), post[k2])
    bound = float(expectation(m, v, phi_final=False)[0])
    return trans, emit, bound


# ------------------------------------------------------------------ training
@dataclass
class IterationRecord:
    iteration: int
    bound: float
    seconds: float
    accuracy: float | None = None
    heldout_loglik: float | None = None
    extra: dict = field(default_factory=dict)


class NGramEM:
    """n-gram EM (n_q = 1, n_p = 2): variational EM or gradient ascent on the bound.

    Args:
        cs: the prepared cq structure.
        allowed: bool [V+1, T] tag dictionary mask.
        log_trans, log_emit: the initial theta.
        optimizer: ``"vem"`` (approximate variational EM: one parallel
            block update of phi, then the closed-form M-step) or ``"gradient"``
            (gradient ascent on softmax parameters of theta and phi with a
            backtracking step).
        estep_passes: parallel block updates per vEM iteration (the paper: 1).
        cond: which blocks are also conditioned on the previous tag
            (:meth:`CondBlocks.build`): ``"none"`` (n_q = 1, the paper),
            ``"roots"``, ``"all"`` or a bool [N] mask of source states.
        threads: threads of the n_q = 1 vEM kernels (default: numba's
            thread count; 1 runs the single-threaded kernels).
    """

    def __init__(self, cs: CqStructure, allowed, log_trans, log_emit, optimizer: str = "vem",
                 estep_passes: int = 1, step: float = 1.0, cond="none", threads: int | None = None):
        if optimizer not in ("vem", "gradient"):
            raise ValueError(f"optimizer must be 'vem' or 'gradient', got {optimizer!r}")
        self.cond = CondBlocks.build(cs, cond)
        if self.cond.K2 == 0:
            self.cond = None
        elif optimizer != "vem":
            raise ValueError("blocks conditioned on the previous tag need optimizer='vem'")
        self.phi2 = self.cond.uniform(cs) if self.cond is not None else None
        self._U = None
        self.cs = cs
        self.allowed = np.asarray(allowed, bool)
        self.log_trans = np.asarray(log_trans, np.float64).copy()
        self.log_emit = np.asarray(log_emit, np.float64).copy()
        self.phi = cs.uniform_phi()
        self.optimizer = optimizer
        self.estep_passes = int(estep_passes)
        self.step = float(step)
        self.stats = None
        self.history: list[IterationRecord] = []
        # n_q = 1 variational EM runs its kernels on every thread numba has (threads=1: one)
        self.px = None
        if self.cond is None and optimizer == "vem" and (threads is None or threads > 1):
            from .ngram_par import ParIndex
            px = ParIndex(cs, threads)
            self.px = px if px.threads > 1 else None

    def _stats(self):
        if self.cond is None:
            return expected_stats(self.cs, self.phi, self.log_trans, self.log_emit, self.px)
        warm = self.stats.alpha2 if self.stats is not None else getattr(self, "_A2", None)
        st = expected_stats_cond(self.cs, self.cond, self.phi, self.phi2, self.log_trans, self.log_emit,
                                 warm=warm)
        self._A2 = st.alpha2
        return st

    def bound(self) -> float:
        self.stats = self._stats()
        return self.stats.bound

    def iterate(self) -> float:
        """One iteration; returns the bound after it."""
        if self.optimizer == "vem" and self.cond is not None:
            for _ in range(self.estep_passes):
                st = self.stats if self.stats is not None else self._stats()
                self.phi, self.phi2, self._U = estep_parallel_cond(
                    self.cs, self.cond, self.phi, self.phi2, self.log_trans, self.log_emit, st.alpha2,
                    warm_u=self._U)
                self.stats = None
            st = self._stats()
            self.log_trans, self.log_emit = mstep(st.trans, st.emit, self.allowed)
        elif self.optimizer == "vem":
            for _ in range(self.estep_passes):
                a2 = self.stats.alpha2 if self.stats is not None else None
                G = self.stats.G if self.stats is not None else None
                self.phi = estep_parallel(self.cs, self.phi, self.log_trans, self.log_emit, a2, self.px, G)
                self.stats = None
            st = expected_stats(self.cs, self.phi, self.log_trans, self.log_emit, self.px)
            self.log_trans, self.log_emit = mstep(st.trans, st.emit, self.allowed)
            # the counts depend on phi alone: only the bound moves with theta
            b = _dot_log(st.trans, self.log_trans) + _dot_log(st.emit, self.log_emit) + st.entropy
            self.stats = Stats(st.trans, st.emit, st.entropy, b, st.alpha2, st.G)
            return b
        else:
            self._gradient_step()
        return self.bound()

    def _gradient_step(self):
        # gradient of r in softmax coordinates: d r / d eta = p (g - E_p g)
        cs = self.cs
        st = self.stats or expected_stats(cs, self.phi, self.log_trans, self.log_emit)
        r0 = st.bound
        g_phi = d_bound_d_phi(cs, self.phi, self.log_trans, self.log_emit)
        arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
        Eg = np.zeros(cs.machine.num_arcs)
        np.add.at(Eg, arc_of, self.phi * g_phi)
        geta = self.phi * (g_phi - Eg[arc_of])
        # theta rows: d r / d log theta = counts; softmax: counts - p * row total
        Pt = np.exp(self.log_trans)
        gt = st.trans - Pt * st.trans.sum(1, keepdims=True)
        Pe = np.exp(self.log_emit)
        ge = np.where(self.allowed.T, st.emit - Pe * st.emit.sum(1, keepdims=True), 0.0)
        scale = max(float(np.abs(st.trans).sum()), 1e-300)
        lr = self.step
        with np.errstate(divide="ignore"):
            eta = np.log(np.maximum(self.phi, 1e-300))
        for _ in range(30):
            phi_new = _block_softmax(eta + lr * geta / np.maximum(st.alpha2.sum() / scale, 1e-300),
                                     cs.blk_start, arc_of)
            lt = _row_log_softmax(self.log_trans + lr * gt / scale)
            le = _row_log_softmax(np.where(self.allowed.T, self.log_emit + lr * ge / scale, -np.inf))
            s_new = expected_stats(cs, phi_new, lt, le)
            if s_new.bound >= r0:
                self.phi, self.log_trans, self.log_emit = phi_new, lt, le
                self.step = lr * 1.5
                self.stats = s_new
                return
            lr *= 0.5
        self.step = lr

    def run(self, iterations: int, callback=None):
        """Run iterations; ``callback(record)`` may add accuracy etc. to each record."""
        t0 = time.time()
        b = self.bound()
        rec = IterationRecord(0, b, 0.0)
        if callback:
            callback(rec, self)
        self.history.append(rec)
        for it in range(1, iterations + 1):
            t0 = time.time()
            b = self.iterate()
            rec = IterationRecord(it, b, time.time() - t0)
            if callback:
                callback(rec, self)
            self.history.append(rec)
        return self.history


def _block_softmax(eta, blk_start, arc_of):
    mx = np.full(blk_start.shape[0] - 1, -np.inf)
    np.maximum.at(mx, arc_of, eta)
    e = np.exp(eta - mx[arc_of])
    z = np.zeros(blk_start.shape[0] - 1)
    np.add.at(z, arc_of, e)
    return e / z[arc_of]


def _row_log_softmax(x):
    mx = np.max(np.where(np.isfinite(x), x, -np.inf), axis=1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return x - mx - np.log(np.exp(x - mx).sum(1, keepdims=True))

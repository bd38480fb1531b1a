"""The tagged approximate corpus cq: everything about it that training does not change.

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
2-3.  The training distribution c(w) is a backoff LM compiled to an acceptor
with failure arcs (:mod:`fsmlearn.lm`).  The variational family is the tagged
transducer cq_phi: with n_q = 1 its states are those of c, and each word arc
a of c becomes one arc per allowed tag t (tag dictionary) with weight
``c(w | h) * phi[a, t]``; phi arcs become ``phi:epsilon`` arcs with value 0.

cq preserves c's marginal, so the first components of its forward values are
the forward values ``alpha`` of c itself: the expected number of visits to
each state.  They do not depend on theta or phi, so the engine's relaxation
(:func:`fsmlearn.algo.forward` with exact failure semantics) solves them once.
Exact failure semantics come from the engine's signed linear system
(:func:`fsmlearn.algo.phi.linear_system`): an *exclusion arc* per label a
state shadows, carrying minus the weight of the backoff chain that would
otherwise serve it, and a signed final adjustment per state whose own final
weight hides its chain's.  Each exclusion arc uses the phi block of the arc it
shadows; :class:`CqStructure` lists these signed *events* once.

Public names: CqStructure.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ...algo.phi import linear_system, phi_depths
from ...algo.shortest import forward
from ...errors import MachineError
from ...fsm.machine import EPSILON, Machine

__all__ = ["CqStructure"]


@nb.njit(cache=True)
def _events(src_start, arc_src, dst, kind, ref, ilabel, weight, neg_ptr, neg_chain):
    """Signed word events of the linear system: (es, ed, ea, ek).

    Every word arc of c (kind 0 with a label > 0) is an event of weight
    k = exp(-weight); every exclusion arc (kind 1) is an event of weight minus
    the product of its backoff chain's weights, using the block of the chain's
    last arc (the arc it shadows).

    Args:
        src_start, arc_src, dst, kind, ref: the integer arrays of the linear
            system's X arcs (:class:`fsmlearn.algo.phi.LinearSystem`): ref is
            the arc of c (kind 0) or the exclusion (kind 1).
        ilabel: int32 [E] and weight: float64 [E] of c's arcs.
        neg_ptr: int64 [n+1], neg_chain: int64 [m]: each exclusion's backoff chain.

    Returns:
        es, ed: int32 [X'] source and destination; ea: int64 [X'] the arc whose
        block the event uses; ek: float64 [X'] the signed weight.
    """
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
        kernel_index: kernels' indexes built for this structure, by part count
            (:func:`fsmlearn.tag.ngram.objective.one_thread_index`).
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
    kernel_index: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, c: Machine, arc_word: np.ndarray, allowed: np.ndarray, *, alpha=None,
              tol: float = 1e-10, max_sweeps: int = 100_000, device: str = "cpu") -> "CqStructure":
        """Prepare cq for machine ``c``.

        Args:
            c: the acceptor (log semiring; word labels > 0; phi arcs with
                failure semantics, final weights failing over; no epsilons).
            arc_word: int [E] word id of each arc of c in the tagger's
                vocabulary (ignored for phi arcs).
            allowed: bool [V+1, T] the tags each word may take.
            alpha: optional precomputed forward values of c (probabilities).
            tol, max_sweeps: relaxation settings for alpha.
            device: where alpha is solved, "cpu" or "cuda" (:mod:`fsmlearn.algo.cuda`).

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
            a = forward(c, "log", tol=tol, max_sweeps=max_sweeps, device=device)
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

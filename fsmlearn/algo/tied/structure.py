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
shadows; :class:`TiedStructure` lists these signed *events* once.

Public names: TiedStructure, exclusion_weight.
"""

from __future__ import annotations

import math
import time
from functools import cached_property

import numba as nb
import numpy as np

from ..phi import phi_depths, phi_structure
from ..shortest import forward
from ...errors import MachineError
from ...fsm.machine import EPSILON, PHI, Machine
from .kernels import balanced_cuts

__all__ = ["TiedStructure", "exclusion_weight"]


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


@nb.njit(cache=True)
def _shadowed(neg_ptr, neg_chain):
    """The arc each exclusion shadows: the last of its chain."""
    X = neg_ptr.shape[0] - 1
    out = np.empty(X, np.int64)
    for i in range(X):
        out[i] = neg_chain[neg_ptr[i + 1] - 1]
    return out


@nb.njit(cache=True)
def _shadow_table(shadow, tail, N, ilabel, wsrc, label_word, wt_ptr, src_start):
    """The exclusions by their state (``ex_ptr`` [N+1], ``ex_sid`` int32: each one's entry in
    the table of shadowed arcs) and that table, in arc order: ``sh_arc`` (int64), ``sh_state``
    (int32, the arc's source) and ``sh_off`` (int64 [S+1], offsets of their block entries)."""
    X = shadow.shape[0]
    order = np.argsort(shadow, kind="mergesort")
    S = 0
    for i in range(X):
        if i == 0 or shadow[order[i]] != shadow[order[i - 1]]:
            S += 1
    sh_arc = np.empty(S, np.int64)
    sid_of = np.empty(X, np.int32)
    S = -1
    for i in range(X):
        e = order[i]
        if i == 0 or shadow[e] != shadow[order[i - 1]]:
            S += 1
            sh_arc[S] = shadow[e]
        sid_of[e] = S
    S += 1
    sh_state = np.empty(S, np.int32)
    sh_off = np.zeros(S + 1, np.int64)
    s = 0
    for i in range(S):
        a = sh_arc[i]
        while src_start[s + 1] <= a:
            s += 1
        sh_state[i] = s
        w = label_word[wsrc[a]]
        sh_off[i + 1] = sh_off[i] + wt_ptr[w + 1] - wt_ptr[w]
    ex_ptr = np.zeros(N + 1, np.int64)
    for i in range(X):
        ex_ptr[tail[i] + 1] += 1
    for q in range(N):
        ex_ptr[q + 1] += ex_ptr[q]
    pos = ex_ptr[:-1].copy()
    ex_sid = np.empty(X, np.int32)
    for i in range(X):
        q = tail[i]
        ex_sid[pos[q]] = sid_of[i]
        pos[q] += 1
    return ex_ptr, ex_sid, sh_arc, sh_state, sh_off


@nb.njit(cache=True)
def _phi_arcs(src_start, ilabel, dst, weight, PHI):
    """Each state's phi arc: (phi_dst int64 [N] (-1: none), phi_w [N], the first state with two
    phi arcs or -1, whether every state's labels ascend (the phi arc first))."""
    N = src_start.shape[0] - 1
    phi_dst = np.full(N, -1, np.int64)
    phi_w = np.zeros(N)
    two = -1
    ascending = True
    for q in range(N):
        for a in range(src_start[q], src_start[q + 1]):
            if a > src_start[q] and ilabel[a] <= ilabel[a - 1]:
                ascending = False
            if ilabel[a] == PHI:
                if phi_dst[q] >= 0 and two < 0:
                    two = q
                phi_dst[q] = dst[a]
                phi_w[q] = weight[a]
    return phi_dst, phi_w, two, ascending


@nb.njit(cache=True)
def _lean_exclusions(src_start, ilabel, phi_dst, fill, tail, shadow):
    """The exclusion arcs of c's signed system (:mod:`fsmlearn.algo.phi`), read off c directly
    when every state's labels ascend: for each word arc of a state q with a backoff chain, the
    first arc of that label along the chain is shadowed.  Returns their number; with
    ``fill``, writes (q, shadowed arc) by q."""
    n = 0
    for q in range(src_start.shape[0] - 1):
        if phi_dst[q] < 0:
            continue
        for a in range(src_start[q], src_start[q + 1]):
            x = ilabel[a]
            if x <= 0:
                continue
            r = phi_dst[q]
            while r >= 0:
                lo = src_start[r]
                hi = src_start[r + 1]
                i = lo + np.searchsorted(ilabel[lo:hi], x)      # the first arc labelled >= x
                if i < hi and ilabel[i] == x:
                    if fill:
                        tail[n] = q
                        shadow[n] = i
                    n += 1
                    break
                r = phi_dst[r]
    return n


@nb.njit(cache=True)
def _lean_finals(final, phi_dst, phi_w):
    """Signed final events: every state's own final weight, and minus its chain's (to the
    first state with one) for a state whose own final hides it."""
    N = final.shape[0]
    n = 0
    for q in range(N):
        if final[q] != np.inf:
            n += 1
            r = phi_dst[q]
            while r >= 0:
                if final[r] != np.inf:
                    n += 1
                    break
                r = phi_dst[r]
    fs = np.empty(n, np.int32)
    fk = np.empty(n)
    j = 0
    for q in range(N):
        if final[q] != np.inf:
            fs[j] = q
            fk[j] = math.exp(-final[q])
            j += 1
    for q in range(N):
        if final[q] == np.inf:
            continue
        lw = 0.0
        r = q
        while phi_dst[r] >= 0:
            lw += phi_w[r]
            r = phi_dst[r]
            if final[r] != np.inf:
                fs[j] = q
                fk[j] = -math.exp(-(lw + final[r]))
                j += 1
                break
    return fs, fk


@nb.njit(parallel=True, cache=True)
def _step_weights(src_start, ilabel, weight, phi_dst, phi_w, ex_ptr, ex_sid, sh_arc, sh_state):
    """The one-step map's weights, once: k_a = exp(-weight) of each word arc (0 off words), each
    state's phi arc weight, and each exclusion arc's signed weight (by state, as ``ex_sid``)."""
    N = src_start.shape[0] - 1
    ka = np.zeros(ilabel.shape[0])
    kx = np.empty(ex_sid.shape[0])
    for q in nb.prange(N):
        for a in range(src_start[q], src_start[q + 1]):
            if ilabel[a] > 0:
                ka[a] = math.exp(-weight[a])
        for e in range(ex_ptr[q], ex_ptr[q + 1]):
            sid = ex_sid[e]
            kx[e] = exclusion_weight(np.int64(q), sh_state[sid], weight[sh_arc[sid]], phi_dst, phi_w)
    return ka, kx


@nb.njit(cache=True, inline="always")
def exclusion_weight(q, s, weight_a, phi_dst, phi_w):
    """The signed weight of the exclusion arc from q that shadows an arc of weight ``weight_a``
    at s: minus the product of q's backoff chain up to s and the arc (weights summed in the
    chain's order, as :func:`fsmlearn.algo.phi.phi_structure` lists them)."""
    lw = 0.0
    r = q
    while r != s:
        lw += phi_w[r]
        r = phi_dst[r]
    return -math.exp(-(lw + weight_a))


@nb.njit(parallel=True, cache=True)
def _forward_step(x, bounds, src_start, dst, ka, phi_dst, kp, ex_ptr, ex_sid, sh_arc, kx):
    """y = A^T x for c's signed system (word arcs, phi arcs as plain arcs, exclusion arcs): the
    mass one step carries from each state to the next (forward values solve x = e_start + A^T x)."""
    N = src_start.shape[0] - 1
    P = bounds.shape[0] - 1
    Y = np.zeros((P, N))
    for p in nb.prange(P):
        y = Y[p]
        for q in range(bounds[p], bounds[p + 1]):
            v = x[q]
            if v == 0.0:
                continue
            for a in range(src_start[q], src_start[q + 1]):
                y[dst[a]] += ka[a] * v
            if phi_dst[q] >= 0:
                y[phi_dst[q]] += kp[q] * v
            for e in range(ex_ptr[q], ex_ptr[q + 1]):
                y[dst[sh_arc[ex_sid[e]]]] += kx[e] * v
    out = Y[0].copy()
    for p in range(1, P):
        for i in range(N):
            out[i] += Y[p, i]
    return out


@nb.njit(cache=True)
def _entering_word(N, dst, ilabel, wsrc, label_word):
    """The word every word arc into each state carries (-1: none), and whether each state has
    at most one (True for a backoff LM: a state is a history, ending in its last word)."""
    w_in = np.full(N, -1, np.int32)
    for a in range(dst.shape[0]):
        if ilabel[a] > 0:
            w = label_word[wsrc[a]]
            d = dst[a]
            if w_in[d] < 0:
                w_in[d] = w
            elif w_in[d] != w:
                return w_in, False
    return w_in, True


@nb.njit(cache=True)
def _pair_offsets(pair_word, wt_ptr):
    off = np.zeros(pair_word.shape[0] + 1, np.int64)
    for p in range(pair_word.shape[0]):
        w = pair_word[p]
        off[p + 1] = off[p] + (wt_ptr[w + 1] - wt_ptr[w] if w >= 0 else 0)
    return off


@nb.njit(cache=True)
def _block_sizes(ilabel, wsrc, label_word, wt_ptr):
    """Total block entries and the first word arc without an allowed tag (-1: none)."""
    K = 0
    bad = -1
    for a in range(ilabel.shape[0]):
        if ilabel[a] > 0:
            w = label_word[wsrc[a]]
            n = wt_ptr[w + 1] - wt_ptr[w]
            if n == 0 and bad < 0:
                bad = a
            K += n
    return K, bad


@nb.njit(cache=True)
def _uniform(ilabel, wsrc, label_word, wt_ptr, K):
    out = np.empty(K)
    j = 0
    for a in range(ilabel.shape[0]):
        if ilabel[a] > 0:
            w = label_word[wsrc[a]]
            n = wt_ptr[w + 1] - wt_ptr[w]
            for i in range(n):
                out[j + i] = 1.0 / n
            j += n
    return out


@nb.njit(cache=True)
def _events_by_source(src_start, dst, ilabel, weight, ex_ptr, ex_sid, sh_arc, sh_state, phi_dst, phi_w):
    """The signed word events (es, ed, ea, ek) sorted by source state: every word arc of c
    (weight k = exp(-weight)) and every exclusion arc (minus the weight of its backoff
    chain, using the block of the arc it shadows)."""
    N = src_start.shape[0] - 1
    n = 0
    for a in range(ilabel.shape[0]):
        if ilabel[a] > 0:
            n += 1
    n += ex_sid.shape[0]
    es = np.empty(n, np.int32)
    ed = np.empty(n, np.int32)
    ea = np.empty(n, np.int64)
    ek = np.empty(n)
    i = 0
    for s in range(N):
        for a in range(src_start[s], src_start[s + 1]):
            if ilabel[a] <= 0:
                continue
            es[i] = s
            ed[i] = dst[a]
            ea[i] = a
            ek[i] = math.exp(-weight[a])
            i += 1
        for x in range(ex_ptr[s], ex_ptr[s + 1]):
            sid = ex_sid[x]
            a = sh_arc[sid]
            es[i] = s
            ed[i] = dst[a]
            ea[i] = a
            ek[i] = exclusion_weight(s, sh_state[sid], weight[a], phi_dst, phi_w)
            i += 1
    return es, ed, ea, ek


_GMRES_RTOL = 1e-3          # GMRES stops at this fraction of tol (plain steps then check the error)
_GMRES_RESTART = 40
_LAST_STEPS = [0]


def _solve_alpha(c, phi_dst, phi_w, ex_ptr, ex_sid, sh_arc, sh_state, tol, max_steps):
    """c's forward values (expected visits), x = e_start + A^T x, without building the signed
    system's arrays (the map's weights are held while it runs: 8 bytes per arc and per
    exclusion): restarted GMRES (scipy) on (I - A^T) x = e_start with the one-step map
    :func:`_forward_step`, then plain steps x <- e_start + A^T x until the settled rate r of
    their changes bounds the remaining error, change r / (1 - r), by ``tol`` times the
    largest value (the engine's relative-change rule, :mod:`fsmlearn.algo.convergence`).

    Raises:
        NotConvergedError: ``max_steps`` matrix-vector products without meeting ``tol``.
        DivergenceError: the values grow without bound (c's mass does not end).
    """
    from scipy.sparse.linalg import LinearOperator, gmres

    from ...errors import DivergenceError, NotConvergedError
    import numba
    N = c.num_states
    P = max(1, numba.get_num_threads())
    bounds = balanced_cuts(np.asarray(c.src_start, np.float64) + np.asarray(ex_ptr, np.float64), P)
    b = np.zeros(N)
    b[c.start] = 1.0
    used = [0]
    ka, kx = _step_weights(c.src_start, c.ilabel, c.weight, phi_dst, phi_w, ex_ptr, ex_sid, sh_arc, sh_state)
    kp = np.where(phi_dst >= 0, np.exp(-phi_w), 0.0)

    def step(x):
        used[0] += 1
        return _forward_step(np.ascontiguousarray(x, np.float64), bounds, c.src_start, c.dst, ka, phi_dst, kp,
                             ex_ptr, ex_sid, sh_arc, kx)

    op = LinearOperator((N, N), matvec=lambda x: x - step(x), dtype=np.float64)
    x = b.copy()
    tiny = 16 * np.finfo(float).eps
    while used[0] < max_steps:
        x, _ = gmres(op, b, x0=x, rtol=tol * _GMRES_RTOL, atol=0.0, restart=_GMRES_RESTART,
                     maxiter=max(1, (max_steps - used[0]) // _GMRES_RESTART))
        _LAST_STEPS[0] = used[0]
        changes = []
        for _ in range(3):
            y = b + step(x)
            ch = float(np.max(np.abs(y - x)))
            top = float(np.max(np.abs(y)))
            x = y
            if not np.isfinite(ch) or top > 2.0 ** 1000:
                raise DivergenceError("the forward values of c grow without bound (its mass does not end)")
            changes.append(ch)
        if ch <= tiny * top:
            return x
        r = changes[-1] / changes[-2] if changes[-2] > 0 else 0.0
        if r < 1.0 and ch * r / (1.0 - r) <= tol * top:
            return x
    raise NotConvergedError(f"the forward values of c did not settle to {tol:g} in {max_steps} steps")


class TiedStructure:
    """c with its tag blocks: everything about cq that does not change in training.

    What n-gram EM's pass reads (:mod:`fsmlearn.algo.tied.sweep`), held once:

    Attributes:
        machine: c (log semiring, labels > 0 are words, phi arcs allowed).
        T: number of tags (index T is the sentence boundary).
        alpha: float64 [N] forward values of c (expected visits), solved once.
        wsrc, label_word: the word id (of the tagger's vocabulary) of word arc a is
            ``label_word[wsrc[a]]``: ``wsrc`` is c's own ``ilabel`` and ``label_word`` maps
            labels to words when one label always means one word (an LM), else ``wsrc`` is
            the int32 [E] word per arc and ``label_word`` the identity.
        wt_ptr, wt_tag: CSR of the tags each word allows (a block lists them in this order).
        ex_ptr, ex_sid: the exclusion arcs by state: state q's are
            ``ex_sid[ex_ptr[q]:ex_ptr[q+1]]`` (int32), each an entry of the table of
            shadowed arcs; the exclusion uses that arc's block and weighs minus q's backoff
            chain up to the arc's source times the arc.
        sh_arc, sh_state, sh_off: that table, in arc order: the arc (int64), its source
            (int32) and the offsets of its block entries in the table's own arrays
            (int64 [S+1]; the pass's boundary quantities live there).
        pair, pair_dst, pair_word, pair_off: the (word, destination) pairs of the word
            arcs: arc a's is ``pair[a]``, of destination ``pair_dst`` and word ``pair_word``,
            its tags' entries at ``pair_off`` (int64 [P+1]) in the pass's compact rows.  In a
            backoff LM each state is entered by one word, so the pairs are the states and
            ``pair`` is c's own ``dst``; otherwise int32 [E].
        fin_state, fin_k: int32 / float64 [Y] signed final events.
        phi_dst: int64 [N] backoff state of each state (-1 for none).
        phi_w: float64 [N] its phi arc's weight (-log); phi_k: exp(-phi_w).
        down: int64 [N] states by decreasing phi depth (longest histories first).
        num_params: K, the number of block entries (phi's length).
        solve_seconds: time spent solving alpha.
        kernel_index: kernels' indexes built for this structure, by part count
            (:func:`fsmlearn.algo.tied.objective.one_thread_index`).

    Built on first use, for the per-event kernels (:mod:`~fsmlearn.algo.tied.kernels`,
    the conditioned blocks, the device and the references) and not held otherwise:
    ``ev_src, ev_dst`` (int32 [X] the signed word events, sorted by source), ``ev_arc``
    (int64 [X] the arc whose block each uses), ``ev_k`` (float64 [X] their weights),
    ``arc_word`` (int32 [E], -1 off words), ``blk_start`` (int64 [E+1] each arc's block)
    and ``blk_tag`` (int32 [K] each entry's tag).
    """

    def __init__(self, *, machine, T, alpha, wsrc, label_word, wt_ptr, wt_tag, ex_ptr, ex_sid, sh_arc, sh_state,
                 sh_off, pair, pair_dst, pair_word, pair_off, fin_state, fin_k, phi_dst, phi_w, down, num_params,
                 solve_seconds=0.0):
        self.machine = machine
        self.T = int(T)
        self.alpha = alpha
        self.wsrc = wsrc
        self.label_word = label_word
        self.wt_ptr = wt_ptr
        self.wt_tag = wt_tag
        self.ex_ptr = ex_ptr
        self.ex_sid = ex_sid
        self.sh_arc = sh_arc
        self.sh_state = sh_state
        self.sh_off = sh_off
        self.pair = pair
        self.pair_dst = pair_dst
        self.pair_word = pair_word
        self.pair_off = pair_off
        self.fin_state = fin_state
        self.fin_k = fin_k
        self.phi_dst = phi_dst
        self.phi_w = phi_w
        self.phi_k = np.where(phi_dst >= 0, np.exp(-phi_w), 0.0)
        self.down = down
        self.num_params = int(num_params)
        self.solve_seconds = float(solve_seconds)
        self.kernel_index = {}

    @classmethod
    def build(cls, c: Machine, arc_word: np.ndarray, allowed: np.ndarray, *, alpha=None,
              tol: float = 1e-10, max_sweeps: int = 100_000, device: str = "cpu",
              system: str = "auto") -> "TiedStructure":
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
            system: "auto" reads the exclusion arcs off c and solves alpha without
                building the signed system's arrays (:func:`_solve_alpha`) when every
                state's labels ascend (a compiled LM's do) and the device is the CPU;
                "engine" builds the engine's signed system (:func:`fsmlearn.algo.phi.phi_structure`)
                and solves alpha with :func:`fsmlearn.algo.forward` (the reference).

        c's derived structures (the signed system the solve builds, its schedule) are
        dropped afterwards (:meth:`fsmlearn.fsm.machine.Machine.forget_cached`).

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
        wl = c.ilabel[words]
        ww = arc_word[words]
        bad = np.flatnonzero((ww < 0) | (ww >= V1))
        if bad.size:
            a = int(np.flatnonzero(words)[bad[0]])
            raise MachineError(f"arc {a} has word id {int(arc_word[a])}, outside [0, {V1})")
        label_word = np.full(int(wl.max()) + 1 if wl.size else 1, -1, np.int32)
        label_word[wl] = ww
        if np.array_equal(label_word[wl], ww):     # one word per label: read it off c's labels
            wsrc = c.ilabel
        else:
            wsrc = np.where(words, arc_word, 0).astype(np.int32)
            label_word = np.arange(V1, dtype=np.int32)
        wt_ptr = np.zeros(V1 + 1, np.int64)
        np.cumsum(allowed.sum(1), out=wt_ptr[1:])
        wt_tag = np.nonzero(allowed)[1].astype(np.int32)
        w_in, one = _entering_word(c.num_states, c.dst, c.ilabel, wsrc, label_word)
        if one:
            pair, pair_dst, pair_word = c.dst, np.arange(c.num_states, dtype=np.int32), w_in
        else:
            key = np.where(words, c.dst.astype(np.int64) * V1 + np.where(words, label_word[wsrc], 0), -1)
            uniq, inv = np.unique(key, return_inverse=True)
            first = int(uniq[0] < 0)
            pair = (inv - first).astype(np.int32)
            uniq = uniq[first:]
            pair_dst, pair_word = (uniq // V1).astype(np.int32), (uniq % V1).astype(np.int32)
            del key, uniq, inv
        pair_off = _pair_offsets(pair_word, wt_ptr)
        del wl, ww, words, w_in
        K, bad_arc = _block_sizes(c.ilabel, wsrc, label_word, wt_ptr)
        if bad_arc >= 0:
            w = int(label_word[wsrc[bad_arc]])
            raise MachineError(f"word id {w} (arc {bad_arc}) has no allowed tag")
        phi_dst, phi_w, two, ascending = _phi_arcs(c.src_start, c.ilabel, c.dst, c.weight, PHI)
        if two >= 0:
            raise MachineError(f"state {two} has more than one phi (failure) arc")
        _, order = phi_depths(phi_dst, c.num_states)
        if order.shape[0] < c.num_states:
            raise MachineError("the phi (failure) arcs of c form a cycle")
        t0 = time.time()
        if system not in ("auto", "engine"):
            raise MachineError(f"system must be 'auto' or 'engine', got {system!r}")
        lean = ascending and device == "cpu" and system == "auto"
        if lean:        # the signed system's exclusions read off c; alpha by a matrix-free solve
            n = _lean_exclusions(c.src_start, c.ilabel, phi_dst, False, np.empty(0, np.int32),
                                 np.empty(0, np.int64))
            tail, shadow = np.empty(n, np.int32), np.empty(n, np.int64)
            _lean_exclusions(c.src_start, c.ilabel, phi_dst, True, tail, shadow)
            fs, fk = _lean_finals(c.final, phi_dst, phi_w)
        else:
            ps = phi_structure(c, True)
            tail = ps.neg_tail
            shadow = _shadowed(ps.neg_ptr, ps.neg_chain)
            fs, fk = _final_events(c.final, ps.nf_state, ps.nf_final, ps.nf_ptr, ps.nf_chain, c.weight)
            del ps
        ex_ptr, ex_sid, sh_arc, sh_state, sh_off = _shadow_table(shadow, tail, c.num_states, c.ilabel, wsrc,
                                                                 label_word, wt_ptr, c.src_start)
        del shadow, tail
        if alpha is None:
            if lean:
                alpha = _solve_alpha(c, phi_dst, phi_w, ex_ptr, ex_sid, sh_arc, sh_state, tol, max_sweeps)
            else:
                alpha = np.exp(-forward(c, "log", tol=tol, max_sweeps=max_sweeps, device=device))
        alpha = np.asarray(alpha, np.float64)
        secs = time.time() - t0
        c.forget_cached()
        return cls(machine=c, T=T, alpha=alpha, wsrc=wsrc, label_word=label_word, wt_ptr=wt_ptr, wt_tag=wt_tag,
                   ex_ptr=ex_ptr, ex_sid=ex_sid, sh_arc=sh_arc, sh_state=sh_state, sh_off=sh_off, pair=pair,
                   pair_dst=pair_dst, pair_word=pair_word, pair_off=pair_off, fin_state=fs, fin_k=fk, phi_dst=phi_dst, phi_w=phi_w,
                   down=order[::-1].copy(), num_params=K, solve_seconds=secs)

    @property
    def num_exclusions(self) -> int:
        """The exclusion arcs of c's signed system (events that use another state's block)."""
        return int(self.ex_sid.shape[0])

    def uniform_phi(self) -> np.ndarray:
        """float64 [K]: uniform tag distributions in every block."""
        return _uniform(self.machine.ilabel, self.wsrc, self.label_word, self.wt_ptr, self.num_params)

    # ---- built on first use (the per-event kernels, the device, the references)
    @cached_property
    def _events(self):
        c = self.machine
        return _events_by_source(c.src_start, c.dst, c.ilabel, c.weight, self.ex_ptr, self.ex_sid, self.sh_arc,
                                 self.sh_state, self.phi_dst, self.phi_w)

    @property
    def ev_src(self) -> np.ndarray:
        return self._events[0]

    @property
    def ev_dst(self) -> np.ndarray:
        return self._events[1]

    @property
    def ev_arc(self) -> np.ndarray:
        return self._events[2]

    @property
    def ev_k(self) -> np.ndarray:
        return self._events[3]

    @cached_property
    def arc_word(self) -> np.ndarray:
        c = self.machine
        return np.where(c.ilabel > 0, self.label_word[np.where(c.ilabel > 0, self.wsrc, 0)], -1).astype(np.int32)

    @cached_property
    def blk_start(self) -> np.ndarray:
        aw = self.arc_word
        n = np.where(aw >= 0, np.diff(self.wt_ptr)[np.maximum(aw, 0)], 0)
        out = np.zeros(aw.shape[0] + 1, np.int64)
        np.cumsum(n, out=out[1:])
        return out

    @cached_property
    def blk_tag(self) -> np.ndarray:
        return _block_tags(self.arc_word, self.wt_ptr, self.wt_tag, self.blk_start)


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

"""n-gram EM (n_q = 1) on a CUDA device: the bound, its gradient and the variational-EM step.

The device twins of :mod:`fsmlearn.algo.tied.kernels`'s kernels, for Smith and
Eisner, "Unsupervised learning on an approximate corpus", sections 3.3-3.5
(formulas in :mod:`fsmlearn.algo.tied.objective`).  :class:`CudaCq` copies a
:class:`~fsmlearn.algo.tied.structure.TiedStructure` to the device once; phi,
alpha2, G, U and the block scores then stay there:

* ``alpha2[h, t] = [h = start, t = T] + sum_{e: dst = h} k_e alpha[src_e] phi[a_e, t]``
  (one thread per event, atomic adds), then ``P alpha2`` up the phi forest
  (one launch per depth, :func:`fsmlearn.algo.cuda.solve.forest_pass_rows`);
* ``G[h, t] = sum_{e: src = h} k_e phi[a_e, t]`` (+ the signed final weights
  in column T), one thread per state over its events (sorted by source);
* ``emit[t, w] = sum_a A[a] phi[a, t]`` over the arcs of word w, and the
  entropy ``sum_a A[a] H(phi[a, .])`` reduced on the device;
* ``trans = alpha2^T G``, reduced on the device over chunks of states;
* ``U = P^T S`` with ``S[h, t'] = sum_t G[h, t] log theta(t | t')``,
  ``M = alpha2 log theta``, the block scores
  ``B[j] = sum_e k_e (M[src_e, t] + alpha[src_e] (log theta(w | t) + U[dst_e, t]))``
  (one thread per arc over its events) and the parallel block update
  ``phi[a, .] = softmax(B[a, .] / A[a])`` (one thread per arc).

Only theta's M-step (normalising the [T+1, T+1] and [T, V+1] counts) and the
dot products of the bound run on the host.  Every function returns what its
CPU twin returns, to 1e-6 relative or better.

Public names: CudaCq, cuda_cq, expected_stats_cuda, phi_gradient_cuda,
d_bound_d_phi_cuda, estep_parallel_cuda.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from . import check_device
from . import kernels as K
from .solve import forest_levels, forest_pass_rows, launch, reduce_sum
from ..tied.objective import MIN_BLOCK_MASS, NEG_LOG, Stats, dot_log
from .product import row_times as _row_times_dev
from .product import _times_trans_rows as _row_times    # out[h] = X[h] @ L, one thread per state
from ..flow_arith import retarget
from ..tied.arith import arc_emit_entropy_py, block_scores_py, block_softmax_py, event_scatter_py
from ..tied.kernels import _arc_mass

__all__ = ["CudaCq", "cuda_cq", "expected_stats_cuda", "phi_gradient_cuda", "d_bound_d_phi_cuda",
           "estep_parallel_cuda"]

_CHUNK = 1024        # states per thread of the alpha2^T G reduction


# ------------------------------------------------------------------ kernels

@cuda.jit(device=True)
def _imin(a, b):
    """The smaller of a and b (the builtin min of two scalars does not compile on every numba.cuda)."""
    return a if a <= b else b


@cuda.jit
def _alpha2_scatter(A2, alpha, es, ed, ea, ek, blk_start, blk_tag, phi, start, T):
    """One thread per event: :func:`~fsmlearn.algo.tied.arith.event_scatter_py` into A2
    (atomically); thread 0 also adds the start's unit mass at (start, T)."""
    e = cuda.grid(1)
    if e == 0:
        cuda.atomic.add(A2, (start, T), 1.0)
    if e < es.shape[0]:
        _event_scatter(e, alpha, es, ed, ea, ek, blk_start, blk_tag, phi, A2)


@cuda.jit
def _state_tag_mass(G, ev_ptr, ea, ek, blk_start, blk_tag, phi, gfin, T):
    """G[h, :] = sum over h's events of ek[e] phi[block of e], G[h, T] += gfin[h] (one thread per state)."""
    h = cuda.grid(1)
    if h >= G.shape[0]:
        return
    for c in range(G.shape[1]):
        G[h, c] = 0.0
    for e in range(ev_ptr[h], ev_ptr[h + 1]):
        a = ea[e]
        k = ek[e]
        for j in range(blk_start[a], blk_start[a + 1]):
            G[h, blk_tag[j]] += k * phi[j]
    G[h, T] += gfin[h]


@cuda.jit
def _emit_entropy(emit_wt, ent, A, blk_start, blk_tag, phi, arc_word):
    """One thread per arc: :func:`~fsmlearn.algo.tied.arith.arc_emit_entropy_py` (emit_wt
    [V1, T] added to atomically; ent[a] the arc's entropy share)."""
    a = cuda.grid(1)
    if a < A.shape[0]:
        ent[a] = _arc_emit_entropy(a, A, blk_start, blk_tag, phi, arc_word, emit_wt)


@cuda.jit
def _trans_parts(A2, G, part):
    """part[c, t', t] = sum over states i of chunk c of A2[i, t'] G[i, t] (one thread per (c, t', t))."""
    x = cuda.grid(1)
    T1 = A2.shape[1]
    if x >= part.shape[0] * T1 * T1:
        return
    c = x // (T1 * T1)
    r = x % (T1 * T1)
    tp = r // T1
    t = r % T1
    lo = c * _CHUNK
    hi = _imin(lo + _CHUNK, A2.shape[0])
    acc = 0.0
    for i in range(lo, hi):
        acc += A2[i, tp] * G[i, t]
    part[c, tp, t] = acc


@cuda.jit
def _sum_parts(part, out):
    """out[t', t] = sum_c part[c, t', t] (one thread per (t', t))."""
    x = cuda.grid(1)
    T1 = out.shape[0]
    if x >= T1 * T1:
        return
    tp = x // T1
    t = x % T1
    acc = 0.0
    for c in range(part.shape[0]):
        acc += part[c, tp, t]
    out[tp, t] = acc


@cuda.jit
def _out_scores(G, logT, S):
    """S[h, t'] = sum_t G[h, t] logT[t', t] (one thread per state;
    :func:`fsmlearn.algo.product_entry.row_times_py`, transposed)."""
    h = cuda.grid(1)
    if h < G.shape[0]:
        _row_times_dev(G, h, logT, S, True, False)


@cuda.jit
def _block_scores(B, alpha, M, U, logE, es, ed, ek, blk_start, blk_tag, arc_word, ev_of_arc, arc_ev_ptr):
    """B[j] = sum over arc a's events e of ek[e] (M[src, t] + alpha[src] (logE[w, t] + U[dst, t]))
    for a's block entries j (one thread per arc)."""
    a = cuda.grid(1)
    if a >= arc_word.shape[0]:
        return
    for j in range(blk_start[a], blk_start[a + 1]):
        B[j] = 0.0
    _block_scores_arc(B, a, alpha, M, U, logE, es, ed, ek, blk_start, blk_tag, arc_word, ev_of_arc, arc_ev_ptr)


_block_softmax = cuda.jit(device=True)(block_softmax_py)


_arc_emit_entropy = cuda.jit(device=True)(retarget(arc_emit_entropy_py, _add2=K.atomic_add2))
_event_scatter = cuda.jit(device=True)(retarget(event_scatter_py, _add2=K.atomic_add2))
_block_scores_arc = cuda.jit(device=True)(block_scores_py)


@cuda.jit
def _softmax_blocks(out, A, B, blk_start, phi_old, min_mass):
    """out[a, .] = softmax(B[a, .] / A[a]); blocks with A[a] <= min_mass keep phi_old (one thread per arc)."""
    a = cuda.grid(1)
    if a >= A.shape[0]:
        return
    lo = blk_start[a]
    hi = blk_start[a + 1]
    for j in range(lo, hi):
        out[j] = phi_old[j]
    _block_softmax(out, A[a], B, lo, hi, min_mass)


@cuda.jit
def _phi_grad(out, A, B, phi, arc_of):
    """out[j] = B[j] - A[arc of j] (log phi[j] + 1) (-inf where phi[j] = 0 and A > 0)."""
    j = cuda.grid(1)
    if j >= out.shape[0]:
        return
    a = arc_of[j]
    q = phi[j]
    lp = math.log(q) if q > 0.0 else -math.inf
    out[j] = B[j] - A[a] * (lp + 1.0)


# ------------------------------------------------------------------ the device copy of cq

class CudaCq:
    """A :class:`~fsmlearn.algo.tied.structure.TiedStructure` on the device, with its kernels' indexes.

    Args:
        cs: the structure (copied once; training never changes it).

    Attributes:
        N, T, E, K: states, tags, arcs of c, block entries.
        V1: the vocabulary size the emission counts need (largest word id + 1).
    """

    def __init__(self, cs):
        check_device("cuda")
        self.cs = cs
        c = cs.machine
        self.N = c.num_states
        self.T = cs.T
        self.E = c.num_arcs
        self.K = cs.num_params
        self.start = int(c.start)
        to = cuda.to_device
        es = np.asarray(cs.ev_src, np.int64)
        self.es = to(es)
        self.ed = to(np.asarray(cs.ev_dst, np.int64))
        self.ea = to(np.asarray(cs.ev_arc, np.int64))
        self.ek = to(np.asarray(cs.ev_k, np.float64))
        self.alpha = to(np.asarray(cs.alpha, np.float64))
        self.blk_start = to(np.asarray(cs.blk_start, np.int64))
        self.blk_tag = to(np.asarray(cs.blk_tag, np.int64))
        self.arc_word = to(np.maximum(np.asarray(cs.arc_word, np.int64), 0))
        self.arc_of = to(np.repeat(np.arange(self.E, dtype=np.int64), np.diff(cs.blk_start)))
        # events by source state (TiedStructure lists them sorted by source)
        if es.size > 1 and np.any(np.diff(es) < 0):
            order = np.argsort(es, kind="stable")
        else:
            order = None
        self._src_order = order
        ev_ptr = np.zeros(self.N + 1, np.int64)
        np.cumsum(np.bincount(es, minlength=self.N), out=ev_ptr[1:])
        self.ev_ptr = to(ev_ptr)
        if order is not None:     # a private by-source copy for the G kernel
            self.ea_src = to(np.asarray(cs.ev_arc, np.int64)[order])
            self.ek_src = to(np.asarray(cs.ev_k, np.float64)[order])
        else:
            self.ea_src, self.ek_src = self.ea, self.ek
        gfin = np.zeros(self.N)
        np.add.at(gfin, np.asarray(cs.fin_state, np.int64), np.asarray(cs.fin_k, np.float64))
        self.gfin = to(gfin)
        # events by arc, and each arc's expected uses A[a] = sum_e k_e alpha[src_e]
        ev_of_arc = np.argsort(cs.ev_arc, kind="stable").astype(np.int64)
        arc_ev_ptr = np.zeros(self.E + 1, np.int64)
        np.cumsum(np.bincount(cs.ev_arc, minlength=self.E), out=arc_ev_ptr[1:])
        arc_mass = _arc_mass(cs.alpha, cs.ev_src, cs.ev_k, ev_of_arc, arc_ev_ptr)
        self.arc_mass_host = arc_mass
        self.arc_mass = to(arc_mass)
        self.ev_of_arc = to(ev_of_arc)
        self.arc_ev_ptr = to(arc_ev_ptr)
        self.forest = forest_levels(cs.phi_dst)
        self.phi_k = to(np.asarray(cs.phi_k, np.float64))
        aw = np.asarray(cs.arc_word)
        self.V1 = int(aw.max(initial=-1)) + 1

    # -- phi on and off the device
    def put(self, phi):
        """phi as a device array (host arrays are copied, device arrays passed through)."""
        if hasattr(phi, "copy_to_host"):      # a device array (real or simulated)
            return phi
        phi = np.ascontiguousarray(phi, np.float64)
        if phi.shape != (self.K,):
            from ...errors import ArgumentError
            raise ArgumentError(f"phi has shape {phi.shape}, expected ({self.K},)")
        return cuda.to_device(phi)

    # -- the sums
    def alpha2(self, phi_d):
        """Device float64 [N, T+1]: alpha2 (the forward mass per last tag, phi pass included)."""
        A2 = cuda.device_array((self.N, self.T + 1))
        launch(K.zero_rows, self.N, A2)
        launch(_alpha2_scatter, max(int(self.es.shape[0]), 1), A2, self.alpha, self.es, self.ed, self.ea, self.ek,
               self.blk_start, self.blk_tag, phi_d, self.start, self.T)
        forest_pass_rows(A2, self.forest, self.phi_k, False)
        return A2

    def state_tag_mass(self, phi_d):
        """Device float64 [N, T+1]: G (the tag mass of the events leaving each state)."""
        G = cuda.device_array((self.N, self.T + 1))
        launch(_state_tag_mass, self.N, G, self.ev_ptr, self.ea_src, self.ek_src, self.blk_start, self.blk_tag,
               phi_d, self.gfin, self.T)
        return G

    def emit_entropy(self, phi_d, V1):
        """(host float64 [T, V1] expected emissions, entropy E[-log q(t | w)])."""
        emit_wt = cuda.device_array((V1, self.T))
        launch(K.zero_rows, V1, emit_wt)
        ent = cuda.device_array(self.E)
        launch(_emit_entropy, self.E, emit_wt, ent, self.arc_mass, self.blk_start, self.blk_tag, phi_d,
               self.arc_word)
        return np.ascontiguousarray(emit_wt.copy_to_host().T), reduce_sum(ent)

    def trans(self, A2, G):
        """Host float64 [T+1, T+1]: alpha2^T G, reduced on the device."""
        T1 = self.T + 1
        nc = max((self.N + _CHUNK - 1) // _CHUNK, 1)
        part = cuda.device_array((nc, T1, T1))
        launch(_trans_parts, nc * T1 * T1, A2, G, part)
        out = cuda.device_array((T1, T1))
        launch(_sum_parts, T1 * T1, part, out)
        return out.copy_to_host()

    def expected_stats(self, phi, log_trans, log_emit) -> Stats:
        """The twin of :func:`fsmlearn.algo.tied.objective.expected_stats`; alpha2 and G stay on the device."""
        phi_d = self.put(phi)
        A2 = self.alpha2(phi_d)
        G = self.state_tag_mass(phi_d)
        emit, ent = self.emit_entropy(phi_d, log_emit.shape[1])
        trans = self.trans(A2, G)
        bound = dot_log(trans, log_trans) + dot_log(emit, log_emit) + ent
        return Stats(trans, emit, ent, bound, A2, G)

    def phi_gradient(self, phi, log_trans, log_emit, alpha2=None, G=None):
        """(A, B) on the device: the twin of :func:`fsmlearn.algo.tied.objective.phi_gradient`."""
        phi_d = self.put(phi)
        if alpha2 is None:
            alpha2 = self.alpha2(phi_d)
        if G is None:
            G = self.state_tag_mass(phi_d)
        lt = cuda.to_device(np.ascontiguousarray(np.maximum(log_trans, NEG_LOG)))
        le_wt = cuda.to_device(np.ascontiguousarray(np.maximum(log_emit, NEG_LOG).T))
        U = cuda.device_array((self.N, self.T + 1))
        launch(_out_scores, self.N, G, lt, U)
        forest_pass_rows(U, self.forest, self.phi_k, True)
        M = cuda.device_array((self.N, self.T + 1))
        launch(_row_times, self.N, alpha2, lt, M)
        B = cuda.device_array(self.K)
        launch(_block_scores, self.E, B, self.alpha, M, U, le_wt, self.es, self.ed, self.ek, self.blk_start,
               self.blk_tag, self.arc_word, self.ev_of_arc, self.arc_ev_ptr)
        return self.arc_mass, B

    def d_bound_d_phi(self, phi, log_trans, log_emit):
        """Host float64 [K]: the twin of :func:`fsmlearn.algo.tied.objective.d_bound_d_phi`."""
        phi_d = self.put(phi)
        A, B = self.phi_gradient(phi_d, log_trans, log_emit)
        out = cuda.device_array(self.K)
        launch(_phi_grad, self.K, out, A, B, phi_d, self.arc_of)
        return out.copy_to_host()

    def estep(self, phi, log_trans, log_emit, alpha2=None, G=None):
        """Device float64 [K]: one parallel block update (the twin of
        :func:`fsmlearn.algo.tied.objective.estep_parallel`)."""
        phi_d = self.put(phi)
        A, B = self.phi_gradient(phi_d, log_trans, log_emit, alpha2, G)
        out = cuda.device_array(self.K)
        launch(_softmax_blocks, self.E, out, A, B, self.blk_start, phi_d, MIN_BLOCK_MASS)
        return out


def cuda_cq(cs) -> CudaCq:
    """The device copy of ``cs`` (made once per structure, kept in ``cs.kernel_index``)."""
    d = cs.kernel_index.get("cuda")
    if d is None:
        d = cs.kernel_index["cuda"] = CudaCq(cs)
    return d


def expected_stats_cuda(cs, phi, log_trans, log_emit) -> Stats:
    """:func:`fsmlearn.algo.tied.objective.expected_stats` on the device (alpha2, G: device arrays)."""
    return cuda_cq(cs).expected_stats(phi, log_trans, log_emit)


def phi_gradient_cuda(cs, phi, log_trans, log_emit, alpha2=None, G=None):
    """(A [E], B [K]) as host arrays: :func:`fsmlearn.algo.tied.objective.phi_gradient` on the device."""
    A, B = cuda_cq(cs).phi_gradient(phi, log_trans, log_emit, alpha2, G)
    return A.copy_to_host(), B.copy_to_host()


def d_bound_d_phi_cuda(cs, phi, log_trans, log_emit) -> np.ndarray:
    """float64 [K]: :func:`fsmlearn.algo.tied.objective.d_bound_d_phi` on the device."""
    return cuda_cq(cs).d_bound_d_phi(phi, log_trans, log_emit)


def estep_parallel_cuda(cs, phi, log_trans, log_emit, alpha2=None, G=None) -> np.ndarray:
    """float64 [K] (host): :func:`fsmlearn.algo.tied.objective.estep_parallel` on the device."""
    return cuda_cq(cs).estep(phi, log_trans, log_emit, alpha2, G).copy_to_host()

"""Failure (phi) arcs with exact semantics.

A phi arc ``q -> q'`` is followed for a label ``x`` only when ``q`` has no arc
labelled ``x`` (Allauzen, Mohri and Roark 2003).  The final weight counts as a
label too when ``phi_final`` is true (the default, as ``</s>`` in a backoff
LM): a state with zero final weight takes its final weight through its phi
arc, and a state with its own final weight never stops through it.  Epsilon
arcs are always available and never excluded.

Sums over a phi machine's full distribution are linear in the real semiring,
so fsmlearn turns a phi machine into a *signed linear system*: its own arcs
(phi arcs included, as ordinary arcs) plus one *exclusion arc* per label that
``q`` has explicitly and that ``q``'s backoff chain would otherwise serve,
carrying minus the weight of that chain (``q -phi-> q' -phi-> ... -x->``),
and a final adjustment per state whose own final weight hides the chain's.
The forward and backward values of that system are exactly those of the
phi-free expansion (:func:`phi_expand`), at the size of the original machine
plus one arc per shadowed label, and every linear semiring (real, log,
expectation) runs on it unchanged.

Public names: PhiStructure, phi_structure, LinearSystem, linear_system,
label_index, phi_expand, phi_depths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import MachineError
from ..fsm.machine import EPSILON, PHI, Machine
from ._check import require_machine

_ERR_TWO_PHI, _ERR_CYCLE = 1, 2


@nb.njit(cache=True)
def _labels_sorted(src_start, ilabel):
    for s in range(src_start.shape[0] - 1):
        for a in range(src_start[s] + 1, src_start[s + 1]):
            if ilabel[a] < ilabel[a - 1]:
                return False
    return True


def label_index(m: Machine) -> np.ndarray:
    """int64 [E]: arc ids sorted by (source, input label), stable (cached)."""
    def build():
        if _labels_sorted(m.src_start, m.ilabel):
            return np.arange(m.num_arcs, dtype=np.int64)
        return np.lexsort((m.ilabel, m.arc_src)).astype(np.int64)
    return m.cached("label_index", build)


@nb.njit(cache=True)
def find_label(perm, ilabel, lo, hi, x):
    """First i in [lo, hi) with ilabel[perm[i]] >= x (perm sorted by label in range)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if ilabel[perm[mid]] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True)
def phi_walk(src_start, perm, ilabel, phi, dst, r, x, chain, L, limit):
    """Follow failure arcs from state r to the first state with arcs labelled x.

    Args:
        src_start, perm, ilabel, dst: the machine's CSR arrays, perm sorting each
            state's arcs by label (:func:`label_index`).
        phi: int64 [n] each state's phi arc (-1: none).
        r: the state to start from; x: the label.
        chain: int64 buffer: the phi arcs taken are written at chain[L], chain[L+1], ...
        L: where the next phi arc goes in ``chain``; limit: the most arcs a chain may
            hold before it counts as a cycle.

    Returns:
        (state, k, L): the state reached, ``k`` the index into ``perm`` of its first
        arc labelled x (-1 when the chain ends without one) and the chain's new
        length; L = -1 when the walk exceeds ``limit`` (a phi cycle).
    """
    while True:
        r0 = src_start[r]
        r1 = src_start[r + 1]
        k = find_label(perm, ilabel, r0, r1, x)
        if k < r1 and ilabel[perm[k]] == x:
            return r, k, L
        ar = phi[r]
        if ar == -1:
            return r, -1, L
        if L > limit:
            return r, -1, -1
        chain[L] = ar
        L += 1
        r = dst[ar]


@nb.njit(cache=True)
def _phi_of(src_start, ilabel):
    n = src_start.shape[0] - 1
    phi = np.full(n, -1, np.int64)
    for q in range(n):
        for a in range(src_start[q], src_start[q + 1]):
            if ilabel[a] == PHI:
                if phi[q] != -1:
                    return phi, q
                phi[q] = a
    return phi, -1


@nb.njit(cache=True)
def _phi_cycle(phi, dst):
    """A state on a cycle of phi arcs, or -1 (colouring walk, linear time)."""
    n = phi.shape[0]
    colour = np.zeros(n, np.int8)  # 0 new, 1 on the current walk, 2 done
    for q in range(n):
        if colour[q] != 0:
            continue
        r = q
        while r >= 0 and colour[r] == 0:
            colour[r] = 1
            r = dst[phi[r]] if phi[r] >= 0 else -1
        if r >= 0 and colour[r] == 1:
            return r
        r = q
        while r >= 0 and colour[r] == 1:
            colour[r] = 2
            r = dst[phi[r]] if phi[r] >= 0 else -1
    return -1


@nb.njit(cache=True)
def _exclusions(src_start, perm, ilabel, dst, has_final, phi, phi_final, fill,
                neg_tail, neg_head, neg_ptr, neg_chain, nf_state, nf_final, nf_ptr, nf_chain):
    """Count (fill=False) or write (fill=True) exclusion arcs and final adjustments."""
    n = src_start.shape[0] - 1
    chain = np.empty(n + 2, np.int64)
    nn = 0
    nc = 0
    nfn = 0
    nfc = 0
    if fill:
        neg_ptr[0] = 0
        nf_ptr[0] = 0
    for q in range(n):
        ap = phi[q]
        if ap == -1:
            continue
        q1 = dst[ap]
        lo = src_start[q]
        hi = src_start[q + 1]
        i = lo
        while i < hi:
            x = ilabel[perm[i]]
            j = i
            while j < hi and ilabel[perm[j]] == x:
                j += 1
            if x != EPSILON and x != PHI:
                chain[0] = ap
                r, k, L = phi_walk(src_start, perm, ilabel, phi, dst, q1, x, chain, 1, n)
                if L < 0:
                    return nn, nc, nfn, nfc, q, _ERR_CYCLE
                r1 = src_start[r + 1]
                while 0 <= k < r1 and ilabel[perm[k]] == x:
                    a2 = perm[k]
                    if fill:
                        neg_tail[nn] = q
                        neg_head[nn] = dst[a2]
                        for t in range(L):
                            neg_chain[nc + t] = chain[t]
                        neg_chain[nc + L] = a2
                        neg_ptr[nn + 1] = nc + L + 1
                    nn += 1
                    nc += L + 1
                    k += 1
            i = j
        # final weight
        if phi_final:
            if has_final[q]:
                r = q1
                chain[0] = ap
                L = 1
                while True:
                    if has_final[r]:
                        if fill:
                            nf_state[nfn] = q
                            nf_final[nfn] = r
                            for t in range(L):
                                nf_chain[nfc + t] = chain[t]
                            nf_ptr[nfn + 1] = nfc + L
                        nfn += 1
                        nfc += L
                        break
                    ar = phi[r]
                    if ar == -1:
                        break
                    if L > n:
                        return nn, nc, nfn, nfc, q, _ERR_CYCLE
                    chain[L] = ar
                    L += 1
                    r = dst[ar]
        elif has_final[q1]:
            if fill:
                nf_state[nfn] = q
                nf_final[nfn] = q1
                nf_chain[nfc] = ap
                nf_ptr[nfn + 1] = nfc + 1
            nfn += 1
            nfc += 1
    return nn, nc, nfn, nfc, -1, 0


@dataclass(frozen=True)
class PhiStructure:
    """The failure structure of a machine (see the module docstring).

    Attributes:
        phi_arc: int64 [N] the phi arc of each state, or -1.
        neg_tail, neg_head: int32 [X] exclusion arcs (state q, head state).
        neg_ptr, neg_chain: int64 CSR of each exclusion arc's chain of machine
            arcs (q's phi arc, further phi arcs, then the shadowed arc).
        nf_state, nf_final: int32 [Y] final adjustments: state q loses the
            chain's weight times the final weight of ``nf_final``.
        nf_ptr, nf_chain: int64 CSR of each adjustment's chain of phi arcs.
        phi_final: whether final weights fail over.
    """
    phi_arc: np.ndarray
    neg_tail: np.ndarray
    neg_head: np.ndarray
    neg_ptr: np.ndarray
    neg_chain: np.ndarray
    nf_state: np.ndarray
    nf_final: np.ndarray
    nf_ptr: np.ndarray
    nf_chain: np.ndarray
    phi_final: bool


def _final_nonzero(m: Machine) -> np.ndarray:
    return (m.final != 0.0) if m.semiring == "real" else (m.final != np.inf)


def phi_structure(m: Machine, phi_final: bool = True) -> PhiStructure:
    """The (cached) failure structure of ``m``.

    Raises:
        MachineError: a state with two phi arcs, or a cycle of phi arcs.
    """
    def build():
        phi, bad = _phi_of(m.src_start, m.ilabel)
        if bad >= 0:
            raise MachineError(f"state {bad} has more than one phi (failure) arc")
        q = _phi_cycle(phi, m.dst)
        if q >= 0:
            raise MachineError(f"the phi (failure) arcs from state {q} form a cycle")
        perm = label_index(m)
        hf = _final_nonzero(m)
        z32 = np.empty(0, np.int32)
        z64 = np.empty(0, np.int64)
        nn, nc, nfn, nfc, q, err = _exclusions(m.src_start, perm, m.ilabel, m.dst, hf, phi,
                                               phi_final, False, z32, z32, z64, z64, z32, z32, z64, z64)
        if err == _ERR_CYCLE:
            raise MachineError(f"the phi (failure) arcs from state {q} form a cycle")
        out = dict(neg_tail=np.empty(nn, np.int32), neg_head=np.empty(nn, np.int32),
                   neg_ptr=np.zeros(nn + 1, np.int64), neg_chain=np.empty(nc, np.int64),
                   nf_state=np.empty(nfn, np.int32), nf_final=np.empty(nfn, np.int32),
                   nf_ptr=np.zeros(nfn + 1, np.int64), nf_chain=np.empty(nfc, np.int64))
        _exclusions(m.src_start, perm, m.ilabel, m.dst, hf, phi, phi_final, True,
                    out["neg_tail"], out["neg_head"], out["neg_ptr"], out["neg_chain"],
                    out["nf_state"], out["nf_final"], out["nf_ptr"], out["nf_chain"])
        return PhiStructure(phi_arc=phi, phi_final=phi_final, **out)
    return m.cached(("phi_structure", bool(phi_final)), build)


@nb.njit(cache=True)
def _merge_csr(src_start, dst, neg_tail, neg_head):
    """CSR of machine arcs plus exclusion arcs (grouped by tail, in order)."""
    n = src_start.shape[0] - 1
    E = dst.shape[0]
    X = neg_tail.shape[0]
    start = np.zeros(n + 1, np.int64)
    for q in range(n):
        start[q + 1] = src_start[q + 1] - src_start[q]
    for i in range(X):
        start[neg_tail[i] + 1] += 1
    for q in range(n):
        start[q + 1] += start[q]
    sdst = np.empty(E + X, np.int32)
    ssrc = np.empty(E + X, np.int32)
    kind = np.empty(E + X, np.int8)
    ref = np.empty(E + X, np.int64)
    i = 0
    for q in range(n):
        p = start[q]
        for a in range(src_start[q], src_start[q + 1]):
            sdst[p] = dst[a]
            ssrc[p] = q
            kind[p] = 0
            ref[p] = a
            p += 1
        while i < X and neg_tail[i] == q:
            sdst[p] = neg_head[i]
            ssrc[p] = q
            kind[p] = 1
            ref[p] = i
            p += 1
            i += 1
    return start, ssrc, sdst, kind, ref


class LinearSystem:
    """The signed linear system of a phi machine (see the module docstring).

    Has the graph interface the schedules need (``num_states``, ``src_start``,
    ``arc_src``, ``dst``, ``cached``).  System arc ``i`` is machine arc
    ``ref[i]`` when ``kind[i] == 0`` and exclusion arc ``ref[i]`` otherwise.
    """

    def __init__(self, machine: Machine, phi: PhiStructure):
        self.phi = phi
        self.num_states = machine.num_states
        (self.src_start, self.arc_src, self.dst, self.kind, self.ref) = _merge_csr(
            machine.src_start, machine.dst, phi.neg_tail, phi.neg_head)
        self._cache = {}

    def cached(self, key, build):
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = build()
        return v


def linear_system(m: Machine, phi_final: bool = True) -> LinearSystem:
    """The (cached) signed linear system of a phi machine."""
    return m.cached(("linear_system", bool(phi_final)), lambda: LinearSystem(m, phi_structure(m, phi_final)))


def phi_expand(m: Machine, phi_final: bool = True) -> Machine:
    """The phi-free machine with the same weighted language (a reference).

    Each state gets, for every label its backoff chain offers and it lacks,
    a direct arc carrying the chain's phi weights; with ``phi_final`` a state
    without a final weight inherits the chain's.  Phi arcs are removed.  The
    result can be much larger than ``m`` (every state receives the labels of
    its whole chain); it is meant for checks and small machines.

    Raises:
        MachineError: two phi arcs at a state or a phi cycle.
        NotAMachineError: ``m`` is not a Machine.
    """
    require_machine(m, "phi_expand", "m")
    st = phi_structure(m, phi_final)
    phi = st.phi_arc
    w, f = m.neglog_weights()
    n = m.num_states
    src, dst, il, ol, wt = [], [], [], [], []
    final = np.array(f, dtype=np.float64)
    arc_src = m.arc_src
    keep = m.ilabel != PHI
    for q in range(n):
        lo, hi = int(m.src_start[q]), int(m.src_start[q + 1])
        own = set(int(x) for x in m.ilabel[lo:hi] if x != PHI and x != EPSILON)
        cost = 0.0
        r = q
        seen = 0
        has_final = final[q] != np.inf
        while phi[r] != -1:
            a = int(phi[r])
            cost += float(w[a])
            r = int(m.dst[a])
            seen += 1
            if seen > n:
                raise MachineError(f"the phi (failure) arcs from state {q} form a cycle")
            rlo, rhi = int(m.src_start[r]), int(m.src_start[r + 1])
            new = set()
            for b in range(rlo, rhi):
                x = int(m.ilabel[b])
                if x == PHI or x == EPSILON or x in own:
                    continue
                new.add(x)
                src.append(q)
                dst.append(int(m.dst[b]))
                il.append(x)
                ol.append(int(m.olabel[b]))
                wt.append(cost + float(w[b]))
            own |= new
            if phi_final and not has_final and f[r] != np.inf:
                final[q] = cost + float(f[r])
                has_final = True
    src = np.concatenate([arc_src[keep].astype(np.int64), np.asarray(src, np.int64)])
    dst_a = np.concatenate([m.dst[keep].astype(np.int64), np.asarray(dst, np.int64)])
    il_a = np.concatenate([m.ilabel[keep], np.asarray(il, np.int32)])
    ol_a = np.concatenate([m.olabel[keep], np.asarray(ol, np.int32)])
    wt_a = np.concatenate([w[keep], np.asarray(wt, np.float64)])
    semiring = "log" if m.semiring == "real" else m.semiring
    return Machine.from_arcs(n, m.start, final, src, dst_a, il_a, None if m.is_acceptor else ol_a,
                             wt_a, isyms=m.isyms, osyms=m.osyms, semiring=semiring)


@nb.njit(cache=True)
def phi_depths(phi_t, n):
    """Depth of each state in the phi forest (0 for states without a phi arc).

    Returns (depth, order): states sorted by increasing depth.
    """
    depth = np.full(n, -1, np.int64)
    for q in range(n):
        if depth[q] >= 0:
            continue
        # walk down to a known depth, then unwind
        path_len = 0
        r = q
        while depth[r] < 0 and phi_t[r] >= 0:
            path_len += 1
            r = phi_t[r]
            if path_len > n:
                return depth, np.empty(0, np.int64)
        base = depth[r] if depth[r] >= 0 else 0
        if depth[r] < 0:
            depth[r] = 0
        r = q
        d = base + path_len
        while depth[r] < 0:
            depth[r] = d
            d -= 1
            r = phi_t[r]
    order = np.argsort(depth, kind="mergesort")
    return depth, order

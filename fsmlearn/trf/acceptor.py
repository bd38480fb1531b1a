"""The feature acceptor of a TRF, and exact per-length normalisers by the engine.

A feature set with history span s (the farthest offset of its templates) compiles into a
deterministic acceptor whose states are the last s padded tokens: reading token a in state
h fires every template whose current token is a (history h), so the arc's weight is
-sum of lambda over those features (the machine's -log convention) and the final weight of
h is -sum over the features that fire on </s>.  The path weight of x is -lambda . f(x).

For small alphabets (characters) the acceptor is built explicitly.  Intersected with the
acceptor of strings of lengths 1..m (states = the length so far), the engine's forward
values give every Z_j(lambda) = sum_{x of length j} exp(lambda . f(x)) at once (equation 2),
and re-weighting the product's final states by pi_j / Z_j turns it into the TRF's joint
distribution p(j, x): its arc and final posteriors (forward-backward) are the exact
expected features sum_j pi_j E_{p_j}[f], the gradient of the log-likelihood (equation 6)
used by quasi-Newton training.  For word vocabularies the acceptor is never built: the
feature set's kernels walk it implicitly (``FeatureSet.scores``), and a test checks both
give the same path weight.

Public names: FeatureAcceptor, compile_acceptor, LengthProduct.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp

from ..algo import forward, forward_backward, intersect
from ..errors import ArgumentError
from ..fsm import Machine
from ..fsm.buffers import grow
from ..fsm.hashing import hash64, hash_lookup, same_rows
from .features import KIND_C, MAX_SLOTS, ID_BITS, FeatureSet

NONE = -1


@nb.njit(cache=True)
def _fire(w, at_eos, e, tid, length, offset, kind, cls, tkeys, tvals, mask, rows, cols, n):
    """Append (e, feature) for every row firing at the last position of window ``w`` (padded
    tokens, NONE before <s>; rows of length 1 do not fire on </s>); returns the count and
    the arrays (grown)."""
    s = w.shape[0] - 1
    for r in range(tid.shape[0]):
        L = length[r]
        if L == 1 and at_eos:
            continue
        k = tid[r]
        ok = True
        for q in range(L):
            tok = w[s + offset[r, q]]
            if tok == NONE:
                ok = False
                break
            k = (k << ID_BITS) | (cls[tok] if kind[r, q] == KIND_C else tok)
        if not ok:
            continue
        f = hash_lookup(tkeys, tvals, mask, k << (ID_BITS * (MAX_SLOTS - L)))
        if f >= 0:
            rows = grow(rows, n)
            cols = grow(cols, n)
            rows[n] = e
            cols[n] = f
            n += 1
    return n, rows, cols


@nb.njit(cache=True)
def _hist_slot(hist, q, span, table, mask):
    """The slot of history ``hist[q]`` in the open-addressing table of histories (the slot
    holding its state, or the empty slot where it goes)."""
    x = np.int64(0)
    for i in range(span):
        x = x * np.int64(1000003) + hist[q, i] + 2
    i = np.int64(hash64(x) & np.uint64(mask))
    while True:
        t = table[i]
        if t == -1 or same_rows(hist, t, q, span):
            return i
        i = (i + 1) & mask


@nb.njit(cache=True)
def _build(V, span, bos, eos, tid, length, offset, kind, cls, tkeys, tvals, mask, max_states):
    """The explicit acceptor, breadth first from the start history (states in the order they
    are found, each with one arc per token in token order): (N, hist [N, span] their padded
    histories, dst [N V], rows, cols of the
    arcs' features, frows, fcols of the finals', n, nf), N = -1 when it needs more than
    ``max_states`` states."""
    cap = 1
    while cap < 2 * max_states + 2:
        cap *= 2
    table = np.full(cap, -1, np.int64)
    tmask = np.int64(cap - 1)
    hist = np.empty((64, span), np.int64)
    for i in range(span - 1):
        hist[0, i] = NONE
    hist[0, span - 1] = bos
    table[_hist_slot(hist, 0, span, table, tmask)] = 0
    N = 1
    dst = np.empty(64, np.int64)
    rows = np.empty(64, np.int64)
    cols = np.empty(64, np.int64)
    frows = np.empty(64, np.int64)
    fcols = np.empty(64, np.int64)
    n = 0
    nf = 0
    w = np.empty(span + 1, np.int64)
    q = 0
    while q < N:
        for i in range(span):
            w[i] = hist[q, i]
        for a in range(V):
            w[span] = a
            e = q * V + a
            n, rows, cols = _fire(w, False, e, tid, length, offset, kind, cls, tkeys, tvals, mask, rows, cols, n)
            hist = grow(hist, N)
            for i in range(span):
                hist[N, i] = w[i + 1]
            slot = _hist_slot(hist, N, span, table, tmask)
            if table[slot] == -1:
                if N >= max_states:
                    return -1, hist, dst, rows, cols, frows, fcols, n, nf
                table[slot] = N
                N += 1
            dst = grow(dst, e)
            dst[e] = table[slot]
        w[span] = eos
        nf, frows, fcols = _fire(w, True, q, tid, length, offset, kind, cls, tkeys, tvals, mask, frows, fcols, nf)
        q += 1
    return N, hist, dst, rows, cols, frows, fcols, n, nf


class FeatureAcceptor:
    """The explicit feature acceptor of a feature set over a small alphabet.

    Attributes:
        features: the :class:`FeatureSet`.
        histories: int64 [N, span], the padded history of each state (NONE before <s>).
        machine: the acceptor with lambda = 0 (labels token + 1; every state has one arc per
            token, in label order, so the arc of state q on token a is q * V + a).
        arc_features: scipy CSR [E, d], the features each arc fires (with multiplicity).
        final_features: scipy CSR [N, d], the features each state's </s> fires.
    """

    def __init__(self, fs: FeatureSet, max_states: int = 200_000):
        V = fs.vocab_size
        span = max(fs.templates.span, 1)
        t = fs.templates
        N, hist, dst, rows, cols, frows, fcols, n, nf = _build(
            V, span, fs.bos, fs.eos, t.tid, t.length, t.offset, t.kind, np.asarray(fs.classes, np.int64),
            *fs.table, int(max_states))
        if N < 0:
            raise ArgumentError(f"TRF feature acceptor: more than {max_states} states "
                                f"(vocabulary {V}, span {span}); it is built for small alphabets")
        d = fs.num_features
        E = N * V
        self.features = fs
        self.histories = hist[:N].copy()
        self.arc_features = sp.csr_matrix((np.ones(n), (rows[:n], cols[:n])), shape=(E, d))
        self.final_features = sp.csr_matrix((np.ones(nf), (frows[:nf], fcols[:nf])), shape=(N, d))
        src = np.repeat(np.arange(N), V)
        labels = np.tile(np.arange(1, V + 1), N)
        self.machine = Machine.from_arcs(N, 0, np.zeros(N), src, dst[:E].copy(), labels, weight=np.zeros(E))

    @property
    def num_states(self) -> int:
        return self.machine.num_states

    def weighted(self, lam) -> Machine:
        """The acceptor with weights -lambda . (features fired), -log convention."""
        lam = np.asarray(lam, np.float64)
        return self.machine.replace(weight=-(self.arc_features @ lam), final=-(self.final_features @ lam))


def compile_acceptor(fs: FeatureSet, max_states: int = 200_000) -> FeatureAcceptor:
    """The explicit :class:`FeatureAcceptor` of ``fs`` (small alphabets only)."""
    return FeatureAcceptor(fs, max_states)


class LengthProduct:
    """The feature acceptor intersected with strings of lengths 1..m, by the engine.

    Attributes:
        acceptor: the :class:`FeatureAcceptor`.
        m: the largest length.
        machine: the product (lambda = 0); state q stands for (acceptor state, length).
        length: int64 [N], the length of each product state.
        arc_map: int64 [E], the acceptor arc of each product arc.
        state_map: int64 [N], the acceptor state of each product state.
    """

    def __init__(self, acc: FeatureAcceptor, m: int):
        if m < 1:
            raise ArgumentError(f"TRF length product: the largest length must be >= 1, got {m}")
        V = acc.features.vocab_size
        src = np.repeat(np.arange(m), V)
        lengths = Machine.from_arcs(m + 1, 0, np.r_[np.inf, np.zeros(m)], src, src + 1,
                                    np.tile(np.arange(1, V + 1), m), weight=np.zeros(m * V))
        prod, pairs = intersect(acc.machine, lengths, return_pairs=True)
        self.acceptor = acc
        self.m = int(m)
        self.machine = prod
        self.state_map = pairs[:, 0]
        self.length = pairs[:, 1]
        self.arc_map = self.state_map[prod.arc_src] * V + (prod.ilabel.astype(np.int64) - 1)

    def weighted(self, lam, final_shift=None) -> Machine:
        """The product with weights -lambda . f; ``final_shift`` [m+1] is added to the final
        weight of every state of each length (-log convention)."""
        acc = self.acceptor
        lam = np.asarray(lam, np.float64)
        aw = -(acc.arc_features @ lam)
        af = -(acc.final_features @ lam)
        final = af[self.state_map]
        final = np.where(self.length > 0, final, np.inf)
        if final_shift is not None:
            final = final + np.asarray(final_shift, np.float64)[self.length]
        return self.machine.replace(weight=aw[self.arc_map], final=final)

    def log_normalisers(self, lam) -> np.ndarray:
        """float64 [m+1]: ln Z_j(lambda) for j = 0..m (entry 0 is -inf: no empty sentences),
        from the engine's forward values on the product."""
        m = self.weighted(lam)
        alpha = forward(m, "log")
        tot = -(alpha + m.final)
        out = np.full(self.m + 1, -np.inf)
        ok = np.isfinite(tot)
        for j in range(1, self.m + 1):
            sel = ok & (self.length == j)
            if sel.any():
                v = tot[sel]
                mx = v.max()
                out[j] = mx + np.log(np.exp(v - mx).sum())
        return out

    def expected_features(self, lam, log_pi) -> tuple[np.ndarray, np.ndarray]:
        """(E [d], ln Z [m+1]): E = sum_j pi_j E_{p_j}[f] under lambda, exactly.

        Args:
            lam: float64 [d].
            log_pi: float64 [m+1], ln pi_j (entry 0 and lengths with pi_j = 0 at -inf).
        """
        logz = self.log_normalisers(lam)
        log_pi = np.asarray(log_pi, np.float64)
        ok = np.isfinite(log_pi) & np.isfinite(logz)
        shift = np.full(len(logz), np.inf)
        shift[ok] = logz[ok] - log_pi[ok]
        fb = forward_backward(self.weighted(lam, shift))
        acc = self.acceptor
        arc_post = np.bincount(self.arc_map, fb.posteriors, minlength=acc.machine.num_arcs)
        fin_post = np.bincount(self.state_map, fb.final_posteriors, minlength=acc.num_states)
        return acc.arc_features.T @ arc_post + acc.final_features.T @ fin_post, logz

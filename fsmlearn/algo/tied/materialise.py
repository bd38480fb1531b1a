"""cq as an explicit machine over (state, previous tag) pairs: n_q = 2, and references.

Smith and Eisner, "Unsupervised learning on an approximate corpus": with
n_q = 2 (one phi block per (arc, previous tag)) cq is materialised as a
machine over (state, tag) pairs and the engine's expectation-semiring forward
runs on it (:func:`materialise`, :func:`bound_materialised`,
:func:`stats_materialised`); with n_q = n_p the E-step can take phi from the
posteriors of the joint machine c * p_theta (:func:`joint_posterior_phi`),
which is the optimum when c is a union of straight-line sentences (an
ordinary corpus), so that n-gram EM reduces to EM.  The tests check the
n_q = 1 and conditioned computations against these machines.

Public names: materialise, bound_materialised, stats_materialised,
joint_posterior_phi.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..posteriors import expectation, forward_backward
from ...fsm.machine import PHI, Machine
from .objective import NEG_LOG
from .structure import TiedStructure

__all__ = ["materialise", "bound_materialised", "stats_materialised", "joint_posterior_phi"]


@nb.njit(cache=True)
def _product_arcs(arc_src, dst, ilabel, weight, final, arc_word, blk_start, blk_tag, phi2, log_trans, log_emit,
                  eos_label):
    """The materialised machine's arcs, counted then filled: (src, dst, label, weight, value,
    prev_tag, tag, word, entry), in c's arc order, then the end-of-sentence arcs."""
    T1 = log_trans.shape[0]
    T = T1 - 1
    N = final.shape[0]
    F = N * T1
    n = 0
    for a in range(ilabel.shape[0]):
        if ilabel[a] == PHI:
            n += T1
        else:
            for j in range(blk_start[a], blk_start[a + 1]):
                for tp in range(T1):
                    if phi2[j, tp] > 0.0:
                        n += 1
    for q in range(N):
        if final[q] != np.inf:
            n += T1
    src = np.empty(n, np.int64)
    dsts = np.empty(n, np.int64)
    lab = np.empty(n, np.int32)
    wt = np.empty(n)
    val = np.empty(n)
    prev = np.empty(n, np.int64)
    tag = np.empty(n, np.int64)
    word = np.empty(n, np.int64)
    entry = np.empty(n, np.int64)
    i = 0
    for a in range(ilabel.shape[0]):
        s = arc_src[a]
        d = dst[a]
        x = ilabel[a]
        if x == PHI:
            for tp in range(T1):
                src[i], dsts[i], lab[i], wt[i], val[i] = s * T1 + tp, d * T1 + tp, x, weight[a], 0.0
                prev[i], tag[i], word[i], entry[i] = -1, -1, -1, -1
                i += 1
            continue
        w = arc_word[a]
        for j in range(blk_start[a], blk_start[a + 1]):
            t = blk_tag[j]
            for tp in range(T1):
                p = phi2[j, tp]
                if p <= 0.0:
                    continue
                lp = math.log(p)
                src[i], dsts[i], lab[i], wt[i] = s * T1 + tp, d * T1 + t, x, weight[a] - lp
                val[i] = log_trans[tp, t] + log_emit[t, w] - lp
                prev[i], tag[i], word[i], entry[i] = tp, t, w, j
                i += 1
    for q in range(N):
        if final[q] == np.inf:
            continue
        for tp in range(T1):
            src[i], dsts[i], lab[i], wt[i], val[i] = q * T1 + tp, F, eos_label, final[q], log_trans[tp, T]
            prev[i], tag[i], word[i], entry[i] = tp, T, -1, -1
            i += 1
    return src, dsts, lab, wt, val, prev, tag, word, entry


def _materialise(cs: TiedStructure, phi2, log_trans, log_emit, eos_label=None):
    """(machine, values, prev_tag, tag, word, entry) per arc of the materialised cq.

    ``prev_tag``/``tag`` are -1 on phi arcs, ``tag`` is T on end-of-sentence
    arcs; ``word`` and ``entry`` (the phi block entry) are -1 where none.
    Builds K (T+1) arcs: meant for small machines (tests, references).
    """
    c = cs.machine
    T1 = cs.T + 1
    phi2 = np.asarray(phi2, np.float64)
    if phi2.ndim == 1:
        phi2 = np.repeat(phi2[:, None], T1, axis=1)
    if eos_label is None:
        eos_label = int(c.ilabel.max(initial=0)) + 1
    N = c.num_states
    F = N * T1
    src, dst, lab, wt, val, tp_, t_, w_, j_ = _product_arcs(
        np.asarray(c.arc_src, np.int64), np.asarray(c.dst, np.int64), np.asarray(c.ilabel, np.int32),
        np.asarray(c.weight, np.float64), np.asarray(c.final, np.float64), np.asarray(cs.arc_word, np.int64),
        np.asarray(cs.blk_start, np.int64), np.asarray(cs.blk_tag, np.int64), np.ascontiguousarray(phi2),
        np.ascontiguousarray(log_trans, np.float64), np.ascontiguousarray(log_emit, np.float64), int(eos_label))
    final = np.full(F + 1, np.inf)
    final[F] = 0.0
    m = Machine.from_arcs(F + 1, c.start * T1 + T1 - 1, final, src, dst, lab, weight=wt)
    # from_arcs sorts stably by source; carry the per-arc data along
    order = np.argsort(src, kind="stable")
    # log 0 (a transition theta forbids, e.g. from unreachable (state, start) pairs)
    # as a huge finite value, so that zero-mass paths contribute 0 * value = 0
    values = np.maximum(val[order], NEG_LOG)
    meta = [v[order] for v in (tp_, t_, w_, j_)]
    return (m, values, *meta)


def materialise(cs: TiedStructure, phi2: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray,
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


def bound_materialised(cs: TiedStructure, phi2, log_trans, log_emit) -> float:
    """The bound r by the engine's expectation-semiring relaxation on the materialised cq."""
    m, v = materialise(cs, phi2, log_trans, log_emit)
    return float(expectation(m, v, phi_final=False)[0])


def joint_posterior_phi(cs: TiedStructure, log_trans, log_emit) -> np.ndarray:
    """phi2 [K, T+1] (n_q = 2) from the posteriors of the joint machine c * p_theta.

    The joint machine is the materialised cq with phi = 1 and the HMM's
    transition and emission weights; phi[j, t'] is the posterior probability
    of tag t on arc a given the previous tag t', from the engine's
    forward-backward.  When c is a union of straight-line sentences this is
    p_theta(t_i | t_{i-1}, w), the optimum, and the bound equals the corpus
    log-likelihood.
    """
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


def stats_materialised(cs: TiedStructure, phi2, log_trans, log_emit):
    """(trans, emit, bound) for n_q = 2 from the engine's forward-backward on the materialised cq."""
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

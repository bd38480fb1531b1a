"""Dense first-order chains: the lattice of an HMM given as matrices, without building it.

A chain of length L over V labels is the layered acyclic machine with one
state per (position, label), arcs (i - 1, y') -> (i, y) for every pair,
weighted

    initial[y] + unary[0, y]                     (position 1, from the start state)
    transition[y', y] + unary[i - 1, y]          (positions i = 2 .. L)

and final weights ``final[y]`` on the last layer (all weights natural-log
scores, i.e. the negated weights of a log-semiring :class:`Machine`).  Such a
machine has L V^2 arcs: 500 labels make 250,000 arcs per position, which is
why this module works on the matrices instead.  It computes what the
engine's :func:`~fsmlearn.algo.forward_backward` and
:func:`~fsmlearn.algo.best_path` compute on that machine (the tests compare
them on small chains):

- ``semiring="log"``: the forward recursion alpha_i = (alpha_{i-1} T) * exp(unary_i)
  and the backward one beta_{i-1} = T (beta_i * exp(unary_i)) in the real semiring with
  one scale per position (Rabiner 1989, eq. 91-93), so that ln Z = sum of the log scales;
  position marginals p(y_i = y) = alpha_i[y] beta_i[y] / Z;
- ``semiring="tropical"``: the Viterbi recursion delta_i = max_y' (delta_{i-1}[y'] +
  transition[y', y]) + unary_i[y] with back-pointers: the best labelling and its score.

Many chains of the same length are done together (one matrix product per
position for the whole group).

Public names: ChainResult, chain_forward_backward, chain_best.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import ArgumentError

__all__ = ["ChainResult", "chain_forward_backward", "chain_best"]


@dataclass
class ChainResult:
    """Forward-backward over dense chains (log semiring).

    Attributes:
        log_partition: float64 [N], ln Z of each chain (-inf when it has no path of nonzero
            weight).
        marginals: list of float64 [L_n, V], p(y_i = y) for each chain (zeros when Z = 0).
    """
    log_partition: np.ndarray
    marginals: list


def _check(initial, transition, unaries, final):
    initial = np.asarray(initial, np.float64)
    transition = np.asarray(transition, np.float64)
    V = initial.size
    if initial.ndim != 1 or V == 0 or transition.shape != (V, V):
        raise ArgumentError(f"initial must be [V] and transition [V, V]; got {initial.shape} and "
                            f"{transition.shape}")
    final = np.zeros(V) if final is None else np.asarray(final, np.float64)
    if final.shape != (V,):
        raise ArgumentError(f"final must be [V] = [{V}]; got {final.shape}")
    us = []
    for k, u in enumerate(unaries):
        u = np.asarray(u, np.float64)
        if u.ndim != 2 or u.shape[1] != V or u.shape[0] == 0:
            raise ArgumentError(f"unary {k} has shape {u.shape}; expected [L >= 1, {V}]")
        us.append(u)
    for name, a in (("initial", initial), ("transition", transition), ("final", final)):
        if np.isnan(a).any() or (a == np.inf).any():
            raise ArgumentError(f"{name} holds NaN or +inf scores")
    return initial, transition, us, final


def _scaled_exp(a):
    """exp(a - max over the last axis) and the max (rows of -inf: zeros and -inf)."""
    m = a.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    return np.exp(a - m_safe), m_safe[..., 0], np.isfinite(m[..., 0])


def chain_forward_backward(initial, transition, unaries, final=None) -> ChainResult:
    """ln Z and position marginals of dense first-order chains (the log semiring).

    Args:
        initial: float64 [V], ln scores of y_1.
        transition: float64 [V, V], ln scores of y_{i-1} -> y_i (-inf: no arc).
        unaries: a list of float64 [L_n, V], per-position ln scores of each chain.
        final: float64 [V] ln scores of ending in y_L (default 0).

    Returns:
        :class:`ChainResult`.
    """
    initial, transition, unaries, final = _check(initial, transition, unaries, final)
    V = initial.size
    T, tmax, _ = _scaled_exp(transition.reshape(1, -1))        # one scale for the whole matrix
    T = T.reshape(V, V)
    tmax = float(tmax[0])
    log_partition = np.full(len(unaries), -np.inf)
    marginals = [np.zeros_like(u) for u in unaries]
    by_len: dict = {}
    for k, u in enumerate(unaries):
        by_len.setdefault(u.shape[0], []).append(k)
    fexp, fmax, fok = _scaled_exp(final.reshape(1, -1))
    for L, ks in by_len.items():
        U = np.stack([unaries[k] for k in ks])                  # [N, L, V]
        N = len(ks)
        Ue, umax, _ = _scaled_exp(U)                             # [N, L, V], [N, L]
        alpha = np.empty((N, L, V))
        logc = np.zeros((N, L))                                  # ln of each position's scale
        a0, a0max, _ = _scaled_exp(initial.reshape(1, -1))
        a = a0 * Ue[:, 0]
        s = a.sum(axis=1)
        dead = s <= 0
        s[dead] = 1.0
        alpha[:, 0] = a / s[:, None]
        logc[:, 0] = np.log(s) + a0max[0] + umax[:, 0]
        for i in range(1, L):
            a = (alpha[:, i - 1] @ T) * Ue[:, i]
            s = a.sum(axis=1)
            dead |= s <= 0
            s[s <= 0] = 1.0
            alpha[:, i] = a / s[:, None]
            logc[:, i] = np.log(s) + tmax + umax[:, i]
        zf = alpha[:, L - 1] @ fexp[0]
        dead |= zf <= 0
        lz = logc.sum(axis=1) + np.log(np.where(zf > 0, zf, 1.0)) + fmax[0]
        lz[dead | ~fok[0]] = -np.inf
        # backward, scaled by the forward scales (Rabiner's convention): alpha_i beta_i sums to one
        beta = np.empty((N, L, V))
        b = np.broadcast_to(fexp[0], (N, V)) / np.where(zf > 0, zf, 1.0)[:, None]
        beta[:, L - 1] = b
        for i in range(L - 1, 0, -1):
            b = ((beta[:, i] * Ue[:, i]) @ T.T) / np.exp(logc[:, i] - tmax - umax[:, i])[:, None]
            beta[:, i - 1] = b
        post = alpha * beta
        for j, k in enumerate(ks):
            log_partition[k] = lz[j]
            if np.isfinite(lz[j]):
                marginals[k] = post[j]
    return ChainResult(log_partition, marginals)


@nb.njit(cache=True)
def _viterbi(initial, transition, unary, final):
    L, V = unary.shape
    delta = initial + unary[0]
    bp = np.zeros((L, V), np.int64)
    for i in range(1, L):
        new = np.full(V, -np.inf)
        for y in range(V):
            best = -np.inf
            arg = 0
            for yp in range(V):
                v = delta[yp] + transition[yp, y]
                if v > best:
                    best = v
                    arg = yp
            new[y] = best + unary[i, y]
            bp[i, y] = arg
        delta = new
    delta = delta + final
    y = 0
    for k in range(V):
        if delta[k] > delta[y]:
            y = k
    score = delta[y]
    out = np.empty(L, np.int64)
    out[L - 1] = y
    for i in range(L - 1, 0, -1):
        y = bp[i, y]
        out[i - 1] = y
    return out, score


def chain_best(initial, transition, unary, final=None) -> tuple[np.ndarray, float]:
    """The best labelling of one dense chain (the tropical semiring) and its ln score.

    Args: as :func:`chain_forward_backward`, with one ``unary`` [L, V].

    Returns:
        (labels int64 [L], score); the score is -inf when no labelling has nonzero weight
        (the labels are then arbitrary).
    """
    initial, transition, (unary,), final = _check(initial, transition, [unary], final)
    labels, score = _viterbi(initial, transition, unary, final)
    return labels, float(score)

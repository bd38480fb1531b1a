"""cq as the engine's tagged product: the bound, expected counts and gradient from the
generic routines of :mod:`fsmlearn.algo.product`.

Smith and Eisner, "Unsupervised learning on an approximate corpus", sections
3.3-3.4.  The tagged approximate corpus c q_phi is the product of c (failure
arcs with exact semantics) with the blocks phi (one entry per allowed tag of
each word arc; [K] with n_q = 1, [K, T+1] conditioned on the previous tag with
n_q = 2) and no transition factor.  The bound (5),

    r = E_cq[ log p_theta(w, t) - log q_phi(t | w) ],

is the product's unnormalised expectation (c is a proper LM: Z = 1) of the values
``log theta(w_a | t) - log phi[j]`` on the entries and ``log theta(t | t')`` on the
transitions (column T: the end); the HMM's expected counts are the product's
posteriors (transitions; entries summed by (tag, word)); and d r / d phi is the
gradient of that expectation with the values held fixed (the expectation
semiring's second components, :func:`fsmlearn.algo.product_expectation_gradient`)
plus the derivative of the values ``-log phi[j]`` themselves.

The production path computes the same numbers with the specialised passes of
:mod:`fsmlearn.algo.tied.sweep` (c's forward values are fixed, blocks are
normalised, so the product's backward values are 1 and one pass suffices); the
tests check them against these routines, which are in turn checked against the
explicit product (:mod:`fsmlearn.algo.tied.materialise`) and finite differences.

Public names: cq_product, bound_product, stats_product, d_bound_d_phi_product,
block_update_product.
"""

from __future__ import annotations

import numpy as np

from ..product import (product_block_update, product_expectation, product_expectation_gradient,
                       product_posteriors, product_total, tag_product)
from .objective import NEG_LOG, Stats, dot_log
from .structure import TiedStructure

__all__ = ["cq_product", "bound_product", "stats_product", "d_bound_d_phi_product", "block_update_product"]


def cq_product(cs: TiedStructure, phi):
    """The engine's tagged product c x phi (phi: float64 [K], or [K, T+1] by previous tag)."""
    return tag_product(cs.machine, cs.T, cs.blk_start, cs.blk_tag, phi, None, phi_final=True)


def _entry_word(cs: TiedStructure) -> np.ndarray:
    """int [K]: the word of each block entry's arc."""
    return np.repeat(cs.arc_word, np.diff(cs.blk_start))


def _values(cs: TiedStructure, phi, log_trans, log_emit):
    """(entry values [K] or [K, T+1], transition values [T+1, T+1]): log theta(w | t) -
    log phi on the entries, log theta(t | t') on the transitions (log 0 clamped to NEG_LOG,
    as the passes do: a path of zero mass contributes 0)."""
    le = np.maximum(np.asarray(log_emit, np.float64), NEG_LOG)
    lt = np.maximum(np.asarray(log_trans, np.float64), NEG_LOG)
    phi = np.asarray(phi, np.float64)
    word = _entry_word(cs)
    with np.errstate(divide="ignore"):
        lp = np.maximum(np.log(phi), NEG_LOG)
    e = le[cs.blk_tag, word]
    return (e - lp if phi.ndim == 1 else e[:, None] - lp), lt


def bound_product(cs: TiedStructure, phi, log_trans, log_emit, **kw) -> float:
    """The bound r (5) by the engine's expectation over the product (``kw``: the solves'
    ``tol`` and ``max_sweeps``)."""
    ev, tv = _values(cs, phi, log_trans, log_emit)
    return product_expectation(cq_product(cs, phi), ev, tv, normalised=False, **kw)


def stats_product(cs: TiedStructure, phi, log_trans, log_emit) -> Stats:
    """(trans, emit, entropy, bound) from the engine's posteriors and expectation over the
    product (alpha2 and G are not part of the product's answer: None)."""
    p = cq_product(cs, phi)
    Z = product_total(p)
    post, trans, _ = product_posteriors(p, by_prev=False)
    post, trans = post * Z, trans * Z
    V = np.asarray(log_emit).shape[1]
    emit = np.zeros((cs.T, V))
    word = _entry_word(cs)
    np.add.at(emit, (cs.blk_tag, word), post)
    phi = np.asarray(phi, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = np.where(phi > 0, np.log(np.where(phi > 0, phi, 1.0)), 0.0)
    ent = -product_expectation(p, lp, None, normalised=False)
    lt = np.maximum(np.asarray(log_trans, np.float64), NEG_LOG)
    bound = dot_log(trans, lt) + dot_log(emit, np.maximum(np.asarray(log_emit, np.float64), NEG_LOG)) + ent
    return Stats(trans, emit, float(ent), float(bound), None, None)


def d_bound_d_phi_product(cs: TiedStructure, phi, log_trans, log_emit, **kw) -> np.ndarray:
    """d r / d phi (phi's shape): the gradient of the product's expectation with the values
    held fixed, plus that of the values -log phi (minus each entry's uses over phi)."""
    p = cq_product(cs, phi)
    ev, tv = _values(cs, phi, log_trans, log_emit)
    g = product_expectation_gradient(p, ev, tv, **kw)
    phi = np.asarray(phi, np.float64)
    post, _, _ = product_posteriors(p, by_prev=phi.ndim > 1, **kw)
    Z = product_total(p, **kw)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(phi > 0, post.reshape(phi.shape) * Z / np.where(phi > 0, phi, 1.0), 0.0)
    return g.reshape(phi.shape) - own


def block_update_product(cs: TiedStructure, phi, log_trans, log_emit, min_mass: float = 0.0, **kw) -> np.ndarray:
    """The parallel block update of phi (section 3.5) by the engine's generic
    :func:`fsmlearn.algo.product_block_update` on c x phi, with entry values
    log theta(w | t) and transition values log theta(t | t') (log 0 clamped to NEG_LOG, as
    the fused passes do)."""
    le = np.maximum(np.asarray(log_emit, np.float64), NEG_LOG)
    lt = np.maximum(np.asarray(log_trans, np.float64), NEG_LOG)
    ev = le[cs.blk_tag, _entry_word(cs)]
    return product_block_update(cq_product(cs, phi), ev, lt, min_mass=min_mass, **kw)

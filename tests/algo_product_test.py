"""The tagged product (fsmlearn.algo.product), never materialised, against the same product
built as an explicit machine and run through the engine's forward-backward and
expectation routines (which are checked against pynini elsewhere), and its gradients
against finite differences: cyclic backoff machines with failure arcs at three orders,
blocks independent of and conditioned on the previous tag, with and without a
transition factor, final weights failing over or not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import backoff_machine
from fsmlearn.algo import expectation, forward_backward, log_partition_gradient, phi_structure
from fsmlearn.algo.product import (product_backward, product_expectation, product_expectation_gradient,
                                   product_forward, product_log_partition_gradient, product_posteriors, product_total,
                                   tag_product)
from fsmlearn.errors import MachineError, SemiringError
from fsmlearn.fsm.machine import PHI, Machine


def _random_product(seed, T=3, by_prev=False, trans=True, V=3, p_final=0.4):
    rng = np.random.default_rng(seed)
    m = backoff_machine(rng, V=V, order=3, normalised=True, p_final=p_final)
    E = m.num_arcs
    n = np.where(m.ilabel == PHI, 0, rng.integers(1, T + 1, size=E))
    ptr = np.zeros(E + 1, np.int64)
    np.cumsum(n, out=ptr[1:])
    tags = np.concatenate([rng.choice(T, size=k, replace=False) for k in n]).astype(np.int64) if ptr[-1] else \
        np.zeros(0, np.int64)
    W = T + 1 if by_prev else 1
    w = rng.uniform(0.2, 1.0, size=(ptr[-1], W))
    for a in range(E):          # each block a distribution over its tags (m's total bounds the product's)
        if ptr[a + 1] > ptr[a]:
            w[ptr[a]:ptr[a + 1]] /= w[ptr[a]:ptr[a + 1]].sum(axis=0)
    H = rng.uniform(0.1, 1.0, size=(T + 1, T + 1)) if trans else None
    return m, T, ptr, tags, w, H


def _explicit(m, T, ptr, tags, w, H, ev=None, tv=None, fv=None):
    """The product as a machine over states q (T+1) + t' (negative-log weights), with each
    arc's value; final weights f(q) H[t', T] (their values: tv[t', T] + fv[q])."""
    T1 = T + 1
    Hm = np.ones((T1, T1)) if H is None else H
    src, dst, lab, wt, val, ent, prev = [], [], [], [], [], [], []
    for a in range(m.num_arcs):
        s, d, x = int(m.arc_src[a]), int(m.dst[a]), int(m.ilabel[a])
        if x == PHI:
            for tp in range(T1):
                src.append(s * T1 + tp), dst.append(d * T1 + tp), lab.append(x), wt.append(float(m.weight[a]))
                val.append(0.0), ent.append(-1), prev.append(tp)
            continue
        for j in range(ptr[a], ptr[a + 1]):
            t = int(tags[j])
            for tp in range(T1):
                p = w[j, 0 if w.shape[1] == 1 else tp] * Hm[tp, t]
                v = (0.0 if ev is None else ev[j, 0 if ev.shape[1] == 1 else tp]) + (0.0 if tv is None else tv[tp, t])
                src.append(s * T1 + tp), dst.append(d * T1 + t), lab.append(x)
                wt.append(float(m.weight[a]) - math.log(p) if p > 0 else math.inf)
                val.append(v), ent.append(j), prev.append(tp)
    N = m.num_states
    final = np.full(N * T1, np.inf)
    fval = np.zeros(N * T1)
    for q in range(N):
        if m.final[q] == np.inf:
            continue
        for tp in range(T1):
            final[q * T1 + tp] = float(m.final[q]) - math.log(Hm[tp, T])
    for q in range(N):
        for tp in range(T1):
            fval[q * T1 + tp] = (0.0 if tv is None else tv[tp, T]) + (0.0 if fv is None else fv[q])
    src = np.array(src, np.int64)
    order = np.argsort(src, kind="stable")
    x = Machine.from_arcs(N * T1, m.start * T1 + T, final, src, np.array(dst, np.int64),
                          np.array(lab, np.int32), weight=np.array(wt, np.float64))
    return x, np.array(val)[order], np.array(ent)[order], np.array(prev)[order], fval


CASES = [(s, by_prev, trans, pf) for s in (1, 2, 3) for by_prev in (False, True) for trans in (False, True)
         for pf in (True, False)]


@pytest.mark.parametrize("seed,by_prev,trans,phi_final", CASES)
def test_totals_and_posteriors_equal_the_explicit_product(seed, by_prev, trans, phi_final):
    m, T, ptr, tags, w, H = _random_product(seed, by_prev=by_prev, trans=trans)
    p = tag_product(m, T, ptr, tags, w, H, phi_final=phi_final)
    # the cases exercise failure arcs: exclusion arcs, and (with phi_final) final weights a
    # state's own final hides
    st = phi_structure(m, phi_final)
    assert st.neg_tail.size > 0
    assert st.nf_state.size > 0 or not phi_final
    x, _, ent, prev, _ = _explicit(m, T, ptr, tags, w, H)
    fb = forward_backward(x, phi_final=phi_final)
    Z = math.exp(-fb.cost)
    assert math.isclose(product_total(p), Z, rel_tol=1e-8)
    post, trans_c, ends = product_posteriors(p)
    # entries' uses by previous tag
    ref = np.zeros_like(post)
    keep = ent >= 0
    np.add.at(ref, (ent[keep], prev[keep]), fb.posteriors[keep])
    assert np.allclose(post, ref, rtol=1e-8, atol=1e-11)
    # transitions (t', t) cell by cell, and the ends: by previous tag and by the state whose
    # final weight is used (the explicit machine's final-weight gradient: -uses, log weights)
    T1 = T + 1
    ref_t = np.zeros((T1, T1))
    tag_of = np.where(ent >= 0, tags[np.maximum(ent, 0)], -1)
    np.add.at(ref_t, (prev[keep], tag_of[keep]), fb.posteriors[keep])
    use = -log_partition_gradient(x, phi_final=phi_final)[1].reshape(m.num_states, T1)
    ref_t[:, T] = use.sum(axis=0)
    assert np.allclose(trans_c, ref_t, rtol=1e-8, atol=1e-11)
    assert np.allclose(ends, use.sum(axis=1), rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("seed,by_prev,trans,phi_final", CASES)
def test_expectation_equals_the_engine_on_the_explicit_product(seed, by_prev, trans, phi_final):
    m, T, ptr, tags, w, H = _random_product(seed, by_prev=by_prev, trans=trans)
    rng = np.random.default_rng(seed + 100)
    ev = rng.normal(size=(ptr[-1], T + 1 if by_prev else 1))
    tv = rng.normal(size=(T + 1, T + 1))
    fv = rng.normal(size=m.num_states)
    p = tag_product(m, T, ptr, tags, w, H, phi_final=phi_final)
    x, val, _, _, fval = _explicit(m, T, ptr, tags, w, H, ev, tv, fv)
    # final values on the explicit product: of the state whose final weight is used
    ref = float(expectation(x, val, fval, phi_final=phi_final)[0])
    got = product_expectation(p, ev, tv, fv)
    assert math.isclose(got, ref, rel_tol=1e-8, abs_tol=1e-10)
    # each kind of value alone
    for kw, args in (({"entry_values": ev}, (ev, None, None)), ({"trans_values": tv}, (None, tv, None)),
                     ({"final_values": fv}, (None, None, fv))):
        x, val, _, _, fval = _explicit(m, T, ptr, tags, w, H, *args)
        ref = float(expectation(x, val, fval, phi_final=phi_final)[0])
        assert math.isclose(product_expectation(p, **kw), ref, rel_tol=1e-8, abs_tol=1e-10)


def _fd(f, x, eps=1e-5):
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = f()
        flat[i] = old - eps
        dn = f()
        flat[i] = old
        gf[i] = (up - dn) / (2 * eps)
    return g


@pytest.mark.parametrize("seed,by_prev,trans,phi_final,ev_prev",
                         [(4, False, True, True, False), (4, True, True, True, True), (5, False, False, True, True),
                          (5, True, True, False, False), (6, False, True, False, True)])
def test_gradients_equal_finite_differences(seed, by_prev, trans, phi_final, ev_prev):
    m, T, ptr, tags, w, H = _random_product(seed, T=2, by_prev=by_prev, trans=trans, V=2)
    rng = np.random.default_rng(seed + 7)
    ev = rng.normal(size=(ptr[-1], T + 1 if ev_prev else 1))
    tv = rng.normal(size=(T + 1, T + 1))
    fv = rng.normal(size=m.num_states)

    def prod():
        return tag_product(m, T, ptr, tags, w, H, phi_final=phi_final)

    tol = 1e-14     # the solves' stopping rule: values to about this, differences (eps 1e-5) to 1e-9
    gw, gt = product_log_partition_gradient(prod(), tol=tol)
    assert np.allclose(gw, _fd(lambda: math.log(product_total(prod(), tol=tol)), w), rtol=1e-5, atol=1e-7)
    if trans:
        assert np.allclose(gt, _fd(lambda: math.log(product_total(prod(), tol=tol)), H), rtol=1e-5, atol=1e-7)
    g = product_expectation_gradient(prod(), ev, tv, fv, tol=tol)
    num = _fd(lambda: product_expectation(prod(), ev, tv, fv, normalised=False, tol=tol), w)
    assert np.allclose(g, num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("seed,phi_final", [(1, True), (2, False), (3, True)])
def test_the_reduced_schedule_equals_the_products_system(seed, phi_final):
    """Without H and with blocks independent of the previous tag the engine solves over m's
    states and applies the blocks once; the answers are those of the product's system."""
    m, T, ptr, tags, w, H = _random_product(seed, by_prev=False, trans=False)
    rng = np.random.default_rng(seed + 50)
    ev = rng.normal(size=(ptr[-1], T + 1))
    tv = rng.normal(size=(T + 1, T + 1))
    fv = rng.normal(size=m.num_states)
    a = tag_product(m, T, ptr, tags, w, None, phi_final=phi_final)
    g = tag_product(m, T, ptr, tags, w, None, phi_final=phi_final, schedule="general")
    for f in (product_forward, product_backward):
        xa, ia = f(a)
        xg, ig = f(g)
        assert np.allclose(xa, xg, rtol=1e-9, atol=1e-12)
    for ra, rg in zip(product_posteriors(a), product_posteriors(g)):
        assert np.allclose(ra, rg, rtol=1e-9, atol=1e-12)
    assert math.isclose(product_expectation(a, ev, tv, fv), product_expectation(g, ev, tv, fv), rel_tol=1e-9)
    assert np.allclose(product_expectation_gradient(a, ev, tv, fv), product_expectation_gradient(g, ev, tv, fv),
                       rtol=1e-8, atol=1e-10)


def test_bad_arguments_are_named():
    m, T, ptr, tags, w, H = _random_product(1)
    with pytest.raises(SemiringError, match="blk_ptr"):
        tag_product(m, T, ptr[:-1], tags, w, H)
    with pytest.raises(SemiringError, match="blk_tag must lie"):
        tag_product(m, T, ptr, tags + T, w, H)
    with pytest.raises(SemiringError, match="non-negative"):
        tag_product(m, T, ptr, tags, -w, H)
    with pytest.raises(SemiringError, match="trans must have shape"):
        tag_product(m, T, ptr, tags, w, np.ones((2, 2)))
    with pytest.raises(MachineError, match="epsilon"):
        tag_product(m.replace(ilabel=np.where(m.ilabel == m.ilabel.max(), 0, m.ilabel).astype(m.ilabel.dtype)),
                    T, ptr, tags, w, H)
    p = tag_product(m, T, ptr, tags, w, H)
    with pytest.raises(SemiringError, match="entry_values"):
        product_expectation(p, np.ones(3))

"""Helpers of the n-gram EM tests: tiny backoff machines, random theta and phi, brute-force
enumeration of c's strings and their taggings."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from conftest import backoff_machine
from fsmlearn.fsm import PHI
from fsmlearn.algo.tied.structure import TiedStructure


def random_theta(rng, T, V, allowed):
    lt = np.log(rng.dirichlet(np.ones(T + 1), size=T + 1))
    le = np.log(rng.dirichlet(np.ones(V + 1), size=T))
    return lt, np.where(allowed.T, le, -np.inf)


def random_phi(rng, cs):
    phi = cs.uniform_phi() * rng.uniform(0.3, 1.7, cs.num_params)
    arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
    z = np.zeros(cs.machine.num_arcs)
    np.add.at(z, arc_of, phi)
    return phi / z[arc_of]


def tiny(seed, V=2, T=2, p_final=0.75):
    rng = np.random.default_rng(seed)
    c = backoff_machine(rng, V=V, order=3, normalised=True, p_final=p_final)
    allowed = np.ones((V + 1, T), bool)
    allowed[0, T - 1] = False          # word 0 (label 1) may not take the last tag
    cs = TiedStructure.build(c, np.maximum(c.ilabel - 1, 0), allowed)
    lt, le = random_theta(rng, T, V, allowed)
    return rng, c, cs, allowed, lt, le


# -------------------------------------------------------------- brute force
def walk(c, word_labels):
    """(probability, arcs used per word) of a string under failure semantics."""
    q = c.start
    p = 1.0
    arcs = []
    for x in word_labels:
        while True:
            lo, hi = c.src_start[q], c.src_start[q + 1]
            hit = [a for a in range(lo, hi) if c.ilabel[a] == x]
            if hit:
                a = hit[0]
                p *= math.exp(-c.weight[a])
                arcs.append(a)
                q = c.dst[a]
                break
            phi = [a for a in range(lo, hi) if c.ilabel[a] == PHI]
            if not phi:
                return 0.0, None
            p *= math.exp(-c.weight[phi[0]])
            q = c.dst[phi[0]]
    while c.final[q] == np.inf:
        lo, hi = c.src_start[q], c.src_start[q + 1]
        phi = [a for a in range(lo, hi) if c.ilabel[a] == PHI]
        if not phi:
            return 0.0, None
        p *= math.exp(-c.weight[phi[0]])
        q = c.dst[phi[0]]
    return p * math.exp(-c.final[q]), arcs


def strings(c, V, mass_left=1e-9, max_len=40):
    """All strings by increasing length until the unenumerated mass is below mass_left."""
    out = []
    total = 0.0
    for n in range(max_len + 1):
        for w in itertools.product(range(1, V + 1), repeat=n):
            p, arcs = walk(c, w)
            if p > 0:
                out.append((w, p, arcs))
                total += p
        if 1.0 - total < mass_left:
            return out, total
    raise AssertionError(f"mass left {1 - total} after length {max_len}")


def per_string(cs, w, arcs, phi, lt, le, T):
    """(E_q[log p - log q], log sum_t p(w, t)) for one string, by dense formulas."""
    n = len(w)
    Q = np.zeros((n, T))
    for i, a in enumerate(arcs):
        for j in range(cs.blk_start[a], cs.blk_start[a + 1]):
            Q[i, cs.blk_tag[j]] = phi[j]
    words = [x - 1 for x in w]
    LT = np.where(np.isfinite(lt), lt, -1e300)
    LE = np.where(np.isfinite(le), le, -1e300)
    with np.errstate(divide="ignore"):
        logQ = np.where(Q > 0, np.log(np.where(Q > 0, Q, 1)), 0.0)
    if n == 0:
        val = lt[T, T]
        ll = lt[T, T]
        return val, ll
    val = float((Q[0] * LT[T, :T]).sum())
    for i in range(1, n):
        val += float(Q[i - 1] @ LT[:T, :T] @ Q[i])
    val += float((Q[-1] * LT[:T, T]).sum())
    for i in range(n):
        val += float((Q[i] * (LE[:, words[i]] - logQ[i])).sum())
    # exact log-likelihood: by enumeration of taggings for short strings, else
    # by the dense HMM forward recursion (checked against enumeration below)
    P = np.exp(lt)
    Em = np.exp(le)
    f = P[T, :T] * Em[:, words[0]]
    for i in range(1, n):
        f = (f @ P[:T, :T]) * Em[:, words[i]]
    ll = math.log(float(f @ P[:T, T]))
    if n <= 4:
        tot = 0.0
        for tags in itertools.product(range(T), repeat=n):
            lp = lt[T, tags[0]] + lt[tags[-1], T]
            for i in range(n):
                lp += le[tags[i], words[i]]
                if i:
                    lp += lt[tags[i - 1], tags[i]]
            tot += math.exp(lp) if np.isfinite(lp) else 0.0
        assert math.log(tot) == pytest.approx(ll, abs=1e-12)
    return val, ll


_STRINGS = {}


def brute(cs, c, V, T, phi, lt, le):
    key = id(c)
    if key not in _STRINGS:
        _STRINGS[key] = (c, strings(c, V, mass_left=1e-11))
    S, total = _STRINGS[key][1]
    bound = 0.0
    ll = 0.0
    brute.tail = 1.0 - total
    for w, p, arcs in S:
        v, l = per_string(cs, w, arcs, phi, lt, le, T)
        bound += p * v
        ll += p * l
    return bound, ll


def random_phi2(rng, cs, cb):
    phi2 = cb.uniform(cs) * rng.uniform(0.3, 1.7, (cb.K2, cs.T + 1))
    for a in np.flatnonzero(cb.crow >= 0):
        r, n = cb.crow[a], cs.blk_start[a + 1] - cs.blk_start[a]
        phi2[r:r + n] /= phi2[r:r + n].sum(0)
    return phi2

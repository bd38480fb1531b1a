"""Random machines shared by the tests, the benchmarks and the warm step (layer 3, beside algo/).

Public names: random_machine, backoff_machine.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..fsm.machine import PHI, Machine

__all__ = ["random_machine", "backoff_machine"]


def random_machine(rng, n, E, cyclic=True, mass=0.9, labels=5, semiring="log", arc_type=None):
    """A random machine in which each state's arcs carry ``mass`` and its final weight the rest."""
    if cyclic:
        src = rng.integers(0, n, E)
        dst = rng.integers(0, n, E)
    else:
        src = rng.integers(0, n - 1, E)
        dst = src + 1 + rng.integers(0, n - 1 - src)
    w = rng.random(E) + 0.05
    tot = np.bincount(src, w, minlength=n)
    p = mass * w / tot[src]
    final = np.full(n, 1 - mass)
    final[tot == 0] = 1.0
    if semiring == "real":
        return Machine.from_arcs(n, 0, final, src, dst, rng.integers(1, labels + 1, E), weight=p,
                                 semiring="real")
    return Machine.from_arcs(n, 0, -np.log(final), src, dst, rng.integers(1, labels + 1, E),
                             weight=-np.log(p), semiring=semiring, arc_type=arc_type)


def backoff_machine(rng, V=4, order=3, keep=0.6, normalised=True, p_final=None):
    """A random backoff acceptor with failure arcs (histories of length < order).

    ``p_final`` gives every history that final probability (short strings).
    With ``normalised`` the weights are those of a proper backoff model: each
    history's own events plus its phi arc's share give a distribution whose
    failure-semantics total is 1 (phi weight = leftover / leftover of the
    backoff history restricted to the labels the history lacks).
    """
    hist = [()]
    for L in range(1, order):
        hist += [h for h in itertools.product(range(1, V + 1), repeat=L) if rng.random() < keep]
    idx = {h: i for i, h in enumerate(hist)}

    def back(h):
        h = h[1:]
        while h not in idx:
            h = h[1:]
        return h

    # probabilities of own events (labels, final) per history
    own = {}
    for h in hist:
        labels = list(range(1, V + 1)) if h == () else [x for x in range(1, V + 1) if rng.random() < 0.5]
        has_final = h == () or rng.random() < 0.5
        if h != () and len(labels) == V and has_final:
            has_final = False  # leave the backoff history something to serve
        if p_final is not None:
            has_final = True
            if h != () and len(labels) == V:
                labels = labels[:-1]  # leave the backoff history something to serve
        k = len(labels) + (1 if has_final else 0)
        p = rng.dirichlet(np.ones(k + (1 if h != () else 0)))
        if p_final is not None:  # the final event gets p_final, the rest shares 1 - p_final
            p = np.insert(np.delete(p, len(labels)) * (1 - p_final) / np.delete(p, len(labels)).sum(),
                          len(labels), p_final)
        own[h] = (labels, has_final, p)

    # effective distribution of each history over events (label or 'F'), by failure semantics
    eff = {}

    def dist(h):
        if h in eff:
            return eff[h]
        labels, has_final, p = own[h]
        d = {x: p[i] for i, x in enumerate(labels)}
        if has_final:
            d["F"] = p[len(labels)]
        if h != ():
            left = 1.0 - sum(d.values())
            lower = dist(back(h))
            avail = {e: q for e, q in lower.items() if e not in d}
            z = sum(avail.values())
            alpha = left / z if normalised else left
            for e, q in avail.items():
                d[e] = alpha * q
            own[h] = (labels, has_final, p, alpha)
        eff[h] = d
        return d

    for h in hist:
        dist(h)
    src, dst, lab, w = [], [], [], []
    final = np.full(len(hist), np.inf)
    for h in hist:
        q = idx[h]
        labels, has_final, p = own[h][:3]
        for i, x in enumerate(labels):
            nh = (h + (x,))[-(order - 1):] if order > 1 else ()
            while nh not in idx:
                nh = nh[1:]
            src.append(q)
            dst.append(idx[nh])
            lab.append(x)
            w.append(-math.log(p[i]))
        if has_final:
            final[q] = -math.log(p[len(labels)])
        if h != ():
            src.append(q)
            dst.append(idx[back(h)])
            lab.append(PHI)
            w.append(-math.log(own[h][3]))
    return Machine.from_arcs(len(hist), idx[()], final, src, dst, lab, weight=w)

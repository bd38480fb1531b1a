"""Layer 3 (beside algo/): helpers shared by the tests and benchmarks: exact OpenFst references.

``pynini.shortestdistance`` returns weights rebuilt from short decimal strings
(9 significant digits, measured: up to 5e-9 relative error on log64 values),
too coarse for a 1e-9 comparison.  :func:`openfst_distances` therefore reads
OpenFst's shortest distances at full precision: ``pynini.push`` runs the same
``ShortestDistance`` and, with every final weight set to one and
``reweight_type="to_final"``, leaves each state's distance in its final weight,
which the binary reader decodes exactly.  Backward distances are the forward
distances of ``pynini.reverse(fst)``, whose state ``q + 1`` is state ``q``.

Public names: openfst_distances, pynini_distances.
"""

from __future__ import annotations

import numpy as np

from ..fsm.openfst_io import decode_vector_fst


def openfst_distances(fst, reverse: bool = False, delta: float = 1e-12) -> np.ndarray:
    """OpenFst's shortest distances of every state, float64, exact.

    Args:
        fst: a pynini FST (log64 for 1e-9 comparisons).
        reverse: backward distances (final weights included).
        delta: OpenFst's convergence threshold.

    Returns:
        float64 [N], negative logs, +inf for unreachable states.
    """
    import pynini
    n = fst.num_states()
    g = pynini.reverse(fst) if reverse else fst.copy()
    one = pynini.Weight.one(g.weight_type())
    for q in range(g.num_states()):
        g.set_final(q, one)
    p = pynini.push(g, delta=delta, push_weights=True, reweight_type="to_final")
    final = decode_vector_fst(p.write_to_string())["final"]
    return final[1:n + 1].copy() if reverse else final[:n].copy()


def pynini_distances(fst, reverse: bool = False, delta: float = 1e-12) -> np.ndarray:
    """``pynini.shortestdistance`` as a float64 array (9-digit precision).

    Unreached trailing states (OpenFst returns a shorter list) get +inf.
    """
    import pynini
    dist = pynini.shortestdistance(fst, delta=delta, reverse=reverse)
    n = fst.num_states()
    scratch = pynini.Fst(arc_type=fst.arc_type())
    scratch.add_states(n)
    for i, w in enumerate(dist):
        if i < n:
            scratch.set_final(i, w)
    return decode_vector_fst(scratch.write_to_string())["final"]


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for a chi-square variable with ``df`` degrees of freedom.

    The regularised upper incomplete gamma function Q(df/2, x/2), by its
    series or continued fraction (Press et al., Numerical Recipes, 6.2).
    """
    import math
    if x <= 0:
        return 1.0
    a = df / 2.0
    z = x / 2.0
    gln = math.lgamma(a)
    if z < a + 1.0:
        term = 1.0 / a
        total = term
        ap = a
        for _ in range(10000):
            ap += 1.0
            term *= z / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-z + a * math.log(z) - gln))
    b = z + 1.0 - a
    c = 1.0 / 1e-300
    d = 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return math.exp(-z + a * math.log(z) - gln) * h


def enumerate_paths(m, max_len: int = 60, min_weight: float = 0.0, pruned: list | None = None):
    """All accepting paths of a small machine, by depth-first enumeration.

    Yields (arcs, real_weight) with the final weight included; a prefix is
    abandoned when longer than ``max_len`` or lighter than ``min_weight``
    (real weights: ``exp(-w)`` for negative-log machines), and its weight is
    added to ``pruned[0]`` when a list is given (to bound what was left out).
    Phi arcs are treated as ordinary arcs (use on phi-free machines).
    """
    import math
    w, f = m.neglog_weights()
    if m.start < 0:
        return
    stack = [(m.start, (), 1.0)]
    while stack:
        s, arcs, p = stack.pop()
        if f[s] != math.inf:
            yield arcs, p * math.exp(-f[s])
        for a in range(int(m.src_start[s]), int(m.src_start[s + 1])):
            q = p * math.exp(-w[a])
            if q > min_weight and len(arcs) < max_len:
                stack.append((int(m.dst[a]), arcs + (a,), q))
            elif pruned is not None:
                pruned[0] += q

"""Helpers shared by the tests and benchmarks: exact OpenFst references.

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

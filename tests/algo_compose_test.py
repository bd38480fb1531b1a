"""compose / intersect with ``return_pairs``: the state pairs behind the product's states."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import backoff_machine, random_machine
from fsmlearn.algo import compose, intersect, phi_expand


def _same_machine(m1, m2):
    assert m1.num_states == m2.num_states and m1.start == m2.start
    for name in ("src_start", "dst", "ilabel", "olabel", "weight", "final"):
        assert np.array_equal(getattr(m1, name), getattr(m2, name)), name


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("connect", [True, False])
def test_pairs_name_the_states_each_product_arc_joins(seed, connect):
    rng = np.random.default_rng(seed)
    a = random_machine(rng, 5, 12, cyclic=bool(seed % 2), labels=4)
    b = backoff_machine(rng, V=4, order=3, normalised=bool(seed % 2))
    plain = compose(a, b, connect=connect)
    m, pairs = compose(a, b, connect=connect, return_pairs=True)
    _same_machine(m, plain)
    assert pairs.shape == (m.num_states, 2) and pairs.dtype == np.int64
    assert tuple(pairs[m.start]) == (a.start, b.start)
    # every product arc follows an arc of a between the pair's a-states, with its label, and
    # lands in a b-state that b's phi-free expansion reaches from the source's b-state on it
    e = phi_expand(b)
    src = m.arc_src
    for k in range(m.num_arcs):
        qa, qb = pairs[src[k]]
        da, db = pairs[m.dst[k]]
        arcs_a = range(a.src_start[qa], a.src_start[qa + 1])
        assert any(a.dst[x] == da and a.ilabel[x] == m.ilabel[k] for x in arcs_a)
        arcs_b = range(e.src_start[qb], e.src_start[qb + 1])
        assert any(e.dst[y] == db and e.ilabel[y] == a.olabel[next(
            x for x in arcs_a if a.dst[x] == da and a.ilabel[x] == m.ilabel[k])] for y in arcs_b)
    # a state's final weight is the sum of its pair's final weights
    fa, fb = a.neglog_weights()[1], e.neglog_weights()[1]
    assert np.allclose(m.final, fa[pairs[:, 0]] + fb[pairs[:, 1]])


def test_intersect_passes_the_pairs_through():
    rng = np.random.default_rng(3)
    a = random_machine(rng, 4, 9, labels=3)
    b = random_machine(rng, 3, 7, labels=3)
    m, pairs = intersect(a, b, return_pairs=True)
    _same_machine(m, intersect(a, b))
    assert pairs.shape == (m.num_states, 2)

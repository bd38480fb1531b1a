"""Dense first-order chains (fsmlearn.algo.chain) against the engine on the explicit lattice."""

import numpy as np
import pytest

from fsmlearn.algo import best_path, forward_backward
from fsmlearn.algo.chain import chain_best, chain_forward_backward
from fsmlearn.errors import ArgumentError
from fsmlearn.fsm.machine import Machine


def lattice(initial, transition, unary, final):
    """The chain as a log-semiring machine: state 0 the start, 1 + (i - 1) V + y for y_i = y."""
    L, V = unary.shape
    src, dst, lab, wt = [], [], [], []
    for y in range(V):
        src.append(0), dst.append(1 + y), lab.append(y + 1), wt.append(-(initial[y] + unary[0, y]))
    for i in range(1, L):
        for yp in range(V):
            for y in range(V):
                w = transition[yp, y] + unary[i, y]
                if np.isfinite(w):
                    src.append(1 + (i - 1) * V + yp), dst.append(1 + i * V + y), lab.append(y + 1)
                    wt.append(-w)
    n = 1 + L * V
    fin = np.full(n, np.inf)
    fin[1 + (L - 1) * V:] = -final
    m = Machine.from_arcs(n, 0, fin, np.array(src), np.array(dst), np.array(lab, np.int32),
                          weight=np.array(wt), semiring="log")
    return m


def engine_marginals(m, L, V):
    fb = forward_backward(m)
    out = np.zeros((L, V))
    pos = (m.arc_src - 1) // V + 1
    pos[m.arc_src == 0] = 0
    np.add.at(out, (pos, m.ilabel - 1), fb.posteriors)
    return fb.log_partition, out


@pytest.mark.parametrize("seed", range(6))
def test_forward_backward_matches_the_engine(seed):
    rng = np.random.default_rng(seed)
    V = int(rng.integers(1, 6))
    init = rng.normal(size=V) * 3
    trans = rng.normal(size=(V, V)) * 3
    if V > 1:
        trans[0, 1] = -np.inf                    # a missing arc
    final = rng.normal(size=V)
    us = [rng.normal(size=(int(rng.integers(1, 6)), V)) * 4 - 300 for _ in range(4)]   # far from 1
    us.append(us[0] + 1.0)                       # two chains of the same length, one group
    res = chain_forward_backward(init, trans, us, final)
    for k, u in enumerate(us):
        lz, marg = engine_marginals(lattice(init, trans, u, final), *u.shape)
        assert abs(res.log_partition[k] - lz) < 1e-9 * max(1, abs(lz))
        assert np.abs(res.marginals[k] - marg).max() < 1e-9
        assert np.allclose(res.marginals[k].sum(axis=1), 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_best_matches_the_engine(seed):
    rng = np.random.default_rng(100 + seed)
    V, L = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    init, trans, final = rng.normal(size=V), rng.normal(size=(V, V)), rng.normal(size=V)
    u = rng.normal(size=(L, V))
    labels, score = chain_best(init, trans, u, final)
    p = best_path(lattice(init, trans, u, final))
    assert abs(score + p.weight) < 1e-9
    assert list(labels) == [int(x) - 1 for x in p.ilabels]


def test_zero_weight_chain():
    trans = np.full((2, 2), -np.inf)             # no transitions at all: length-2 chains have Z = 0
    res = chain_forward_backward(np.zeros(2), trans, [np.zeros((2, 2)), np.zeros((1, 2))])
    assert res.log_partition[0] == -np.inf and not res.marginals[0].any()
    assert abs(res.log_partition[1] - np.log(2)) < 1e-12


def test_bad_shapes_are_argument_errors():
    with pytest.raises(ArgumentError, match="transition"):
        chain_forward_backward(np.zeros(2), np.zeros((3, 3)), [np.zeros((1, 2))])
    with pytest.raises(ArgumentError, match="unary 0"):
        chain_forward_backward(np.zeros(2), np.zeros((2, 2)), [np.zeros((1, 3))])
    with pytest.raises(ArgumentError, match="NaN"):
        chain_best(np.array([0.0, np.nan]), np.zeros((2, 2)), np.zeros((1, 2)))

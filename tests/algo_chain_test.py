"""The dense-chain schedule (fsmlearn.algo.chain) against the generic engine on the
chains written out arc by arc (ChainBatch.materialise), and against a hand-built lattice."""

import numpy as np
import pytest

from fsmlearn.algo import (arc_posteriors, best_path, entropy, expectation, forward, forward_backward,
                           sample_paths, total_weight)
from fsmlearn.algo.chain import (ChainForwardBackward, ChainPaths, chain_best_paths, chain_forward_backward,
                                 chain_total_weight)
from fsmlearn.errors import ArgumentError, NoAcceptingPathError, NotAMachineError, SemiringError
from fsmlearn.fsm import ChainBatch
from fsmlearn.fsm.machine import Machine


def random_chains(rng, semiring, V=None, sparse_T=0.2, max_len=7, scale=1.0):
    """A random ChainBatch: R rows of distinct labels, S chains (some empty), random weights
    (probabilities, or costs scaled by ``scale``)."""
    V = V or int(rng.integers(1, 6))
    R = int(rng.integers(1, 5))
    rows = [np.sort(rng.choice(V, int(rng.integers(1, V + 1)), replace=False)) for _ in range(R)]
    row_ptr = np.zeros(R + 1, np.int64)
    row_ptr[1:] = np.cumsum([len(x) for x in rows])
    lab = np.concatenate(rows).astype(np.int32)
    S = int(rng.integers(1, 5))
    ptr = np.zeros(S + 1, np.int64)
    ptr[1:] = np.cumsum(rng.integers(0, max_len, S))
    pos = rng.integers(0, R, ptr[-1])
    T = rng.random((V + 1, V + 1))
    T[rng.random((V + 1, V + 1)) < sparse_T] = 0.0
    w = rng.random(lab.size) + 1e-3
    if semiring == "log":
        with np.errstate(divide="ignore"):
            T, w = -np.log(T) * scale, -np.log(w) * scale
    return ChainBatch(ptr, pos, row_ptr, lab, w, T, semiring)


def generic(cb):
    """The generic engine's answers on the materialised chains: (cost [S], transition
    posteriors [V+1, V+1], entry posteriors [nnz], node posteriors [nodes])."""
    mb, arc_trans, arc_entry, final_trans = cb.materialise()
    fb = forward_backward(mb, allow_empty=True)
    V1 = cb.num_labels + 1
    TP = np.bincount(arc_trans, fb.posteriors, minlength=V1 * V1).astype(float)
    has = final_trans >= 0
    TP += np.bincount(final_trans[has], fb.final_posteriors[has], minlength=V1 * V1)
    EP = np.bincount(arc_entry, fb.posteriors, minlength=cb.row_label.size).astype(float)
    # node n of position i is state start(s) + 1 + (n - node_ptr[ptr[s]])
    sp = np.bincount(mb.machine.dst, fb.posteriors, minlength=mb.machine.num_states)
    chain_of = np.repeat(np.arange(len(cb)), np.diff(cb.ptr))
    node_pos = np.repeat(np.arange(cb.num_positions), np.diff(cb.node_ptr))
    chain_of_node = chain_of[node_pos]
    state = mb.state_ptr[chain_of_node] + 1 + np.arange(cb.num_nodes) - cb.node_ptr[cb.ptr[chain_of_node]]
    return np.asarray(fb.cost), TP.reshape(V1, V1), EP, sp[state], mb


def same_cost(a, b, tol=1e-10):
    assert (np.isinf(a) == np.isinf(b)).all(), (a, b)
    f = np.isfinite(a)
    assert np.all(np.abs(a[f] - b[f]) <= tol * np.maximum(1.0, np.abs(b[f]))), (a, b)


def agrees_with_the_generic_engine(cb):
    """chain_forward_backward's costs and posteriors against :func:`generic`'s; (result, cost)."""
    res = chain_forward_backward(cb, allow_empty=True)
    cost, TP, EP, NP, _ = generic(cb)
    same_cost(res.cost, cost)
    assert np.abs(res.transition_posteriors - TP).max() <= 1e-9
    assert np.abs(res.entry_posteriors - EP).max() <= 1e-9
    assert np.abs(res.node_posteriors - NP).max() <= 1e-9
    return res, cost


@pytest.mark.parametrize("semiring", ["log", "real"])
@pytest.mark.parametrize("seed", range(12))
def test_forward_backward_matches_the_generic_engine(semiring, seed):
    rng = np.random.default_rng(seed)
    cb = random_chains(rng, semiring, scale=40.0)
    res, cost = agrees_with_the_generic_engine(cb)
    # every live chain uses one start and one end transition
    live = np.isfinite(res.cost).sum()
    V = cb.num_labels
    assert abs(res.transition_posteriors[V].sum() - live) <= 1e-9 * max(live, 1)
    assert abs(res.transition_posteriors[:, V].sum() - live) <= 1e-9 * max(live, 1)
    same_cost(chain_total_weight(cb), cost)
    same_cost(total_weight(cb), cost)


@pytest.mark.parametrize("semiring", ["log", "real"])
@pytest.mark.parametrize("seed", range(8))
def test_best_paths_match_the_generic_engine(semiring, seed):
    rng = np.random.default_rng(1000 + seed)
    cb = random_chains(rng, semiring)
    paths = chain_best_paths(cb, allow_empty=True)
    mb = cb.materialise()[0]
    same_cost(total_weight(cb, "tropical"), paths.cost)
    for s in range(len(cb)):
        seg = slice(cb.ptr[s], cb.ptr[s + 1])
        if np.isinf(paths.cost[s]):
            assert (paths.labels[seg] == -1).all()
            with pytest.raises(NoAcceptingPathError):
                best_path(mb[s])
            continue
        p = best_path(mb[s])
        assert abs(p.weight - paths.cost[s]) <= 1e-9 * max(1.0, abs(p.weight))
        assert list(p.olabels - 1) == list(paths.labels[seg])          # random weights: no ties
        assert (cb.row_label[paths.entries[seg]] == paths.labels[seg]).all()
        assert (paths.entries[seg] >= cb.row_ptr[cb.pos_row[seg]]).all()
        assert (paths.entries[seg] < cb.row_ptr[cb.pos_row[seg] + 1]).all()


def test_long_chains_far_from_one():
    """3,000 positions of costs near 300 each: Z = e^-900,000, far below what a double holds;
    the scaled recursions agree with the generic engine's scaled rows."""
    rng = np.random.default_rng(7)
    V, N = 4, 3000
    T = rng.random((V + 1, V + 1)) * 3
    row_ptr = np.arange(N + 1, dtype=np.int64) * V
    w = 300 + rng.random(N * V) * 5
    cb = ChainBatch([0, N], np.arange(N), row_ptr, np.tile(np.arange(V, dtype=np.int32), N), w, T, "log")
    res = chain_forward_backward(cb)
    cost, TP, EP, NP, _ = generic(cb)
    same_cost(res.cost, cost, 1e-11)
    assert res.cost[0] > 9e5
    assert np.abs(res.entry_posteriors - EP).max() <= 1e-9
    assert np.abs(res.node_posteriors.reshape(N, V).sum(axis=1) - 1).max() <= 1e-9


def lattice(initial, transition, unary, final):
    """One dense chain as a log-semiring machine built by hand: state 0 the start,
    1 + (i - 1) V + y for y_i = y (natural-log scores)."""
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
    return Machine.from_arcs(n, 0, fin, np.array(src), np.array(dst), np.array(lab, np.int32),
                             weight=np.array(wt), semiring="log")


@pytest.mark.parametrize("seed", range(4))
def test_dense_chains_match_a_hand_built_lattice(seed):
    rng = np.random.default_rng(200 + seed)
    V = int(rng.integers(1, 6))
    init, trans, final = rng.normal(size=V) * 3, rng.normal(size=(V, V)) * 3, rng.normal(size=V)
    if V > 1:
        trans[0, 1] = -np.inf                    # a missing arc
    us = [rng.normal(size=(int(rng.integers(1, 6)), V)) * 4 - 300 for _ in range(3)]
    cb = ChainBatch.dense(init, trans, us, final)
    res = forward_backward(cb)
    assert isinstance(res, ChainForwardBackward)
    paths = best_path(cb)
    assert isinstance(paths, ChainPaths)
    for k, u in enumerate(us):
        m = lattice(init, trans, u, final)
        fb = forward_backward(m)
        assert abs(res.log_partition[k] - fb.log_partition) <= 1e-9 * max(1, abs(fb.log_partition))
        marg = np.zeros(u.shape)
        pos = (m.arc_src - 1) // V + 1
        pos[m.arc_src == 0] = 0
        np.add.at(marg, (pos, m.ilabel - 1), fb.posteriors)
        nodes = res.node_posteriors[cb.node_ptr[cb.ptr[k]]:cb.node_ptr[cb.ptr[k + 1]]].reshape(u.shape)
        assert np.abs(nodes - marg).max() <= 1e-9
        p = best_path(m)
        assert abs(paths.cost[k] - p.weight) <= 1e-9 * max(1, abs(p.weight))
        assert list(paths.labels[cb.ptr[k]:cb.ptr[k + 1]]) == [int(x) - 1 for x in p.ilabels]


def test_chains_without_a_path():
    # no transition between the labels at all: chains of two positions have Z = 0
    T = np.zeros((3, 3))
    T[2, :2] = 1.0
    T[:2, 2] = 1.0
    cb = ChainBatch([0, 2, 3, 3], [0, 0, 0], [0, 2], [0, 1], [0.5, 0.25], T, "real")
    with pytest.raises(NoAcceptingPathError, match=r"chain 0 \(positions 0..1\).*2 chains have none"):
        chain_forward_backward(cb)
    with pytest.raises(NoAcceptingPathError, match="chain 0"):
        chain_best_paths(cb)
    res = chain_forward_backward(cb, allow_empty=True)
    assert res.cost[0] == np.inf and res.cost[2] == np.inf            # the empty chain: T[V, V] = 0
    assert abs(res.cost[1] + np.log(0.75)) < 1e-12
    assert not res.node_posteriors[:4].any()
    assert abs(res.transition_posteriors.sum() - 2.0) < 1e-12         # chain 1: a start and an end
    paths = chain_best_paths(cb, allow_empty=True)
    assert list(paths.labels) == [-1, -1, 0] and abs(paths.cost[1] + np.log(0.5)) < 1e-12


def test_add_to_sums_over_batches():
    rng = np.random.default_rng(3)
    cb = random_chains(rng, "real", V=4, sparse_T=0.0)
    whole = chain_forward_backward(cb)
    V1 = cb.num_labels + 1
    TP, EP = np.zeros((V1, V1)), np.zeros(cb.row_label.size)
    halves = [ChainBatch(cb.ptr[a:b + 1] - cb.ptr[a], cb.pos_row[cb.ptr[a]:cb.ptr[b]], cb.row_ptr, cb.row_label,
                         cb.row_weight, cb.transition, "real") for a, b in ((0, 1), (1, len(cb)))]
    for h in halves:
        out = chain_forward_backward(h, node_posteriors=False, add_to=(TP, EP))
        assert out.transition_posteriors is TP and out.node_posteriors is None
    assert np.abs(TP - whole.transition_posteriors).max() <= 1e-12 * max(1, len(cb))
    assert np.abs(EP - whole.entry_posteriors).max() <= 1e-12 * max(1, len(cb))
    with pytest.raises(ArgumentError, match=r"add_to's entries must be a writable C-contiguous float64"):
        chain_forward_backward(cb, add_to=(TP, np.zeros(3)))


def test_construction_errors_name_the_value():
    T = np.ones((3, 3))
    ok = dict(ptr=[0, 1], pos_row=[0], row_ptr=[0, 2], row_label=[0, 1], row_weight=[1.0, 1.0], transition=T)
    ChainBatch(**ok, semiring="real")
    for change, match in [
        (dict(semiring="tropical"), "semiring must be 'log' or 'real'"),
        (dict(ptr=[0, 2]), r"ptr must rise from 0 to 1"),
        (dict(row_ptr=[0, 3]), r"row_ptr must rise from 0 to 2"),
        (dict(pos_row=[1]), r"position 0 names row 1, outside 0..0"),
        (dict(row_label=[0, 2]), r"row entry 1 has label 2, outside 0..1"),
        (dict(row_label=[1, 1]), r"row entry 1 repeats label 1"),
        (dict(row_weight=[1.0, np.nan]), r"row_weight\[1\] = nan is not a real weight"),
        (dict(row_weight=[1.0, -0.5]), r"row_weight\[1\] = -0.5 is not a real weight"),
        (dict(transition=np.ones((3, 2))), r"transition must be \[V\+1, V\+1\]"),
        (dict(row_weight=[1.0, 2.0, 3.0]), "row_weight has"),
    ]:
        kw = {**ok, "semiring": "real", **change}
        with pytest.raises(ArgumentError, match=match):
            ChainBatch(**kw)
    with pytest.raises(ArgumentError, match=r"transition\[0\] = -inf is not a log weight"):
        ChainBatch(**{**ok, "transition": np.full((3, 3), -np.inf)}, semiring="log")
    with pytest.raises(ArgumentError, match=r"unary 0 has shape \(1, 3\)"):
        ChainBatch.dense(np.zeros(2), np.zeros((2, 2)), [np.zeros((1, 3))])
    with pytest.raises(ArgumentError, match="NaN"):
        ChainBatch.dense(np.array([0.0, np.nan]), np.zeros((2, 2)), [np.zeros((1, 2))])


def test_routines_without_the_schedule_point_at_materialise():
    cb = random_chains(np.random.default_rng(0), "log", sparse_T=0.0)
    for f in (forward, arc_posteriors, lambda m: sample_paths(m, 3)):
        with pytest.raises(NotAMachineError, match=r"materialise\(\)"):
            f(cb)
    with pytest.raises(SemiringError, match="log, real or tropical"):
        total_weight(cb, "expectation")
    with pytest.raises(ArgumentError, match="takes no tol"):
        total_weight(cb, tol=1e-3)
    with pytest.raises(ArgumentError, match="device must be 'cpu' or 'cuda'"):
        forward_backward(cb, device="gpu")
    # what materialise() gives takes every routine, and agrees with the schedule
    mb = cb.materialise()[0]
    same_cost(np.asarray(total_weight(mb)), total_weight(cb))
    same_cost(np.asarray(total_weight(mb, "real")), total_weight(cb, "real"), 1e-9)


@pytest.mark.parametrize("semiring", ["log", "real"])
@pytest.mark.parametrize("seed", range(6))
def test_expectation_and_entropy_match_the_generic_engine(semiring, seed):
    """Values tied to the table entries, summed along paths: the schedule's expectation per
    chain against the generic expectation semiring on the materialised chains (each arc gets
    its transition's and its entry's values, each final weight its end transition's)."""
    from fsmlearn.algo.chain import chain_entropy, chain_expectation
    rng = np.random.default_rng(300 + seed)
    cb = random_chains(rng, semiring, scale=3.0)
    V1 = cb.num_labels + 1
    tv = rng.normal(size=(V1, V1, 2))
    ev = rng.normal(size=(cb.row_label.size, 2))
    if np.isinf(np.asarray(total_weight(cb))).any():
        with pytest.raises(NoAcceptingPathError, match="chain"):
            expectation(cb, (tv, ev))
    got = chain_expectation(cb, tv, ev, allow_empty=True)
    assert got.shape == (len(cb), 2)
    mb, arc_trans, arc_entry, final_trans = cb.materialise()
    arc_values = tv.reshape(V1 * V1, 2)[arc_trans] + ev[arc_entry]
    final_values = np.where((final_trans >= 0)[:, None], tv.reshape(V1 * V1, 2)[np.maximum(final_trans, 0)], 0.0)
    cost = np.asarray(total_weight(mb))
    H = chain_entropy(cb, allow_empty=True)
    for s in range(len(cb)):
        if np.isinf(cost[s]):
            continue
        m = mb[s]
        lo, hi = mb.arc_ptr[s], mb.arc_ptr[s + 1]
        qlo, qhi = mb.state_ptr[s], mb.state_ptr[s + 1]
        want = expectation(m, arc_values[lo:hi], final_values[qlo:qhi])
        np.testing.assert_allclose(got[s], want, rtol=1e-9, atol=1e-9)
        assert abs(H[s] - entropy(m)) <= 1e-9 * max(1.0, abs(entropy(m)))
        assert H[s] >= -1e-12
    assert np.array_equal(np.isnan(H), np.isinf(cost))
    same = chain_expectation(cb, tv[..., 0], ev[:, 0], allow_empty=True)
    np.testing.assert_allclose(same[:, 0][np.isfinite(cost)], got[np.isfinite(cost), 0], rtol=1e-12)


def test_expectation_arguments_are_named():
    from fsmlearn.algo.chain import chain_expectation
    cb = random_chains(np.random.default_rng(1), "real", V=3, sparse_T=0.0)
    V1 = cb.num_labels + 1
    with pytest.raises(SemiringError, match=r"transition_values has shape \(2, 2\)"):
        chain_expectation(cb, np.zeros((2, 2)), np.zeros(cb.row_label.size))
    with pytest.raises(SemiringError, match="entry_values has shape"):
        chain_expectation(cb, np.zeros((V1, V1)), np.zeros(cb.row_label.size + 1))
    with pytest.raises(SemiringError, match="entry_values row 0 is not finite"):
        chain_expectation(cb, np.zeros((V1, V1)), np.full(cb.row_label.size, np.inf))
    with pytest.raises(ArgumentError, match=r"arc_values=\(transition_values, entry_values\)"):
        expectation(cb, np.zeros(3))
    with pytest.raises(ArgumentError, match="takes no tol"):
        entropy(cb, tol=1e-3)


@pytest.mark.parametrize("semiring", ["log", "real"])
@pytest.mark.parametrize("seed", range(3))
def test_the_device_path_runs_the_same_arithmetic(semiring, seed):
    """device="cuda" (a thread per chain, atomic sums; numba's simulator in the suite):
    the CPU's costs, posteriors, node posteriors, expectations and entropies."""
    from fsmlearn.algo.chain import chain_entropy, chain_expectation
    rng = np.random.default_rng(500 + seed)
    cb = random_chains(rng, semiring, scale=5.0)
    cpu = chain_forward_backward(cb, allow_empty=True)
    dev = forward_backward(cb, allow_empty=True, device="cuda")
    same_cost(dev.cost, cpu.cost, 1e-12)
    for a, b in ((dev.transition_posteriors, cpu.transition_posteriors), (dev.entry_posteriors, cpu.entry_posteriors),
                 (dev.node_posteriors, cpu.node_posteriors)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    V1 = cb.num_labels + 1
    tv, ev = rng.normal(size=(V1, V1)), rng.normal(size=cb.row_label.size)
    np.testing.assert_allclose(chain_expectation(cb, tv, ev, allow_empty=True, device="cuda"),
                               chain_expectation(cb, tv, ev, allow_empty=True), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chain_entropy(cb, allow_empty=True, device="cuda"), chain_entropy(cb, allow_empty=True),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("semiring", ["log", "real"])
@pytest.mark.parametrize("seed", range(4))
def test_full_rows_take_the_matrix_path_and_agree(semiring, seed):
    """Rows of every label in order (a dense chain, the decipherment's) go through matrix
    products over the chains of each length; the answers are the generic engine's, dead and
    empty chains included."""
    rng = np.random.default_rng(700 + seed)
    V, R = int(rng.integers(1, 5)), 3
    ptr = np.zeros(7, np.int64)
    ptr[1:] = np.cumsum(rng.integers(0, 5, 6))
    T = rng.random((V + 1, V + 1))
    T[rng.random((V + 1, V + 1)) < 0.3] = 0.0
    w = rng.random(R * V) + 1e-3
    if semiring == "log":
        with np.errstate(divide="ignore"):
            T, w = -np.log(T) * 20, -np.log(w) * 20
    cb = ChainBatch(ptr, rng.integers(0, R, ptr[-1]), np.arange(R + 1) * V, np.tile(np.arange(V, dtype=np.int32), R),
                    w, T, semiring)
    assert cb.full_rows
    agrees_with_the_generic_engine(cb)

"""The schedule's building blocks and the linear solver's plain sweep, against plain references."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components
from scipy.sparse import csr_matrix

from fsmlearn.algo.schedule import _radix_sort3, _sort3, _tarjan, build_schedule
from fsmlearn.algo.solve_linear import plain_sweep_kernel


@pytest.mark.parametrize("maxkey", [1, 7, 1023, 1024, 1 << 20, (1 << 33) + 5])
def test_radix_sort_is_a_stable_sort(maxkey):
    rng = np.random.default_rng(maxkey)
    n = 5000
    key = rng.integers(0, maxkey + 1, n).astype(np.int64)
    p1 = np.arange(n, dtype=np.int32)
    p2 = rng.integers(0, 10**9, n).astype(np.int64)
    k, a, b = _sort3(key.copy(), p1.copy(), p2.copy())
    order = np.argsort(key, kind="stable")
    assert np.array_equal(k, key[order]) and np.array_equal(a, p1[order]) and np.array_equal(b, p2[order])


def test_radix_sort_returns_sorted_input_as_is():
    key = np.arange(10, dtype=np.int64)
    p1 = np.arange(10, dtype=np.int32)
    p2 = np.arange(10, dtype=np.int64)
    k, a, b = _radix_sort3(key, p1, p2, np.empty_like(key), np.empty_like(p1), np.empty_like(p2))
    assert k is key and a is p1 and b is p2


def _random_graph(rng, n, E):
    src = np.sort(rng.integers(0, n, E)).astype(np.int32)
    dst = rng.integers(0, n, E).astype(np.int32)
    # a few self-loops and some forward-only arcs, so that every kind of arc occurs
    dst[:E // 20] = src[:E // 20]
    start = np.searchsorted(src, np.arange(n + 1)).astype(np.int64)
    return start, src, dst


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("backward", [False, True])
def test_schedule_against_a_plain_classification(seed, backward):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    E = int(rng.integers(0, 3 * n))
    start, src, dst = _random_graph(rng, n, E)
    s = build_schedule(n, start, src, dst, backward)
    if s.forward_ordered:
        return
    comp, _ = _tarjan(n, start, dst)
    # Tarjan's components are scipy's strong components
    _, lab = connected_components(csr_matrix((np.ones(E), (src, dst)), shape=(n, n)), connection="strong")
    assert np.array_equal(lab[:, None] == lab[None, :], comp[:, None] == comp[None, :])
    tail, head = (dst, src) if backward else (src, dst)
    pos = np.empty(n, np.int64)
    pos[s.comp_states] = np.arange(n)
    rank = np.searchsorted(s.comp_ptr, pos, side="right") - 1
    local = pos - s.comp_ptr[rank]
    # every arc exactly once, in its kind's list
    assert sorted(np.concatenate([s.ext_arc, s.int_arc, s.self_arc]).tolist()) == list(range(E))
    assert np.all(tail[s.self_arc] == head[s.self_arc]) and np.all(local[head[s.self_arc]] == s.self_loc)
    ia = s.int_arc
    assert np.all((rank[tail[ia]] == rank[head[ia]]) & (tail[ia] != head[ia]))
    assert np.array_equal(local[tail[ia]], s.int_tail) and np.array_equal(local[head[ia]], s.int_head)
    ea = s.ext_arc
    assert np.all(rank[tail[ea]] != rank[head[ea]])
    assert np.array_equal(s.ext_tail, tail[ea]) and np.array_equal(s.ext_head, head[ea])
    # external arcs leave earlier components for later ones; each list is grouped by component
    assert np.all(rank[tail[ea]] < rank[head[ea]])
    C = s.num_components
    for c in range(C):
        assert np.all(rank[tail[ea[s.ext_ptr[c]:s.ext_ptr[c + 1]]]] == c)
        assert np.all(rank[head[ia[s.int_ptr[c]:s.int_ptr[c + 1]]]] == c)
        seg = s.int_head[s.int_ptr[c]:s.int_ptr[c + 1]]
        assert np.all(np.diff(seg) >= 0)           # internal arcs grouped by head, in row order
    # self-loops grouped by component; trivial = no internal arc and no self-loop
    for c in range(C):
        assert np.all(rank[tail[s.self_arc[s.self_ptr[c]:s.self_ptr[c + 1]]]] == c)
        assert s.trivial[c] == (s.int_ptr[c + 1] == s.int_ptr[c] and s.self_ptr[c + 1] == s.self_ptr[c])
    # within a group the arcs keep their order (reversed for backward): the sorts are stable
    step = -1 if backward else 1
    for arcs, key in ((s.ext_arc, rank[tail[s.ext_arc]]), (s.self_arc, rank[tail[s.self_arc]]),
                      (s.int_arc, pos[head[s.int_arc]])):
        same = key[1:] == key[:-1]
        assert np.all(step * np.diff(arcs)[same] > 0)
    dtypes = dict(comp_ptr=np.int64, comp_states=np.int32, trivial=np.bool_, ext_tail=np.int32,
                  ext_head=np.int32, ext_arc=np.int64, ext_ptr=np.int64, int_tail=np.int32,
                  int_head=np.int32, int_arc=np.int64, int_ptr=np.int64, self_loc=np.int32,
                  self_arc=np.int64, self_ptr=np.int64)
    for name, dt in dtypes.items():
        assert getattr(s, name).dtype == dt, name
    # states listed ascending (forward) or descending (backward) inside a component
    for c in range(C):
        st = s.comp_states[s.comp_ptr[c]:s.comp_ptr[c + 1]]
        assert np.all(np.diff(st) > 0) if not backward else np.all(np.diff(st) < 0)


@pytest.mark.parametrize("seed", range(8))
def test_plain_sweep1_is_the_row_sweep(seed):
    """The branch-free scalar sweep gives the row-valued sweep's values and statistics,
    rows without arcs (constants) included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    E = int(rng.integers(0, 6 * n))
    ih = np.sort(rng.integers(0, n, E)).astype(np.int32)
    it = rng.integers(0, n, E).astype(np.int32)
    a0 = int(rng.integers(0, 3))
    ih = np.concatenate([np.zeros(a0, np.int32), ih])     # arcs before a0 belong to another component
    it = np.concatenate([np.zeros(a0, np.int32), it])
    a1 = a0 + E
    Wp = rng.random(E) * 0.3
    b = rng.random(n)
    b[rng.random(n) < 0.2] = 0.0
    y0 = rng.random(n) * 2
    if seed % 4 == 3:
        b[rng.integers(0, n)] = np.inf if seed % 8 == 3 else np.nan   # a non-finite row
    hasrow = np.zeros(n, np.bool_)
    hasrow[ih[a0:a1]] = True
    y1, yo1, st1 = y0.copy(), np.empty(n), np.empty(5)
    plain_sweep_kernel(0)(y1, yo1, b, Wp, ih.view(np.uint32), it.view(np.uint32), a0, a1, hasrow, st1)
    y2, yo2, st2 = y0[:, None].copy(), np.zeros((n, 1)), np.empty(5)
    plain_sweep_kernel(1)(y2, yo2, b[:, None].copy(), Wp[:, None].copy(), ih, it, a0, a1, np.zeros(1), st2)
    assert np.array_equal(y1, y2[:, 0], equal_nan=True)
    assert np.array_equal(yo1[hasrow], yo2[hasrow, 0], equal_nan=True)
    assert np.array_equal(st1, st2, equal_nan=True)
    assert (st1[4] >= 0) == (not np.all(np.isfinite(b[hasrow])))

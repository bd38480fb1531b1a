"""The schedule's building blocks and the linear solver's plain sweep, against plain references."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components
from scipy.sparse import csr_matrix

from fsmlearn.algo import schedule as schedule_mod
from fsmlearn.algo.schedule import (_build, _contract, _pull_on, _radix_sort3, _reach_both, _reached_from, _reaching,
                                    _sort3, _tarjan, build_schedule, strong_components)
from fsmlearn.algo.solve_linear import plain_sweep_kernel


@pytest.mark.parametrize("maxkey, dtype", [(k, d) for k in (1, 7, 1023, 1024, 5000, 1 << 20, (1 << 22) - 1, 1 << 22)
                                            for d in (np.int32, np.int64)] + [((1 << 33) + 5, np.int64)])
def test_radix_sort_is_a_stable_sort(maxkey, dtype):
    # keys of 11 to 22 bits take one pass by the high bits and one per bucket, others LSD passes
    rng = np.random.default_rng(maxkey)
    n = 20000
    key = rng.integers(0, maxkey + 1, n).astype(dtype)
    key[:50] = maxkey
    p1 = np.arange(n, dtype=np.int32)
    p2 = rng.integers(0, 10**9, n).astype(np.int64)
    k, a, b = _sort3(key.copy(), p1.copy(), p2.copy())
    order = np.argsort(key, kind="stable")
    assert np.array_equal(k, key[order]) and np.array_equal(a, p1[order]) and np.array_equal(b, p2[order])


@pytest.mark.parametrize("maxkey", [1024, 5000, 1 << 20, (1 << 22) - 1])
@pytest.mark.parametrize("parts", [1, 2, 3, 8])
def test_the_threaded_radix_sort_is_the_same_stable_sort(maxkey, parts):
    # keys of 11 to 22 bits: each run counted and scattered on a thread, then the buckets
    rng = np.random.default_rng(maxkey + parts)
    n = 30011
    key = rng.integers(0, maxkey + 1, n).astype(np.int32)
    key[-40:] = maxkey
    key[:3] = 0
    p1 = rng.integers(0, 10**9, n).astype(np.int32)
    p2 = np.arange(n, dtype=np.int64)
    kbits = schedule_mod._key_bits(key)
    assert kbits == int(maxkey).bit_length()
    k, a, b = schedule_mod._msd_lsd_sort3_par(key.copy(), p1.copy(), p2.copy(), np.empty_like(key),
                                              np.empty_like(p1), np.empty_like(p2), kbits, parts)
    order = np.argsort(key, kind="stable")
    assert np.array_equal(k, key[order]) and np.array_equal(a, p1[order]) and np.array_equal(b, p2[order])


@pytest.mark.parametrize("maxkey", [7, 5000, (1 << 22) - 1, 1 << 22])
def test_sort3_of_many_records_takes_the_threads_and_sorts_the_same(monkeypatch, maxkey):
    monkeypatch.setattr(schedule_mod, "PAR_SORT_MIN", 100)
    monkeypatch.setattr(schedule_mod.nb, "get_num_threads", lambda: 2)
    threaded = []
    par = schedule_mod._msd_lsd_sort3_par
    monkeypatch.setattr(schedule_mod, "_msd_lsd_sort3_par", lambda *a: threaded.append(a[-1]) or par(*a))
    rng = np.random.default_rng(maxkey)
    key = rng.integers(0, maxkey + 1, 5000).astype(np.int64)
    key[-1] = maxkey
    p1 = np.arange(5000, dtype=np.int32)
    p2 = rng.integers(0, 10**9, 5000).astype(np.int64)
    k, a, b = _sort3(key.copy(), p1.copy(), p2.copy())
    order = np.argsort(key, kind="stable")
    assert np.array_equal(k, key[order]) and np.array_equal(a, p1[order]) and np.array_equal(b, p2[order])
    # keys of 11 to 22 bits take the threaded sort, others the one-thread passes
    assert threaded == ([2] if 10 < int(key.max()).bit_length() <= 22 else [])
    s = np.sort(key)
    k2, _, _ = _sort3(s, p1, p2)
    assert k2 is s                                      # sorted input comes back as is


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


def _giant_graph(rng, n):
    """A random graph whose first ~90% of states form one strongly connected
    component (a ring through them, plus random arcs among them), the rest
    sources into it, sinks out of it, small cycles hanging off it and
    self-loops, numbered in a random order."""
    core = max(2, int(n * 0.9))
    src = [np.arange(core), rng.integers(0, core, 3 * core)]
    dst = [np.roll(np.arange(core), -1), rng.integers(0, core, 3 * core)]
    for s in range(core, n):
        kind = rng.integers(0, 3)
        if kind == 0:                  # a source pointing into the core or to an earlier extra state
            src.append([s]), dst.append([rng.integers(0, s)])
        elif kind == 1:                # a sink reached from the core
            src.append([rng.integers(0, core)]), dst.append([s])
        else:                          # a two-cycle with an earlier extra state, reached from the core
            o = rng.integers(core, s) if s > core else rng.integers(0, core)
            src.append([s, o, rng.integers(0, core)]), dst.append([o, s, s])
    src, dst = np.concatenate(src), np.concatenate(dst)
    loops = rng.integers(0, n, n // 10)
    src, dst = np.concatenate([src, loops]), np.concatenate([dst, loops])
    perm = rng.permutation(n)
    src, dst = perm[src], perm[dst]
    order = np.argsort(src, kind="stable")
    src, dst = src[order].astype(np.int32), dst[order].astype(np.int32)
    return np.searchsorted(src, np.arange(n + 1)).astype(np.int64), src, dst


def _check_components(n, start, src, dst, comp, ncomp):
    """scipy's strong components, numbered in a topological order of the flow
    with sinks first (every arc between components goes to a lower number)."""
    _, lab = connected_components(csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n)),
                                  connection="strong")
    assert np.array_equal(lab[:, None] == lab[None, :], comp[:, None] == comp[None, :])
    assert ncomp == len(np.unique(comp)) and comp.min() == 0 and comp.max() == ncomp - 1
    cross = comp[src] != comp[dst]
    assert np.all(comp[src][cross] > comp[dst][cross])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_strong_components_by_the_giant_component(seed, threads, monkeypatch):
    """The forward-backward path (one large component contracted, Tarjan on the rest)
    gives scipy's components, numbered in a topological order, as Tarjan does: with one
    thread (the two reachability passes one after the other), and with more (both at once,
    the contraction in runs)."""
    monkeypatch.setattr(schedule_mod, "_GIANT_MIN_STATES", 1)
    monkeypatch.setattr(schedule_mod, "PAR_SORT_MIN", 1)
    monkeypatch.setattr(schedule_mod.nb, "get_num_threads", lambda: threads)
    runs = []
    contract = schedule_mod._contract
    monkeypatch.setattr(schedule_mod, "_contract", lambda *a: runs.append(a[-1]) or contract(*a))
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    start, src, dst = _giant_graph(rng, n)
    comp, ncomp = strong_components(n, start, dst)
    assert runs == [threads]                            # the core was found and contracted
    _check_components(n, start, src, dst, comp, ncomp)
    assert np.bincount(comp).max() >= 0.9 * n - 1       # the core is one component
    _check_components(n, start, src, dst, *_tarjan(n, start, dst))


def _graphs_with_pivots(seed, most_states, count=20):
    """``count`` random graphs of 2 to ``most_states`` - 1 states, each with a random
    pivot: (n, start, src, dst, pivot)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, most_states))
        start, src, dst = _random_graph(rng, n, int(rng.integers(0, 3 * n)))
        yield n, start, src, dst, int(rng.integers(0, n))


def test_reachability_sweeps_against_breadth_first_search():
    for n, start, src, dst, pivot in _graphs_with_pivots(7, 200):
        A = csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
        from scipy.sparse.csgraph import breadth_first_order
        fw = np.zeros(n, bool)
        fw[breadth_first_order(A, pivot, return_predecessors=False)] = True
        bw = np.zeros(n, bool)
        bw[breadth_first_order(A.T.tocsr(), pivot, return_predecessors=False)] = True
        for f, want in ((_reached_from, fw), (_reaching, bw)):
            bits, decided = f(n, start, dst, pivot, 10**6)
            got = np.unpackbits(bits.view(np.uint8), bitorder="little")[:n].astype(bool)
            assert decided and np.array_equal(got, want)


def test_both_reachability_sweeps_at_once_are_the_two_calls():
    for n, start, src, dst, pivot in _graphs_with_pivots(11, 300):
        for sweeps in (1, 2, 10**6):
            for pull in (sweeps, 2):
                fw, bw, decided = _reach_both(n, start, dst, pivot, sweeps, pull)
                f1, d1 = _reached_from(n, start, dst, pivot, sweeps)
                b1, d2 = _reaching(n, start, dst, pivot, pull)
                assert np.array_equal(fw, f1) and np.array_equal(bw, b1) and list(decided) == [d1, d2]
        # some pull sweeps beside the push sweeps, then the rest: the sweeps of one call
        for beside in (1, 2, 3):
            for total in (beside, 4, 8):
                _, bw, decided = _reach_both(n, start, dst, pivot, 1, beside)
                more = decided[1] or _pull_on(n, start, dst, total - beside, bw, beside)
                b1, d2 = _reaching(n, start, dst, pivot, total)
                assert np.array_equal(bw, b1) and more == d2


@pytest.mark.parametrize("seed", range(6))
def test_the_contraction_in_runs_is_the_one_run_contraction(seed):
    # the giant set's node takes the runs' arcs in run order, each other state its own
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(20, 700))
    start, src, dst = _giant_graph(rng, n)
    pivot = int(np.argmax(np.diff(start)))
    fw, bw, decided = _reach_both(n, start, dst, pivot, 10**6, 10**6)
    giant = fw & bw
    one = _contract(n, start, dst, giant, 1)
    for parts in (2, 3, 7, n + 5):
        got = _contract(n, start, dst, giant, parts)
        for x, y in zip(one, got):
            assert x.dtype == y.dtype and np.array_equal(x, y)
    ids, cstart, cadj = one
    inside = np.unpackbits(giant.view(np.uint8), bitorder="little")[:n].astype(bool)
    keep = ~inside[src] | ~inside[dst]
    o = np.argsort(ids[src[keep]], kind="stable")
    assert np.array_equal(cadj, ids[dst[keep]][o])
    assert np.array_equal(cstart, np.searchsorted(ids[src[keep]][o], np.arange(cstart.size)))


def test_boundaries_found_in_turn_are_binary_searches():
    # _finish walks each sorted key array once, boundary after boundary: a short scan, then
    # an exponential search, for gaps of none, a few and thousands of keys
    rng = np.random.default_rng(12)
    for size in (0, 1, 15, 16, 17, 300, 20000):
        keys = np.sort(rng.integers(0, max(1, size // int(rng.integers(1, 40))) + 1, size)).astype(np.int32)
        bounds = np.unique(np.r_[0, rng.integers(0, keys.max(initial=0) + 3, 30)])
        j = 0
        for v in bounds:
            j = schedule_mod._lower_bound_from(keys, j, np.int64(v))
            assert j == np.searchsorted(keys, v)


def test_reachability_sweeps_give_up_on_a_zigzag_path(monkeypatch):
    """A ring visiting 0, n-1, 1, n-2, ... advances about two states per sweep in
    either order: the sweeps stop undecided and Tarjan decides."""
    n = 64
    order = np.array([v for k in range(n // 2) for v in (k, n - 1 - k)], np.int32)
    src, dst = order, np.roll(order, -1)
    o = np.argsort(src, kind="stable")
    src, dst = src[o], dst[o]
    start = np.searchsorted(src, np.arange(n + 1)).astype(np.int64)
    assert not _reached_from(n, start, dst, 0, 8)[1]
    assert not _reaching(n, start, dst, 0, 8)[1]
    assert not np.any(_reach_both(n, start, dst, 0, 8, 8)[2])
    monkeypatch.setattr(schedule_mod, "_GIANT_MIN_STATES", 1)
    comp, ncomp = strong_components(n, start, dst)
    assert ncomp == 1 and np.all(comp == 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("backward", [False, True])
def test_giant_classification_is_the_plain_one(seed, backward):
    """Arcs inside the largest component classified from its bitmap give the same
    schedule arrays as the per-state table."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(20, 700))
    start, src, dst = _giant_graph(rng, n)
    comp, ncomp = _tarjan(n, start, dst)
    fast = _build(src, dst, comp, ncomp, backward)
    plain = _build(src, dst, comp, ncomp, backward, giant=False)
    for x, y in zip(fast, plain):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("giant", [False, True])
@pytest.mark.parametrize("runs", [2, 3, 7])
def test_the_arcs_counted_and_classified_in_runs_give_the_same_schedule(seed, backward, giant, runs, monkeypatch):
    # a large machine's arcs are counted and classified in runs, one a thread, each from the
    # positions the runs before it fill (and its sorts threaded): the one-pass arrays
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(20, 700))
    start, src, dst = _giant_graph(rng, n)
    comp, ncomp = _tarjan(n, start, dst)
    one = _build(src, dst, comp, ncomp, backward, giant=giant)
    monkeypatch.setattr(schedule_mod, "PAR_SORT_MIN", 1)
    monkeypatch.setattr(schedule_mod.nb, "get_num_threads", lambda: runs)
    seen = []
    count = schedule_mod._count_kinds
    monkeypatch.setattr(schedule_mod, "_count_kinds", lambda *a: seen.append(a[-1]) or count(*a))
    got = _build(src, dst, comp, ncomp, backward, giant=giant)
    assert seen == [runs]
    for x, y in zip(one, got):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("shape", ["random", "giant"])
def test_schedule_against_a_plain_classification(seed, backward, shape, monkeypatch):
    monkeypatch.setattr(schedule_mod, "_GIANT_MIN_STATES", 1)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    if shape == "giant":
        start, src, dst = _giant_graph(rng, n)
        E = src.size
    else:
        E = int(rng.integers(0, 3 * n))
        start, src, dst = _random_graph(rng, n, E)
    s = build_schedule(n, start, src, dst, backward)
    if s.forward_ordered:
        return
    comp, _ = strong_components(n, start, dst)
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
    # the same statistics; the L1 change summed in another order (sweep_stats_rows' vectors)
    assert np.array_equal(st1[[0, 2, 3, 4]], st2[[0, 2, 3, 4]], equal_nan=True)
    np.testing.assert_allclose(st1[1], st2[1], rtol=n * 2.0**-52, atol=0, equal_nan=True)
    assert (st1[4] >= 0) == (not np.all(np.isfinite(b[hasrow])))

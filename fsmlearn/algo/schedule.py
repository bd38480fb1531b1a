"""Schedules: the order in which the solvers visit states and arcs.

A schedule is computed once per graph and direction of flow (forward: values
flow from an arc's source to its destination; backward: the reverse) and
cached on the machine.  The strongly connected components (Tarjan 1972) are
put in topological order of the flow; inside a component the states keep
their numbering (ascending for forward, descending for backward), which suits
Gauss-Seidel on machines whose arcs mostly go from lower to higher numbers
and keeps the backward arc lists in CSR order.  Arcs are split into

* external arcs, between components, ordered by the component of their tail
  (the state a value flows from) and pushed once when the tail is final;
* internal arcs, inside a component, grouped by head (the state a value flows
  into) in the component's row order, with *local* state indices (the
  position in the component), for flat pull-form Gauss-Seidel sweeps;
* self-loops, folded into each state as a Kleene star.

A graph whose arcs all satisfy ``src < dst`` is acyclic in its own numbering;
its schedule is built without Tarjan (one component per state, the arcs in
CSR order, reversed for backward).

A component holding at least half the states is found by two reachability
passes over bitmaps (the forward-backward method) and contracted, so Tarjan
runs only on what is left; the arcs inside it are classified without looking
up their states.

Public names: Schedule, build_schedule, schedule_for, strong_components,
graph_is_forward_ordered, csr_is_forward_ordered, trivial_run_end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

_DONE = np.int32(2**31 - 1)


@nb.njit(cache=True)
def graph_is_forward_ordered(arc_src, dst):
    """True when every arc goes from a lower to a higher state number."""
    for a in range(dst.shape[0]):
        if dst[a] <= arc_src[a]:
            return False
    return True


@nb.njit(cache=True)
def csr_is_forward_ordered(src_start, dst):
    """graph_is_forward_ordered from the CSR offsets (no per-arc source array)."""
    for s in range(src_start.shape[0] - 1):
        for a in range(src_start[s], src_start[s + 1]):
            if dst[a] <= s:
                return False
    return True


@nb.njit(cache=True)
def _tarjan(n, start, adj):
    """Strongly connected components of the graph (CSR start/adj).

    Returns (comp, ncomp): the component of each state, numbered in Tarjan's
    emission order (sinks of the graph first).  One random read per arc:
    ``idx`` is -1 for unvisited states, _DONE once assigned, else the DFS index.
    """
    idx = np.full(n, -1, np.int32)
    low = np.zeros(n, np.int32)
    stack = np.empty(n, np.int32)
    cs_state = np.empty(n, np.int32)
    cs_edge = np.empty(n, np.int64)
    comp = np.empty(n, np.int32)
    ncomp = 0
    sp = 0
    counter = 0
    for root in range(n):
        if idx[root] != -1:
            continue
        idx[root] = counter
        low[root] = counter
        counter += 1
        stack[sp] = root
        sp += 1
        cs_state[0] = root
        cs_edge[0] = start[root]
        csp = 1
        while csp > 0:
            v = cs_state[csp - 1]
            e = cs_edge[csp - 1]
            end = start[v + 1]
            lv = low[v]
            while e < end:
                w = adj[e]
                iw = idx[w]
                if iw == -1:
                    break
                if iw < lv:  # on the stack (done states hold _DONE)
                    lv = iw
                e += 1
            low[v] = lv
            if e < end:
                cs_edge[csp - 1] = e + 1
                w = adj[e]
                idx[w] = counter
                low[w] = counter
                counter += 1
                stack[sp] = w
                sp += 1
                cs_state[csp] = w
                cs_edge[csp] = start[w]
                csp += 1
            else:
                csp -= 1
                if csp > 0:
                    u = cs_state[csp - 1]
                    if lv < low[u]:
                        low[u] = lv
                if lv == idx[v]:
                    while True:
                        sp -= 1
                        x = stack[sp]
                        idx[x] = _DONE
                        comp[x] = ncomp
                        if x == v:
                            break
                    ncomp += 1
    return comp, ncomp


_U1 = np.uint64(1)


@nb.njit(inline="always")
def _bit(bits, s):
    """Bit s of a bitmap (uint64 words), as 0 or 1."""
    return (bits[s >> 6] >> np.uint64(s & 63)) & _U1


@nb.njit(inline="always")
def _set_bit(bits, s):
    bits[s >> 6] |= _U1 << np.uint64(s & 63)


@nb.njit(inline="always")
def _popcount(x):
    """Number of set bits of a uint64 (SWAR)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@nb.njit(cache=True)
def _count_bits(bits):
    c = 0
    for w in range(bits.shape[0]):
        c += _popcount(bits[w])
    return c


@nb.njit(inline="always")
def _push_sweeps(n, start, adj, max_sweeps, seen, done):
    """:func:`_reached_from`'s sweeps from the bits already in ``seen`` (``done``: zeros);
    returns ``decided``."""
    for sweep in range(max_sweeps):
        expanded = 0
        for i in range(n):
            s = i if sweep % 2 == 0 else n - 1 - i
            if _bit(seen, s) == 1 and _bit(done, s) == 0:
                _set_bit(done, s)
                expanded += 1
                for e in range(start[s], start[s + 1]):
                    _set_bit(seen, adj[e])
        if expanded == 0:
            return True
    return False


@nb.njit(inline="always")
def _pull_sweeps(n, start, adj, max_sweeps, seen, first):
    """:func:`_reaching`'s sweeps from the bits already in ``seen``, the first of them its
    sweep number ``first`` (even: ascending); returns ``decided``."""
    for sweep in range(first, first + max_sweeps):
        new = 0
        for i in range(n):
            s = i if sweep % 2 == 0 else n - 1 - i
            if _bit(seen, s) == 1:
                continue
            for e in range(start[s], start[s + 1]):
                if _bit(seen, adj[e]) == 1:
                    _set_bit(seen, s)
                    new += 1
                    break
        if new == 0:
            return True
    return False


@nb.njit(cache=True)
def _reached_from(n, start, adj, pivot, max_sweeps):
    """(bitmap, decided): the states reachable from ``pivot``.

    Push sweeps over the states, alternately ascending and descending: a marked
    state not yet expanded marks its arcs' destinations.  Every arc is read once
    in all, in CSR order, with one write into a bitmap of n/8 bytes (125 KB for
    a million states: it stays in the core's L2 cache, where Tarjan's per-state
    index arrays do not, and nothing is read at random from the arc arrays).
    ``decided`` is False when ``max_sweeps`` sweeps did not reach a fixed point
    (a long path against both orders).
    """
    seen = np.zeros((n + 63) >> 6, np.uint64)
    done = np.zeros((n + 63) >> 6, np.uint64)
    _set_bit(seen, pivot)
    return seen, _push_sweeps(n, start, adj, max_sweeps, seen, done)


@nb.njit(cache=True)
def _reaching(n, start, adj, pivot, max_sweeps):
    """(bitmap, decided): the states from which ``pivot`` is reachable, without
    the reversed graph.  Pull sweeps, alternately ascending and descending, mark
    a state once one of its arcs leads to a marked one; a marked state's arcs are
    not read again.  ``decided`` as in :func:`_reached_from`."""
    seen = np.zeros((n + 63) >> 6, np.uint64)
    _set_bit(seen, pivot)
    return seen, _pull_sweeps(n, start, adj, max_sweeps, seen, 0)


@nb.njit(cache=True)
def _pull_on(n, start, adj, max_sweeps, seen, first):
    """:func:`_reaching`'s sweeps continued from its bitmap ``seen`` after ``first`` of
    them (so in the directions of one call); returns ``decided``."""
    return _pull_sweeps(n, start, adj, max_sweeps, seen, first)


@nb.njit(cache=True, parallel=True)
def _reach_both(n, start, adj, pivot, max_sweeps, pull_sweeps):
    """(fw, bw, decided): :func:`_reached_from` of ``max_sweeps`` sweeps and the first
    ``pull_sweeps`` sweeps of :func:`_reaching` from one pivot at once, each in a
    ``prange`` iteration of its own (a thread each where numba has two); ``decided``
    [2] their flags.  The same bitmaps as the two calls."""
    fw = np.zeros((n + 63) >> 6, np.uint64)
    done = np.zeros((n + 63) >> 6, np.uint64)
    bw = np.zeros((n + 63) >> 6, np.uint64)
    _set_bit(fw, pivot)
    _set_bit(bw, pivot)
    decided = np.zeros(2, np.bool_)
    for k in nb.prange(2):
        if k == 0:
            decided[0] = _push_sweeps(n, start, adj, max_sweeps, fw, done)
        else:
            decided[1] = _pull_sweeps(n, start, adj, pull_sweeps, bw, 0)
    return fw, bw, decided


@nb.njit(cache=True)
def _state_cuts(start, n, parts):
    """Boundaries 0 = cuts[0] <= ... <= cuts[parts] = n of ``parts`` runs of states with
    about equal numbers of arcs."""
    cuts = np.empty(parts + 1, np.int64)
    E = start[n]
    for t in range(parts + 1):
        cuts[t] = np.searchsorted(start[:n + 1], E * t // parts) if 0 < t < parts else (0 if t == 0 else n)
    for t in range(1, parts + 1):
        cuts[t] = min(max(cuts[t], cuts[t - 1]), n)
    return cuts


@nb.njit(cache=True, parallel=True)
def _contract(n, start, adj, giant, parts):
    """The graph with the states of bitmap ``giant`` (a strongly connected set)
    contracted into one node.  Returns (ids, cstart, cadj): each state's node
    (the other states numbered 0..k-1 in order, the giant set k) and the
    contracted graph's CSR arcs (every arc with an end outside the set).

    The states are cut into ``parts`` runs of about equal arcs, each counted and
    filled in a ``prange`` iteration of its own: a state outside the set keeps
    all its arcs, in a node of its own; the set's node takes the runs' arcs in
    run order, so the arrays are the same for any ``parts``."""
    ids = np.empty(n, np.int32)
    k = 0
    for s in range(n):
        if _bit(giant, s) == 0:
            ids[s] = k
            k += 1
    for s in range(n):
        if _bit(giant, s) == 1:
            ids[s] = k
    parts = max(1, min(parts, n))
    cuts = _state_cuts(start, n, parts)
    cstart = np.zeros(k + 2, np.int64)
    gcnt = np.zeros(parts + 1, np.int64)
    for t in nb.prange(parts):
        g = 0
        for s in range(cuts[t], cuts[t + 1]):
            if _bit(giant, s) == 0:
                cstart[ids[s] + 1] = start[s + 1] - start[s]
            else:
                for e in range(start[s], start[s + 1]):
                    if _bit(giant, adj[e]) == 0:
                        g += 1
        gcnt[t + 1] = g
    for t in range(parts):
        gcnt[t + 1] += gcnt[t]
    cstart[k + 1] = gcnt[parts]
    for c in range(k + 1):
        cstart[c + 1] += cstart[c]
    cadj = np.empty(cstart[k + 1], np.int32)
    for t in nb.prange(parts):
        q = cstart[k] + gcnt[t]
        for s in range(cuts[t], cuts[t + 1]):
            if _bit(giant, s) == 0:
                f = cstart[ids[s]]
                for e in range(start[s], start[s + 1]):
                    cadj[f] = ids[adj[e]]
                    f += 1
            else:
                for e in range(start[s], start[s + 1]):
                    w = adj[e]
                    if _bit(giant, w) == 0:
                        cadj[q] = ids[w]
                        q += 1
    return ids, cstart, cadj


_GIANT_MIN_STATES = 4096   # below this Tarjan is as quick as the reachability passes
_REACH_SWEEPS = 8
# the pull sweeps that run beside the push sweeps (the rest follow once the states reached
# are known to be half or more); with all of them there, a graph without a large component
# (a randomly numbered acyclic one) paid for eight pull sweeps it did not need
_PULL_BESIDE = 1


def strong_components(n: int, start: np.ndarray, adj: np.ndarray):
    """(comp, ncomp): the strongly connected components, numbered in a topological
    order of the graph with sinks first, as :func:`_tarjan` numbers them (the same
    partition; the numbers of unrelated components may differ from Tarjan's).

    A cyclic machine usually has one component holding most of its states.  It
    is found by the forward-backward method (Fleischer, Hendrickson and Pinar
    2000): the states reachable from a pivot (the state with the most arcs)
    that also reach it, both sets computed by sweeps over bitmaps
    (:func:`_reached_from`, :func:`_reaching`; where numba has two threads the first
    pull sweep runs beside the push sweeps, :func:`_reach_both`, and the rest only where
    the states reached are half or more).  When that component holds at
    least half the states it is contracted into one node and Tarjan runs on
    the small contracted graph; otherwise (or when the sweeps do not settle in
    ``_REACH_SWEEPS``) Tarjan runs on the whole graph.
    """
    if n >= _GIANT_MIN_STATES:
        pivot = int(np.argmax(np.diff(start)))
        threads = nb.get_num_threads()
        if threads >= 2:
            fw, bw, decided = _reach_both(n, start, adj, pivot, _REACH_SWEEPS, _PULL_BESIDE)
            ok = bool(decided[0]) and 2 * _count_bits(fw) >= n
            if ok and not decided[1]:
                ok = _pull_on(n, start, adj, _REACH_SWEEPS - _PULL_BESIDE, bw, _PULL_BESIDE)
        else:
            fw, ok = _reached_from(n, start, adj, pivot, _REACH_SWEEPS)
            if ok and 2 * _count_bits(fw) >= n:
                bw, ok = _reaching(n, start, adj, pivot, _REACH_SWEEPS)
        if ok:
            giant = fw & bw
            if 2 * _count_bits(giant) >= n:
                ids, cstart, cadj = _contract(n, start, adj, giant, threads if start[n] >= PAR_SORT_MIN else 1)
                ccomp, ncomp = _tarjan(cstart.shape[0] - 1, cstart, cadj)
                return ccomp[ids], ncomp
    return _tarjan(n, start, adj)


@nb.njit(cache=True)
def _radix_sort3(key, p1, p2, kb, pb, qb):
    """Sort records (key, p1, p2) by key (non-negative integers), stably.

    LSD radix sort: every pass reads and writes the records in streams, which is
    far kinder to caches than scattering records into one bucket per key.  The
    passes are as few as digits of at most 10 bits allow (1,024 buckets: three
    arrays' write streams per bucket stay within the caches and TLB; 11-bit
    digits took 1.7x as long on this project's EPYC).  ``kb``, ``pb``, ``qb``
    are scratch arrays of the same shapes (allocated by the caller through
    numpy, whose large arrays get transparent huge pages where the kernel
    offers them only on request).  Returns the sorted arrays: the inputs or
    the scratch ones; already sorted input is returned as is.
    """
    n = key.shape[0]
    kbits = _key_bits(key)
    if kbits == 0:
        return key, p1, p2
    if 10 < kbits <= 22:
        return _msd_lsd_sort3(key, p1, p2, kb, pb, qb, kbits)
    passes = (kbits + 9) // 10
    bits = (kbits + passes - 1) // passes
    nb_ = 1 << bits
    mask = nb_ - 1
    ka, pa, qa = key, p1, p2
    count = np.empty(nb_ + 1, np.int64)
    shift = 0
    for _ in range(passes):
        count[:] = 0
        for i in range(n):
            count[((ka[i] >> shift) & mask) + 1] += 1
        for d in range(nb_):
            count[d + 1] += count[d]
        for i in range(n):
            d = (ka[i] >> shift) & mask
            j = count[d]
            count[d] = j + 1
            kb[j] = ka[i]
            pb[j] = pa[i]
            qb[j] = qa[i]
        ka, kb = kb, ka
        pa, pb = pb, pa
        qa, qb = qb, qa
        shift += bits
    return ka, pa, qa


@nb.njit(cache=True)
def _msd_lsd_sort3(key, p1, p2, kb, pb, qb, kbits):
    """_radix_sort3 for keys of 11 to 22 bits: one pass by the high bits into the
    scratch arrays (at most 1,024 buckets), then each bucket by its low 12 bits (or
    fewer) back into the input arrays, a bucket at a time, so that the second pass's
    writes stay inside a bucket's few hundred kilobytes instead of spanning all
    records.  Both passes are stable counting sorts.  On 10M records of 20-bit keys
    (the forward schedule of the engine benchmark) 290-395 ms against 356-524 ms for
    two 10-bit LSD passes, runs alternating on this project's busy 2-core machine."""
    n = key.shape[0]
    lob = min(12, kbits - 1)
    if kbits - lob > 10:
        lob = kbits - 10
    nh = 1 << (kbits - lob)
    cnt = np.zeros(nh + 1, np.int64)
    for i in range(n):
        cnt[(key[i] >> lob) + 1] += 1
    for d in range(nh):
        cnt[d + 1] += cnt[d]
    pos = cnt[:-1].copy()
    for i in range(n):
        d = key[i] >> lob
        j = pos[d]
        pos[d] = j + 1
        kb[j] = key[i]
        pb[j] = p1[i]
        qb[j] = p2[i]
    nl = 1 << lob
    c2 = np.empty(nl + 1, np.int64)
    for d in range(nh):
        _sort_bucket(kb, pb, qb, key, p1, p2, cnt[d], cnt[d + 1], nl - 1, c2)
    return key, p1, p2


@nb.njit(inline="always")
def _sort_bucket(kb, pb, qb, key, p1, p2, lo, hi, mask, c2):
    """The records lo..hi-1 of (kb, pb, qb), one bucket, into the same places of (key,
    p1, p2) by their low bits (``key & mask``): a stable counting sort, ``c2`` its
    scratch of mask + 2 counts."""
    c2[:] = 0
    for i in range(lo, hi):
        c2[(kb[i] & mask) + 1] += 1
    c2[0] = lo
    for x in range(mask + 1):
        c2[x + 1] += c2[x]
    for i in range(lo, hi):
        x = kb[i] & mask
        j = c2[x]
        c2[x] = j + 1
        key[j] = kb[i]
        p1[j] = pb[i]
        p2[j] = qb[i]


@nb.njit(cache=True, parallel=True)
def _msd_lsd_sort3_par(key, p1, p2, kb, pb, qb, kbits, parts):
    """:func:`_msd_lsd_sort3` over numba's threads, the same result (stable, so the
    same order exactly): the records are cut into ``parts`` runs (at most one a
    record), each run counted and then scattered by the high bits in a ``prange``
    iteration of its own (within a bucket, the runs' records come in run order), and
    the buckets sorted by their low bits in parallel (:func:`_sort_bucket`).  Returns
    the sorted arrays, which are the inputs, as the one-thread sort's."""
    n = key.shape[0]
    parts = max(1, min(parts, n))
    lob = min(12, kbits - 1)
    if kbits - lob > 10:
        lob = kbits - 10
    nh = 1 << (kbits - lob)
    cnt = np.zeros((parts, nh), np.int64)
    for t in nb.prange(parts):
        for i in range(t * n // parts, (t + 1) * n // parts):
            cnt[t, key[i] >> lob] += 1
    bstart = np.empty(nh + 1, np.int64)
    pos = np.empty((parts, nh), np.int64)
    j = 0
    for d in range(nh):
        bstart[d] = j
        for t in range(parts):
            pos[t, d] = j
            j += cnt[t, d]
    bstart[nh] = j
    for t in nb.prange(parts):
        for i in range(t * n // parts, (t + 1) * n // parts):
            d = key[i] >> lob
            j = pos[t, d]
            pos[t, d] = j + 1
            kb[j] = key[i]
            pb[j] = p1[i]
            qb[j] = p2[i]
    nl = 1 << lob
    for d in nb.prange(nh):
        c2 = np.empty(nl + 1, np.int64)
        _sort_bucket(kb, pb, qb, key, p1, p2, bstart[d], bstart[d + 1], nl - 1, c2)
    return key, p1, p2


@nb.njit(cache=True)
def _key_bits(key):
    """0 where ``key`` is sorted already, else the bits of its largest key."""
    n = key.shape[0]
    ok = True
    for i in range(1, n):
        if key[i] < key[i - 1]:
            ok = False
            break
    if ok:
        return 0
    maxk = 0
    for i in range(n):
        if key[i] > maxk:
            maxk = key[i]
    kbits = 0
    while (maxk >> kbits) > 0:
        kbits += 1
    return max(kbits, 1)


#: records from which _sort3 sorts keys of 11 to 22 bits on numba's threads, and arcs from
#: which _build counts and classifies them there (_runs)
PAR_SORT_MIN = 1 << 20


def _runs(E):
    """The runs _build cuts E arcs into to count and classify them: one a thread of numba's
    from PAR_SORT_MIN arcs, else one."""
    return nb.get_num_threads() if E >= PAR_SORT_MIN else 1


def _sort3(key, p1, p2):
    """_radix_sort3 with numpy-allocated scratch arrays; a large sort of keys of 11 to 22
    bits over numba's threads (:func:`_msd_lsd_sort3_par`, the same result)."""
    kb, pb, qb = np.empty_like(key), np.empty_like(p1), np.empty_like(p2)
    if key.shape[0] >= PAR_SORT_MIN:
        parts = nb.get_num_threads()
        kbits = _key_bits(key) if parts >= 2 else -1
        if kbits == 0:
            return key, p1, p2
        if 10 < kbits <= 22:
            return _msd_lsd_sort3_par(key, p1, p2, kb, pb, qb, kbits, parts)
    return _radix_sort3(key, p1, p2, kb, pb, qb)


@nb.njit(cache=True)
def trivial_run_end(trivial, c):
    """The end of the run of trivial components (one state, no self-loop) starting at c:
    the solvers push such runs in one flat pass over their external arcs."""
    C = trivial.shape[0]
    while c < C and trivial[c]:
        c += 1
    return c


@nb.njit(cache=True)
def _order(comp, ncomp, backward, packed):
    """Components ranked in processing order and their states listed.

    Returns (comp_ptr, comp_states); ``packed[s]`` (int64 [n], filled) is
    ``rank << 32 | local``: the rank of the state's component and its position
    there, one load where the arc pass needs both (and the component's
    identity: equal ranks are equal components).
    """
    n = comp.shape[0]
    C = ncomp
    rank = np.empty(C, np.int64)
    for c in range(C):
        rank[c] = c if backward else C - 1 - c
    comp_ptr = np.zeros(C + 1, np.int64)
    for s in range(n):
        comp_ptr[rank[comp[s]] + 1] += 1
    for c in range(C):
        comp_ptr[c + 1] += comp_ptr[c]
    fill = comp_ptr[:-1].copy()
    comp_states = np.empty(n, np.int32)
    for i in range(n):
        s = n - 1 - i if backward else i
        r = rank[comp[s]]
        p = fill[r]
        fill[r] += 1
        comp_states[p] = s
        packed[s] = (r << 32) | (p - comp_ptr[r])
    return comp_ptr, comp_states


@nb.njit(cache=True, parallel=True)
def _count_kinds(tails, heads, comp, parts):
    """(external, internal, self-loop) arc counts of each of ``parts`` runs of the arcs
    (runs of equal length in the order given, one a ``prange`` iteration; int64 [parts,
    3]).  Branch-free, so the compiler vectorises it."""
    E = tails.shape[0]
    cnt = np.zeros((parts, 3), np.int64)
    for r in nb.prange(parts):
        lo = r * E // parts
        hi = (r + 1) * E // parts
        n_int = 0
        n_self = 0
        for i in range(lo, hi):
            t = tails[i]
            h = heads[i]
            n_self += t == h
            n_int += (t != h) & (comp[t] == comp[h])
        cnt[r, 0] = hi - lo - n_int - n_self
        cnt[r, 1] = n_int
        cnt[r, 2] = n_self
    return cnt


@nb.njit(cache=True)
def _giant_bits(comp, gc):
    """(bits, below): the bitmap of the states of component ``gc`` and, per
    64-state word, how many of its states lie in the words before."""
    n = comp.shape[0]
    W = (n + 63) >> 6
    bits = np.zeros(W, np.uint64)
    for s in range(n):
        if comp[s] == gc:
            _set_bit(bits, s)
    below = np.empty(W, np.int64)
    c = 0
    for w in range(W):
        below[w] = c
        c += _popcount(bits[w])
    return bits, below


@nb.njit(inline="always")
def _giant_rank(bits, below, s):
    """Rank of state s among the states of a bitmap (s marked), from the bitmap
    and its word counts alone (both small enough for the L2 cache)."""
    w = s >> 6
    return below[w] + np.int64(_popcount(bits[w] & ((_U1 << np.uint64(s & 63)) - _U1)))


@nb.njit(cache=True, parallel=True)
def _classify(tails, heads, a0, astep, packed, comp_ptr, gbits, gbelow, gbase, l0, lstep,
              ek, et, ea, ik, itl, ia, sk, sl, sa, cnt):
    """Each arc into its kind's arrays, in the order given: ``tails[i]`` and
    ``heads[i]`` are the ends of arc ``a0 + astep * i`` in the direction of flow
    (the graph's arrays forward, their reversed views backward, so that no
    direction flag is read per arc: with one, the loop took 2.5 to 4 times as
    long).  External (rank of the tail, tail, arc), internal (global row
    position of the head, local tail, arc), self-loop (rank, local state, arc).

    Where ``gbits`` is not empty it marks the states of a large component whose
    rows start at ``gbase``; an arc between two of them is classified from the
    bitmap and its word counts alone: the local index of state s is
    ``l0 + lstep * (its rank among the component's states)``, so
    (0, 1) forward and (size - 1, -1) backward.  Other arcs look up ``packed``
    (8 bytes per state, read at random: this pass's cost when it is used for
    every arc).

    ``cnt``: :func:`_count_kinds` of the same arcs in the same order; each of its runs
    is classified in a ``prange`` iteration of its own, from the positions the runs
    before it fill, so the arrays are those of one pass over all arcs.
    """
    E = tails.shape[0]
    parts = cnt.shape[0]
    start = np.zeros((parts, 3), np.int64)
    for r in range(1, parts):
        for k in range(3):
            start[r, k] = start[r - 1, k] + cnt[r - 1, k]
    for r in nb.prange(parts):
        _classify_run(tails, heads, a0, astep, packed, comp_ptr, gbits, gbelow, gbase, l0, lstep,
                      ek, et, ea, ik, itl, ia, sk, sl, sa, r * E // parts, (r + 1) * E // parts,
                      start[r, 0], start[r, 1], start[r, 2])


@nb.njit(inline="always")
def _classify_run(tails, heads, a0, astep, packed, comp_ptr, gbits, gbelow, gbase, l0, lstep,
                  ek, et, ea, ik, itl, ia, sk, sl, sa, i0, i1, je, ji, js):
    """:func:`_classify` of the arcs i0..i1-1, into positions from je, ji and js."""
    low = np.int64(0xFFFFFFFF)
    giant = gbits.shape[0] > 0
    for i in range(i0, i1):
        a = a0 + astep * i
        t = tails[i]
        h = heads[i]
        if giant and t != h and (_bit(gbits, t) & _bit(gbits, h)) == 1:
            ik[ji] = gbase + l0 + lstep * _giant_rank(gbits, gbelow, h)
            itl[ji] = l0 + lstep * _giant_rank(gbits, gbelow, t)
            ia[ji] = a
            ji += 1
            continue
        pt = packed[t]
        ph = packed[h]
        r = pt >> 32
        if t == h:
            sk[js] = r
            sl[js] = ph & low
            sa[js] = a
            js += 1
        elif r == (ph >> 32):
            ik[ji] = comp_ptr[r] + (ph & low)   # global row position of the head
            itl[ji] = pt & low
            ia[ji] = a
            ji += 1
        else:
            ek[je] = r
            et[je] = t
            ea[je] = a
            je += 1


@nb.njit(inline="always")
def _lower_bound_from(keys, j, v):
    """The first index i >= j with keys[i] >= v, for sorted keys with keys[j - 1] < v: a
    scan of up to 16 keys (the usual gap where components are many and small), then an
    exponential search, so that C boundaries found in turn among E keys take
    O(C log(E / C)) steps (neither a pass over all keys nor C full binary searches)."""
    n = keys.shape[0]
    end = min(n, j + 16)
    while j < end and keys[j] < v:
        j += 1
    if j < end or j == n:
        return j
    hi = j
    step = 1
    while hi < n and keys[hi] < v:
        j = hi + 1
        hi += step
        step *= 2
    hi = min(hi, n)
    return j + np.searchsorted(keys[j:hi], v)


@nb.njit(cache=True)
def _finish(arc_src, dst, backward, n, comp_ptr, ek, ea, ik, sk, ext_head, int_head):
    """ext_head, int_head (filled) and the boundary arrays of a schedule.  The keys come
    sorted (ek and sk component ranks, ik row positions), so the boundaries are found in
    turn by :func:`_lower_bound_from`."""
    C = comp_ptr.shape[0] - 1
    n_ext = ek.shape[0]
    for j in range(n_ext):
        a = ea[j]
        ext_head[j] = arc_src[a] if backward else dst[a]
    ext_ptr = np.empty(C + 1, np.int64)
    self_ptr = np.empty(C + 1, np.int64)
    int_ptr = np.empty(C + 1, np.int64)
    je = 0
    js = 0
    ji = 0
    for c in range(C + 1):
        je = _lower_bound_from(ek, je, c)
        js = _lower_bound_from(sk, js, c)
        ji = _lower_bound_from(ik, ji, comp_ptr[c])
        ext_ptr[c] = je
        self_ptr[c] = js
        int_ptr[c] = ji
    trivial = np.empty(C, np.bool_)
    for c in range(C):
        base = comp_ptr[c]
        for j in range(int_ptr[c], int_ptr[c + 1]):
            int_head[j] = ik[j] - base
        trivial[c] = int_ptr[c + 1] == int_ptr[c] and self_ptr[c + 1] == self_ptr[c]
    return ext_ptr, self_ptr, int_ptr, trivial


def _build(arc_src, dst, comp, ncomp, backward, giant=True):
    """The arrays of a :class:`Schedule` (its attributes from ``comp_ptr`` to ``self_ptr``, in order).

    Args:
        arc_src, dst: int32 [E] the graph's arcs (sources and destinations).
        comp: int32 [n] each state's strongly connected component, ncomp of them,
            numbered in Tarjan's order (sinks first).
        backward: schedule the flow from destinations to sources.
        giant: classify the arcs inside the largest component, when it holds
            at least half the states, from a bitmap of its states (False: every
            arc through the per-state table; the result is the same).

    Components are ranked in processing order; each one's states are listed
    (ascending ids forward, descending backward) and its arcs classified into
    external (leaving it), internal (both ends inside, grouped by head) and
    self-loops, each kind compacted by a radix sort on (rank, ...).  The
    arrays of one entry per arc are allocated here through numpy (transparent
    huge pages where the kernel offers them on request; the kernels' own
    allocations get 4 KiB pages) and filled by the kernels.
    """
    n = comp.shape[0]
    packed = np.empty(n, np.int64)
    comp_ptr, comp_states = _order(comp, ncomp, backward, packed)
    E = dst.shape[0]
    tails, heads, a0, astep = (dst[::-1], arc_src[::-1], E - 1, -1) if backward else (arc_src, dst, 0, 1)
    cnt = _count_kinds(tails, heads, comp, _runs(E))
    n_ext, n_int, n_self = (int(x) for x in cnt.sum(axis=0))
    ek, et, ea = np.empty(n_ext, np.int64), np.empty(n_ext, np.int32), np.empty(n_ext, np.int64)
    # the internal arcs' sort key is a row position (< n): 4 bytes where that suffices, so
    # each radix pass moves 16 bytes per arc instead of 20
    ik = np.empty(n_int, np.int32 if n < 2**31 else np.int64)
    itl, ia = np.empty(n_int, np.int32), np.empty(n_int, np.int64)
    sk, sl, sa = np.empty(n_self, np.int64), np.empty(n_self, np.int32), np.empty(n_self, np.int64)
    gbits, gbelow, gbase, l0, lstep = np.empty(0, np.uint64), np.empty(0, np.int64), 0, 0, 1
    if giant and n > 1:
        sizes = np.bincount(comp, minlength=ncomp)
        gc = int(np.argmax(sizes))
        if 2 * sizes[gc] >= n:
            gbits, gbelow = _giant_bits(comp, gc)
            gbase = int(comp_ptr[gc if backward else ncomp - 1 - gc])
            l0, lstep = (int(sizes[gc]) - 1, -1) if backward else (0, 1)
    _classify(tails, heads, a0, astep, packed, comp_ptr, gbits, gbelow, gbase, l0, lstep,
              ek, et, ea, ik, itl, ia, sk, sl, sa, cnt)
    del packed
    ek, et, ea = _sort3(ek, et, ea)
    ik, itl, ia = _sort3(ik, itl, ia)
    sk, sl, sa = _sort3(sk, sl, sa)
    ext_head = np.empty(n_ext, np.int32)
    int_head = np.empty(n_int, np.int32)
    ext_ptr, self_ptr, int_ptr, trivial = _finish(arc_src, dst, backward, n, comp_ptr, ek, ea, ik, sk,
                                                  ext_head, int_head)
    return (comp_ptr, comp_states, trivial, et, ext_head, ea, ext_ptr, itl, int_head,
            ia, int_ptr, sl, sa, self_ptr)


@dataclass(frozen=True)
class Schedule:
    """Processing order of one graph in one direction (see the module doc).

    Attributes:
        n: number of states.
        backward: direction of flow.
        comp_ptr: int64 [C+1] boundaries of the components in ``comp_states``.
        comp_states: int32 [N] the states of each component in row order.
        trivial: bool [C] component is one state without a self-loop.
        ext_tail, ext_head: int32 states of the external arcs.
        ext_arc: int64 graph arc ids of the external arcs.
        ext_ptr: int64 [C+1] external arcs leaving each component.
        int_tail, int_head: int32 local indices (within the component) of the
            internal arcs, grouped by head in row order.
        int_arc: int64 graph arc ids of the internal arcs.
        int_ptr: int64 [C+1] internal arcs of each component.
        self_loc, self_arc, self_ptr: self-loops (local index, arc id).
        forward_ordered: the graph's own numbering is topological (every arc
            goes up); external arcs are then the arcs in CSR order (reversed
            for backward).
    """
    n: int
    backward: bool
    comp_ptr: np.ndarray
    comp_states: np.ndarray
    trivial: np.ndarray
    ext_tail: np.ndarray
    ext_head: np.ndarray
    ext_arc: np.ndarray
    ext_ptr: np.ndarray
    int_tail: np.ndarray
    int_head: np.ndarray
    int_arc: np.ndarray
    int_ptr: np.ndarray
    self_loc: np.ndarray
    self_arc: np.ndarray
    self_ptr: np.ndarray
    forward_ordered: bool = False

    @property
    def cyclic(self) -> bool:
        return not bool(np.all(self.trivial))

    @property
    def num_components(self) -> int:
        return int(self.trivial.shape[0])


_E32 = np.empty(0, np.int32)
_E64 = np.empty(0, np.int64)


def _forward_ordered_schedule(n: int, arc_src: np.ndarray, dst: np.ndarray, backward: bool) -> Schedule:
    """Topologically numbered acyclic graph: one trivial pseudo-component whose
    external arcs are the arcs in CSR order (reversed for backward), so the
    solvers make a single flat pass and nothing is permuted."""
    E = dst.shape[0]
    if backward:
        tail = np.ascontiguousarray(dst[::-1])
        head = np.ascontiguousarray(arc_src[::-1])
        arcs = np.arange(E - 1, -1, -1, dtype=np.int64)
    else:
        tail, head = arc_src, dst
        arcs = np.arange(E, dtype=np.int64)
    return Schedule(n=n, backward=backward, comp_ptr=np.array([0, n], np.int64),
                    comp_states=np.arange(n, dtype=np.int32), trivial=np.ones(1, np.bool_),
                    ext_tail=tail, ext_head=head, ext_arc=arcs, ext_ptr=np.array([0, E], np.int64),
                    int_tail=_E32, int_head=_E32, int_arc=_E64, int_ptr=np.zeros(2, np.int64),
                    self_loc=_E32, self_arc=_E64, self_ptr=np.zeros(2, np.int64), forward_ordered=True)


def build_schedule(n: int, src_start: np.ndarray, arc_src: np.ndarray, dst: np.ndarray,
                   backward: bool, components=None) -> Schedule:
    """Schedule of the graph with CSR arcs (src_start, dst) for one direction.

    Args:
        n: number of states.
        src_start: int64 [N+1] CSR offsets (arcs sorted by source).
        arc_src: int32 [E] source of each arc.
        dst: int32 [E] destination of each arc.
        backward: schedule for values flowing from dst to src.
        components: a callable returning :func:`strong_components`' result for this
            graph (so that both directions share one), or None.
    """
    if graph_is_forward_ordered(arc_src, dst):
        return _forward_ordered_schedule(n, arc_src, dst, backward)
    comp, ncomp = components() if components is not None else strong_components(n, src_start, dst)
    (comp_ptr, comp_states, trivial, ext_tail, ext_head, ext_arc, ext_ptr, int_tail, int_head, int_arc,
     int_ptr, self_loc, self_arc, self_ptr) = _build(arc_src, dst, comp, ncomp, backward)
    return Schedule(n=n, backward=backward, comp_ptr=comp_ptr, comp_states=comp_states,
                    trivial=trivial, ext_tail=ext_tail, ext_head=ext_head, ext_arc=ext_arc,
                    ext_ptr=ext_ptr, int_tail=int_tail, int_head=int_head, int_arc=int_arc,
                    int_ptr=int_ptr, self_loc=self_loc, self_arc=self_arc, self_ptr=self_ptr)


def schedule_for(graph, backward: bool) -> Schedule:
    """The cached schedule of a machine or linear system for one direction.

    ``graph`` needs ``num_states``, ``src_start``, ``arc_src``, ``dst`` and
    ``cached(key, build)`` (a :class:`~fsmlearn.fsm.Machine` has them).
    """
    def components():
        return graph.cached("components", lambda: strong_components(graph.num_states, graph.src_start, graph.dst))

    return graph.cached("schedule_bwd" if backward else "schedule_fwd",
                        lambda: build_schedule(graph.num_states, graph.src_start, graph.arc_src,
                                               graph.dst, backward, components))

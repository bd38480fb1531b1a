"""Cache bands: a large cyclic component's arcs ordered so that a sweep's gathers stay in one window.

A plain Gauss-Seidel sweep (:func:`fsmlearn.algo.solve_linear.plain_sweep1`) streams a
component's arcs grouped by head and gathers ``y[tail]`` for each.  When the
component's value vector is larger than the share of the cache the process gets, each
of those gathers goes to memory (on the project's earlier 2-core AMD machine: 128-183 ns
a dependent load from 4 MB up on a busy day, against 8 ns inside 256 KB;
docs/bench-engine.md), and the sweep is bound by them.

The band layout cuts the component's rows (its states in row order) into bands of
``2**S`` consecutive rows and lists each band's arcs grouped by the band of their
tail: head band first, then tail band.  Inside the band's own group heads ascend; a
group of arcs from another band is further cut by blocks of ``2**(S - 8)`` tails (2 KB
of values for bands of 2**16), heads ascending inside a block, so that its gathers
walk the tail band nearly in order (a stable counting sort of the head-grouped arcs by
(head band, tail band, tail block)).  :func:`banded_sweep1` then takes the bands
in order; for band ``hb`` with rows ``lo:hi``:

1. ``acc = b[lo:hi]``;
2. the arcs whose tail lies in another band add ``y[tail] * W`` to ``acc[head - lo]``.
   Their gathers stay inside the tail band's window of ``2**S`` values.  Tails in an
   earlier band hold this sweep's values, tails in a later band the last sweep's, as
   in Gauss-Seidel;
3. a row all of whose arcs come from other bands takes ``y = acc``;
4. the arcs inside the band run as the flat sweep runs: rows in order, each row's
   running sum starting from its ``acc`` and stored in ``y`` after every arc.

Step 2 of band k reads only values of other bands, and only the arcs from band k - 1
need that band's steps 3 and 4 done first.  So when numba has two threads (the solver
then gives the sweep a scratch of four bands, :func:`sweep_scratch`), the sweep runs as
a pipeline of two threads (:func:`_pipeline_step`): while the first thread finishes band
k - 1 (steps 3 and 4, Gauss-Seidel inside the band, on one thread) and then adds band k's
arcs from band k - 1, the second adds band k's other arcs from other bands into an
accumulator of its own, all but a share that the first adds too, so that the two
threads' work is even.  Band k's two accumulators are summed when it is finished (the rows' sums
in another order than on one thread, the same terms).  A band with fewer than
:data:`PAIR_MIN_ARCS` arcs from other bands, or fewer than twice its rows, has them all
added on the first thread.  On the engine benchmark (bands of 2**18 rows then, on the
AMD machine) adding a band's arcs on two threads took a sweep from 60.7 to 47.5 ms
forward and from 69.9 to 61.1 ms backward; the pipeline, which also takes the finishing
of each band off the critical path, made the sweep a further 1.05-1.15x faster on the
Intel machine (docs/bench-engine.md).

The sweep also keeps what the solver's stopping rule needs: each band's old values,
copied to ``yold`` before step 2, and the statistics of the changes
(:func:`fsmlearn.algo.convergence.sweep_stats_rows`), taken band by band once a band's
rows are final (in the pipeline, on the second thread: band k's copy and band k - 2's
statistics before its arcs; the last band's after the last step).  Made apart (a copy of the whole vector before the
bands, a loop of branches over it after them), they took about 13% of a sweep of the
engine benchmark (docs/bench-engine.md).

Every row is written once a sweep, from a non-negative combination of values of this
sweep and the last (an asynchronous relaxation of the same system
``x = b + sum_t x_t W``: Mohri 2002, eq. 2, the generic single-source shortest-distance
system; Eisner 2002, section 5, for its solution by relaxation).  So the fixed point is
the system's, and on the benchmark machine the error falls as fast a sweep as the
flat sweep's (docs/bench-engine.md).  The solver's stopping rule, extrapolation and
potentials are unchanged; only the order of the arcs' reads differs.

The solver is given a banded component's internal rows in band order too
(:func:`band_order`: the schedule's arc ids permuted once, when the layout is made), so
that :func:`build_plain_banded`, which writes the plain factors under each round of
potentials, streams them instead of gathering each arc's row from the head-grouped rows
(on the engine benchmark's 10M arcs 92-154 ms against 328-432 ms; docs/bench-engine.md).
The solver's rare scaled sweeps, which walk the arcs by head, find each row through the
inverse of ``perm``.

Memory, per direction, cached with the schedule: 12 bytes a banded arc (its position in
the head-grouped order, its head and tail, each uint32), 8 bytes an internal arc of the
schedule (the ids of :func:`band_order`, int64), one byte a row of a banded
component, and 8 bytes a group of a banded component (``gptr``: ``nb**2 << sub_bits``
groups, at most 2**20, so at most 8 MB; 65,536 groups, 512 KB, for the engine
benchmark's component of about 2**20 states in bands of 2**16).  While the layout is
made, each of its runs (one a thread) counts its arcs in 8 bytes a group.  Only
components of at least ``min_states`` states (:data:`BAND_MIN_STATES`) get bands.

Public names: BAND_BITS, BAND_MIN_STATES, PAIR_MIN_ARCS, band_layout, band_order, band_widths, bands_for, no_bands,
banded_sweep1, build_plain_banded, sub_bits, sweep_scratch.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from ..semiring.ops import pow2_capped
from .convergence import sweep_stats_rows, sweep_stats_start

__all__ = ["BAND_BITS", "BAND_MIN_STATES", "PAIR_MIN_ARCS", "band_layout", "band_order", "band_widths", "bands_for",
           "no_bands", "banded_sweep1", "build_plain_banded", "sub_bits", "sweep_scratch"]

#: rows a band holds (a power of two): 2**16 float64 values are 512 KB, an accumulator that
#: leaves most of a 2 MB L2 to the streams and the tail band's window.  On the project's
#: Intel machine (2 MB L2 a core) one sweep of the engine benchmark's giant component took
#: 23-25 ms at 2**15 and 2**16 against 31 ms at 2**17 and 38-40 ms at 2**18, the width
#: chosen on the earlier AMD machine (512 KB L2; docs/bench-engine.md measures both)
BAND_BITS = 16
#: the smallest component that gets bands: a 2 MB value vector (one L2).  On the Intel
#: machine bands made a warm solve of 300,000 states 1.6-2.0x faster, one of 200,000
#: states (below this threshold) 1.2-1.4x faster warm and no faster cold, and one of
#: 100,000 states (800 KB of values) 1.1-1.7x slower
BAND_MIN_STATES = 2 ** 18
#: at most this many bands a side (groups are bands squared): larger components widen their bands
_MAX_BANDS = 256
_CAP = 1000.0     # the same cap on an arc's plain factor as solve_linear.build_plain


@nb.njit(cache=True)
def _band_bits(n, S):
    """The band width (bits) of a component of n rows: S, widened so it has at most _MAX_BANDS bands."""
    while ((n + (1 << S) - 1) >> S) > _MAX_BANDS:
        S += 1
    return S


@nb.njit(cache=True)
def sub_bits(nb_, S):
    """Bits of tail blocks inside a group of a component of nb_ bands of 2**S rows: up to 8
    (blocks of 2**(S - 8) tails), fewer where nb_**2 groups of 2**bits blocks would pass 2**20."""
    lg = 0
    while (1 << lg) < nb_:
        lg += 1
    return max(0, min(8, S, 20 - 2 * lg))


@nb.njit(cache=True)
def _plan(int_ptr, comp_ptr, trivial, S, min_states, bits, bptr, goff):
    """Which components get bands, their widths and their offsets in the layout's arrays."""
    C = trivial.shape[0]
    for c in range(C):
        n = comp_ptr[c + 1] - comp_ptr[c]
        m = int_ptr[c + 1] - int_ptr[c]
        if (not trivial[c]) and n >= min_states and 0 < m < 2 ** 32 - 1:
            Sc = _band_bits(n, S)
            nb_ = (n + (1 << Sc) - 1) >> Sc
            bits[c] = Sc
            bptr[c + 1] = bptr[c] + m
            goff[c + 1] = goff[c] + (nb_ * nb_ << sub_bits(nb_, Sc)) + 1
        else:
            bits[c] = -1
            bptr[c + 1] = bptr[c]
            goff[c + 1] = goff[c]


@nb.njit(inline="always")
def _group(h, t, Sc, nb_, sb, sh, smask):
    """(group, whether the arc is inside its head's band) of an arc from local tail t to head h."""
    own = (h >> Sc) == (t >> Sc)
    return (((h >> Sc) * nb_ + (t >> Sc)) << sb) + (0 if own else (t >> sh) & smask), own


@nb.njit(cache=True)
def _row_cuts(int_head, a0, a1, parts):
    """Boundaries a0 = cuts[0] <= ... <= cuts[parts] = a1 of ``parts`` runs of arcs a0..a1-1
    of about equal length, each cut moved forward to the start of a row (``int_head``
    comes grouped by head), so that no row's arcs fall in two runs."""
    cuts = np.empty(parts + 1, np.int64)
    cuts[0] = a0
    for t in range(1, parts):
        e = max(a0 + (a1 - a0) * t // parts, cuts[t - 1])
        while a0 < e < a1 and int_head[e] == int_head[e - 1]:
            e += 1
        cuts[t] = e
    cuts[parts] = a1
    return cuts


@nb.njit(cache=True, parallel=True)
def _fill_one(int_head, int_tail, a0, a1, Sc, nb_, g0, p0, r0, gptr, perm, bh, bt, code, int_arc, ids, parts):
    """One banded component's part of :func:`_fill`, its arcs cut into ``parts`` runs of
    whole rows (:func:`_row_cuts`: the arcs come grouped by head, so no two runs write
    one row's ``code``; at most one run an arc), each counted and then scattered in a
    ``prange`` iteration of its own (a thread each where there are as many threads): a
    stable counting sort, so the same layout as one run's."""
    want_ids = ids.shape[0] > 0
    sb = sub_bits(nb_, Sc)
    sh = Sc - sb
    smask = (1 << sb) - 1
    G = nb_ * nb_ << sb
    parts = max(1, min(parts, a1 - a0))
    cuts = _row_cuts(int_head, a0, a1, parts)
    cnt = np.zeros((parts, G), np.int64)        # the counts, then in place each run's next position
    for t in nb.prange(parts):
        for e in range(cuts[t], cuts[t + 1]):
            h = np.int64(int_head[e])
            k, own = _group(h, np.int64(int_tail[e]), Sc, nb_, sb, sh, smask)
            cnt[t, k] += 1
            # 2 once an arc from the row's own band is seen, else 1: without a branch (an
            # arc is from its own band about once in the bands' number, at random)
            code[r0 + h] = max(code[r0 + h], np.uint8(1 + own))
    j = 0
    for k in range(G):
        gptr[g0 + k] = j
        for t in range(parts):
            c = cnt[t, k]
            cnt[t, k] = j
            j += c
    gptr[g0 + G] = j
    for t in nb.prange(parts):
        for e in range(cuts[t], cuts[t + 1]):
            h = np.int64(int_head[e])
            tl = np.int64(int_tail[e])
            k, own = _group(h, tl, Sc, nb_, sb, sh, smask)
            q = cnt[t, k]
            cnt[t, k] = q + 1
            perm[p0 + q] = e - a0
            bh[p0 + q] = h
            bt[p0 + q] = tl
            if want_ids:
                ids[a0 + q] = int_arc[e]


@nb.njit(cache=True)
def _fill(int_head, int_tail, int_ptr, comp_ptr, bits, bptr, goff, gptr, perm, bh, bt, code, int_arc, ids, parts):
    """The banded components' groups (a stable counting sort by head band, then tail band);
    with ``ids`` not empty (:func:`_unbanded_ids`) also each banded arc's id in band order.
    Each component's sort runs over ``parts`` threads (:func:`_fill_one`)."""
    for c in range(bits.shape[0]):
        if bits[c] < 0:
            continue
        Sc = bits[c]
        n = comp_ptr[c + 1] - comp_ptr[c]
        nb_ = (n + (1 << Sc) - 1) >> Sc
        _fill_one(int_head, int_tail, int_ptr[c], int_ptr[c + 1], Sc, nb_, goff[c], bptr[c], comp_ptr[c], gptr,
                  perm, bh, bt, code, int_arc, ids, parts)


@nb.njit(cache=True)
def _unbanded_ids(int_arc, int_ptr, bits, ids):
    """The arc ids in band order of the components without bands (their own order, from
    ``int_arc``) into ``ids``; :func:`_fill` writes the banded components' ranges."""
    for c in range(bits.shape[0]):
        if bits[c] < 0:
            for j in range(int_ptr[c], int_ptr[c + 1]):
                ids[j] = int_arc[j]


def band_layout(int_head, int_tail, int_ptr, comp_ptr, trivial, S=None, min_states=None):
    """The band layout of a schedule's cyclic components (see the module docstring).

    Args:
        int_head, int_tail: int32 local head and tail of the schedule's internal arcs,
            grouped by head in row order; int_ptr: int64 [C+1] each component's arcs;
            comp_ptr: int64 [C+1] each component's rows; trivial: bool [C].
        S: band width in bits (default :data:`BAND_BITS`; a component with more than
            256 bands widens its own).
        min_states: the smallest component that gets bands (default :data:`BAND_MIN_STATES`).

    Returns the tuple the linear solver takes: ``(bits, bptr, goff, gptr, perm, bh, bt,
    code)``; ``bits[c]`` is component c's band width in bits or -1 (no bands);
    ``bptr[c]:bptr[c + 1]`` its arcs in band order in ``perm`` (position in the component's
    head-grouped arcs), ``bh`` and ``bt`` (local head and tail, uint32);
    ``gptr[goff[c]:goff[c + 1]]`` the boundaries of its (head band, tail band, tail block)
    groups relative to ``bptr[c]`` (group ``k = hb * nb + tb`` spans ``gptr[k << sb]`` to
    ``gptr[(k + 1) << sb]``, ``sb`` = :func:`sub_bits`; a band's own group is one block); ``code[comp_ptr[c] + i]`` row i's arcs: 0 none, 1 only from
    other bands, 2 some from its own band.
    """
    return _layout(int_head, int_tail, int_ptr, comp_ptr, trivial, S, min_states, None)[0]


def _layout(int_head, int_tail, int_ptr, comp_ptr, trivial, S, min_states, int_arc, parts=None):
    """(:func:`band_layout`'s tuple, the arc ids of :func:`band_order`); with ``int_arc``
    None the ids are not made (None comes back), and where no arc is banded they are
    ``int_arc`` itself.  ``parts``: the runs each component's arcs are sorted in, one a
    thread (default numba's threads, at most 8); the layout does not depend on it."""
    S = BAND_BITS if S is None else int(S)
    min_states = BAND_MIN_STATES if min_states is None else int(min_states)
    if S < 1 or S > 31:
        raise ValueError(f"band width must be 1 to 31 bits, got {S}")
    C = trivial.shape[0]
    bits = np.empty(C, np.int64)
    bptr = np.zeros(C + 1, np.int64)
    goff = np.zeros(C + 1, np.int64)
    _plan(int_ptr, comp_ptr, trivial, S, max(min_states, 2), bits, bptr, goff)
    # the arrays of one entry per arc through numpy (huge pages where the kernel offers them)
    m = int(bptr[C])
    perm, bh, bt = np.empty(m, np.uint32), np.empty(m, np.uint32), np.empty(m, np.uint32)
    gptr = np.zeros(int(goff[C]), np.int64)
    code = np.zeros(int(comp_ptr[C]) if m else 0, np.uint8)
    ids = np.empty(0, np.int64)
    if int_arc is not None and m:
        ids = np.empty_like(int_arc)
        _unbanded_ids(int_arc, int_ptr, bits, ids)
    _fill(int_head, int_tail, int_ptr, comp_ptr, bits, bptr, goff, gptr, perm, bh, bt, code,
          int_arc if int_arc is not None else ids, ids,
          max(1, min(nb.get_num_threads(), 8)) if parts is None else int(parts))
    return (bits, bptr, goff, gptr, perm, bh, bt, code), (ids if (m and int_arc is not None) else int_arc)


def band_widths():
    """(:data:`BAND_BITS`, :data:`BAND_MIN_STATES`) in force: part of the key under which a
    layout, and anything laid out in its order, is cached."""
    return BAND_BITS, BAND_MIN_STATES


def _cached(graph, sched):
    """The layout and band-ordered arc ids of ``sched``, cached on ``graph``; None where no
    component reaches :data:`BAND_MIN_STATES`."""
    S, least = band_widths()
    if not sched.cyclic or int(np.max(np.diff(sched.comp_ptr))) < least:
        return None
    return graph.cached(("bands", sched.backward, S, least),
                        lambda: _layout(sched.int_head, sched.int_tail, sched.int_ptr, sched.comp_ptr,
                                        sched.trivial, S, least, sched.int_arc))


def bands_for(graph, sched):
    """The cache bands of a schedule of ``graph`` (its one-column rows' sweeps), cached on
    the graph beside the schedule (:func:`fsmlearn.algo.schedule.schedule_for`) under the
    widths in force; :func:`no_bands` where no component reaches :data:`BAND_MIN_STATES`."""
    got = _cached(graph, sched)
    return no_bands() if got is None else got[0]


def band_order(graph, sched):
    """The schedule's internal arc ids (``sched.int_arc``, grouped by head) with each banded
    component's range in band order, the order in which the linear solver reads that
    component's internal rows (one-column rows): ``ids[a0 + p] = int_arc[a0 + perm[p]]``
    for the component's arcs ``a0:a1`` and its slice of the layout's ``perm``; other
    components keep their order.  Made with the layout (:func:`bands_for`) and cached
    with it (8 bytes an arc); ``sched.int_arc`` itself where nothing is banded."""
    got = _cached(graph, sched)
    return sched.int_arc if got is None else got[1]     # (_layout's ids are int_arc where nothing is banded)


_NONE = None


def no_bands():
    """The layout with no banded component (the solver's flat sweeps everywhere)."""
    global _NONE
    if _NONE is None:
        e64 = np.empty(0, np.int64)
        e32 = np.empty(0, np.uint32)
        _NONE = (e64, e64, e64, e64, e32, e32, e32, np.empty(0, np.uint8))
    return _NONE


@nb.njit(cache=True)
def _scatter(acc, y, Wp, bh, bt, e0, e1, ulo):
    """acc[bh[e] - ulo] += y[bt[e]] * Wp[e] for the arcs e0:e1 (step 2 of the module docstring)."""
    one = np.uint64(1)
    e = np.uint64(e0)
    end = np.uint64(e1)
    while e < end:
        acc[np.uint64(bh[e]) - ulo] += y[bt[e]] * Wp[e]
        e += one


@nb.njit(cache=True)
def _scatter_part(acc, y, Wp, bh, bt, i0, own0, own1, i1, c0, c1, ulo):
    """The arcs c0:c1 of the band's arcs from other bands, counted over i0:own0 then own1:i1."""
    n0 = own0 - i0
    if c0 < n0:
        _scatter(acc, y, Wp, bh, bt, i0 + c0, i0 + min(c1, n0), ulo)
    if c1 > n0:
        _scatter(acc, y, Wp, bh, bt, own1 + max(c0, n0) - n0, own1 + c1 - n0, ulo)


@nb.njit(inline="always")
def _around(gptr, k, nb_, sb):
    """Band k's arcs from other bands, which lie around its own group: (i0, g0, own0, own1,
    i1) with ``i0:g0`` those from bands before k - 1, ``g0:own0`` those from band k - 1
    (none for band 0), ``own0:own1`` the band's own and ``own1:i1`` those from later bands."""
    i0 = gptr[(k * nb_) << sb]
    g0 = gptr[(k * nb_ + k - 1) << sb] if k >= 1 else i0
    own0 = gptr[(k * nb_ + k) << sb]
    own1 = gptr[(k * nb_ + k + 1) << sb]
    i1 = gptr[((k + 1) * nb_) << sb]
    return i0, g0, own0, own1, i1


@nb.njit(inline="always")
def _paired(gptr, k, nb_, sb, rows):
    """Whether band k's arcs from other bands are split between two accumulators: at least
    :data:`PAIR_MIN_ARCS` of them, and twice the band's rows."""
    i0, g0, own0, own1, i1 = _around(gptr, k, nb_, sb)
    ext = (own0 - i0) + (i1 - own1)
    return ext >= PAIR_MIN_ARCS and ext >= 2 * rows


@nb.njit(inline="always")
def _first_share(gptr, k, nb_, sb, rows):
    """How many of band k's arcs from bands other than k - 1 the first thread adds (the
    second adds the rest): the first also finishes band k - 1 (its own arcs) and adds the
    arcs from band k - 1, so it takes what evens the two threads' arcs, plus a quarter of
    the band's rows (measured on the engine benchmark: 0 to 40,000 more arcs to the first
    thread gave the same time within the noise; 30,000 fewer, a slower sweep).  All of
    them where the band is not paired (:func:`_paired`)."""
    i0, g0, own0, own1, i1 = _around(gptr, k, nb_, sb)
    rest = (g0 - i0) + (i1 - own1)
    if not _paired(gptr, k, nb_, sb, rows):
        return rest
    mine = own0 - g0
    if k >= 1:
        mine += gptr[((k - 1) * nb_ + k) << sb] - gptr[((k - 1) * nb_ + k - 1) << sb]
    return max(0, min(rest, (rest + mine) // 2 - mine + rows // 4))


@nb.njit(inline="always")
def _finish_band(y, code, Wp, bh, bt, a0, a1, paired, lo, hi, own0, own1):
    """Steps 3 and 4 for the band of rows lo:hi: its sums (``a0``, plus ``a1`` where it is
    paired) taken into ``a0``, the rows all of whose arcs come from other bands set, then
    the band's own arcs added row by row, Gauss-Seidel."""
    for r in range(hi - lo):
        v = a0[r] + a1[r] if paired else a0[r]
        a0[r] = v
        if code[lo + r] == 1:
            y[lo + r] = v
    one = np.uint64(1)
    ulo = np.uint64(lo)
    e = np.uint64(own0)
    end = np.uint64(own1)
    while e < end:
        # the row's running sum lives in a0 (a read-modify-write the store forwarding
        # serves; a select between a0 and a register sum took 1.3x as long), and its
        # newest value in y after every arc
        h = bh[e]
        v = a0[np.uint64(h) - ulo] + y[bt[e]] * Wp[e]
        a0[np.uint64(h) - ulo] = v
        y[h] = v
        e += one


@nb.njit(cache=True, parallel=True)
def _pipeline_step(y, yold, b, Wp, bh, bt, code, accs, st, cur, fin, plo, phi, pown0, pown1, ppaired,
                   lo, hi, i0, g0, own0, own1, i1, paired, share, qlo, qhi):
    """One step of the two-thread sweep: band k's arcs from other bands added while band
    k - 1 is finished.

    The first thread finishes band k - 1 (rows ``plo:phi``, its own arcs ``pown0:pown1``;
    :func:`_finish_band`) where ``fin``, then starts band k's sums (rows ``lo:hi``) from
    ``b`` in its first accumulator and adds the first ``share`` of its arcs from bands
    other than k - 1 (``i0:g0`` then ``own1:i1``; :func:`_first_share`) and, last, those
    from band k - 1 (``g0:own0``), which are final now.  The second thread copies band k's
    old values to ``yold``, zeroes band k's second accumulator where ``paired``, adds the
    rows ``qlo:qhi`` (band k - 2's, final since the last step) to the statistics ``st``,
    and adds the rest of band k's arcs from bands other than k - 1 into that accumulator.
    The second thread reads band k's values only to copy them, reads none of band k - 1,
    and writes neither ``y`` nor the first thread's accumulators; the first writes only
    band k - 1's values and its own accumulators: the two are independent, and with one
    thread the same work runs in turn, with the same sums.  ``accs``: [4, 2**S], band k's
    two accumulators in rows ``cur`` and ``cur + 1`` (``cur`` = 2 * (k & 1); band k - 1's in
    the other two); an empty range ``lo:hi`` where there is no band k.

    Every index comes in as an argument, computed by the caller: numba's parallel lowering
    hoists loop-invariant array reads out of the ``prange`` body, conditions and all, so a
    read of the group boundaries guarded here would still run where its guard is false."""
    rest = (g0 - i0) + (i1 - own1)
    ulo = np.uint64(lo)
    for j in nb.prange(2):
        if j == 0:
            if fin:
                _finish_band(y, code, Wp, bh, bt, accs[2 - cur], accs[3 - cur], ppaired, plo, phi, pown0, pown1)
            a0 = accs[cur]
            for r in range(hi - lo):
                a0[r] = b[lo + r]
            _scatter_part(a0, y, Wp, bh, bt, i0, g0, own1, i1, 0, share, ulo)
            _scatter(a0, y, Wp, bh, bt, g0, own0, ulo)
        else:
            a1 = accs[cur + 1]
            for r in range(hi - lo):
                yold[lo + r] = y[lo + r]
            if paired:
                for r in range(hi - lo):
                    a1[r] = 0.0
            if qhi > qlo:
                sweep_stats_rows(y, yold, code, qlo, qhi, st)
            _scatter_part(a1, y, Wp, bh, bt, i0, g0, own1, i1, share, rest, ulo)


#: a band's arcs from other bands are split between two accumulators from this many on, and
#: from twice the band's rows (the second accumulator is zeroed and summed); fewer: the first
#: thread adds them all.  Compiled into the cached kernel: changing it here changes nothing
#: after the first import.
PAIR_MIN_ARCS = 1 << 16


def sweep_scratch(S, two_threads):
    """The scratch :func:`banded_sweep1` takes for bands of 2**S rows: four bands' accumulators
    for the two-thread sweep, one for the sweep on one thread."""
    return np.empty((4 if two_threads else 1) << S)


@nb.njit(cache=True)
def banded_sweep1(y, yold, b, Wp, bh, bt, gptr, S, code, acc, st):
    """One banded Gauss-Seidel sweep of one-column rows (steps 1-4 of the module docstring),
    with its statistics.

    y, yold, b: float64 [n] (values, previous values out, constants); Wp: float64 [m]
    the plain arc factors in band order; bh, bt: uint32 [m] local head and tail in band
    order; gptr: int64 [(nb**2 << sub_bits) + 1] the groups' boundaries; S: band width in bits;
    code: uint8 [n] (see :func:`band_layout`); acc: float64 scratch
    (:func:`sweep_scratch`): of at least 4 * 2**S for the two-thread sweep, else (at
    least 2**S) the sweep on one thread (:func:`_pipeline_step`: each band's arcs from other bands added
    while the band before is finished, the rows' sums in another order, the same
    terms).  (The caller knows numba's thread count; asking it here would keep the kernel
    from numba's cache.)  st: float64 [5] out, the statistics of the rows with arcs
    (``code`` not 0) as :func:`fsmlearn.algo.solve_linear.sweep_stats` takes them, band by
    band (:func:`fsmlearn.algo.convergence.sweep_stats_rows`) once each band's rows are
    final.
    """
    n = y.shape[0]
    nb_ = (n + (1 << S) - 1) >> S
    sb = sub_bits(nb_, S)
    w = 1 << S
    sweep_stats_start(st)
    if acc.shape[0] >= 4 * w:
        accs = acc[:4 * w].reshape(4, w)
        # step k: band k's arcs from other bands while band k - 1 is finished (every index
        # computed here, none in the parallel step: see _pipeline_step)
        pown0 = pown1 = 0
        ppaired = False
        for k in range(nb_ + 1):
            lo = min(n, k << S)
            hi = min(n, lo + w)
            i0 = g0 = own0 = own1 = i1 = 0
            paired = False
            share = 0
            if k < nb_:
                i0, g0, own0, own1, i1 = _around(gptr, k, nb_, sb)
                paired = _paired(gptr, k, nb_, sb, hi - lo)
                share = _first_share(gptr, k, nb_, sb, hi - lo)
            qlo = (k - 2) << S if k >= 2 else 0
            qhi = min(n, qlo + w) if k >= 2 else 0
            plo = (k - 1) << S if k >= 1 else 0
            _pipeline_step(y, yold, b, Wp, bh, bt, code, accs, st, 2 * (k & 1), k >= 1, plo, min(n, plo + w),
                           pown0, pown1, ppaired, lo, hi, i0, g0, own0, own1, i1, paired, share, qlo, qhi)
            pown0, pown1, ppaired = own0, own1, paired
        if nb_ >= 1:
            sweep_stats_rows(y, yold, code, (nb_ - 1) << S, n, st)
        return
    acc0 = acc[:w]
    for hb in range(nb_):
        lo = hb << S
        hi = min(n, lo + w)
        ulo = np.uint64(lo)
        i0, _, own0, own1, i1 = _around(gptr, hb, nb_, sb)
        for r in range(hi - lo):
            yold[lo + r] = y[lo + r]
            acc0[r] = b[lo + r]
        _scatter(acc0, y, Wp, bh, bt, i0, own0, ulo)
        _scatter(acc0, y, Wp, bh, bt, own1, i1, ulo)
        _finish_band(y, code, Wp, bh, bt, acc0, acc0, False, lo, hi, own0, own1)
        sweep_stats_rows(y, yold, code, lo, hi, st)


@nb.njit(inline="always")
def _plain_banded_run(Wint, a0, bh, bt, pot, star, Wp, p0, p1):
    """:func:`build_plain_banded` of the arcs p0..p1-1 of the band order; True when one was capped."""
    capped = False
    one = np.uint64(1)
    p = np.uint64(p0)
    end = np.uint64(p1)
    e = np.uint64(a0 + p0)
    while p < end:
        h = bh[p]
        f, cap = pow2_capped(Wint[e, 1] - (pot[h] - pot[bt[p]]), _CAP)
        capped |= cap
        Wp[p] = Wint[e, 0] * f * star[h, 0]
        p += one
        e += one
    return capped


@nb.njit(cache=True, parallel=True)
def build_plain_banded(Wint, a0, bh, bt, pot, star, Wp):
    """The plain arc factors of a banded component; True when one was capped.

    ``Wint[a0:]`` holds the component's one-column scaled rows in band order (the
    schedule's internal rows with this component's range permuted by :func:`band_order`),
    so this is one stream: Wp[p] = W_p * 2**(k_p - (pot[bh[p]] - pot[bt[p]])) * star[bh[p]]
    (star [n, 1] the heads' self-loop stars), as
    :func:`fsmlearn.algo.solve_linear.build_plain` writes them in head order, with the same
    cap at 2**1000.  (Reading head-ordered rows through the layout's ``perm`` instead took
    301-321 ms of a warm solve on the engine benchmark; docs/bench-engine.md.)  The two
    halves of the stream go to two ``prange`` iterations (two threads where numba has
    them; each factor is computed on its own, so the same factors).
    """
    m = bh.shape[0]
    capped = np.zeros(2, np.bool_)
    for t in nb.prange(2):
        capped[t] = _plain_banded_run(Wint, a0, bh, bt, pot, star, Wp, t * m // 2, (t + 1) * m // 2)
    return capped[0] or capped[1]

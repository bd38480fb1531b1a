"""Scoring label sequences on a machine with failure arcs, without building a product.

``score_sequences(b, seqs)`` is composition with a straight-line ``a`` (one
label sequence): it walks ``b`` state by state, for scoring many strings on
a backoff language model, through a hash of (state, label) and the failure
states (:class:`ScoreTables`, which a file can hold and hand in), on one
thread or on several (blocks of sequences).  The result equals the total
weight of ``compose(string_acceptor, b)`` (:mod:`fsmlearn.algo.compose`).

Public names: score_sequences, ScoreResult, ScoreTables, score_tables, label_hash,
seed_label_hash, probe_arc_hash, PARALLEL_MIN_LABELS, WALK_OK, WALK_BAD_DST, WALK_BAD_BACK,
WALK_LONG_CHAIN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import MachineError
from ..fsm.hashing import hash64, table_capacity
from ..fsm.hashing import prefetch as _prefetch
from ..fsm.machine import PHI, Machine
from .compose import neglog_arrays
from .phi import label_index, phi_depths


@dataclass
class ScoreResult:
    """Scores of label sequences on a machine.

    Attributes:
        weight: float64 [S] total weight of each sequence (negative log,
            final weight included; inf when the machine rejects it).
        failed_at: int64 [S] position of the first label the machine could
            not read (-1 if none; the sequence length if only the final
            weight was missing).
        word_weight: with ``per_word``, float64: the weight of each label
            (the failure arcs taken to read it included) and, when the final
            weight is scored, one more entry per sequence for it; sequence
            ``i`` holds entries ``ptr[i] + i`` to ``ptr[i + 1] + i``
            (``ptr[i]`` to ``ptr[i + 1] - 1`` without final weights); inf
            from the first label the machine cannot read.  Else None.
        word_state: with ``per_word``, int64 like ``word_weight``: the state
            whose arc (or final weight) served the entry, after the failure
            arcs (-1 where none did).  Else None.
    """
    weight: np.ndarray
    failed_at: np.ndarray
    word_weight: np.ndarray | None = None
    word_state: np.ndarray | None = None


@nb.njit(cache=True)
def _build_label_hash(src_start, perm, il, dst, w, L, T, mask):
    """Rows [key, destination, weight] of the first arc per (state, label).

    key = state * L + label, stored as float64 (exact below 2**53); one row
    per probe, so a lookup touches one cache line in the common case.
    """
    for s in range(src_start.shape[0] - 1):
        for i in range(src_start[s], src_start[s + 1]):
            a = perm[i]
            x = il[a]
            if x < 0:
                continue
            if i > src_start[s] and il[perm[i - 1]] == x:
                continue
            key = s * L + x
            j = np.int64(hash64(key) & np.uint64(mask))
            while T[j, 0] >= 0.0:
                j = (j + 1) & mask
            T[j, 0] = key
            T[j, 1] = dst[a]
            T[j, 2] = w[a]


@nb.njit(inline="always")
def probe_arc_hash(T, mask, key):
    """The row of ``key`` (state * L + label) in an arc hash T (float64 [cap, 3]: key, destination,
    weight; key -1 for a free slot; ``mask = cap - 1``), or -1 when absent.  At most ``cap`` rows
    are probed, so that a table without a free slot (a corrupt file) cannot loop forever."""
    j = np.int64(hash64(key) & np.uint64(mask))
    kf = float(key)
    for _ in range(mask + 1):
        k = T[j, 0]
        if k == kf:
            return j
        if k < 0.0:
            return -1
        j = (j + 1) & mask
    return -1


def label_hash(m: Machine):
    """Cached hash of (state, input label) -> (destination, weight) of its first arc.

    Returns:
        (T float64 [cap, 3], mask = cap - 1, L): rows [state * L + label,
        destination, -log weight], key -1 for a free slot; cap is the first
        power of two (at least 16) holding twice the arcs with a label >= 0
        (phi arcs have no row), so that at most half the rows are used.
        A hash built elsewhere (a compiled LM's file) is handed in with
        :func:`seed_label_hash`.
    """
    def build():
        perm = label_index(m)
        L = int(max(int(m.ilabel.max(initial=0)), 0)) + 1
        if m.num_states * L >= 2**53:
            raise MachineError("too many states x labels for the arc hash")
        labelled = int(np.count_nonzero(m.ilabel >= 0))
        cap = table_capacity(labelled)
        T = np.full((cap, 3), -1.0)
        w, _ = neglog_arrays(m)
        _build_label_hash(m.src_start, perm, m.ilabel, m.dst, w, L, T, cap - 1)
        T.setflags(write=False)
        return T, cap - 1, L
    return m.cached("label_hash", build)


def seed_label_hash(m: Machine, T: np.ndarray, mask: int, L: int) -> None:
    """Give ``m`` a precomputed :func:`label_hash` (e.g. mapped from a file) instead of building it.

    The table must be the hash of ``m`` itself (the caller vouches for it;
    only its shape is checked here).

    Raises:
        MachineError: T is not float64 [mask + 1, 3] with mask + 1 a power of
            two, or L is smaller than a label of ``m``.
    """
    cap = int(mask) + 1
    if not (isinstance(T, np.ndarray) and T.dtype == np.float64 and T.shape == (cap, 3) and cap > 0
            and cap & (cap - 1) == 0):
        raise MachineError(f"an arc hash must be float64 [cap, 3] with cap = mask + 1 = {cap} a power of two; "
                           f"got {getattr(T, 'dtype', type(T).__name__)} {getattr(T, 'shape', '')}")
    if m.num_arcs and int(L) <= int(m.ilabel.max()):
        raise MachineError(f"arc hash for labels < {L}, but the machine has label {int(m.ilabel.max())}")
    m.cached("label_hash", lambda: (T, int(mask), int(L)))


@dataclass
class ScoreTables:
    """What :func:`score_sequences` reads of a machine: its arc hash and its
    failure and final structure, one flat array each, so that a file can hold
    them and hand them in mapped (see ``fsmlearn.lm.model``).

    Attributes:
        start: the start state (-1: the machine accepts nothing).
        arcs: float64 [cap, 3], the :func:`label_hash` rows.
        mask: ``cap - 1`` (cap a power of two).
        num_labels: L, the keys' multiplier (labels are 0..L-1).
        back: int32 [n], each state's failure (phi) state, -1 for none.
        back_cost: float64 [n], the -log weight of that failure arc.
        final: float64 [n], -log final weights (inf: not final).
        max_back: the most failure arcs a chain may hold (the depth of the
            phi forest); a longer chain means the arrays are corrupt.

    Only shapes, dtypes and scalars are checked here (constant time); the
    values are checked where the walk reads them (a destination or failure
    state out of range, a chain longer than ``max_back`` raise
    MachineError with the array, index and value, never a crash).

    Raises:
        MachineError: a shape, dtype or scalar out of range (named).
    """
    start: int
    arcs: np.ndarray
    mask: int
    num_labels: int
    back: np.ndarray
    back_cost: np.ndarray
    final: np.ndarray
    max_back: int

    def __post_init__(self):
        def need(name, dtypes, ndim):
            a = getattr(self, name)
            if not (isinstance(a, np.ndarray) and a.dtype in dtypes and a.ndim == ndim and a.flags.c_contiguous):
                raise MachineError(f"score tables: {name} must be a contiguous {ndim}-D array of "
                                   f"{' or '.join(str(np.dtype(d)) for d in dtypes)}; got "
                                   f"{getattr(a, 'dtype', type(a).__name__)} {getattr(a, 'shape', '')}")
        need("arcs", (np.float64,), 2)
        need("back", (np.int32,), 1)
        need("back_cost", (np.float64,), 1)
        need("final", (np.float64,), 1)
        cap = int(self.mask) + 1
        if self.arcs.shape != (cap, 3) or cap & (cap - 1):
            raise MachineError(f"score tables: arcs has shape {self.arcs.shape}; expected ({cap}, 3) "
                               f"with {cap} = mask + 1 a power of two")
        n = self.final.shape[0]
        for name in ("back", "back_cost"):
            if getattr(self, name).shape != (n,):
                raise MachineError(f"score tables: {name} has shape {getattr(self, name).shape}; expected ({n},) "
                                   f"like final")
        self.start, self.mask, self.num_labels, self.max_back = (int(self.start), int(self.mask),
                                                                 int(self.num_labels), int(self.max_back))
        if not -1 <= self.start < n or (n == 0 and self.start != -1):
            raise MachineError(f"score tables: start state {self.start} is out of range for {n} states")
        if self.num_labels < 1 or n * self.num_labels >= 2**53:
            raise MachineError(f"score tables: {self.num_labels} labels x {n} states do not make arc hash keys")
        if not 0 <= self.max_back <= max(n, 0):
            raise MachineError(f"score tables: max_back {self.max_back} is out of range for {n} states")

    @property
    def num_states(self) -> int:
        return int(self.final.shape[0])


@nb.njit(cache=True)
def _back_arcs(src_start, ilabel, dst, w):
    """Each state's phi arc as (back state int64 [n] or -1, its weight float64 [n]) and the
    first state with two phi arcs (-1 if none)."""
    n = src_start.shape[0] - 1
    back = np.full(n, -1, np.int64)
    cost = np.zeros(n)
    for q in range(n):
        for a in range(src_start[q], src_start[q + 1]):
            if ilabel[a] == PHI:
                if back[q] != -1:
                    return back, cost, q
                back[q] = dst[a]
                cost[q] = w[a]
    return back, cost, -1


def score_tables(m: Machine) -> ScoreTables:
    """The (cached) :class:`ScoreTables` of a machine: :func:`label_hash`, its
    phi arcs as failure states and their weights, its final weights (-log).

    Raises:
        MachineError: a state with two phi arcs, or a cycle of phi arcs.
    """
    def build():
        T, mask, L = label_hash(m)
        w, f = neglog_arrays(m)
        back, cost, bad = _back_arcs(m.src_start, m.ilabel, m.dst, w)
        if bad >= 0:
            raise MachineError(f"state {bad} has more than one phi (failure) arc")
        n = m.num_states
        depth, order = phi_depths(back, n)
        if n and order.size == 0:
            raise MachineError("the phi (failure) arcs of the machine form a cycle")
        f = np.array(f, dtype=np.float64)
        back = back.astype(np.int32)
        for a in (back, cost, f):
            a.setflags(write=False)
        return ScoreTables(m.start, T, mask, L, back, cost, f, int(depth.max(initial=0)))
    return m.cached("score_tables", build)


#: fewer labels than this are scored on one thread whatever ``threads`` says (starting
#: the threads would cost more than it saves)
PARALLEL_MIN_LABELS = 20_000

# what the walk reports (err[0]); err[1] holds the row or state
WALK_OK, WALK_BAD_DST, WALK_BAD_BACK, WALK_LONG_CHAIN = 0, 1, 2, 3


@nb.njit(inline="always")
def _read_label(x, r, T, mask, L, back, back_cost, n, max_back):
    """Read label x from state r with failure semantics.

    Returns (row of the arc or -1, the cost of the failure arcs taken, the
    state that has the arc, status, where): status WALK_BAD_DST (the row's
    destination is out of range; where = the row), WALK_BAD_BACK (a failure
    state out of range; where = the state) or WALK_LONG_CHAIN (more than
    max_back failure arcs: a cycle; where = the state reached).
    """
    acc = 0.0
    for _ in range(max_back + 1):
        if 0 <= x < L:
            row = probe_arc_hash(T, mask, r * L + x)
            if row >= 0:
                d = T[row, 1]
                if d >= 0.0 and d < n:
                    return row, acc, r, WALK_OK, 0
                return row, acc, r, WALK_BAD_DST, row
        b = np.int64(back[r])
        if b == -1:
            return -1, acc, r, WALK_OK, 0
        if b < -1 or b >= n:
            return -1, acc, r, WALK_BAD_BACK, r
        acc += back_cost[r]
        r = b
    return -1, acc, r, WALK_LONG_CHAIN, r


@nb.njit(inline="always")
def _read_final(r, final, back, back_cost, n, max_back, phi_final):
    """The final weight of state r, failing over when ``phi_final``: (weight or inf, the state
    whose final weight it is or -1, status, where) with the statuses of :func:`_read_label`."""
    acc = 0.0
    for _ in range(max_back + 1):
        f = final[r]
        if f < np.inf:
            return acc + f, r, WALK_OK, 0
        if not phi_final:
            return np.inf, np.int64(-1), WALK_OK, 0
        b = np.int64(back[r])
        if b == -1:
            return np.inf, np.int64(-1), WALK_OK, 0
        if b < -1 or b >= n:
            return np.inf, np.int64(-1), WALK_BAD_BACK, r
        acc += back_cost[r]
        r = b
    return np.inf, np.int64(-1), WALK_LONG_CHAIN, r


@nb.njit(inline="always")
def _load_stream(k, i, sent, pos, state, tot, ptr, start):
    """Stream k starts sentence i at the start state."""
    sent[k] = i
    pos[k] = ptr[i]
    state[k] = start
    tot[k] = 0.0


@nb.njit(cache=True)
def _score_block(lo, hi, ptr, labels, start, T, mask, L, back, back_cost, final, max_back, phi_final,
                 use_final, per_word, out_w, out_fail, word_w, word_state, err):
    """Weights of sequences lo..hi-1 (:func:`score_sequences`), walked in lockstep.

    K streams each hold one sequence; each round first asks the processor to
    bring in the hash row (and failure state) that every stream will read
    (prefetches, which overlap in memory), then advances every stream by one
    label, so that the sequences' cache misses are waited for together
    instead of one by one.  Writes out_w, out_fail and, with
    ``per_word``, word_w and word_state (:class:`ScoreResult`); on corrupt
    arrays stops with err = (status, where) of :func:`_read_label`.
    """
    n = final.shape[0]
    K = 16
    sent = np.full(K, -1, np.int64)
    pos = np.zeros(K, np.int64)
    state = np.zeros(K, np.int64)
    tot = np.zeros(K)
    nxt = lo
    active = 0
    for k in range(K):
        if nxt < hi:
            _load_stream(k, nxt, sent, pos, state, tot, ptr, start)
            nxt += 1
            active += 1
    while active > 0:
        # bring in the hash rows (and failure states) that this round will read, all streams at once
        for k in range(K):
            i = sent[k]
            if i >= 0 and pos[k] < ptr[i + 1]:
                x = labels[pos[k]]
                r = state[k]
                if 0 <= x < L:
                    _prefetch(T, np.int64(hash64(r * L + x) & np.uint64(mask)))
                _prefetch(back, r)
        for k in range(K):
            i = sent[k]
            if i < 0:
                continue
            p = pos[k]
            done = False
            if p < ptr[i + 1]:
                row, acc, r, status, where = _read_label(labels[p], state[k], T, mask, L, back, back_cost, n,
                                                         max_back)
                if status != WALK_OK:
                    err[0] = status
                    err[1] = where
                    return
                if row < 0:
                    out_w[i] = np.inf
                    out_fail[i] = p - ptr[i]
                    done = True
                else:
                    c = acc + T[row, 2]
                    tot[k] += c
                    state[k] = np.int64(T[row, 1])
                    pos[k] = p + 1
                    if per_word:
                        o = p + i if use_final else p
                        word_w[o] = c
                        word_state[o] = r
            else:
                fail = -1
                t = tot[k]
                if use_final:
                    fw, r, status, where = _read_final(state[k], final, back, back_cost, n, max_back, phi_final)
                    if status != WALK_OK:
                        err[0] = status
                        err[1] = where
                        return
                    if fw == np.inf:
                        fail = ptr[i + 1] - ptr[i]
                    t += fw
                    if per_word:
                        word_w[ptr[i + 1] + i] = fw
                        word_state[ptr[i + 1] + i] = r
                out_w[i] = t
                out_fail[i] = fail
                done = True
            if done:
                if nxt < hi:
                    _load_stream(k, nxt, sent, pos, state, tot, ptr, start)
                    nxt += 1
                else:
                    sent[k] = -1
                    active -= 1


@nb.njit(cache=True, parallel=True)
def _score_blocks(bounds, ptr, labels, start, T, mask, L, back, back_cost, final, max_back, phi_final,
                  use_final, per_word, out_w, out_fail, word_w, word_state, err):
    """:func:`_score_block` on the blocks [bounds[c], bounds[c + 1]) of sequences, in parallel
    (one err row per block)."""
    for c in nb.prange(bounds.shape[0] - 1):
        _score_block(bounds[c], bounds[c + 1], ptr, labels, start, T, mask, L, back, back_cost, final, max_back,
                     phi_final, use_final, per_word, out_w, out_fail, word_w, word_state, err[c])


def _walk_error(status: int, where: int, t: ScoreTables) -> MachineError:
    """The error of a walk that met corrupt tables, naming the array, the index and the value
    (as attributes ``array``, ``index``, ``value`` too)."""
    n = t.num_states
    if status == WALK_BAD_DST:
        array, index, value = "arcs", (where, 1), float(t.arcs[where, 1])
        msg = f"arc hash row {where}: destination {value!r} is out of range for {n} states"
    elif status == WALK_BAD_BACK:
        array, index, value = "back", where, int(t.back[where])
        msg = f"state {where}: failure state {value} is out of range for {n} states"
    else:
        array, index, value = "back", where, int(t.back[where])
        msg = f"failure states: a chain longer than the phi forest's depth {t.max_back} reaches state {where} " \
              f"(a cycle)"
    e = MachineError(msg)
    e.array, e.index, e.value = array, index, value
    return e


def score_sequences(b: Machine | None, ptr: np.ndarray, labels: np.ndarray, phi_final: bool = True,
                    final: bool = True, *, tables: ScoreTables | None = None, threads: int = 1,
                    per_word: bool = False) -> ScoreResult:
    """Weights of label sequences on a (deterministic) machine with failure arcs.

    Follows the first matching arc at each step (for a machine that is
    deterministic on input labels this is the only path; the total weight is
    that of ``compose(string_acceptor, b)``).  Arcs are found through a hash
    of (state, label), one probe per step (:func:`label_hash`).

    Args:
        b: the machine (typically a backoff LM acceptor); None when
            ``tables`` are given.
        ptr: int64 [S+1] sequence boundaries in ``labels``.
        labels: int32 label ids.
        phi_final: final weights fail over.
        final: include the final weight at the end of each sequence.
        tables: precomputed :class:`ScoreTables` (a file's, mapped); default
            the machine's own (:func:`score_tables`, built once and cached).
        threads: 1 walks the sequences on this thread; k > 1 splits them into
            blocks scored on up to k of numba's threads (0: all of them), when
            there are at least :data:`PARALLEL_MIN_LABELS` labels.  Same
            results either way.
        per_word: also return each label's weight and serving state
            (:class:`ScoreResult`).

    Raises:
        MachineError: bad ``ptr``; corrupt tables (a destination or failure
            state out of range, a failure cycle: the message and the error's
            ``array``, ``index``, ``value`` attributes name it).
    """
    ptr = np.ascontiguousarray(ptr, dtype=np.int64)
    labels = np.ascontiguousarray(labels, dtype=np.int32)
    if ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or ptr[-1] != labels.size or np.any(np.diff(ptr) < 0):
        raise MachineError("ptr must rise from 0 to len(labels)")
    if tables is None:
        if b is None:
            raise MachineError("score_sequences needs a machine or its tables")
        tables = score_tables(b)
    t = tables
    S = ptr.size - 1
    out_w = np.empty(S)
    out_f = np.empty(S, np.int64)
    nw = (labels.size + S if final else labels.size) if per_word else 0
    word_w = np.full(nw, np.inf)
    word_state = np.full(nw, -1, np.int64)
    res = ScoreResult(out_w, out_f, word_w if per_word else None, word_state if per_word else None)
    if t.start < 0:
        out_w[:] = np.inf
        out_f[:] = 0
        return res
    args = (ptr, labels, t.start, t.arcs, t.mask, t.num_labels, t.back, t.back_cost, t.final, t.max_back,
            bool(phi_final), bool(final), bool(per_word), out_w, out_f, word_w, word_state)
    threads = int(threads)
    if threads < 0:
        raise MachineError(f"threads must be >= 0, got {threads}")
    k = nb.config.NUMBA_NUM_THREADS if threads == 0 else min(threads, nb.config.NUMBA_NUM_THREADS)
    if k <= 1 or labels.size < PARALLEL_MIN_LABELS:
        err = np.zeros(2, np.int64)
        _score_block(0, S, *args, err)
        errs = err[None, :]
    else:
        # blocks of about equal label counts, several per thread so that uneven ones even out
        nblocks = min(S, 8 * k)
        bounds = np.unique(np.searchsorted(ptr, np.linspace(0, labels.size, nblocks + 1), side="left"))
        bounds[0], bounds[-1] = 0, S
        bounds = np.unique(bounds)
        errs = np.zeros((bounds.size - 1, 2), np.int64)
        before = nb.get_num_threads()
        nb.set_num_threads(k)
        try:
            _score_blocks(bounds, *args, errs)
        finally:
            nb.set_num_threads(before)
    bad = np.flatnonzero(errs[:, 0])
    if bad.size:
        status, where = errs[bad[0]]
        raise _walk_error(int(status), int(where), t)
    return res

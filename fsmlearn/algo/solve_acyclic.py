"""The one-pass kernels for acyclic machines in -log weights (the log semiring).

A machine whose states are numbered topologically is solved in one pass over
its arcs (forward or backward).  :func:`acyclic_neglog_plain` sums in plain
float64 relative to one exponent per block of 256 states and reports where
that could have lost a value; :func:`acyclic_neglog` sums in scaled rows (an
exponent per state and per arc) and is exact in range everywhere: the solver
runs it when the plain pass declines.  The plain pass also checks the
numbering, so the solver needs no separate pass over the arcs to find that a
machine is topologically numbered.

Public names: acyclic_neglog, acyclic_neglog_plain, acyclic_neglog_piped, neglog_plain,
PLAIN_DONE, PLAIN_DECLINED, PLAIN_WEIGHTS, NOT_ORDERED, PIPE_CHUNK.
"""

from __future__ import annotations

import numba as nb
import numpy as np

import math

from ..semiring.ops import EXP_UNSET, NEGLOG_BLOCK, P2, P2X, neglog_block, neglog_plain_block, neglog_row
from ..semiring.ops import renorm as _renorm0

__all__ = ["acyclic_neglog", "acyclic_neglog_plain", "acyclic_neglog_piped", "neglog_plain", "PLAIN_DONE",
           "PLAIN_DECLINED", "PLAIN_WEIGHTS", "NOT_ORDERED", "PIPE_CHUNK"]

#: acyclic_neglog_plain's results: the values are in V (or out); a value it cannot hold; a
#: weight it cannot hold; an arc that does not go to a higher state
PLAIN_DONE = 1
PLAIN_DECLINED = 0
PLAIN_WEIGHTS = 2
NOT_ORDERED = -1

_SHIFT = 8                 # 256 states share an exponent
# Bounds of the plain pass (see acyclic_neglog_plain): weights within 2**+-500, a pushing
# source at 2**-500 or more of its block's scale, a pulled value at 2**-400 or more when it
# is computed, no stored value below 2**-1000 (so none is subnormal), and a block whose
# values pass 2**100 while it is being pulled has its finished part rescaled at once.
_VMIN = 2.0**-400
_VMIN_READ = 2.0**-500
_VSTORE = 2.0**-1000
_VMAX = 2.0**100
_NOEXP = -(2**62)          # a block without an exponent yet


@nb.njit(cache=True, parallel=True)
def neglog_plain(w, Q):
    """Q = exp(-w) in plain float64 over numba's threads (``neglog_plain_block`` on
    windows of NEGLOG_BLOCK arcs); False when some weight is outside its range (then
    Q is meaningless): the plain pass is not for such machines."""
    E = w.shape[0]
    B = NEGLOG_BLOCK
    bad = 0
    for j in nb.prange((E + B - 1) // B):
        lo = j * B
        hi = min(E, lo + B)
        T = np.empty(hi - lo)
        bad += neglog_plain_block(w, lo, hi, Q[lo:hi], T)
    return bad == 0


@nb.njit(inline="always")
def _factor(d):
    """2**d for an integer exponent difference d (0 and inf beyond +-1000)."""
    if d == 0:
        return 1.0
    if d < -1000:
        return 0.0
    if d > 1000:
        return np.inf
    return P2X[d + 1000]


@nb.njit(inline="always")
def _renorm_block(v, lo, hi, E, c):
    """Scale block c's values v[lo:hi] so that the largest lies in [0.5, 1), moving the
    power of two into its exponent E[c].  False when the largest is not finite, or a
    non-zero value lies below 2**-1000, before or after the scaling (it may have lost
    bits to subnormal arithmetic, or would)."""
    mx = 0.0
    mn = np.inf
    for i in range(lo, hi):
        x = abs(v[i])
        mx = max(mx, x)
        if x > 0.0:
            mn = min(mn, x)
    if not mx < np.inf:
        return False
    if mx > 0.0:
        _, e = math.frexp(mx)
        if not (mn >= _VSTORE and mn >= math.ldexp(_VSTORE, e)):
            return False
        if e != 0:
            f = math.ldexp(1.0, -e)
            for i in range(lo, hi):
                v[i] *= f
            E[c] += e
    return True


_GOING = 3                 # a range of states done, the pass goes on


@nb.njit(inline="always")
def _push_arcs(b0, b1, s, ps, span, es, dst, Qb, qlo, v, Eb, reached):
    """State s (value ps, in its block's exponent es) pushes along its arcs b0..b1-1
    (plain weights ``Qb[b - qlo]``); False at an arc to s or a lower state.  An arc within
    ``span`` states ahead (the next block shares s's exponent) is one product and add;
    one to a block of another exponent is scaled, gives that block an exponent if it
    has none, and marks its head reached."""
    for b in range(b0, b1):
        # unsigned indices (b and h are never negative here): numba then adds no
        # wraparound for a negative index to each load; the forward pass over the
        # benchmark's acyclic machine on one thread took 53-57 ms with it, 32-33 without
        h = dst[np.uint64(b)]
        q = Qb[np.uint64(b - qlo)]
        if np.uint64(h - s - 1) < span:
            v[np.uint64(h)] += ps * q
        elif h <= s:
            return False
        elif q != 0.0:
            ch = h >> _SHIFT
            if Eb[ch] == _NOEXP:
                Eb[ch] = es
            v[h] += ps * q * _factor(es - Eb[ch])
            reached[h] = True
    return True


@nb.njit(cache=True)
def _forward_rows(s0, s1, src_start, dst, w, v, Eb, reached, Qb, Tb, st):
    """The forward plain pass over states s0..s1-1 (see :func:`acyclic_neglog_plain`).

    ``Qb`` holds the plain weights of arcs ``st[0]``..``st[1]-1``; the pass converts the
    next window of NEGLOG_BLOCK arcs into ``Qb`` (which must hold that many) when a state
    needs an arc beyond them.  ``st[2]``, ``st[3]``: whether the current block and the next
    share an exponent, and the first state past the next block, carried from one range of
    states to the next.  Returns _GOING or the pass's result."""
    n = src_start.shape[0] - 1
    E = dst.shape[0]
    nblk = Eb.shape[0]
    mask = (1 << _SHIFT) - 1
    C = NEGLOG_BLOCK
    qlo = st[0]
    qhi = st[1]
    same = st[2] != 0
    lim = st[3]
    for s in range(s0, s1):
        c = s >> _SHIFT
        if (s & mask) == 0 and Eb[c] != _NOEXP:
            if not _renorm_block(v, s, min(n, s + mask + 1), Eb, c):
                return PLAIN_DECLINED
            if c + 1 < nblk and Eb[c + 1] == _NOEXP:
                Eb[c + 1] = Eb[c]
            same = c + 1 >= nblk or Eb[c + 1] == Eb[c]
            lim = min(n, (c + 2) << _SHIFT)
        ps = v[s]
        a = src_start[s]
        a1 = src_start[s + 1]
        if ps == 0.0:
            if reached[s]:
                return PLAIN_DECLINED
            for b in range(a, a1):
                if dst[b] <= s:
                    return NOT_ORDERED
            continue
        if not (ps >= _VMIN_READ and ps < np.inf):
            return PLAIN_DECLINED
        # arcs to s+1 .. lim-1 when the next block shares this one's exponent, by one
        # unsigned compare (an arc to s or below wraps around to a large number)
        span = np.uint64(lim - s - 1) if same else np.uint64(0)
        while a < a1:
            if a >= qhi:
                qlo = a
                qhi = min(E, a + C)
                if neglog_plain_block(w, qlo, qhi, Qb, Tb) != 0:
                    return PLAIN_WEIGHTS
            e = min(a1, qhi)
            if not _push_arcs(a, e, s, ps, span, Eb[c], dst, Qb, qlo, v, Eb, reached):
                return NOT_ORDERED
            a = e
    st[0] = qlo
    st[1] = qhi
    st[2] = 1 if same else 0
    st[3] = lim
    return _GOING


@nb.njit(cache=True)
def _backward_rows(s0, s1, F, src_start, dst, w, v, Eb, Qb, Tb, st):
    """The backward plain pass over states s1-1 down to s0 from the final rows ``F`` (see
    :func:`acyclic_neglog_plain`).  ``Qb`` holds the plain weights of arcs
    ``st[0]``..``st[1]-1``; a row outside them is converted into ``Qb`` (which must hold
    NEGLOG_BLOCK) in a window that ends with it.  Returns _GOING or the pass's result."""
    n = src_start.shape[0] - 1
    nblk = Eb.shape[0]
    mask = (1 << _SHIFT) - 1
    C = NEGLOG_BLOCK
    qlo = st[0]
    qhi = st[1]
    for i in range(s1 - s0):
        s = s1 - 1 - i
        c = s >> _SHIFT
        if s == n - 1 or (s & mask) == mask:
            # the block's exponent: its successor's, or its largest final weight's
            if c + 1 < nblk and Eb[c + 1] != _NOEXP:
                Eb[c] = Eb[c + 1]
            else:
                kmax = _NOEXP
                for t in range(c << _SHIFT, s + 1):
                    if F[t, 0] != 0.0:
                        kmax = max(kmax, int(F[t, 1]))
                Eb[c] = 0 if kmax == _NOEXP else kmax
        ec = Eb[c]
        same = c + 1 >= nblk or Eb[c + 1] == ec
        lim = min(n, (c + 2) << _SHIFT)
        acc = 0.0
        touched = False
        if F[s, 0] != 0.0:
            acc = F[s, 0] * _factor(int(F[s, 1]) - ec)
            touched = True
        a0 = src_start[s]
        a1 = src_start[s + 1]
        a = a0
        while a < a1:                       # the row in order, as from a whole copy
            if a < qlo or a >= qhi:
                # a window that ends with the row (so it holds the rows below too),
                # or the next part of a row longer than a window
                qhi = a1 if a1 - a <= C else a + C
                qlo = max(0, qhi - C)
                if neglog_plain_block(w, qlo, qhi, Qb, Tb) != 0:
                    return PLAIN_WEIGHTS
            e = min(a1, qhi)
            for b in range(a, e):
                h = dst[np.uint64(b)]           # unsigned: see _push_arcs
                q = Qb[np.uint64(b - qlo)]
                if same and h > s and h < lim:
                    acc += q * v[np.uint64(h)]
                elif h <= s:
                    return NOT_ORDERED
                else:
                    vh = v[h]
                    acc += q * vh * _factor(Eb[h >> _SHIFT] - ec)
                    touched |= (vh != 0.0) & (q != 0.0)
            a = e
        if acc == 0.0:
            if touched:
                return PLAIN_DECLINED
            # zero: right only if no term had non-zero inputs (a rare case: the
            # fast path does not track it per arc; a weight that passed the
            # conversion is non-zero unless it is +inf)
            for b in range(a0, a1):
                if v[dst[b]] != 0.0 and w[b] != np.inf:
                    return PLAIN_DECLINED
        elif not (acc >= _VMIN and acc < np.inf):
            return PLAIN_DECLINED
        elif acc >= _VMAX:
            # values growing down the block: rescale its finished part now, so that a
            # rescaling never takes a checked value by more than 2**-100
            _, e = math.frexp(acc)
            f = math.ldexp(1.0, -e)
            acc *= f
            top = min(n, (c + 1) << _SHIFT)
            for t in range(s + 1, top):
                v[t] *= f
                if v[t] != 0.0 and not v[t] >= _VSTORE:
                    return PLAIN_DECLINED
            Eb[c] += e
        v[s] = acc
        if (s & mask) == 0:
            if not _renorm_block(v, s, min(n, s + mask + 1), Eb, c):
                return PLAIN_DECLINED
    st[0] = qlo
    st[1] = qhi
    return _GOING


@nb.njit(cache=True)
def _start_rows(starts, v, Eb, reached):
    """The forward pass's start values: one (the scaled row one_row, 0.5 * 2**1) at each
    state of ``starts``, in its block's exponent (the first start's of the block)."""
    for i in range(starts.shape[0]):
        s = starts[i]
        c = s >> _SHIFT
        if Eb[c] == _NOEXP:
            Eb[c] = 1
        v[s] = 0.5 * _factor(1 - Eb[c])
        reached[s] = True


@nb.njit(inline="always")
def _store_rows(V, out, v, Eb, lo, hi):
    """States lo..hi-1 from the plain values and their blocks' exponents: V's scaled
    rows, or, when ``out`` has a place for every state, their -ln (each row made in a
    scratch row and given to ``neglog_row``: what ``scaled_to_neglog`` gives for V)."""
    direct = out.shape[0] == v.shape[0]
    R = np.empty((1, 2)) if direct else V
    for s in range(lo, hi):
        t = 0 if direct else s
        x = v[s]
        R[t, 0] = x
        R[t, 1] = float(Eb[s >> _SHIFT]) if x != 0.0 else EXP_UNSET
        _renorm0(R, t)
        if direct:
            out[s] = neglog_row(R[0, 0], R[0, 1])


@nb.njit(cache=True)
def acyclic_neglog_plain(V, out, F, starts, src_start, dst, w, Q, backward):
    """:func:`acyclic_neglog` in plain float64, checking the numbering as it goes.

    Forward, the values start at one at each state of ``starts`` (int64; ``F`` is not
    read); backward, they start from the final rows ``F`` (scaled, one per state).
    The result goes into ``out`` (float64 [N], -ln of each value) when it has a place
    for every state, else into ``V``'s scaled rows (``V`` may be ``F`` itself).

    Returns PLAIN_DONE (``V`` or ``out`` holds the values), or leaves both untouched and
    returns NOT_ORDERED (some arc goes from a state to itself or to a lower
    number: the machine is not topologically numbered), PLAIN_WEIGHTS (a weight
    this pass cannot hold) or PLAIN_DECLINED (a value it cannot hold).

    ``Q``: the arcs' plain weights exp(-w) (:func:`neglog_plain`, which must
    have accepted them), or an empty array: then the weights are converted a
    window of arcs at a time inside the pass (``neglog_plain_block``, the same
    values, vectorised), so no converted copy of the arcs is written and read
    back.  Either way each row is summed in arc order, so the results are the
    same, bit for bit.

    The values of each block of 256 consecutive states are plain numbers times
    one power of two ``2**E[block]``, so an arc's term is one product and one
    add, where the scaled pass aligns two exponents and renormalises a row per
    arc.  A block is rescaled once, when its values are complete (forward: when
    its first state is about to push; backward: after its last state has
    pulled), so that its largest value lies in [0.5, 1); terms between blocks of
    different exponents are scaled by the difference (forward, a source's arcs
    into its own block and the next one need no scaling when the next one has
    its exponent, as it has unless an arc from further back reached it first).

    Every arc is checked to go to a higher state, on the arc's own path (a
    state of value zero, which pushes nothing forward, has its arcs scanned), so
    PLAIN_DONE also proves the numbering topological.

    Declines where plain arithmetic could have lost a value:

    * PLAIN_WEIGHTS (converting in windows): a weight in a window the pass
      converts (NEGLOG_BLOCK arcs from the first one a state needs, forward; ending
      with a state's row, backward) outside about 2**+-500 (its binary exponent
      rounded beyond +-500), -inf or NaN;
    * a stored value that is not finite, or non-zero below 2**-1000 of its block's
      scale, before or after a rescaling (so no value is ever subnormal);
    * forward: a source below 2**-500 of its block's scale when it pushes.  With
      weights of at least 2**-500, no term of the fast path (same exponent)
      underflows, so a state reached by one is not zero; an arc between blocks of
      different exponents marks its head as reached, and a reached state left at
      zero declines;
    * backward: a value below 2**-400 of its block's scale when it is computed (a
      sum that holds an underflowed term and nothing larger), or zero although one
      of its terms had non-zero inputs.

    A term that underflows next to a sum kept above those bounds changes it by less
    than 2**-600 relatively.  Otherwise the values agree with the scaled pass to
    rounding: the same sums of the same products, rounded in plain float64 instead
    of per-row scaled arithmetic.
    """
    n = src_start.shape[0] - 1
    E = dst.shape[0]
    v = np.zeros(n)
    Eb = np.full((n >> _SHIFT) + 1, _NOEXP, np.int64)
    Tb = np.empty(NEGLOG_BLOCK)
    whole = Q.shape[0] == E                     # a converted copy: one window of every arc
    Qb = Q if whole else np.empty(NEGLOG_BLOCK)
    st = np.zeros(4, np.int64)
    if not backward:
        st[1] = E if whole else 0
        reached = np.zeros(n, np.bool_)
        _start_rows(starts, v, Eb, reached)
        r = _forward_rows(0, n, src_start, dst, w, v, Eb, reached, Qb, Tb, st)
    else:
        st[0] = 0 if whole else E
        st[1] = E
        r = _backward_rows(0, n, F, src_start, dst, w, v, Eb, Qb, Tb, st)
    if r != _GOING:
        return r
    _store_rows(V, out, v, Eb, 0, n)
    return PLAIN_DONE


#: arcs per chunk of the two-thread plain pass
PIPE_CHUNK = 1 << 16


@nb.njit(cache=True)
def _chunk_cuts(src_start, chunk):
    """State boundaries 0 = c_0 < c_1 < ... < c_K = n such that each range of states
    starts at the first state whose row begins at or past a multiple of ``chunk`` arcs
    (whole rows, so a range can hold more than ``chunk`` arcs)."""
    n = src_start.shape[0] - 1
    E = src_start[n]
    cuts = np.empty(E // chunk + 2, np.int64)
    cuts[0] = 0
    K = 1
    for j in range(1, E // chunk + 1):
        s = min(n, np.searchsorted(src_start, j * chunk))
        if s > cuts[K - 1]:
            cuts[K] = s
            K += 1
    if cuts[K - 1] < n:
        cuts[K] = n
        K += 1
    return cuts[:K]


@nb.njit(cache=True)
def _convert_chunk(w, lo, hi, B, T):
    """B[i] = exp(-w[lo + i]) for the arcs lo..hi-1, a window of NEGLOG_BLOCK at a
    time; returns how many weights were out of range."""
    bad = 0
    for a in range(lo, hi, NEGLOG_BLOCK):
        e = min(hi, a + NEGLOG_BLOCK)
        bad += neglog_plain_block(w, a, e, B[a - lo:e - lo], T)
    return bad


@nb.njit(cache=True)
def _pipe_step(t, i, F, src_start, dst, w, v, Eb, reached, cuts, B, Qout, T, Wb, bad, prog, st, res, backward):
    """Step i of :func:`acyclic_neglog_piped` on thread t.

    t = 0 passes over chunk i (in pass order) from buffer i % 2 (or its part of
    ``Qout``), then helps convert chunk i + 1 from its end; t = 1 converts chunk i + 1
    into the other buffer from its start.  Each converts a window of NEGLOG_BLOCK arcs
    at a time into its own scratch (``T[t]``), copies it into the buffer, and then
    posts how far it has come (``prog``: the first arc not yet converted from the
    start, the last one converted from the end), and stops where the other has been.
    A post read late only makes a thread convert a window the other has converted
    too; the buffer receives only finished values (the conversion itself works in
    place, in steps), so the two write the same values there, and every weight of
    the chunk is converted once the two meet, whatever the timing.  Out-of-range
    weights are counted in ``bad[t, chunk]``."""
    K = cuts.shape[0] - 1
    whole = Qout.shape[0] == dst.shape[0]
    C = NEGLOG_BLOCK
    if t == 0:
        k = K - 1 - i if backward else i
        lo = src_start[cuts[k]]
        hi = src_start[cuts[k + 1]]
        if bad[0, k] + bad[1, k] == 0:
            Qb = Qout[lo:hi] if whole else B[i % 2, :hi - lo]
            st[0] = lo
            st[1] = hi
        else:
            # a weight out of range somewhere in the chunk: convert in windows, as the
            # one-thread pass does, so the pass meets only the weights it needs
            Qb = Wb
            st[0] = lo if not backward else 0
            st[1] = lo if not backward else 0
        if backward:
            res[0] = _backward_rows(cuts[k], cuts[k + 1], F, src_start, dst, w, v, Eb, Qb, T[0, 1], st)
        else:
            res[0] = _forward_rows(cuts[k], cuts[k + 1], src_start, dst, w, v, Eb, reached, Qb, T[0, 1], st)
        if res[0] != _GOING:
            return                              # the pass has ended: no next chunk
    if i + 1 >= K:
        return
    k = K - 2 - i if backward else i + 1
    lo = src_start[cuts[k]]
    hi = src_start[cuts[k + 1]]
    Qn = Qout[lo:hi] if whole else B[(i + 1) % 2, :hi - lo]
    nbad = 0
    P = T[t, 0]
    if t == 1:
        a = lo
        while a < prog[1]:
            e = min(hi, a + C)
            nbad += neglog_plain_block(w, a, e, P, T[t, 1])
            Qn[a - lo:e - lo] = P[:e - a]
            a = e
            prog[0] = a
    else:
        b = hi
        while b > prog[0]:
            a = max(lo, b - C)
            nbad += neglog_plain_block(w, a, b, P, T[t, 1])
            Qn[a - lo:b - lo] = P[:b - a]
            b = a
            prog[1] = b
    bad[t, k] = nbad


@nb.njit(cache=True, parallel=True)
def _pipe_pair(i, F, src_start, dst, w, v, Eb, reached, cuts, B, Qout, T, Wb, bad, prog, st, res, backward):
    """One step of :func:`acyclic_neglog_piped`, the pass and the conversion on two
    threads (in turn on one); they meet at its end."""
    for t in nb.prange(2):
        _pipe_step(t, i, F, src_start, dst, w, v, Eb, reached, cuts, B, Qout, T, Wb, bad, prog, st, res, backward)


@nb.njit(cache=True, parallel=True)
def _store_rows_par(V, out, v, Eb):
    """:func:`_store_rows` of every state, a block at a time over numba's threads."""
    n = v.shape[0]
    for c in nb.prange((n >> _SHIFT) + 1):
        _store_rows(V, out, v, Eb, c << _SHIFT, min(n, (c + 1) << _SHIFT))


@nb.njit(cache=True)
def acyclic_neglog_piped(V, out, F, starts, src_start, dst, w, Qout, backward, chunk=PIPE_CHUNK):
    """:func:`acyclic_neglog_plain` (converting as it goes) on two threads: one
    converts the next chunk of about ``chunk`` arcs (whole rows) while the other
    passes over the current one, from two buffers in turn, or, when ``Qout`` has a
    place for every arc, into ``Qout`` (a converted copy made on the way, as
    :func:`neglog_plain` makes it).  ``V``, ``out``, ``F`` and ``starts`` are
    :func:`acyclic_neglog_plain`'s.

    Returns (the plain pass's result, whether every weight was converted: then, with
    PLAIN_DONE, ``Qout`` is the whole converted copy).

    The pass is the one-thread pass, over the same states in the same order, reading
    the same values (``neglog_plain_block`` converts each weight on its own), so where
    every weight is in the plain range the result and the values are the one-thread
    pass's, bit for bit.  A chunk holding a weight out of range is converted in windows
    by the pass itself, as in one thread, but its windows start at the chunk: forward,
    where a window is converted only for a state of non-zero value, the two may differ
    in whether they meet a weight out of range on an arc of an unreached state (one
    answers PLAIN_WEIGHTS, the other PLAIN_DONE), and the chunks before one that holds
    such a weight are converted whole, so the pass can meet a value it cannot hold
    (PLAIN_DECLINED) before that weight.  Every such answer sends the solver to the
    scaled pass, which agrees to rounding.  The two threads meet at the end of each
    chunk (a ``prange`` of two, ``_pipe_pair``); with one thread the steps run in turn
    and the results do not change.  The results are stored over both threads.
    """
    n = src_start.shape[0] - 1
    cuts = _chunk_cuts(src_start, chunk)
    K = cuts.shape[0] - 1
    whole = Qout.shape[0] == dst.shape[0]
    mx = 0
    if not whole:
        for k in range(K):
            mx = max(mx, src_start[cuts[k + 1]] - src_start[cuts[k]])
    B = np.empty((2, mx))
    T = np.empty((2, 2, NEGLOG_BLOCK))         # each thread's scratch: results, exponents
    Wb = np.empty(NEGLOG_BLOCK)
    bad = np.zeros((2, K), np.int64)
    prog = np.zeros(2, np.int64)
    st = np.zeros(4, np.int64)
    res = np.zeros(1, np.int64)
    v = np.zeros(n)
    Eb = np.full((n >> _SHIFT) + 1, _NOEXP, np.int64)
    reached = np.zeros(n if not backward else 0, np.bool_)
    if not backward:
        _start_rows(starts, v, Eb, reached)
    if K == 0:
        return PLAIN_DONE, True
    k0 = K - 1 if backward else 0
    lo = src_start[cuts[k0]]
    hi = src_start[cuts[k0 + 1]]
    bad[0, k0] = _convert_chunk(w, lo, hi, Qout[lo:hi] if whole else B[0, :hi - lo], T[0, 1])
    for i in range(K):
        if i + 1 < K:                           # chunk i + 1: nothing converted yet
            k = K - 2 - i if backward else i + 1
            prog[0] = src_start[cuts[k]]
            prog[1] = src_start[cuts[k + 1]]
        _pipe_pair(i, F, src_start, dst, w, v, Eb, reached, cuts, B, Qout, T, Wb, bad, prog, st, res, backward)
        if res[0] != _GOING:
            return res[0], False
    _store_rows_par(V, out, v, Eb)
    return PLAIN_DONE, not np.any(bad)


@nb.njit(cache=True)
def acyclic_neglog(V, src_start, dst, w, backward):
    """Forward or backward values of a topologically numbered machine in one pass.

    Every arc goes from a lower to a higher state number; ``w`` holds the arc
    weights as negative logs and ``V`` scaled rows ``[p, k]`` (real and log
    semirings, R = 0): the start state's one (forward) or the final weights
    (backward) on entry, the values on return.  The weights are converted a
    block of arcs at a time (vectorised, see ``neglog_block``) inside the
    pass, so no converted copy of the arcs is written and read back, and
    states with value zero push nothing (forward).  Backward values are
    pulled over each state's own CSR row, highest state first, with the sum
    kept in registers.
    """
    n = src_start.shape[0] - 1
    E = dst.shape[0]
    B = NEGLOG_BLOCK
    P = np.empty(B)
    K = np.empty(B)
    lo = 0
    hi = 0
    if not backward:
        for s in range(n):
            ps = V[s, 0]
            if ps == 0.0:
                continue
            ks = V[s, 1]
            for a in range(src_start[s], src_start[s + 1]):
                if a >= hi:
                    lo = a
                    hi = min(E, a + B)
                    neglog_block(w, lo, hi, P, K)
                pw = P[a - lo]
                if pw == 0.0:
                    continue
                h = dst[a]
                k = ks + K[a - lo]
                kt = V[h, 1]
                kn = max(k, kt)
                V[h, 0] = V[h, 0] * P2[min(int(kn - kt), 1100)] + ps * pw * P2[min(int(kn - k), 1100)]
                V[h, 1] = kn
                _renorm0(V, h)
    else:
        lo = E
        hi = E
        for i in range(n):
            s = n - 1 - i
            am = V[s, 0]
            ak = V[s, 1]
            a1 = src_start[s]
            for a in range(src_start[s + 1] - 1, a1 - 1, -1):
                if a < lo:
                    hi = a + 1
                    lo = max(0, hi - B)
                    neglog_block(w, lo, hi, P, K)
                h = dst[a]
                ph = V[h, 0]
                pw = P[a - lo]
                if ph == 0.0 or pw == 0.0:
                    continue
                k = V[h, 1] + K[a - lo]
                if am == 0.0:
                    am = ph * pw
                    ak = k
                    continue
                kn = max(k, ak)
                am = am * P2[min(int(kn - ak), 1100)] + ph * pw * P2[min(int(kn - k), 1100)]
                ak = kn
            V[s, 0] = am
            V[s, 1] = ak if am != 0.0 else EXP_UNSET
            _renorm0(V, s)

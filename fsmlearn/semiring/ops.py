"""numba kernels of the semirings, one module-level set for every value layout.

Values live in rows of 2-D float64 arrays so that one generic routine handles
every semiring:

* linear semirings (real, log, expectation) use a *scaled* row
  ``[p, r_1..r_R, k]`` meaning ``(p, r) * 2**k``: the real-domain value with a
  shared power-of-two exponent, so that long paths never underflow and no
  per-arc ``exp``/``log`` is needed.  R = 0 for real and log, R >= 1 for the
  expectation semiring <p, r> (Eisner 2002), whose product is
  ``<p1 p2, p1 r2 + r1 p2>``.  Inside cyclic solves the rows are rescaled by
  per-state potentials into *plain* rows ``[p, r_1..r_R]`` (no exponent).
* the tropical semiring uses rows ``[c]`` of costs (min, +).

Every kernel reads the row width from its arrays' shapes (a scaled row has
R + 2 columns, a plain row R + 1), as the CUDA kernels do, so there is one
compiled kernel per argument type whatever R is and it is cached on disk
(``cache=True`` in the callers): kernels built as closures at call time close
over dispatchers, whose pickled form carries a per-process id, and never hit
the cache (numba issue 6264).

Public names: scaled_ops, tropical_ops, LinearOps, TropicalOps, renorm, fma, to_plain,
from_plain, times_plain, star_plain, times_scaled, neg_scaled, tropical_fma,
neglog_block, neglog_plain_block, neglog_to_scaled, real_to_scaled, scaled_to_neglog,
neglog_row, scaled_to_neglog_par, neglog_to_scaled_par, neglog_to_scaled_at_par,
scaled_to_real, P2, P2X, EXP_UNSET, NEGLOG_BLOCK, PLAIN_KMAX, PAR_ROWS.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numba as nb
import numpy as np

#: P2[j] = 2**-j for j = 0..1100 (P2[1075:] underflow to 0)
P2 = np.ldexp(1.0, -np.arange(1101)).astype(np.float64)
#: P2X[j] = 2**(j - 1000) for j = 0..2000
P2X = np.ldexp(1.0, np.arange(-1000, 1001)).astype(np.float64)
#: exponent of an unset (zero) scaled value
EXP_UNSET = -1.0e9
_HI = 2.0**64
_LO = 2.0**-64
_LN2 = math.log(2.0)
_INV_LN2 = 1.0 / _LN2

LinearOps = namedtuple("LinearOps", "R K fma fma_reset renorm to_plain from_plain times_plain star_plain "
                                    "times_scaled neg_scaled")
TropicalOps = namedtuple("TropicalOps", "fma")


@nb.njit(inline="always")
def pow2_capped(x, cap):
    """(2**x, capped) for an integer-valued x: from the table P2X inside (-1000, 1000), else
    by ldexp with x cut to ``cap`` from above (then ``capped`` is True) and to -2200 from
    below (a zero)."""
    if -1000.0 < x < 1000.0:
        return P2X[int(x) + 1000], False
    if x > cap:
        return math.ldexp(1.0, int(cap)), True
    return math.ldexp(1.0, int(max(x, -2200.0))), False


@nb.njit(inline="always")
def renorm(V, t):
    """Scaled row V[t]: bring its largest magnitude into [2**-64, 2**64) by its exponent."""
    KE = V.shape[1] - 1
    m = abs(V[t, 0])
    for j in range(1, KE):
        m = max(m, abs(V[t, j]))
    if m >= _HI or (m < _LO and m > 0.0):
        _, e = math.frexp(m)
        # ldexp of each value, not a factor 2**-e: that overflows to inf for a subnormal row
        for j in range(KE):
            V[t, j] = math.ldexp(V[t, j], -e)
        V[t, KE] += e
    elif m == 0.0:
        V[t, KE] = EXP_UNSET


@nb.njit(inline="always")
def fma(V, t, U, s, W, a):
    """V[t] += U[s] (x) W[a], all scaled rows."""
    KE = V.shape[1] - 1
    pu = U[s, 0]
    pw = W[a, 0]
    k = U[s, KE] + W[a, KE]
    kt = V[t, KE]
    kn = max(k, kt)
    f1 = P2[min(int(kn - kt), 1100)]
    f2 = P2[min(int(kn - k), 1100)]
    V[t, 0] = V[t, 0] * f1 + pu * pw * f2
    for j in range(1, KE):
        V[t, j] = V[t, j] * f1 + (pu * W[a, j] + U[s, j] * pw) * f2
    V[t, KE] = kn
    renorm(V, t)


@nb.njit(inline="always")
def fma_reset(Y, t, B, X, s, W, a, first):
    """Plain rows: Y[t] = (B[t] if first else Y[t]) + X[s] (x) W[a]."""
    KE = Y.shape[1]
    px = X[s, 0]
    pw = W[a, 0]
    base = B[t, 0] if first else Y[t, 0]
    Y[t, 0] = base + px * pw
    for j in range(1, KE):
        base = B[t, j] if first else Y[t, j]
        Y[t, j] = base + px * W[a, j] + X[s, j] * pw


@nb.njit(inline="always")
def to_plain(Y, t, V, s, pot):
    """Plain row Y[t] = V[s] / 2**pot (V scaled)."""
    KE = Y.shape[1]
    e = V[s, KE] - pot
    if -1000.0 < e < 1000.0:
        f = P2X[int(e) + 1000]
        for j in range(KE):
            Y[t, j] = V[s, j] * f
    else:
        ei = int(min(max(e, -2200.0), 2200.0))
        for j in range(KE):
            Y[t, j] = math.ldexp(V[s, j], ei)


@nb.njit(inline="always")
def from_plain(V, t, Y, s, pot):
    """Scaled row V[t] = Y[s] * 2**pot (Y plain)."""
    KE = V.shape[1] - 1
    for j in range(KE):
        V[t, j] = Y[s, j]
    V[t, KE] = pot
    renorm(V, t)


@nb.njit(inline="always")
def _times_cols(Y, t, A, i, B, j, KE):
    """Columns 0..KE-1 (p, r_1..r_R) of Y[t] = A[i] (x) B[j]: p1 p2, p1 r2 + r1 p2 (Y may alias
    A or B)."""
    pa = A[i, 0]
    pb = B[j, 0]
    for c in range(1, KE):
        Y[t, c] = pa * B[j, c] + A[i, c] * pb
    Y[t, 0] = pa * pb


@nb.njit(inline="always")
def times_plain(Y, t, A, i, B, j):
    """Plain rows: Y[t] = A[i] (x) B[j] (Y may alias A or B)."""
    _times_cols(Y, t, A, i, B, j, Y.shape[1])


@nb.njit(inline="always")
def star_plain(Y, t, A, i):
    """Plain rows: Y[t] = A[i]* = 1/(1-p), r/(1-p)^2; returns False if p >= 1."""
    KE = Y.shape[1]
    p = A[i, 0]
    if not p < 1.0:
        return False
    q = 1.0 / (1.0 - p)
    for c in range(1, KE):
        Y[t, c] = A[i, c] * q * q
    Y[t, 0] = q
    return True


@nb.njit(inline="always")
def times_scaled(Y, t, A, i, B, j):
    """Scaled rows: Y[t] = A[i] (x) B[j] (Y may alias A or B)."""
    KE = Y.shape[1] - 1
    k = A[i, KE] + B[j, KE]
    _times_cols(Y, t, A, i, B, j, KE)
    Y[t, KE] = k
    renorm(Y, t)


@nb.njit(inline="always")
def neg_scaled(Y, t):
    """Scaled row Y[t] = -Y[t]."""
    KE = Y.shape[1] - 1
    for c in range(KE):
        Y[t, c] = -Y[t, c]


@nb.njit(inline="always")
def tropical_fma(V, t, U, s, W, a):
    """V[t] = min(V[t], U[s] + W[a]); True when it improved."""
    c = U[s, 0] + W[a, 0]
    if c < V[t, 0]:
        V[t, 0] = c
        return True
    return False


def scaled_ops(R: int) -> LinearOps:
    """The kernels for linear semirings with R expectation components.

    The same module-level kernels for every R (they read the row width from
    their arrays); R and the scaled row width K = R + 2 ride along.
    """
    return LinearOps(R, R + 2, fma, fma_reset, renorm, to_plain, from_plain, times_plain, star_plain,
                     times_scaled, neg_scaled)


def tropical_ops() -> TropicalOps:
    """The tropical semiring's kernel (rows [cost])."""
    return TropicalOps(tropical_fma)


_EXPC = tuple(1.0 / math.factorial(i) for i in range(14))
_E0, _E1, _E2, _E3, _E4, _E5, _E6, _E7, _E8, _E9, _E10, _E11, _E12, _E13 = _EXPC
#: arcs converted per block by the vectorised conversion
NEGLOG_BLOCK = 2048


@nb.njit(inline="always")
def _exp_parts(x):
    """(p, k) with exp(-x) = p 2**k: k is -x / ln 2 rounded to an integer and p = exp(z)
    for the remainder z = (-x / ln 2 - k) ln 2, |z| <= ln 2 / 2, by its Taylor polynomial
    of degree 13 (truncation below 1e-17; a few ulps in all).  No branches and no calls,
    so loops over it are vectorised (inlined, it takes its caller's fastmath flags)."""
    y = -x * _INV_LN2
    k = math.floor(y + 0.5)
    z = (y - k) * _LN2
    p = _E13
    p = p * z + _E12
    p = p * z + _E11
    p = p * z + _E10
    p = p * z + _E9
    p = p * z + _E8
    p = p * z + _E7
    p = p * z + _E6
    p = p * z + _E5
    p = p * z + _E4
    p = p * z + _E3
    p = p * z + _E2
    p = p * z + _E1
    p = p * z + _E0
    return p, k


@nb.njit(cache=True, fastmath={"contract"})
def neglog_block(w, lo, hi, P, K):
    """P[i], K[i] with exp(-w[lo + i]) = P[i] 2**K[i], for i < hi - lo.

    K is -w / ln 2 rounded to an integer and P = exp(z) for the remainder
    z = (-w / ln 2 - K) ln 2, |z| <= ln 2 / 2, by its Taylor polynomial of
    degree 13 (truncation below 1e-17; a few ulps in all): no branches and no
    calls, so the loop is vectorised, about six times faster than calling
    ``math.exp2`` per weight.  ``w = +inf`` (no weight) gives P = 0 and
    K = EXP_UNSET.
    """
    for i in range(hi - lo):
        x = w[np.uint64(lo + i)]     # unsigned: no wraparound, so a vector load, not a gather
        p, k = _exp_parts(x)
        zero = x == np.inf
        P[i] = 0.0 if zero else p
        K[i] = EXP_UNSET if zero else k


#: 2**52 + 1023: a float64 whose low mantissa bits hold k + 1023 after adding an integer k
_EXP_MAGIC = 2.0**52 + 1023.0
#: the binary exponents neglog_plain_block accepts
PLAIN_KMAX = 500.0


@nb.njit(cache=True, fastmath={"contract"})
def neglog_plain_block(w, lo, hi, Q, T):
    """Q[i] = exp(-w[lo + i]) in plain float64 for i < hi - lo; returns how many
    weights it could not convert (``T``: scratch of the same length as ``Q``).

    ``neglog_block``'s reduction and polynomial (the same values, bit for bit,
    as P * 2**K), with the power of two built from its bits instead of read from
    a table, so the whole conversion is vectorised: k + 1023 sits in the low bits
    of ``k + 2**52 + 1023`` and a shift by 52 moves it into the exponent field.
    A weight whose rounded binary exponent lies outside +-500 (so exp(-w) is
    outside about [2**-500, 2**500]), -inf or NaN is counted and its Q is
    meaningless; ``w = +inf`` (no weight) gives Q = 0.
    """
    TI = T.view(np.int64)
    bad = 0
    for i in range(hi - lo):
        x = w[np.uint64(lo + i)]     # unsigned: no wraparound, so a vector load, not a gather
        p, k = _exp_parts(x)
        inside = (k >= -PLAIN_KMAX) & (k <= PLAIN_KMAX)
        zero = x == np.inf
        if not (inside | zero):
            bad += 1
        Q[i] = 0.0 if zero else p
        T[i] = (k if inside else 0.0) + _EXP_MAGIC
    for i in range(hi - lo):
        TI[i] = TI[i] << 52
    for i in range(hi - lo):
        Q[i] *= T[i]
    return bad


@nb.njit(cache=True)
def neglog_to_scaled(w, out, col_p, col_k, sign):
    """out[i, col_p], out[i, col_k] = scaled form of sign * exp(-w[i])."""
    E = w.shape[0]
    P = np.empty(NEGLOG_BLOCK)
    K = np.empty(NEGLOG_BLOCK)
    for lo in range(0, E, NEGLOG_BLOCK):
        hi = min(E, lo + NEGLOG_BLOCK)
        neglog_block(w, lo, hi, P, K)
        for i in range(hi - lo):
            out[lo + i, col_p] = sign * P[i]
            out[lo + i, col_k] = K[i]


@nb.njit(cache=True, parallel=True)
def neglog_to_scaled_par(w, out, col_p, col_k, sign):
    """:func:`neglog_to_scaled` over numba's threads, 16 windows of NEGLOG_BLOCK weights a
    task (the same values: each weight is converted on its own)."""
    E = w.shape[0]
    B = 16 * NEGLOG_BLOCK
    for j in nb.prange((E + B - 1) // B):
        lo = j * B
        hi = min(E, lo + B)
        neglog_to_scaled(w[lo:hi], out[lo:hi], col_p, col_k, sign)


@nb.njit(cache=True, parallel=True)
def neglog_to_scaled_at_par(w, idx, out, col_p, col_k, sign):
    """:func:`neglog_to_scaled_par` of ``w[idx]`` without the gathered array: each task
    gathers a window of NEGLOG_BLOCK weights at a time, in their own type, and converts
    it (the same values: each weight is converted on its own)."""
    E = idx.shape[0]
    B = 16 * NEGLOG_BLOCK
    for j in nb.prange((E + B - 1) // B):
        buf = np.empty(NEGLOG_BLOCK, w.dtype)
        P = np.empty(NEGLOG_BLOCK)
        K = np.empty(NEGLOG_BLOCK)
        for lo in range(j * B, min(E, (j + 1) * B), NEGLOG_BLOCK):
            hi = min(E, lo + NEGLOG_BLOCK)
            for i in range(hi - lo):
                buf[i] = w[idx[lo + i]]
            neglog_block(buf, 0, hi - lo, P, K)
            for i in range(hi - lo):
                out[lo + i, col_p] = sign * P[i]
                out[lo + i, col_k] = K[i]


@nb.njit(cache=True)
def real_to_scaled(v, out, col_p, col_k):
    for i in range(v.shape[0]):
        x = v[i]
        if x == 0.0:
            out[i, col_p] = 0.0
            out[i, col_k] = EXP_UNSET
        else:
            m, e = math.frexp(x)
            out[i, col_p] = m
            out[i, col_k] = e


@nb.njit(inline="always")
def neglog_row(p, k):
    """-ln(p * 2**k) of one scaled value (+inf for zero, nan for negative): what
    :func:`scaled_to_neglog` gives for the row (p, k)."""
    if p > 0.0:
        return -(math.log(p) + k * _LN2)
    if p == 0.0:
        return np.inf
    return np.nan


@nb.njit(cache=True)
def scaled_to_neglog(V, out):
    """-ln of the p column of scaled rows (+inf for zero, nan for negative)."""
    KE = V.shape[1] - 1
    for i in range(V.shape[0]):
        out[i] = neglog_row(V[i, 0], V[i, KE])


#: rows (or arcs) at which the threaded twins are worth their threads: scaled_to_neglog_par,
#: neglog_to_scaled_par and neglog_to_scaled_at_par (through the semirings), solve_linear.gather_par (through the
#: linear solver's weights; fsmlearn.algo.shortest reads its own copy, at import)
PAR_ROWS = 1 << 18
_PAR_TASK = 1 << 12


@nb.njit(cache=True, parallel=True)
def scaled_to_neglog_par(V, out):
    """:func:`scaled_to_neglog` over numba's threads, 4,096 rows a task (the same values)."""
    n = V.shape[0]
    for j in nb.prange((n + _PAR_TASK - 1) // _PAR_TASK):
        lo = j * _PAR_TASK
        hi = min(n, lo + _PAR_TASK)
        scaled_to_neglog(V[lo:hi], out[lo:hi])


@nb.njit(cache=True)
def scaled_to_real(V, out):
    KE = V.shape[1] - 1
    for i in range(V.shape[0]):
        p = V[i, 0]
        e = V[i, KE]
        if p == 0.0 or e < -2200.0:
            out[i] = 0.0 * p
        elif e > 2200.0:
            out[i] = np.inf if p > 0 else -np.inf
        else:
            out[i] = math.ldexp(p, int(e))

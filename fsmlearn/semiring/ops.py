"""numba kernels of the semirings, generated once per value layout.

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

Public names: scaled_ops, tropical_ops, neglog_scaled, P2, EXP_UNSET.
"""

from __future__ import annotations

import math
from collections import namedtuple
from functools import lru_cache

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


@lru_cache(maxsize=None)
def scaled_ops(R: int) -> LinearOps:
    """Kernels for linear semirings with R expectation components."""
    K = R + 2
    KE = K - 1  # exponent column

    @nb.njit(inline="always")
    def renorm(V, t):
        m = abs(V[t, 0])
        for j in range(1, KE):
            m = max(m, abs(V[t, j]))
        if m >= _HI or (m < _LO and m > 0.0):
            _, e = math.frexp(m)
            f = math.ldexp(1.0, -e)
            for j in range(KE):
                V[t, j] *= f
            V[t, KE] += e
        elif m == 0.0:
            V[t, KE] = EXP_UNSET

    @nb.njit(inline="always")
    def fma(V, t, U, s, W, a):
        """V[t] += U[s] (x) W[a], all scaled rows."""
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
        px = X[s, 0]
        pw = W[a, 0]
        base = B[t, 0] if first else Y[t, 0]
        Y[t, 0] = base + px * pw
        for j in range(1, KE):
            base = B[t, j] if first else Y[t, j]
            Y[t, j] = base + px * W[a, j] + X[s, j] * pw

    @nb.njit(inline="always")
    def to_plain(Y, t, V, s, pot):
        """Plain row Y[t] = V[s] / 2**pot."""
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
        """Scaled row V[t] = Y[s] * 2**pot."""
        for j in range(KE):
            V[t, j] = Y[s, j]
        V[t, KE] = pot
        renorm(V, t)

    @nb.njit(inline="always")
    def times_plain(Y, t, A, i, B, j):
        """Plain rows: Y[t] = A[i] (x) B[j] (Y may alias A or B)."""
        pa = A[i, 0]
        pb = B[j, 0]
        for c in range(1, KE):
            Y[t, c] = pa * B[j, c] + A[i, c] * pb
        Y[t, 0] = pa * pb

    @nb.njit(inline="always")
    def star_plain(Y, t, A, i):
        """Plain rows: Y[t] = A[i]* = 1/(1-p), r/(1-p)^2; returns False if p >= 1."""
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
        pa = A[i, 0]
        pb = B[j, 0]
        k = A[i, KE] + B[j, KE]
        for c in range(1, KE):
            Y[t, c] = pa * B[j, c] + A[i, c] * pb
        Y[t, 0] = pa * pb
        Y[t, KE] = k
        renorm(Y, t)

    @nb.njit(inline="always")
    def neg_scaled(Y, t):
        for c in range(KE):
            Y[t, c] = -Y[t, c]

    return LinearOps(R, K, fma, fma_reset, renorm, to_plain, from_plain, times_plain, star_plain,
                     times_scaled, neg_scaled)


@lru_cache(maxsize=None)
def tropical_ops() -> TropicalOps:
    @nb.njit(inline="always")
    def fma(V, t, U, s, W, a):
        """V[t] = min(V[t], U[s] + W[a]); True when it improved."""
        c = U[s, 0] + W[a, 0]
        if c < V[t, 0]:
            V[t, 0] = c
            return True
        return False

    return TropicalOps(fma)


#: 2**(j / 256) * 0.5 for j = 0..255
_EXP2_TAB = np.exp2(np.arange(256) / 256.0) * 0.5


@nb.njit(inline="always")
def neglog_scaled(x):
    """(p, k) with p in [0.5, 1) and exp(-x) = p 2**k, for a finite x.

    2**f for the fraction f of -x / ln 2 as a table entry 2**(j/256) times
    exp(z) for the remainder z < ln 2 / 256 by its Taylor polynomial of
    degree 5 (error below 1e-18): a few ulps, at about half the cost of
    ``math.exp2``.
    """
    y = -x * _INV_LN2
    fk = math.floor(y)
    f = (y - fk) * 256.0
    if not (0.0 <= f < 256.0):
        return math.exp2(y - fk) * 0.5, fk + 1.0   # x not finite
    j = int(f)
    z = (f - j) * (_LN2 / 256.0)
    e = 1.0 + z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z * (1.0 / 24.0 + z * (1.0 / 120.0)))))
    return _EXP2_TAB[j] * e, fk + 1.0


@nb.njit(cache=True)
def neglog_to_scaled(w, out, col_p, col_k, sign):
    """out[i, col_p], out[i, col_k] = scaled form of sign * exp(-w[i])."""
    for i in range(w.shape[0]):
        x = w[i]
        if x == np.inf:
            out[i, col_p] = 0.0
            out[i, col_k] = EXP_UNSET
        else:
            p, k = neglog_scaled(x)
            out[i, col_p] = sign * p
            out[i, col_k] = k


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


@nb.njit(cache=True)
def scaled_to_neglog(V, out):
    """-ln of the p column of scaled rows (+inf for zero, nan for negative)."""
    KE = V.shape[1] - 1
    for i in range(V.shape[0]):
        p = V[i, 0]
        if p > 0.0:
            out[i] = -(math.log(p) + V[i, KE] * _LN2)
        elif p == 0.0:
            out[i] = np.inf
        else:
            out[i] = np.nan


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

"""The arithmetic of arc flows, written once for both targets.

Plain Python functions that :mod:`fsmlearn.algo.posteriors` compiles with numba's
``njit`` and :mod:`fsmlearn.algo.cuda.kernels` with ``cuda.jit(device=True)``, so a
fix lands on both devices.  A flow is ``alpha(t) w beta(h) / Z`` on scaled rows
``[p, ..., k]`` (value ``p 2**k``); in a :class:`~fsmlearn.fsm.MachineBatch` Z is
that of the machine owning the arc's tail state.

A function that adds into an array other threads also add into calls ``_add1`` or
``_add2`` for it: numba's ``njit`` versions here are a plain ``+=``; the device
compiles the same function with atomic adds bound to those names
(:func:`retarget`).

Public names: owner_py, arc_flow_py, chain_flow_py, final_flow_py, retarget, add1_py, add2_py.
"""

from __future__ import annotations

import math
import types

__all__ = ["owner_py", "arc_flow_py", "chain_flow_py", "final_flow_py", "retarget", "add1_py", "add2_py"]


def retarget(func, **names):
    """``func`` with some of its global names bound to other objects (a device's own
    versions of the functions it calls), for compiling one source for another target."""
    return types.FunctionType(func.__code__, {**func.__globals__, **names}, func.__name__, func.__defaults__,
                              func.__closure__)


def add1_py(a, i, v):
    """a[i] += v (the CPU's; the device binds an atomic add)."""
    a[i] += v


def add2_py(a, i, j, v):
    """a[i, j] += v (the CPU's; the device binds an atomic add)."""
    a[i, j] += v


def owner_py(ptr, s):
    """The b with ``ptr[b] <= s < ptr[b + 1]`` (ptr: rising offsets [B+1]; the last such b
    when machines are empty)."""
    lo = 0
    hi = ptr.shape[0] - 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ptr[mid] <= s:
            lo = mid
        else:
            hi = mid - 1
    return lo


def arc_flow_py(A, W, Bt, i, t, h, zp, zk):
    """``A[t] W[i] Bt[h] / Z`` as a float, Z = zp 2**zk (the p-parts of scaled rows; 0 when
    it underflows below 2**-2200)."""
    KA = A.shape[1] - 1
    KW = W.shape[1] - 1
    KB = Bt.shape[1] - 1
    m = A[t, 0] * W[i, 0] * Bt[h, 0] / zp
    if m == 0.0:
        return 0.0
    e = A[t, KA] + W[i, KW] + Bt[h, KB] - zk
    if e < -2200.0:
        return 0.0
    if e > 2200.0:
        e = 2200.0
    return math.ldexp(m, int(e))


def chain_flow_py(A, Wm, Hd, q, lo, hi, chain, r, zp, zk):
    """The (negative) flow of one exclusion arc or final adjustment of a phi system
    (:mod:`fsmlearn.algo.phi`): ``-A[q] (x) Wm[chain[lo:hi]] (x) Hd[r] / Z`` as a float,
    with Hd the backward rows (an exclusion arc) or the final rows (a final adjustment);
    0 when it underflows.  The caller adds it to every arc of the chain."""
    K = Wm.shape[1] - 1
    m = A[q, 0] / zp
    e = A[q, A.shape[1] - 1] - zk
    for c in range(lo, hi):
        a = chain[c]
        m *= Wm[a, 0]
        e += Wm[a, K]
        if m != 0.0:
            fr, ex = math.frexp(m)
            m = fr
            e += ex
    m *= Hd[r, 0]
    e += Hd[r, Hd.shape[1] - 1]
    if m == 0.0 or e < -2200.0:
        return 0.0
    if e > 2200.0:
        e = 2200.0
    return -math.ldexp(m, int(e))


def final_flow_py(A, F, q, zp, zk):
    """``A[q] F[q] / Z`` as a float: the probability that a path stops at state q (scaled
    rows, as :func:`arc_flow_py`)."""
    m = A[q, 0] * F[q, 0] / zp
    if m == 0.0:
        return 0.0
    e = A[q, A.shape[1] - 1] + F[q, F.shape[1] - 1] - zk
    if e < -2200.0:
        return 0.0
    if e > 2200.0:
        e = 2200.0
    return math.ldexp(m, int(e))

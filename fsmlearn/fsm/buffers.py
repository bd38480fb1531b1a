"""Growing arrays inside numba kernels that build machines, and searching sorted ones.

Public names: grow, upper_bound.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["grow", "upper_bound"]


@nb.njit(cache=True)
def grow(a, n):
    """``a`` with room for index ``n`` along its first axis (doubled when full; 1-D, or 2-D by
    rows); ``a`` itself when it has room."""
    if n < a.shape[0]:
        return a
    shape = (max(a.shape[0] * 2, n + 1),) + a.shape[1:]
    b = np.empty(shape, a.dtype)
    b[:a.shape[0]] = a
    return b


@nb.njit(cache=True, inline="always")
def upper_bound(keys, lo, hi, x):
    """The first i in [lo, hi) with keys[i] > x (hi when none), keys[lo:hi] sorted."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo

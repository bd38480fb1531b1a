"""Growing arrays inside numba kernels that build machines.

Public names: grow.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["grow"]


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

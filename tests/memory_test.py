"""fsmlearn._memory.huge_pages: advice only, so the arrays it is given hold what is written
to them, whatever their size, shape or alignment, and whether or not the system takes the
advice."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

from fsmlearn._memory import _MIN_BYTES, huge_pages


@nb.njit
def _filled(n, k):
    a = huge_pages(np.empty((n, k)))
    for i in range(n):
        for j in range(k):
            a[i, j] = i * k + j
    return a


@nb.njit
def _same(a):
    return huge_pages(a)


@pytest.mark.parametrize("n", [0, 1, 1000, _MIN_BYTES // 8 - 1, _MIN_BYTES // 8, (_MIN_BYTES // 8) * 3 + 17])
@pytest.mark.parametrize("k", [1, 2])
def test_an_advised_array_holds_what_is_written(n, k):
    a = _filled(n, k)
    assert a.shape == (n, k)
    assert np.array_equal(a.ravel(), np.arange(n * k, dtype=np.float64))


def test_it_returns_the_array_it_was_given_and_changes_no_value():
    for a in (np.arange(10.0), np.arange(3 * _MIN_BYTES // 8, dtype=np.float64)[5:]):
        before = a.copy()
        b = _same(a)
        assert b.ctypes.data == a.ctypes.data and np.array_equal(b, before)

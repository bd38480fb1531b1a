"""fsmlearn._memory.huge_pages: advice only, so the arrays it is given hold what is written
to them, whatever their size, shape or alignment, and whether or not the system takes the
advice."""

from __future__ import annotations

import os
import sys

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


def _vma_flags(addr):
    """VmFlags of the mapping of this process that holds the address, from /proc/self/smaps."""
    flags = None
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "VmFlags:":
                flags = line.split()[1:]
    return flags


@nb.njit
def _advised(n):
    return huge_pages(np.empty(n))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise(MADV_HUGEPAGE) is Linux's")
def test_the_whole_huge_pages_inside_a_large_array_are_advised():
    # the advice is a flag on the mapping ("hg" in /proc/self/smaps) where the kernel has
    # transparent huge pages, on every whole 2 MiB page inside the array (40 MiB: a fresh
    # mapping of its own, past the 32 MiB up to which malloc may recycle memory that an
    # earlier array's advice still covers)
    a = _advised(40 * (1 << 20) // 8 + 1000)
    p = a.ctypes.data
    page = 1 << 21
    lo = (p + page - 1) // page * page
    hi = (p + a.nbytes) // page * page
    assert hi - lo >= 2 * page
    if not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):
        assert "hg" not in (_vma_flags(lo) or [])
        return
    for addr in [*range(lo, hi, page), hi - 1]:
        assert "hg" in _vma_flags(addr), hex(addr)

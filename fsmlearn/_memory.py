"""Transparent huge pages for the large arrays that numba kernels allocate themselves.

An array made with ``np.empty`` inside a numba kernel comes from ``malloc``; a large one
is a fresh anonymous mapping whose pages the kernel faults in 4 KiB at a time on first
touch.  numpy's own allocator asks the kernel for transparent huge pages on arrays of
4 MiB or more (``madvise(MADV_HUGEPAGE)``, where the system's setting is "madvise", as
on the project's machines); numba's does not.  On the benchmark machine, writing a fresh
80 MB array took 36-41 ms when numba allocated it and 13-15 ms when numpy did, or when
:func:`huge_pages` had advised it first (a second write: 8 ms).

:func:`huge_pages` gives a kernel's fresh array the same advice, from inside the kernel:
the ``madvise`` system call, declared by name in the compiled code (so the kernel stays
in numba's cache, which a ctypes function pointer would prevent), on the whole 2 MiB
pages inside the array.  It changes no value.  Where the advice is refused (huge pages
off, another system), the call fails quietly and the array is faulted in as before.

An array under 32 MiB may come from memory ``malloc`` recycles rather than a fresh
mapping (glibc raises its mapping threshold up to 32 MiB after freeing a mapped block):
pages already there stay as they are, and the advice stays on that memory after the
array is freed, as numpy's does.  Like numpy's, it may make the kernel compact memory to
find a huge page, and a process hold more resident memory.

Public names: huge_pages.
"""

from __future__ import annotations

import sys

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

__all__ = ["huge_pages"]

#: Linux's MADV_HUGEPAGE; the advice is given on Linux only
_MADV_HUGEPAGE = 14
_LINUX = sys.platform.startswith("linux")
_PAGE = np.uint64(1 << 21)                 # a transparent huge page on x86-64
#: arrays of fewer bytes are left alone (numpy's threshold for the same advice)
_MIN_BYTES = 1 << 22


@intrinsic
def _madvise(typingctx, addr, length, advice):
    """madvise(addr, length, advice), the C library's, called by name."""
    sig = types.int32(types.uint64, types.uint64, types.int32)

    def codegen(context, builder, signature, args):
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [i8p, ir.IntType(64), ir.IntType(32)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "madvise")
        a, n, adv = args
        return builder.call(fn, [builder.inttoptr(a, i8p), n, adv])
    return sig, codegen


@nb.njit(inline="always")
def huge_pages(a):
    """Advise the kernel to back the untouched array ``a`` (contiguous: an ``np.empty``
    result) with transparent huge pages (the whole 2 MiB pages inside it; arrays under
    4 MiB are left alone).  Call it right after ``np.empty``, before anything is written;
    returns ``a``."""
    if _LINUX and a.nbytes >= _MIN_BYTES:
        p = np.uint64(a.ctypes.data)
        lo = (p + _PAGE - np.uint64(1)) & ~(_PAGE - np.uint64(1))
        hi = (p + np.uint64(a.nbytes)) & ~(_PAGE - np.uint64(1))
        if hi > lo:
            _madvise(lo, hi - lo, np.int32(_MADV_HUGEPAGE))
    return a

"""Open-addressing hash tables of int64 keys for numba kernels.

Keys are non-negative int64 (-1 marks an empty slot); a table of capacity
2**k (mask = 2**k - 1) with linear probing, hashed by splitmix64's finaliser.

Also a software prefetch for kernels that probe many slots of a large table in a row
(:func:`prefetch`: LLVM's ``llvm.prefetch``, a hint with no effect on results), and the
element-by-element key tests of probes whose keys are runs of values rather than one
int64 (a word's bytes, an n-gram's word ids, a history's tokens): :func:`same_run`,
:func:`same_rows`, inlined where they are called.

Public names: hash64, hash_insert, hash_lookup, new_table, table_capacity, prefetch, same_run, same_rows.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def table_capacity(n: int) -> int:
    """The capacity (a power of two, at least 16) of a table for about n entries at load
    factor at most 1/2."""
    cap = 16
    while cap < 2 * max(1, n):
        cap *= 2
    return cap


def new_table(n: int):
    """(keys, vals, mask) for about n entries (load factor at most 1/2)."""
    cap = table_capacity(n)
    return np.full(cap, -1, np.int64), np.full(cap, -1, np.int64), cap - 1


@nb.njit(cache=True)
def hash64(key):
    # 64-bit mix (splitmix64 finaliser)
    x = np.uint64(key)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xbf58476d1ce4e5b9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94d049bb133111eb)
    x ^= x >> np.uint64(31)
    return x


@nb.njit(cache=True)
def hash_insert(keys, vals, mask, key, val):
    """Insert key -> val; returns the existing value if the key is present, else -1."""
    i = np.int64(hash64(key) & np.uint64(mask))
    while True:
        k = keys[i]
        if k == -1:
            keys[i] = key
            vals[i] = val
            return -1
        if k == key:
            return vals[i]
        i = (i + 1) & mask


@nb.njit(cache=True)
def hash_lookup(keys, vals, mask, key):
    i = np.int64(hash64(key) & np.uint64(mask))
    while True:
        k = keys[i]
        if k == -1:
            return -1
        if k == key:
            return vals[i]
        i = (i + 1) & mask


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the processor to bring the cache line of ``arr[idx]`` (1-D) or ``arr[idx, 0]``
    (2-D) in: LLVM's prefetch (read, high locality), which never faults and changes no
    result."""
    if not isinstance(arr, types.Array) or arr.ndim not in (1, 2) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        at = [index] if aryty.ndim == 1 else [index, context.get_constant(types.intp, 0)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, at, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen


@nb.njit(cache=True, inline="always")
def same_run(x, i, y, j, n):
    """Whether ``x[i:i + n]`` equals ``y[j:j + n]`` (1-D arrays), stopping at the first difference."""
    for k in range(n):
        if x[i + k] != y[j + k]:
            return False
    return True


@nb.njit(cache=True, inline="always")
def same_rows(a, r, s, n):
    """Whether rows ``r`` and ``s`` of the 2-D array ``a`` agree in their first ``n`` columns,
    stopping at the first difference."""
    for k in range(n):
        if a[r, k] != a[s, k]:
            return False
    return True

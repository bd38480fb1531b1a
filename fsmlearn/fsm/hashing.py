"""Open-addressing hash tables of int64 keys for numba kernels.

Keys are non-negative int64 (-1 marks an empty slot); a table of capacity
2**k (mask = 2**k - 1) with linear probing, hashed by splitmix64's finaliser.

Also a software prefetch for kernels that probe many slots of a large table in a row
(:func:`prefetch`: LLVM's ``llvm.prefetch``, a hint with no effect on results).

Public names: hash64, hash_insert, hash_lookup, new_table, prefetch.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def new_table(n: int):
    """(keys, vals, mask) for about n entries (load factor at most 1/2)."""
    cap = 16
    while cap < 2 * max(1, n):
        cap *= 2
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
    """prefetch(arr, i) inside a numba kernel: ask the CPU to bring arr[i]'s cache line in
    (for reading, kept in every cache level).  A hint only: it never faults or changes a
    value, so the index may be anything inside the array."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ary = context.make_array(aty)(context, builder, args[0])
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, [i], wraparound=False, boundscheck=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen

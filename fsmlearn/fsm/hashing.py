"""Open-addressing hash tables of int64 keys for numba kernels.

Keys are non-negative int64 (-1 marks an empty slot); a table of capacity
2**k (mask = 2**k - 1) with linear probing, hashed by splitmix64's finaliser.

Public names: hash64, hash_insert, hash_lookup, new_table.
"""

from __future__ import annotations

import numba as nb
import numpy as np


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



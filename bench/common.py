"""Helpers shared by the benchmarks in bench/ (run as scripts, so this folder is on sys.path)."""

from __future__ import annotations

import math
import time

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _triad(a, b, c, s):
    for i in range(a.shape[0]):
        a[i] = b[i] + s * c[i]


def triad_bandwidth(n=20_000_000, runs=7) -> float:
    """Single-threaded triad bandwidth in GB/s (best of runs; 3 arrays x 8 bytes)."""
    rng = np.random.default_rng(0)
    a = np.empty(n)
    b = rng.random(n)
    c = rng.random(n)
    _triad(a, b, c, 2.0)
    best = math.inf
    for _ in range(runs):
        t = time.perf_counter()
        _triad(a, b, c, 2.0)
        best = min(best, time.perf_counter() - t)
    return 3 * 8 * n / best / 1e9

"""The arithmetic of the tied product's per-block steps, written once for both targets.

Plain Python functions that :mod:`fsmlearn.algo.tied.kernels` compiles with numba's
``njit`` and :mod:`fsmlearn.algo.cuda.tied` with ``cuda.jit(device=True)``, so a fix
lands on both devices.

Public names: block_softmax_py.
"""

from __future__ import annotations

import math

__all__ = ["block_softmax_py"]


def block_softmax_py(out, A_a, B, lo, hi, min_mass):
    """In place, ``out[lo:hi] = softmax(B[lo:hi] / A_a)``: block a's optimum (Smith and
    Eisner, section 3.5); a block of mass ``A_a <= min_mass``, or whose scores are all
    -inf, is left as ``out`` holds it (its old entries)."""
    if hi - lo == 0 or A_a <= min_mass:
        return
    mx = -math.inf
    for j in range(lo, hi):
        v = B[j] / A_a
        if v > mx:
            mx = v
    if mx == -math.inf:
        return
    z = 0.0
    for j in range(lo, hi):
        x = math.exp(B[j] / A_a - mx)
        out[j] = x
        z += x
    for j in range(lo, hi):
        out[j] /= z

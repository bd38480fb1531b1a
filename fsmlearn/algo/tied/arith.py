"""The arithmetic of the tied product's per-block steps, written once for both targets.

Plain Python functions that :mod:`fsmlearn.algo.tied.kernels` compiles with numba's
``njit`` and :mod:`fsmlearn.algo.cuda.tied` with ``cuda.jit(device=True)``, so a fix
lands on both devices.

Public names: block_softmax_py, block_scores_py.
"""

from __future__ import annotations

import math

__all__ = ["block_softmax_py", "block_scores_py"]


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


def block_scores_py(B, a, alpha, M, U, logE, es, ed, ek, blk_start, blk_tag, arc_word, ev_of_arc, arc_ev_ptr):
    """Adds arc a's block scores to ``B`` (section 3.4): over the events e that use a's block
    (``ev_of_arc[arc_ev_ptr[a]:arc_ev_ptr[a + 1]]``), ``B[j] += k_e (M[src_e, t_j] +
    alpha[src_e] (logE[w_a, t_j] + U[dst_e, t_j]))``."""
    w = arc_word[a]
    for i in range(arc_ev_ptr[a], arc_ev_ptr[a + 1]):
        e = ev_of_arc[i]
        s = es[e]
        k = ek[e]
        al = alpha[s]
        d = ed[e]
        for j in range(blk_start[a], blk_start[a + 1]):
            t = blk_tag[j]
            B[j] += k * (M[s, t] + al * (logE[w, t] + U[d, t]))

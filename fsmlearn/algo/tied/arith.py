"""The arithmetic of the tied product's per-block steps, written once for both targets.

Plain Python functions that :mod:`fsmlearn.algo.tied.kernels` compiles with numba's
``njit`` and :mod:`fsmlearn.algo.cuda.tied` with ``cuda.jit(device=True)``, so a fix
lands on both devices.  :func:`arc_emit_entropy_py` adds into a table other arcs add
into, through ``_add2``: a plain ``+=`` on the CPU, an atomic add on the device
(:func:`~fsmlearn.algo.flow_arith.retarget`).

Public names: block_softmax_py, block_scores_py, arc_emit_entropy_py, event_scatter_py.
"""

from __future__ import annotations

import math

import numba as nb

from ..flow_arith import add2_py

__all__ = ["block_softmax_py", "block_scores_py", "arc_emit_entropy_py", "event_scatter_py"]

_add2 = nb.njit(inline="always")(add2_py)


def event_scatter_py(e, alpha, es, ed, ea, ek, blk_start, blk_tag, phi, A2):
    """Event e's share of the tag mass reaching its destination: adds
    ``alpha[src_e] k_e phi[j]`` to ``A2[dst_e, tag_j]`` for each entry j of the block of e's
    arc (the tagged product's forward mass, alpha2, before its phi pass)."""
    base = alpha[es[e]] * ek[e]
    if base == 0.0:
        return
    d = ed[e]
    a = ea[e]
    for j in range(blk_start[a], blk_start[a + 1]):
        _add2(A2, d, blk_tag[j], base * phi[j])


def arc_emit_entropy_py(a, A, blk_start, blk_tag, phi, arc_word, emit_wt):
    """Arc a's share of the expected emissions and of the blocks' entropy (Smith and Eisner,
    section 3.4: the bound's emission counts and the entropy of q): adds ``A[a] phi[j]`` to
    ``emit_wt[word of a, tag_j]`` (a word-major table) for each entry j of a's block and
    returns ``A[a] H(phi[a, .])``; ``A[a]`` is the arc's expected uses (every event of arc a
    uses its block)."""
    m = A[a]
    if m == 0.0:
        return 0.0
    w = arc_word[a]
    h = 0.0
    for j in range(blk_start[a], blk_start[a + 1]):
        q = phi[j]
        if q > 0.0:
            _add2(emit_wt, w, blk_tag[j], m * q)
            h -= q * math.log(q)
    return m * h


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

"""The arithmetic of one entry of a tagged product, written once for both targets.

A plain Python function compiled by :mod:`fsmlearn.algo.product` with numba's
``njit`` and by :mod:`fsmlearn.algo.cuda.product` with ``cuda.jit(device=True)``,
so a fix lands on both devices.

Public names: entry_weight_py.
"""

from __future__ import annotations

__all__ = ["entry_weight_py"]


def entry_weight_py(blk_w, row, tp, trans, c):
    """An entry's weight after previous tag t': its block weight (column 0 when the block is
    independent of the previous tag) times the transition factor H[t', c] (none when
    ``trans`` is empty)."""
    w = blk_w[row, 0] if blk_w.shape[1] == 1 else blk_w[row, tp]
    if trans.shape[0] > 0:
        w *= trans[tp, c]
    return w

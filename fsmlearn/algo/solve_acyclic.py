"""The one-pass kernel for acyclic machines in -log weights (log and tropical semirings).

A machine whose states are numbered topologically is solved in one pass over
its arcs (forward or backward), ``log``-summing in blocks of scaled rows.

Public names: acyclic_neglog.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..semiring.ops import EXP_UNSET, NEGLOG_BLOCK, P2, neglog_block
from ..semiring.ops import renorm as _renorm0

__all__ = ["acyclic_neglog"]


@nb.njit(cache=True)
def acyclic_neglog(V, src_start, dst, w, backward):
    """Forward or backward values of a topologically numbered machine in one pass.

    Every arc goes from a lower to a higher state number; ``w`` holds the arc
    weights as negative logs and ``V`` scaled rows ``[p, k]`` (real and log
    semirings, R = 0): the start state's one (forward) or the final weights
    (backward) on entry, the values on return.  The weights are converted a
    block of arcs at a time (vectorised, see ``neglog_block``) inside the
    pass, so no converted copy of the arcs is written and read back, and
    states with value zero push nothing (forward).  Backward values are
    pulled over each state's own CSR row, highest state first, with the sum
    kept in registers.
    """
    n = src_start.shape[0] - 1
    E = dst.shape[0]
    B = NEGLOG_BLOCK
    P = np.empty(B)
    K = np.empty(B)
    lo = 0
    hi = 0
    if not backward:
        for s in range(n):
            ps = V[s, 0]
            if ps == 0.0:
                continue
            ks = V[s, 1]
            for a in range(src_start[s], src_start[s + 1]):
                if a >= hi:
                    lo = a
                    hi = min(E, a + B)
                    neglog_block(w, lo, hi, P, K)
                pw = P[a - lo]
                if pw == 0.0:
                    continue
                h = dst[a]
                k = ks + K[a - lo]
                kt = V[h, 1]
                kn = max(k, kt)
                V[h, 0] = V[h, 0] * P2[min(int(kn - kt), 1100)] + ps * pw * P2[min(int(kn - k), 1100)]
                V[h, 1] = kn
                _renorm0(V, h)
    else:
        lo = E
        hi = E
        for i in range(n):
            s = n - 1 - i
            am = V[s, 0]
            ak = V[s, 1]
            a1 = src_start[s]
            for a in range(src_start[s + 1] - 1, a1 - 1, -1):
                if a < lo:
                    hi = a + 1
                    lo = max(0, hi - B)
                    neglog_block(w, lo, hi, P, K)
                h = dst[a]
                ph = V[h, 0]
                pw = P[a - lo]
                if ph == 0.0 or pw == 0.0:
                    continue
                k = V[h, 1] + K[a - lo]
                if am == 0.0:
                    am = ph * pw
                    ak = k
                    continue
                kn = max(k, ak)
                am = am * P2[min(int(kn - ak), 1100)] + ph * pw * P2[min(int(kn - k), 1100)]
                ak = kn
            V[s, 0] = am
            V[s, 1] = ak if am != 0.0 else EXP_UNSET
            _renorm0(V, s)

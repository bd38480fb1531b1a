"""numba.cuda kernels of the engine: sums over arcs in the linear semirings, one thread per row.

Two row layouts, those of the CPU kernels (:mod:`fsmlearn.semiring.ops`):

* *scaled* rows ``[p, r_1..r_R, k]``, float64 [n, R+2], meaning
  ``(p, r) * 2**k`` (zero: all zero with ``k = EXP_UNSET``): phi-free
  machines, in the real, log and expectation semirings (Eisner 2002's
  ``<p, r>`` with product ``<p1 p2, p1 r2 + r1 p2>``);
* *plain* rows ``[p, r_1..r_R]``, float64 [n, R+1]: the signed phi systems,
  as :mod:`fsmlearn.algo.solve_phi` keeps them.

Every kernel writes only rows its own thread owns (pull form: a state gathers
over its incoming arcs), except the scatters of flows to a machine's arcs,
which add atomically.  The row width is read from the arrays, so one compiled
kernel serves every R.

Kernels (grid: one thread per item named first):

* :func:`pull_level` (state of a level): ``V[t] = V[t] (+) sum_j V[nbr_j] (x) W[arc_j]``,
  the level-synchronous pass of an acyclic machine (Mohri 2002's generic
  single-source shortest distance in topological order, one level at a time);
* :func:`pull_levels_block` (one block): a run of narrow levels in one launch,
  the block's threads synchronised between levels;
* :func:`jacobi_sweep` (state): ``Y[t] = B[t] (+) sum_j X[nbr_j] (x) W[arc_j]``
  and the row's change (largest relative change, L1 change at a fixed
  exponent, non-finite / unbounded flag), one Jacobi step of the algebraic
  path problem;
* :func:`reduce_change` (chunk of rows): the largest relative change, the L1
  change and the first bad row of each chunk;
* :func:`chunk_sums` (chunk): partial sums of a vector;
* :func:`extrapolate_scaled`, :func:`extrapolate_plain` (state): Aitken's step
  ``Y <- Y + c (Y - X)`` (Kamvar et al. 2003);
* :func:`phi_pull` (state): ``Y[t] = B[t] + sum_e X[col_e] (x) W[e]`` over the
  own and exclusion arcs of a phi system (plain rows), own self-loops applied
  exactly (their star) instead of iterated;
* :func:`phi_up_level`, :func:`phi_down_level` (state of a forest level): the
  phi forest's passes ``(I - Phi^T)^{-1}`` and ``(I - Phi)^{-1}``, one depth
  at a time (:mod:`fsmlearn.algo.solve_phi`);
* :func:`row_changes` (state): the change of a step on plain rows, row by row
  (largest value, largest change, L1 change, not finite), to which
  :func:`fsmlearn.algo.cuda.solve.change_rule` applies the rule of
  :func:`fsmlearn.algo.convergence.measure_change`;
* :func:`forest_up_rows`, :func:`forest_down_rows` (state of a forest level):
  the same passes over matrix rows with scalar weights, ``P X`` and ``P^T X``
  (the twin of :func:`fsmlearn.algo.product.phi_pass_rows`);
* :func:`arc_flows` (arc): ``alpha[tail] w beta[head] / Z`` (the arc posterior);
* :func:`scatter_flows` (system arc): adds the flows of a phi system's own arcs
  to the machine's arcs; :func:`chain_flows` (exclusion): adds an exclusion
  arc's (negative) flow to every arc of its backoff chain.

Public names: the kernels above, atomic_add1 and atomic_add2 (the device's ``_add1`` /
``_add2`` for :func:`fsmlearn.algo.flow_arith.retarget`), EXP_UNSET, CHUNK.
"""

from __future__ import annotations

import math

from numba import cuda

from ...semiring.ops import EXP_UNSET
from ..flow_arith import arc_flow_py, chain_flow_py, final_flow_py, owner_py

__all__ = ["forest_up_rows", "forest_down_rows", "pull_level", "pull_levels_block", "jacobi_sweep", "reduce_change", "chunk_sums", "extrapolate_scaled", "extrapolate_plain",
           "phi_pull", "phi_up_level", "phi_down_level", "row_changes", "arc_flows", "final_flows", "scatter_flows",
           "chain_flows", "atomic_add1", "atomic_add2", "EXP_UNSET", "CHUNK"]

CHUNK = 256                  # rows per thread of reduce_change
_HI = 2.0**64
_LO = 2.0**-64
_UNBOUNDED_EXP = 1000.0      # a row this many binary orders above the reference diverges
_UNBOUNDED = 2.0**1000       # the same bound for plain rows (convergence.measure_change)


@cuda.jit(device=True)
def atomic_add1(a, i, v):
    """a[i] += v, atomically (the device's ``_add1`` of the shared arithmetic)."""
    cuda.atomic.add(a, i, v)


@cuda.jit(device=True)
def atomic_add2(a, i, j, v):
    """a[i, j] += v, atomically (the device's ``_add2`` of the shared arithmetic)."""
    cuda.atomic.add(a, (i, j), v)


@cuda.jit(device=True)
def _fmax(a, b):
    """The larger of a and b, NaN if either is (the builtin max of two scalars does not compile
    on every numba.cuda)."""
    return a if (a >= b or a != a) else b


@cuda.jit(device=True)
def _fmin(a, b):
    """The smaller of a and b, NaN if either is."""
    return a if (a <= b or a != a) else b


# the flows' arithmetic, one source with the CPU kernels of algo.posteriors
_owner = cuda.jit(device=True)(owner_py)
_arc_flow = cuda.jit(device=True)(arc_flow_py)
_chain_flow = cuda.jit(device=True)(chain_flow_py)
_final_flow = cuda.jit(device=True)(final_flow_py)


@cuda.jit(device=True)
def _p2(d, P2):
    """2**-d for d >= 0 (0 beyond 2**-1100), from the table P2."""
    i = int(d)
    if i > 1100:
        i = 1100
    return P2[i]


@cuda.jit(device=True)
def _renorm(V, t):
    """Bring row t's largest value into [2**-64, 2**64) (exponent column adjusted); zero rows unset."""
    KE = V.shape[1] - 1
    m = 0.0
    for j in range(KE):
        m = _fmax(m, abs(V[t, j]))
    if m == 0.0:
        V[t, KE] = EXP_UNSET
    elif (m >= _HI or m < _LO) and m < math.inf:
        _, e = math.frexp(m)
        for j in range(KE):
            V[t, j] = math.ldexp(V[t, j], -e)
        V[t, KE] += e


@cuda.jit(device=True)
def _gather(Y, t, Bs, bt, X, ptr, nbr, arc, W, P2):
    """Y[t] = Bs[bt] (+) sum over j in ptr[t]:ptr[t+1] of X[nbr[j]] (x) W[arc[j]] (scaled rows).

    Two passes over the row's arcs: the largest exponent first, then the sum
    with every term scaled to it, so no term overflows and none that matters
    underflows.  Y[t] may be Bs[bt] itself.
    """
    KE = Y.shape[1] - 1
    kmax = Bs[bt, KE]
    for j in range(ptr[t], ptr[t + 1]):
        k = X[nbr[j], KE] + W[arc[j], KE]
        if k > kmax:
            kmax = k
    f = _p2(kmax - Bs[bt, KE], P2)
    for c in range(KE):
        Y[t, c] = Bs[bt, c] * f
    for j in range(ptr[t], ptr[t + 1]):
        s = nbr[j]
        a = arc[j]
        f = _p2(kmax - (X[s, KE] + W[a, KE]), P2)
        px = X[s, 0]
        pw = W[a, 0]
        Y[t, 0] += px * pw * f
        for c in range(1, KE):
            Y[t, c] += (px * W[a, c] + X[s, c] * pw) * f
    Y[t, KE] = kmax
    _renorm(Y, t)


@cuda.jit
def pull_level(V, states, s0, s1, ptr, nbr, arc, W, P2):
    """One level of the acyclic pass: V[t] = V[t] (+) sum_j V[nbr_j] (x) W[arc_j] for t = states[s0:s1].

    Args:
        V: float64 [n, K] scaled rows: each state's input on entry (start row
            or final weight), its value on exit; the rows of earlier levels are final.
        states: int64 [n] states by level; s0, s1: this level's slice.
        ptr, nbr, arc: int64 CSR of the arcs each state pulls (forward: its
            incoming arcs and their sources; backward: its outgoing arcs and
            their destinations).
        W: float64 [E, K] scaled arc rows; P2: float64 [1101] powers 2**-j.
    """
    i = cuda.grid(1) + s0
    if i < s1:
        t = states[i]
        _gather(V, t, V, t, V, ptr, nbr, arc, W, P2)


@cuda.jit
def pull_levels_block(V, states, level_ptr, l0, l1, ptr, nbr, arc, W, P2):
    """Levels l0 .. l1-1 of the acyclic pass in one block: the block's threads share each
    level's states, then wait for each other (``syncthreads``) before the next level.

    For runs of narrow levels (a deep machine has many levels of a few states
    each: one launch per level would cost more than the level's work).  Launch
    with one block.  ``level_ptr``: device int64 [L+1]; the rest as for
    :func:`pull_level`.
    """
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for lv in range(l0, l1):
        i = level_ptr[lv] + tid
        s1 = level_ptr[lv + 1]
        while i < s1:
            t = states[i]
            _gather(V, t, V, t, V, ptr, nbr, arc, W, P2)
            i += nt
        cuda.syncthreads()


@cuda.jit
def jacobi_sweep(Y, X, B, ptr, nbr, arc, W, P2, kref, dn, sd, bad):
    """One Jacobi step Y = B (+) X (x) W on scaled rows, with each row's change.

    Args:
        Y: float64 [n, K] out: the new rows; X: the previous rows; B: the inputs.
        ptr, nbr, arc, W, P2: as for :func:`pull_level`.
        kref: the reference exponent of the L1 change (the inputs' largest).
        dn: float64 [n] out: the row's largest change over its largest value
            (1 for a row leaving or reaching zero).
        sd: float64 [n] out: the row's L1 change, in units of 2**kref.
        bad: int64 [n] out: 1 when the row is not finite or above 2**(kref + 1000).
    """
    t = cuda.grid(1)
    if t >= Y.shape[0]:
        return
    _gather(Y, t, B, t, X, ptr, nbr, arc, W, P2)
    KE = Y.shape[1] - 1
    ky = Y[t, KE]
    kx = X[t, KE]
    zy = True
    zx = True
    finite = True
    for c in range(KE):
        if Y[t, c] != 0.0:
            zy = False
        if X[t, c] != 0.0:
            zx = False
        if not (abs(Y[t, c]) < math.inf):
            finite = False
    bad[t] = 0
    if not finite or (not zy and ky - kref > _UNBOUNDED_EXP):
        bad[t] = 1
        dn[t] = 1.0
        sd[t] = math.inf
        return
    if zy and zx:
        dn[t] = 0.0
        sd[t] = 0.0
        return
    kn = _fmax(ky, kx)
    fy = _p2(kn - ky, P2)
    fx = _p2(kn - kx, P2)
    m = 0.0
    d = 0.0
    s = 0.0
    for c in range(KE):
        y = Y[t, c] * fy
        x = X[t, c] * fx
        m = _fmax(m, _fmax(abs(y), abs(x)))
        d = _fmax(d, abs(y - x))
        s += abs(y - x)
    e = kn - kref
    if e < -2200.0:
        e = -2200.0
    sd[t] = math.ldexp(s, int(e))
    if zy or zx:
        dn[t] = 1.0
    elif m > 0.0:
        dn[t] = d / m
    else:
        dn[t] = 0.0


@cuda.jit
def reduce_change(dn, sd, bad, part):
    """part[c] = [largest dn, sum of sd, first bad row or -1] over rows c*CHUNK .. (c+1)*CHUNK - 1."""
    c = cuda.grid(1)
    if c >= part.shape[0]:
        return
    n = dn.shape[0]
    lo = c * CHUNK
    hi = _fmin(lo + CHUNK, n)
    mx = 0.0
    tot = 0.0
    first = -1.0
    for i in range(lo, hi):
        mx = _fmax(mx, dn[i])
        tot += sd[i]
        if bad[i] != 0 and first < 0.0:
            first = float(i)
    part[c, 0] = mx
    part[c, 1] = tot
    part[c, 2] = first


@cuda.jit
def chunk_sums(x, part):
    """part[c] = sum of x[c*CHUNK : (c+1)*CHUNK] (float64 vectors)."""
    c = cuda.grid(1)
    if c >= part.shape[0]:
        return
    lo = c * CHUNK
    hi = _fmin(lo + CHUNK, x.shape[0])
    tot = 0.0
    for i in range(lo, hi):
        tot += x[i]
    part[c] = tot


@cuda.jit
def extrapolate_scaled(Y, X, factor, P2):
    """Aitken's step on scaled rows: Y[t] <- Y[t] + factor (Y[t] - X[t])."""
    t = cuda.grid(1)
    if t >= Y.shape[0]:
        return
    KE = Y.shape[1] - 1
    kn = _fmax(Y[t, KE], X[t, KE])
    fy = _p2(kn - Y[t, KE], P2)
    fx = _p2(kn - X[t, KE], P2)
    for c in range(KE):
        y = Y[t, c] * fy
        Y[t, c] = y + factor * (y - X[t, c] * fx)
    Y[t, KE] = kn
    _renorm(Y, t)


@cuda.jit
def extrapolate_plain(X, D, factor):
    """Aitken's step on plain rows: X[t] += factor D[t] (D: the last change)."""
    t = cuda.grid(1)
    if t >= X.shape[0]:
        return
    for c in range(X.shape[1]):
        X[t, c] += D[t, c] * factor


@cuda.jit(device=True)
def _add_prod(Y, t, X, s, W, e):
    """Y[t] += X[s] (x) W[e] (plain rows)."""
    px = X[s, 0]
    pw = W[e, 0]
    Y[t, 0] += px * pw
    for c in range(1, Y.shape[1]):
        Y[t, c] += px * W[e, c] + X[s, c] * pw


@cuda.jit(device=True)
def _times_star(Y, t, D):
    """Y[t] <- Y[t] (x) D[t]*, with D* = 1 / (1 - d0) and r-parts d_j / (1 - d0)^2 (plain rows)."""
    s0 = 1.0 / (1.0 - D[t, 0])
    y0 = Y[t, 0]
    Y[t, 0] = y0 * s0
    for c in range(1, Y.shape[1]):
        Y[t, c] = Y[t, c] * s0 + y0 * D[t, c] * s0 * s0


@cuda.jit
def phi_pull(Y, X, Xo, B, ptr, col, W, self_arc, D, has_self, forward):
    """One pass over a phi system's own (phi arcs excluded) and exclusion arcs, plain rows [n, R+1]:
    Y[t] = B[t] + sum over the arcs e of row t that are not own self-loops of X[col[e]] (x) W[e].

    Forward (X = alpha of the previous gamma Xo), a row with own self-loops D[t]
    solves gamma_t (1 - D) = s_t + other arcs + D (alpha_t - gamma_t) exactly:
    Y[t] += (X[t] - Xo[t]) (x) D[t], then Y[t] <- Y[t] (x) D[t]*.  Backward rows
    get their stars in :func:`phi_down_star_level` (after their phi term), as
    :func:`fsmlearn.algo.solve_phi.phi_solver` does.
    """
    t = cuda.grid(1)
    if t >= Y.shape[0]:
        return
    for c in range(Y.shape[1]):
        Y[t, c] = B[t, c]
    for e in range(ptr[t], ptr[t + 1]):
        if self_arc[e] == 0:
            _add_prod(Y, t, X, col[e], W, e)
    if forward and has_self[t] != 0:
        d0 = X[t, 0] - Xo[t, 0]
        Y[t, 0] += d0 * D[t, 0]
        for c in range(1, Y.shape[1]):
            Y[t, c] += d0 * D[t, c] + (X[t, c] - Xo[t, c]) * D[t, 0]
        _times_star(Y, t, D)


@cuda.jit
def phi_up_level(Z, states, s0, s1, cptr, child, Wphi):
    """Z[t] += sum over the phi children q of t of Z[q] (x) Wphi[q], for t = states[s0:s1]
    (one depth of the forest, deepest first: the children's rows are final)."""
    i = cuda.grid(1) + s0
    if i < s1:
        t = states[i]
        for j in range(cptr[t], cptr[t + 1]):
            q = child[j]
            _add_prod(Z, t, Z, q, Wphi, q)


@cuda.jit
def phi_down_level(Z, states, s0, s1, phi_t, Wphi, D, has_self):
    """Z[q] += Z[phi_t[q]] (x) Wphi[q] (for q with a phi arc), then Z[q] <- Z[q] (x) D[q]* (for q
    with own self-loops), for q = states[s0:s1] (one depth, shallowest first)."""
    i = cuda.grid(1) + s0
    if i < s1:
        q = states[i]
        if phi_t[q] >= 0:
            _add_prod(Z, q, Z, phi_t[q], Wphi, q)
        if has_self[q] != 0:
            _times_star(Z, q, D)


@cuda.jit(device=True)
def row_change(X, Y, D, t):
    """Take row t of a step's result: D[t] = Y[t] - X[t], X[t] = Y[t]; returns (largest
    finite |value|, largest finite |change|, L1 change, 1 if a value or change is not
    finite else 0).  The row step of :func:`row_changes`."""
    mx = 0.0
    d = 0.0
    s = 0.0
    bad = 0
    for c in range(X.shape[1]):
        dj = Y[t, c] - X[t, c]
        D[t, c] = dj
        X[t, c] = Y[t, c]
        if dj != dj or not (abs(Y[t, c]) < math.inf):
            bad = 1
        else:
            mx = _fmax(mx, abs(Y[t, c]))
            d = _fmax(d, abs(dj))
        s += abs(dj)
    return mx, d, s, bad


@cuda.jit
def row_changes(X, Y, D, out):
    """Take a step's result row by row (:func:`row_change`): D = Y - X, X = Y; out[q] =
    (largest finite |value|, largest finite |change|, L1 change, 1 if a value or change
    is not finite else 0), for :func:`fsmlearn.algo.cuda.solve.change_rule` to apply the
    engine's stopping rule to."""
    q = cuda.grid(1)
    if q >= X.shape[0]:
        return
    mx, d, s, bad = row_change(X, Y, D, q)
    out[q, 0] = mx
    out[q, 1] = d
    out[q, 2] = s
    out[q, 3] = float(bad)


@cuda.jit
def arc_flows(A, W, Bt, tail, head, zp, zk, state_ptr, out):
    """out[i] = A[tail[i]] W[i] Bt[head[i]] / Z (the p-parts of scaled rows; Z = zp[b] 2**zk[b]
    of the machine b owning the tail state: ``state_ptr`` [B+1], one machine [0, n])."""
    i = cuda.grid(1)
    if i >= out.shape[0]:
        return
    t = tail[i]
    b = _owner(state_ptr, t)
    out[i] = _arc_flow(A, W, Bt, i, t, head[i], zp[b], zk[b])


@cuda.jit
def final_flows(A, F, zp, zk, state_ptr, out):
    """out[q] = A[q] F[q] / Z of q's machine (one thread per state)."""
    q = cuda.grid(1)
    if q >= out.shape[0]:
        return
    b = _owner(state_ptr, q)
    out[q] = _final_flow(A, F, q, zp[b], zk[b])


@cuda.jit
def scatter_flows(post, flows, kind, ref):
    """post[ref[i]] += flows[i] for the phi system's own arcs (kind 0), atomically."""
    i = cuda.grid(1)
    if i < flows.shape[0] and kind[i] == 0:
        cuda.atomic.add(post, ref[i], flows[i])


@cuda.jit
def chain_flows(A, Wm, Hd, tail_state, ptr, chain, head_state, zp, zk, state_ptr, post):
    """For exclusion i (or final adjustment): v = -A[q] (x) chain weights (x) Hd[r] / Z, with
    q = tail_state[i], r = head_state[i] and Hd the backward rows (or the final rows); adds v
    to every arc of its chain ptr[i]:ptr[i+1] atomically (scaled rows, p-parts; Z of the
    machine owning q)."""
    i = cuda.grid(1)
    if i >= tail_state.shape[0]:
        return
    q = tail_state[i]
    b = _owner(state_ptr, q)
    v = _chain_flow(A, Wm, Hd, q, ptr[i], ptr[i + 1], chain, head_state[i], zp[b], zk[b])
    if v != 0.0:
        for c in range(ptr[i], ptr[i + 1]):
            cuda.atomic.add(post, chain[c], v)


@cuda.jit
def forest_up_rows(X, states, s0, s1, cptr, child, w):
    """X[t, :] += sum over the forest children q of t of w[q] X[q, :], for t = states[s0:s1]
    (one depth, deepest first): ``P X`` of :func:`fsmlearn.algo.product.phi_pass_rows`."""
    i = cuda.grid(1) + s0
    if i < s1:
        t = states[i]
        for j in range(cptr[t], cptr[t + 1]):
            q = child[j]
            k = w[q]
            for c in range(X.shape[1]):
                X[t, c] += k * X[q, c]


@cuda.jit
def forest_down_rows(X, states, s0, s1, parent, w):
    """X[q, :] += w[q] X[parent[q], :] for q = states[s0:s1] (one depth, shallowest first):
    ``P^T X`` of :func:`fsmlearn.algo.product.phi_pass_rows`."""
    i = cuda.grid(1) + s0
    if i < s1:
        q = states[i]
        r = parent[q]
        k = w[q]
        for c in range(X.shape[1]):
            X[q, c] += k * X[r, c]


@cuda.jit
def zero_rows(X):
    """X[i, :] = 0 (one thread per row)."""
    i = cuda.grid(1)
    if i < X.shape[0]:
        for c in range(X.shape[1]):
            X[i, c] = 0.0

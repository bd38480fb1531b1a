"""The per-position kernels of RCMS with alignment states (Steinhardt and Liang 2015, section 4
and appendix A; section 4.2's per-z context sets): expanding the contexts of position i - 1 by
every allowed label, selecting the B heaviest per new z, merging the rest into their least
selected ancestor (the kernel of :mod:`fsmlearn.rcm.contexts`), and the arcs of the chosen
contexts.  :func:`fsmlearn.rcm.align.rcms_align` runs them position by position.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .align_model import BOS, STAR
from .contexts import _heap_replace_root, _heap_sift_up

# ----------------------------------------------------------------------------- RCMS kernels
@nb.njit(cache=True, inline="always")
def _lae(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@nb.njit(cache=True)
def _layer_scores(z, g, root, prev, ngs, edge_s, big_s, use_big, C, A, Lp, lo, outside, out_on):
    """S[k, v]: the score of label v after context k (natural log), -inf where not allowed
    (a = 0 after g = 1, z + a beyond L' or below ``lo``, leaving a root under outside -inf)."""
    K = z.size
    V = C * (A + 1)
    S = np.empty((K, V))
    for k in range(K):
        zk = z[k]
        dead = root[k] and out_on and outside == -np.inf
        for v in range(V):
            a = v // C
            zn = zk + a
            if dead or (a == 0 and g[k] == 1) or zn > Lp or zn < lo:
                S[k, v] = -np.inf
                continue
            s = ngs[k, v % C] + edge_s[zk * V + v]
            if use_big:
                s += big_s[(zk * (V + 2) + prev[k]) * V + v]
            if root[k] and out_on:
                s += outside
            S[k, v] = s
    return S


@nb.njit(cache=True)
def _expand(pz, plen, plcs, pm, pt, zoff, znr, zr0, zr1, S, tallow, lo_t, last, lo, Lp, C, A, target_only):
    """Step 1 of appendix A for one position, per new z: the expanded elements in sorted order
    (z' ascending, then label, then the parent's order; the root pair last in a label block)
    with lens, lcs, forward masses (model, target), validity, segment starts per z' and the
    block start of each (source z, label)."""
    V = C * (A + 1)
    blk = np.full((Lp + 1, V), -1, np.int64)
    E = 0
    for zn in range(lo, Lp + 1):
        for v in range(V):
            zs = zn - v // C
            if zs < 0 or zoff[zs + 1] == zoff[zs]:
                continue
            blk[zs, v] = E
            E += znr[zs] + 1
    e_z = np.empty(E, np.int64)
    e_v = np.empty(E, np.int64)
    e_par = np.empty(E, np.int64)
    lens = np.empty(E, np.int64)
    lcs = np.empty(E, np.int64)
    m = np.full(E, -np.inf)
    t = np.full(E, -np.inf)
    valid = np.zeros(E, np.bool_)
    seg = np.empty(Lp + 2 - lo, np.int64)
    e = 0
    for zn in range(lo, Lp + 1):
        seg[zn - lo] = e
        for v in range(V):
            zs = zn - v // C
            if zs < 0 or zoff[zs + 1] == zoff[zs]:
                continue
            # the target's mass: y_i allowed, and y can still be finished (enough phonemes left, and
            # not at z = L' before position L after a >= 2, where only a = 0 could follow)
            tok = tallow[v] and zn >= lo_t and not (zn == Lp and not last and v // C >= 2)
            nr = znr[zs]
            for r in range(nr + 1):
                e_z[e] = zn
                e_v[e] = v
                if r < nr:
                    k = zoff[zs] + r
                    e_par[e] = k
                    lens[e] = plen[k] + 1
                    lcs[e] = plcs[k] + 1 if r < nr - 1 else 1
                    s = S[k, v]
                    if s > -np.inf and (tok or not target_only):
                        valid[e] = True
                        m[e] = pm[k] + s
                        if tok:
                            t[e] = pt[k] + s
                else:
                    e_par[e] = -1
                    lens[e] = 1
                    lcs[e] = 0
                    for rr in (zr0[zs], zr1[zs]):
                        if rr < 0:
                            continue
                        s = S[rr, v]
                        if s > -np.inf and (tok or not target_only):
                            valid[e] = True
                            m[e] = _lae(m[e], pm[rr] + s)
                            if tok:
                                t[e] = _lae(t[e], pt[rr] + s)
                e += 1
    seg[Lp + 1 - lo] = e
    return e_z, e_v, e_par, lens, lcs, m, t, valid, seg, blk


@nb.njit(cache=True)
def _select_segments(seg, vals, B, active):
    """Step 2, per segment: mark the B elements of highest finite value (ties to the earlier).

    One pass per segment with a heap of the B best so far, its root the worst (the least value,
    of those the latest element): a later element displaces it only with a strictly larger
    value, so the kept set is that of a sort by (value descending, position ascending)."""
    if B <= 0:
        return
    hv = np.empty(B)
    hi = np.empty(B, np.int64)
    for s in range(seg.size - 1):
        n = 0
        for e in range(seg[s], seg[s + 1]):
            x = vals[e]
            if not x > -np.inf:
                continue
            if n < B:            # push
                _heap_sift_up(hv, hi, n, x, e)
                n += 1
            elif x > hv[0]:      # replace the root (a later element only with a larger value)
                _heap_replace_root(hv, hi, B, x, e)
        for j in range(n):
            active[hi[j]] = True


@nb.njit(cache=True)
def _finish(i, out_e, out_lcs, owner_rev, e_z, e_v, e_par, lens, m, t, valid, phist, C, A, Lp, keep_roots):
    """Step 3's bookkeeping: the new contexts in order (per z: the live selected elements in
    sorted order, then the roots (z, 0) and (z, 1) when they absorbed a valid element), their
    attributes, lcs within each z list, forward masses, and each element's context (-1: none)."""
    n_act = out_e.size
    E = lens.size
    W = phist.shape[1]
    big = np.int64(1) << 62
    sel = out_e[::-1].copy()
    owner = np.full(E, -1, np.int64)
    for e in range(E):
        if owner_rev[e] >= 0:
            owner[e] = n_act - 1 - owner_rev[e]
    live = np.zeros(n_act, np.bool_)
    root_live = np.zeros((Lp + 1, 2), np.bool_)
    for e in range(E):
        if not valid[e]:
            continue
        if owner[e] >= 0:
            live[owner[e]] = True
        elif keep_roots:
            root_live[e_z[e], 1 if e_v[e] // C >= 2 else 0] = True
    new_sel = np.full(n_act, -1, np.int64)
    root_idx = np.full((Lp + 1, 2), -1, np.int64)
    cnt = 0
    j = 0
    for zz in range(Lp + 1):
        while j < n_act and e_z[sel[j]] == zz:
            if live[j]:
                new_sel[j] = cnt
                cnt += 1
            j += 1
        for gg in range(2):
            if root_live[zz, gg]:
                root_idx[zz, gg] = cnt
                cnt += 1
    nz = np.empty(cnt, np.int64)
    ng = np.empty(cnt, np.int64)
    nroot = np.zeros(cnt, np.bool_)
    nlen = np.zeros(cnt, np.int64)
    npar = np.full(cnt, -1, np.int64)
    nlab = np.full(cnt, -1, np.int64)
    nlcs = np.zeros(cnt, np.int64)
    nhist = np.empty((cnt, W), np.int64)
    fm = np.full(cnt, -np.inf)
    ft = np.full(cnt, -np.inf)
    for j in range(n_act):
        q = new_sel[j]
        if q < 0:
            continue
        e = sel[j]
        v = e_v[e]
        nz[q] = e_z[e]
        ng[q] = 1 if v // C >= 2 else 0
        nlen[q] = lens[e]
        npar[q] = e_par[e]
        nlab[q] = v
        for s in range(W - 1):
            if e_par[e] >= 0:
                nhist[q, s] = phist[e_par[e], s + 1]
            else:
                nhist[q, s] = BOS if i - W + 1 + s <= 0 else STAR
        nhist[q, W - 1] = v
    for zz in range(Lp + 1):
        for gg in range(2):
            q = root_idx[zz, gg]
            if q < 0:
                continue
            nz[q] = zz
            ng[q] = gg
            nroot[q] = True
            for s in range(W):
                nhist[q, s] = BOS if i - W + 1 + s <= 0 else STAR
    # lcs of consecutive live contexts of one z: the least lcs between them in the sorted list
    last_q = -1
    run = big
    prev_z = -1
    for j in range(n_act):
        zz = e_z[sel[j]]
        if zz != prev_z:
            last_q = -1
            run = big
            prev_z = zz
        if live[j]:
            if last_q >= 0:
                nlcs[last_q] = run
            last_q = new_sel[j]
            run = big
        if j < n_act - 1:
            run = min(run, out_lcs[n_act - 1 - j])
    ctx = np.full(E, -1, np.int64)
    for e in range(E):
        o = owner[e]
        if o >= 0:
            q = new_sel[o]
        else:
            q = root_idx[e_z[e], 1 if e_v[e] // C >= 2 else 0]
        ctx[e] = q
        # the largest term of each context's log-sum (the sums are taken by numpy: _log_sums)
        if q >= 0 and valid[e]:
            if m[e] > fm[q]:
                fm[q] = m[e]
            if t[e] > ft[q]:
                ft[q] = t[e]
    # the terms of the log-sums in element order, each less its context's largest: (context, term)
    # of every valid element with a context and a finite mass, model and target
    mq = np.empty(E, np.int64)
    md = np.empty(E)
    tq = np.empty(E, np.int64)
    td = np.empty(E)
    nm = 0
    nt = 0
    for e in range(E):
        q = ctx[e]
        if q < 0 or not valid[e]:
            continue
        if m[e] > -np.inf:
            mq[nm] = q
            md[nm] = m[e] - fm[q]
            nm += 1
        if t[e] > -np.inf:
            tq[nt] = q
            td[nt] = t[e] - ft[q]
            nt += 1
    return nz, ng, nroot, nlen, npar, nlab, nlcs, nhist, fm, ft, ctx, sel, mq[:nm], md[:nm], tq[:nt], td[:nt]


def _log_sums(q, d, top):
    """log sum of exp per context: the terms ``d`` (each less its context's largest term
    ``top``, in element order) of contexts ``q`` (vectorised: numpy's exp is several times
    numba's here)."""
    s = np.bincount(q, weights=np.exp(d), minlength=top.size)
    with np.errstate(divide="ignore"):
        return np.where(top > -np.inf, top + np.log(s), -np.inf)


@nb.njit(cache=True)
def _arcs(pz, proot, zoff, znr, S, blk, ctx, nroot, tallow, lo_t, last, C, A, Lp, target_only, src_off, dst_off,
          n, ng, src, dst, lab, grp, sc, diff, gsrc, gdst, glab, gtop, gbest):
    """The arcs (elements) of one position in source order, context k --v--> f(k, v), and their
    machine arcs: the elements of one source that land in the same root are one machine arc
    (label 0), an element that lands in a selected context is one of its own (label v + 1).
    Written into the lattice-wide buffers from arc n and machine arc ng (room for K * V of each):
    source, destination, label, machine arc and score S[k, v] of each arc;
    source, destination and label of each machine arc.  Also the machine's pool of these
    scores (see :func:`_pool`): per machine arc the largest score and the label of the first
    element that has it, per arc its score less that.  Returns the new (n, ng)."""
    K, V = S.shape
    rq = np.empty(V, np.int64)      # the roots this source reached so far, and their machine arcs
    rg = np.empty(V, np.int64)
    for k in range(K):
        zs = pz[k]
        rank = znr[zs] if proot[k] else k - zoff[zs]
        nr = 0
        n0 = n
        for v in range(V):
            if not S[k, v] > -np.inf:
                continue
            zn = zs + v // C
            if target_only and not (tallow[v] and zn >= lo_t and not (zn == Lp and not last and v // C >= 2)):
                continue
            b = blk[zs, v]
            if b < 0:
                continue
            q = ctx[b + rank]
            if q < 0:
                continue
            src[n] = src_off + k
            dst[n] = dst_off + q
            lab[n] = v
            sc[n] = S[k, v]
            gi = -1
            if nroot[q]:
                for j in range(nr):
                    if rq[j] == q:
                        gi = rg[j]
                        break
            if gi < 0:
                gi = ng
                gsrc[ng] = src_off + k
                gdst[ng] = dst_off + q
                glab[ng] = 0 if nroot[q] else v + 1
                gtop[ng] = -np.inf
                gbest[ng] = -1
                ng += 1
                if nroot[q]:
                    rq[nr] = q
                    rg[nr] = gi
                    nr += 1
            grp[n] = gi
            if sc[n] > gtop[gi]:
                gtop[gi] = sc[n]
                gbest[gi] = v
            n += 1
        for j in range(n0, n):        # this source's machine arcs are complete
            t = gtop[grp[j]]
            diff[j] = sc[j] - (t if t > -np.inf else 0.0)
    return n, ng


@nb.njit(cache=True)
def _z_lists(z, root, g, Lp):
    """Per z: the offset of its list, its number of non-roots, and its roots' indices (-1: none)."""
    zoff = np.zeros(Lp + 2, np.int64)
    znr = np.zeros(Lp + 1, np.int64)
    zr0 = np.full(Lp + 1, -1, np.int64)
    zr1 = np.full(Lp + 1, -1, np.int64)
    for k in range(z.size):
        zoff[z[k] + 1] += 1
        if root[k]:
            if g[k] == 0:
                zr0[z[k]] = k
            else:
                zr1[z[k]] = k
        else:
            znr[z[k]] += 1
    for zz in range(Lp + 1):
        zoff[zz + 1] += zoff[zz]
    return zoff, znr, zr0, zr1

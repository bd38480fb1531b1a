"""RCMS context sets: the adaptive contexts of reified context models (Steinhardt and Liang 2015).

A context at position i is the set of prefixes y_{1:i} that end in a given
suffix y_{i-len+1:i}; it is written as that suffix (a tuple of labels, the
empty tuple for the root context Y_{1:i}).  Section 4's procedure, with the
data structures of appendix A:

1. *expand*: C~_i = {c x {y} : c in C_{i-1}, y in Y}, kept sorted
   lexicographically from the last symbol back (the star, i.e. an undetermined
   position, is the largest symbol), with the longest-common-suffix array
   ``lcs`` (lcs[k] = length of the common determined suffix of elements k and
   k + 1; the lcs of elements a < b is min lcs[a:b]);
2. *select*: the B elements of C~_i with the highest forward mass
   (equation 8: E(m, y).forward = m.forward * exp(theta . phi(m, y)));
3. *merge*: every other element is absorbed by its least ancestor among the
   selected ones and the root (the longest selected suffix of its suffix), by
   the depth-first pass of appendix A over the sorted list, backwards, with a
   stack of ancestors; an absorbing context's forward mass is the sum of what
   it absorbed.

The resulting sets satisfy coverage (the root is in every C_i) and closure
(the intersection of two suffix contexts is one of them or empty), and
f_i(c_{i-1}, y_i) (the smallest context of C_i containing c_{i-1} x {y_i}) is
the index the merge assigns.

RCMS itself (:func:`fsmlearn.rcm.model.rcms`) runs steps 2 and 3 on the dense
score matrix without the expansion arrays: :func:`top_dense` selects by a
heap, :func:`merge_sparse` merges only the label blocks that hold a selected
element (the elements of any other block all land in the root).

Public names: ContextLayer, expand, suffix_of, select_top, merge, merge_dense, top_dense,
merge_sparse, select_merge, unpack_merge, f_lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

__all__ = ["ContextLayer", "expand", "suffix_of", "select_top", "merge", "merge_dense", "top_dense",
           "merge_sparse", "select_merge", "unpack_merge", "f_lookup"]


@dataclass
class ContextLayer:
    """C_i: the selected contexts in the order of appendix A, the root last.

    Attributes:
        suffixes: per context, its determined suffix (a tuple of labels; ``()``
            for the root, always last).
        lcs: int64 [len(suffixes)], lcs[k] = common determined suffix length of
            contexts k and k + 1 (0 for the last).
        forward: float64 [len(suffixes)], the forward mass (natural log) of each
            context: the log-sum of the expanded elements it absorbed.
    """
    suffixes: list
    lcs: np.ndarray
    forward: np.ndarray

    @classmethod
    def initial(cls) -> "ContextLayer":
        """C_0: the empty prefix, one context (the root), forward mass 1."""
        return cls([()], np.zeros(1, np.int64), np.zeros(1))

    def __len__(self) -> int:
        return len(self.suffixes)


def expand(prev: ContextLayer, num_labels: int):
    """Step 1 of appendix A: C~_i = C_{i-1} x Y, sorted, with its lcs array.

    Returns:
        (parent int64 [E], label int64 [E], lens int64 [E], lcs int64 [E]):
        element e is C_{i-1}[parent[e]] x {label[e]}, whose determined suffix
        has ``lens[e]`` labels; ``lcs[e]`` the common suffix length of elements
        e and e + 1 (0 for the last).  The order is by label first, then by the
        parent's order (the lexicographic order from the last symbol back, the
        star largest).  Suffixes are not built: :func:`suffix_of` gives one.
    """
    K = len(prev)
    parent = np.tile(np.arange(K, dtype=np.int64), num_labels)
    label = np.repeat(np.arange(num_labels, dtype=np.int64), K)
    prev_len = np.array([len(t) for t in prev.suffixes], np.int64)
    lens = prev_len[parent] + 1
    lcs = np.tile(prev.lcs + 1, num_labels)    # same last label: one more than the parents' lcs
    lcs[K - 1::K] = 0                          # the last parent of a label block is followed by another label
    return parent, label, lens, lcs


def suffix_of(prev: ContextLayer, parent: int, label: int) -> tuple:
    """The determined suffix of the expanded element C_{i-1}[parent] x {label}."""
    return prev.suffixes[parent] + (int(label),)


def select_top(log_forward: np.ndarray, B: int) -> np.ndarray:
    """Step 2: the B elements of highest forward mass (ties by position), as a bool mask;
    elements of zero mass are never selected."""
    active = np.zeros(log_forward.size, bool)
    if B <= 0 or log_forward.size == 0:
        return active
    if B >= log_forward.size:
        active[:] = np.isfinite(log_forward)
        return active
    # the B largest, ties by position (as a stable sort would order them), in linear time
    thr = -np.partition(-log_forward, B - 1)[B - 1]
    above = log_forward > thr
    need = B - int(above.sum())
    tied = np.flatnonzero(log_forward == thr)[:need]
    active[above] = True
    active[tied] = True
    active &= np.isfinite(log_forward)
    return active


@nb.njit(inline="always")
def _dfs_setup(active):
    """The state of the depth-first merge: the stack (the root at the bottom) and the outputs."""
    n_act = 0
    for j in range(active.size):
        if active[j]:
            n_act += 1
    stack_idx = np.empty(n_act + 1, np.int64)
    stack_len = np.empty(n_act + 1, np.int64)
    stack_idx[0] = -1
    stack_len[0] = 0
    return n_act, stack_idx, stack_len, np.empty(n_act, np.int64), np.empty(n_act, np.int64)


@nb.njit(inline="always")
def _dfs_visit(j, lcs_j, len_j, is_active, l, top, n, stack_idx, stack_len, out_e, out_lcs, owner):
    """One step of appendix A's merge, visiting element j backwards in the sorted order: pop the
    stack to the least ancestor, then output j (selected) or let the ancestor absorb it
    (owner -1: the root).  Returns the new (l, top, n)."""
    big = np.int64(1) << 62
    if lcs_j < l:
        l = lcs_j
    while l < stack_len[top]:
        top -= 1
    if is_active:
        out_e[n] = j
        out_lcs[n] = 0 if l == big else l
        top += 1
        stack_idx[top] = n
        stack_len[top] = len_j
        owner[j] = n
        n += 1
        l = big
    else:
        owner[j] = stack_idx[top]
    return l, top, n


@nb.njit(cache=True)
def _merge_kernel(lens, lcs, active, log_forward):
    """The depth-first merge of appendix A, backwards over the sorted list with a stack of
    ancestors (see :func:`merge`).  Returns (out_e, out_lcs, owner_rev, acc): the selected
    elements in the order output (decreasing), each one's lcs with the one output before it,
    each element's owner as an output index (-1: the root), and each output's (then the
    root's, last) largest absorbed log forward mass."""
    E = lens.size
    n_act, stack_idx, stack_len, out_e, out_lcs = _dfs_setup(active)
    owner_rev = np.empty(E, np.int64)
    l, top, n = np.int64(1) << 62, 0, 0
    for j in range(E - 1, -1, -1):
        l, top, n = _dfs_visit(j, lcs[j], lens[j], active[j], l, top, n, stack_idx, stack_len, out_e, out_lcs,
                               owner_rev)
    # each output's largest absorbed term (the log-sums are taken outside, with numpy's exp)
    big_term = np.full(n_act + 1, -np.inf)
    for j in range(E):
        pos = n_act if owner_rev[j] == -1 else owner_rev[j]
        if log_forward[j] > big_term[pos]:
            big_term[pos] = log_forward[j]
    return out_e, out_lcs, owner_rev, big_term


@nb.njit(cache=True)
def _merge_dense_kernel(plen, plcs, S, active):
    """The merge of appendix A over C~_i = C_{i-1} x Y in its sorted (label-major) order,
    with lens and lcs computed from C_{i-1}'s on the fly; see :func:`merge_dense`."""
    K, Y = S.shape
    E = K * Y
    n_act, stack_idx, stack_len, out_e, out_lcs = _dfs_setup(active)
    owner = np.empty(E, np.int64)
    l, top, n = np.int64(1) << 62, 0, 0
    for y in range(Y - 1, -1, -1):
        for k in range(K - 1, -1, -1):
            j = y * K + k
            l, top, n = _dfs_visit(j, plcs[k] + 1 if k < K - 1 else 0, plen[k] + 1, active[j], l, top, n,
                                   stack_idx, stack_len, out_e, out_lcs, owner)
    # the elements that are arcs of their own, and per source the pooled ones' best (first) label
    n_single = 0
    for y in range(Y):
        for k in range(K):
            j = y * K + k
            if owner[j] == -1:
                owner[j] = n_act                   # the root after the selected contexts
            elif S[k, y] > -np.inf:
                n_single += 1
    single = np.empty(n_single, np.int64)
    pooled = np.zeros((K, Y), np.bool_)
    best = np.full(K, -np.inf)
    arg = np.full(K, -1, np.int64)
    n_single = 0
    for y in range(Y):
        for k in range(K):
            j = y * K + k
            v = S[k, y]
            if v == -np.inf:
                continue
            if owner[j] != n_act:
                single[n_single] = j
                n_single += 1
            else:
                pooled[k, y] = True
                if v > best[k]:
                    best[k] = v
                    arg[k] = y
    return out_e, out_lcs, owner, single, pooled, best, arg


def merge_dense(plen, plcs, S, active):
    """Step 3 on C~_i = C_{i-1} x Y without building it: element e = y K + k is C_{i-1}[k] x {y}.

    Args:
        plen: int64 [K], the determined lengths of C_{i-1}'s contexts; plcs: C_{i-1}.lcs.
        S: float64 [K, |Y|], the elements' scores (-inf: no transition).
        active: bool [K |Y|], the selected elements.

    Returns:
        (out_e, out_lcs, owner, single, pooled, best, arg): the selected elements in the order
        the backward pass outputs them (decreasing), each one's lcs with the one output before
        it, each element's owner as an index into that output order (the root: the number of
        selected elements); the elements with a score that land in a selected context
        (increasing), bool [K, |Y|] those that land in the root, and per source the largest
        score among the latter and its first label (-inf and -1 when none).
    """
    return _merge_dense_kernel(np.asarray(plen, np.int64), np.asarray(plcs, np.int64),
                               np.ascontiguousarray(S, np.float64), np.asarray(active, np.bool_))


@nb.njit(inline="always")
def _worse(v1, e1, v2, e2):
    """Element (v1, e1) ranks below (v2, e2): less mass, or as much and a later position."""
    return v1 < v2 or (v1 == v2 and e1 > e2)


@nb.njit(inline="always")
def _heap_sift_up(hv, he, i, v, e):
    """Put (v, e) into slot i of a heap whose root is its worst element (:func:`_worse`), sifting
    it up; the caller has grown the heap to hold slot i."""
    while i > 0:
        p = (i - 1) // 2
        if _worse(v, e, hv[p], he[p]):
            hv[i] = hv[p]
            he[i] = he[p]
            i = p
        else:
            break
    hv[i] = v
    he[i] = e


@nb.njit(inline="always")
def _heap_replace_root(hv, he, B, v, e):
    """Replace the worst element (the root) of a full heap of B by (v, e), sifting it down."""
    i = 0
    while True:
        c = 2 * i + 1
        if c >= B:
            break
        if c + 1 < B and _worse(hv[c + 1], he[c + 1], hv[c], he[c]):
            c += 1
        if _worse(hv[c], he[c], v, e):
            hv[i] = hv[c]
            he[i] = he[c]
            i = c
        else:
            break
    hv[i] = v
    he[i] = e


@nb.njit(cache=True)
def _top_dense_kernel(S, fwd, B):
    """The B largest fwd[k] + S[k, y] over label-major positions y K + k, ties by position, by
    one pass over S in row order with a heap of the B best so far (its root the worst)."""
    K, Y = S.shape
    if B <= 0 or K * Y == 0:
        return np.empty(0, np.int64)
    hv = np.empty(B)
    he = np.empty(B, np.int64)
    size = 0
    for k in range(K):
        f = fwd[k]
        if not (f > -np.inf):                     # no mass (or NaN): nothing of this row is selected
            continue
        for y in range(Y):
            v = f + S[k, y]
            if size == B:
                if not (v >= hv[0]):              # below the worst kept (or NaN)
                    continue
                e = y * K + k
                if v == hv[0] and e > he[0]:
                    continue
                _heap_replace_root(hv, he, B, v, e)
            else:
                if not (v > -np.inf):             # zero mass is never selected
                    continue
                e = y * K + k
                _heap_sift_up(hv, he, size, v, e)   # push
                size += 1
    out = np.empty(size, np.int64)
    cnt = 0
    for i in range(size):
        if hv[i] < np.inf:                        # +inf takes its place but is not selected
            out[cnt] = he[i]
            cnt += 1
    return np.sort(out[:cnt])


def top_dense(S, forward, B: int) -> np.ndarray:
    """Step 2 on C~_i = C_{i-1} x Y without building its forward masses: the label-major
    indices e = y K + k (ascending) that :func:`select_top` selects from
    ``(forward[None, :] + S.T).ravel()`` (the B heaviest, ties by position, none of zero mass).

    Args:
        S: float64 [K, |Y|], the elements' scores; forward: float64 [K], C_{i-1}'s forward masses.
        B: the number to keep.
    """
    return _top_dense_kernel(np.ascontiguousarray(S, np.float64), np.asarray(forward, np.float64), int(B))


_HEAD = 4      # the packed merge's header: selected, blocks, singles, all_finite


def unpack_merge(ints, floats, D):
    """The arrays of :func:`merge_sparse` from its kernel's packed output (views)."""
    n, nblk, ns, all_finite = ints[:_HEAD].tolist()
    K = D.shape[0]
    cut = np.cumsum([_HEAD, n, n, n + 1, n + 1, nblk, ns, ns, K, n]).tolist()
    parent, label, plen_out, lcs_out, blocks, single, s_owner, arg, finite = (
        ints[a:b] for a, b in zip(cut[:-1], cut[1:]))
    own = ints[cut[-1]:].reshape(nblk, K)
    s_score, shift, s_diff = floats[:ns], floats[ns:ns + n], floats[ns + n:2 * ns + n]
    best = floats[2 * ns + n:2 * ns + n + K]
    return (parent, label, plen_out, lcs_out, blocks, own, single, s_owner, s_score, shift, finite.astype(bool),
            bool(all_finite), s_diff, best, arg, D)


@nb.njit(cache=True)
def _merge_sparse_kernel(S, fwd, plen, plcs, sel):
    """The merge of appendix A over C~_i = C_{i-1} x Y, visiting only the label blocks that hold a
    selected element; see :func:`merge_sparse`."""
    K, Y = S.shape
    n = sel.size
    blk_of = np.full(Y, -1, np.int64)
    blocks = np.empty(n, np.int64)
    nblk = 0
    for t in range(n):
        y = sel[t] // K
        if blk_of[y] < 0:
            blk_of[y] = nblk
            blocks[nblk] = y
            nblk += 1
    blocks = blocks[:nblk]
    act = np.zeros((nblk, K), np.bool_)
    parent = np.empty(n, np.int64)
    label = np.empty(n, np.int64)
    plen_out = np.zeros(n + 1, np.int64)
    for t in range(n):
        y = sel[t] // K
        k = sel[t] - y * K
        act[blk_of[y], k] = True
        parent[t] = k
        label[t] = y
        plen_out[t] = plen[k] + 1
    # the depth-first pass, backwards; a block starts at the root (its last element's lcs with
    # the next block's first is 0), so the blocks without a selected element can be skipped
    stack_idx = np.empty(n + 1, np.int64)
    stack_len = np.empty(n + 1, np.int64)
    stack_idx[0] = -1
    stack_len[0] = 0
    out_e = np.empty(n, np.int64)
    out_lcs = np.empty(n, np.int64)
    own = np.empty((nblk, K), np.int64)
    no = 0
    for b in range(nblk - 1, -1, -1):
        l, top = np.int64(1) << 62, 0
        row = own[b]
        arow = act[b]
        for k in range(K - 1, -1, -1):
            l, top, no = _dfs_visit(k, plcs[k] + 1 if k < K - 1 else 0, plen[k] + 1, arow[k], l, top, no,
                                    stack_idx, stack_len, out_e, out_lcs, row)
    for b in range(nblk):                          # output order -> index into C_i (the root: n)
        for k in range(K):
            o = own[b, k]
            own[b, k] = n if o == -1 else n - 1 - o
    lcs_out = np.zeros(n + 1, np.int64)
    for t in range(n - 1):
        lcs_out[t] = out_lcs[n - 1 - t]
    # the elements with a score that land in a selected context, in increasing order
    n_single = 0
    for b in range(nblk):
        y = blocks[b]
        for k in range(K):
            if own[b, k] != n and S[k, y] > -np.inf:
                n_single += 1
    single = np.empty(n_single, np.int64)
    s_owner = np.empty(n_single, np.int64)
    s_logf = np.empty(n_single)
    s_score = np.empty(n_single)
    n_single = 0
    for b in range(nblk):
        y = blocks[b]
        for k in range(K):
            if own[b, k] != n and S[k, y] > -np.inf:
                single[n_single] = y * K + k
                s_owner[n_single] = own[b, k]
                s_logf[n_single] = fwd[k] + S[k, y]
                s_score[n_single] = S[k, y]
                n_single += 1
    # each selected context's forward mass is the log-sum of its singles: their largest and
    # each one's difference from it (the exps and logs are numpy's, outside)
    big = np.full(n, -np.inf)
    for j in range(n_single):
        if s_logf[j] > big[s_owner[j]]:
            big[s_owner[j]] = s_logf[j]
    finite = np.ones(n, np.bool_)
    all_finite = True
    for t in range(n):
        if big[t] > -np.inf and big[t] < np.inf:
            continue
        finite[t] = False
        all_finite = False
        big[t] = 0.0
    s_diff = np.empty(n_single)
    for j in range(n_single):
        s_diff[j] = s_logf[j] - big[s_owner[j]]
    # per source the best pooled element (first label) and D = S - best on the pooled, else -inf
    best = np.full(K, -np.inf)
    arg = np.full(K, -1, np.int64)
    D = np.empty((K, Y))
    for k in range(K):
        bk = -np.inf
        ak = -1
        for y in range(Y):
            v = S[k, y]
            if v > bk:
                bb = blk_of[y]
                if bb < 0 or own[bb, k] == n:
                    bk = v
                    ak = y
        best[k] = bk
        arg[k] = ak
        if bk == -np.inf:
            for y in range(Y):
                D[k, y] = -np.inf
        else:
            for y in range(Y):
                D[k, y] = S[k, y] - bk
            for b in range(nblk):
                if own[b, k] != n:
                    D[k, blocks[b]] = -np.inf
    # packed in two flat arrays (one boxed array each instead of sixteen); see unpack_merge
    ints = np.empty(_HEAD + 5 * n + 2 + nblk + 2 * n_single + K + nblk * K, np.int64)
    ints[0] = n
    ints[1] = nblk
    ints[2] = n_single
    ints[3] = 1 if all_finite else 0
    o = _HEAD
    for src in (parent, label, plen_out, lcs_out, blocks, single, s_owner, arg):
        ints[o:o + src.size] = src
        o += src.size
    for t in range(n):
        ints[o + t] = 1 if finite[t] else 0
    o += n
    ints[o:] = own.ravel()
    floats = np.empty(2 * n_single + n + 2 * K)
    floats[:n_single] = s_score
    floats[n_single:n_single + n] = big
    floats[n_single + n:2 * n_single + n] = s_diff
    o = 2 * n_single + n
    floats[o:o + K] = best
    for k in range(K):                             # forward + best: the root's log-sum terms less log R
        floats[o + K + k] = fwd[k] + best[k]
    return ints, floats, D


def merge_sparse(plen, plcs, S, forward, sel):
    """Step 3 on C~_i = C_{i-1} x Y (element e = y K + k is C_{i-1}[k] x {y}), walking only the
    label blocks that hold a selected element: an element's ancestors end in its label, so
    every element of any other block lands in the root.  The same merge as :func:`merge_dense`,
    with C_i's order and what RCMS needs of it.

    Args:
        plen: int64 [K], the determined lengths of C_{i-1}'s contexts; plcs: C_{i-1}.lcs.
        S: float64 [K, |Y|], the elements' scores (-inf: no transition).
        forward: float64 [K], C_{i-1}'s forward masses.
        sel: int64, the selected elements, ascending (:func:`top_dense`).

    Returns:
        (parent, label, plen_out, lcs_out, blocks, owner, single, single_owner, single_score, shift,
        finite, all_finite, diff, best, arg, D):

        * per selected element (C_i's order, the root not included) its context of C_{i-1} and
          its label; C_i's determined lengths and lcs array (the root last);
        * the labels with a selected element (ascending) and int64 [blocks, K] the owner in C_i
          (the root: the number selected) of each element of those blocks (every other
          element's is the root);
        * the elements with a score that land in a selected context (ascending), their owners
          and scores;
        * per selected context the largest forward mass it absorbs (0 where that is not finite:
          ``finite`` False there, ``all_finite`` whether it never is), and per single its forward
          mass less its owner's;
        * per source the largest score of its elements that land in the root and its first label
          (-inf and -1 when none), and float64 [K, |Y|] the scores less that on those elements,
          -inf elsewhere.
    """
    return unpack_merge(*_merge_sparse_kernel(np.ascontiguousarray(S, np.float64), np.asarray(forward, np.float64),
                                              np.asarray(plen, np.int64), np.asarray(plcs, np.int64),
                                              np.asarray(sel, np.int64)))



@nb.njit(cache=True)
def _select_merge_kernel(S, fwd, plen, plcs, B):
    """:func:`top_dense` then :func:`merge_sparse` in one call."""
    return _merge_sparse_kernel(S, fwd, plen, plcs, _top_dense_kernel(S, fwd, B))


def select_merge(plen, plcs, S, forward, B: int, sel=None):
    """Steps 2 and 3 of RCMS on the score matrix in one compiled call: :func:`merge_sparse` of
    ``top_dense(S, forward, B)`` (or of ``sel`` when given), packed: (ints, floats, D), see
    :func:`unpack_merge`.  The arrays must be contiguous of their dtypes already (float64 S and
    forward, int64 plen and plcs)."""
    if sel is None:
        return _select_merge_kernel(S, forward, plen, plcs, B)
    return _merge_sparse_kernel(S, forward, plen, plcs, sel)


def merge(prev: ContextLayer, parent, label, lens, lcs, active, log_forward):
    """Step 3: merge every element of C~_i into its least ancestor in C_i.

    Args:
        prev: C_{i-1}; parent, label, lens, lcs: C~_i from :func:`expand`.
        active: the selected elements (:func:`select_top`).
        log_forward: each element's forward mass (natural log).

    Returns:
        (layer, owner): C_i as a :class:`ContextLayer` (selected elements in
        order, the root last; its forward masses the log-sums of what each
        absorbed) and, per element of C~_i, the index in C_i of the context
        that holds it (itself when selected, else its least ancestor).
    """
    log_forward = np.asarray(log_forward, np.float64)
    out_e, out_lcs, owner_rev, big = _merge_kernel(np.asarray(lens, np.int64), np.asarray(lcs, np.int64),
                                                   np.asarray(active, np.bool_), log_forward)
    n = out_e.size
    # log-sum of what each output absorbed, relative to its largest term (no underflow)
    pos = np.where(owner_rev == -1, n, owner_rev)
    safe = np.where(np.isfinite(big), big, 0.0)
    w = np.exp(log_forward - safe[pos])
    acc = np.bincount(pos, weights=w, minlength=n + 1)
    with np.errstate(divide="ignore"):
        acc = np.where(np.isfinite(big), np.log(acc) + safe, -np.inf)
    chosen = out_e[::-1]
    suffixes = [suffix_of(prev, int(parent[e]), int(label[e])) for e in chosen] + [()]
    lcs_out = np.zeros(n + 1, np.int64)
    if n:
        lcs_out[:n] = out_lcs[::-1]          # lcs of C_i[k] with C_i[k + 1]
        lcs_out[n - 1] = 0                   # the last selected context and the root
    forward = np.concatenate([acc[:n][::-1], acc[n:]])
    owner = np.where(owner_rev == -1, n, n - 1 - owner_rev)
    return ContextLayer(suffixes, lcs_out, forward), owner


def f_lookup(layer: ContextLayer, suffix: tuple) -> int:
    """f_i by definition: the index of the longest context of ``layer`` whose suffix is a
    suffix of ``suffix`` (the root if none); a reference for :func:`merge` in tests."""
    where = {s: k for k, s in enumerate(layer.suffixes)}
    for start in range(len(suffix) + 1):
        k = where.get(tuple(suffix[start:]))
        if k is not None:
            return k
    raise AssertionError("the root is always present")

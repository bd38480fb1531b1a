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

Public names: ContextLayer, expand, suffix_of, select_top, merge, merge_dense, f_lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

__all__ = ["ContextLayer", "expand", "suffix_of", "select_top", "merge", "merge_dense", "f_lookup"]


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

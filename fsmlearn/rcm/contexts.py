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

Public names: ContextLayer, expand, select_top, merge, f_lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ContextLayer", "expand", "select_top", "merge", "f_lookup"]


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
        (parent int64 [E], label int64 [E], suffixes list [E], lcs int64 [E]):
        element e is C_{i-1}[parent[e]] x {label[e]}; ``lcs[e]`` the common
        suffix length of elements e and e + 1 (0 for the last).  The order is
        by label first, then by the parent's order (which is the lexicographic
        order from the last symbol back, the star largest).
    """
    K = len(prev)
    parent = np.tile(np.arange(K, dtype=np.int64), num_labels)
    label = np.repeat(np.arange(num_labels, dtype=np.int64), K)
    within = prev.lcs + 1          # same last label: one more than the parents' lcs
    lcs = np.tile(within, num_labels)
    lcs[K - 1::K] = 0              # the last parent of a label block is followed by another label
    suffixes = [prev.suffixes[k] + (y,) for y in range(num_labels) for k in range(K)]
    return parent, label, suffixes, lcs


def select_top(log_forward: np.ndarray, B: int) -> np.ndarray:
    """Step 2: the B elements of highest forward mass (ties by position), as a bool mask."""
    active = np.zeros(log_forward.size, bool)
    if B > 0:
        order = np.argsort(-log_forward, kind="stable")[:B]
        active[order[np.isfinite(log_forward[order])]] = True
    return active


def merge(suffixes, lcs: np.ndarray, active: np.ndarray, log_forward: np.ndarray):
    """Step 3: the depth-first merge of appendix A (backwards over the sorted list).

    Args:
        suffixes, lcs: C~_i from :func:`expand`.
        active: the selected elements (:func:`select_top`).
        log_forward: each element's forward mass (natural log).

    Returns:
        (layer, owner): C_i as a :class:`ContextLayer` (selected elements in
        order, the root last) and, per element of C~_i, the index in C_i of the
        context that holds it (itself when selected, else its least ancestor).
    """
    E = len(suffixes)
    root_index = -1                     # the root is placed last once the number is known
    stack = [(root_index, 0)]           # (index in the reversed output or -1 for the root, len)
    out_suffix, out_lcs, owner_rev = [], [], np.empty(E, np.int64)
    absorbed: dict[int, list] = {root_index: []}
    l = np.iinfo(np.int64).max
    for j in range(E - 1, -1, -1):
        l = min(l, int(lcs[j]))
        while l < stack[-1][1]:
            stack.pop()
        if active[j]:
            idx = len(out_suffix)
            out_suffix.append(suffixes[j])
            out_lcs.append(l if l != np.iinfo(np.int64).max else 0)
            stack.append((idx, len(suffixes[j])))
            absorbed[idx] = [log_forward[j]]
            owner_rev[j] = idx
            l = np.iinfo(np.int64).max
        else:
            top = stack[-1][0]
            absorbed[top].append(log_forward[j])
            owner_rev[j] = top
    n = len(out_suffix)
    # reverse the selected contexts into increasing order, then the root
    suffix_list = out_suffix[::-1] + [()]
    lcs_out = np.zeros(n + 1, np.int64)
    if n:
        # out_lcs[t] is the lcs of output t with the element output before it (later in order)
        rev = np.asarray(out_lcs[::-1], np.int64)        # rev[k]: lcs of C_i[k] with C_i[k + 1]
        lcs_out[:n] = rev
        lcs_out[n - 1] = 0                                # the last selected context and the root
    forward = np.empty(n + 1)
    for idx, vals in absorbed.items():
        pos = n if idx == -1 else n - 1 - idx
        forward[pos] = np.logaddexp.reduce(vals) if vals else -np.inf
    owner = np.where(owner_rev == -1, n, n - 1 - owner_rev)
    return ContextLayer(suffix_list, lcs_out, forward), owner


def f_lookup(layer: ContextLayer, suffix: tuple) -> int:
    """f_i by definition: the index of the longest context of ``layer`` whose suffix is a
    suffix of ``suffix`` (the root if none); a reference for :func:`merge` in tests."""
    where = {s: k for k, s in enumerate(layer.suffixes)}
    for start in range(len(suffix) + 1):
        k = where.get(tuple(suffix[start:]))
        if k is not None:
            return k
    raise AssertionError("the root is always present")

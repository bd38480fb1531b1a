"""Which partition an n-gram belongs to: ranges of last words, frequent suffixes split further.

The estimation partitions n-grams by their last word, so that an n-gram's suffixes lie in its
own partition (:mod:`~fsmlearn.lm.scale.kn`).  One word's n-grams can outgrow any budget:
every distinct sentence ending of up to N-1 words ends in ``</s>``.  Such a word w is split
by the word before it: the partition of (x in [lo, hi), w) holds the n-grams ending in x' w
for x' in the range, and a copy of the unigram w.  A frequent pair (x, w) (``. </s>``) is
split again by the word before it, and so on: a *node* of suffix s (d words) divides the
n-grams that end in s and are longer than s by their word d + 1 from the end into ranges;
a range is a *leaf* (a partition) or, when it is one word x, the node of the suffix x s.

Every suffix of an n-gram in a leaf is in the leaf: its own rows (longer than s) and the
*copies* of s and of its suffixes, which every leaf under a node holds.  One leaf, the
node's *owner* (its first), answers for the copy: it counts it, writes it and receives
what other partitions send about it; the others use it only to look up their n-grams'
suffixes, with the values the owner's statistics give it (the driver passes them on).

Public names: Layout, plan, reroute.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _leaf_kernel(rows, depth, boff, bnds, coff, child, owner, leaf, node_of):
    """leaf[i]: the leaf of row i; node_of[i]: the node whose suffix row i is (a copy in every
    leaf under it, the owner answering), -1 for the others."""
    m = rows.shape[1]
    for i in range(rows.shape[0]):
        node = 0
        while True:
            j = m - 1 - depth[node]
            if j < 0:
                leaf[i] = owner[node]
                node_of[i] = node
                break
            w = rows[i, j]
            lo = boff[node]
            hi = boff[node + 1] - 1          # the node's bounds are bnds[lo..hi]
            a, b = lo, hi                    # the last bound <= w
            while b - a > 1:
                c = (a + b) // 2
                if bnds[c] <= w:
                    a = c
                else:
                    b = c
            c = child[coff[node] + a - lo]
            if c >= 0:
                leaf[i] = c
                node_of[i] = -1
                break
            node = -c - 1


class Layout:
    """The partitions: a tree of nodes (the root: ranges of last words), leaves numbered in
    order.

    Attributes:
        leaves: per leaf, (suffix, lo, hi): n-grams ending in ``suffix`` (a tuple of word ids,
            () for a range of last words) whose word ``len(suffix) + 1`` from the end is in
            [lo, hi), with copies of ``suffix``'s own suffixes.
        own: per leaf, a tuple: for j = 1..len(suffix), whether the leaf answers for the copy
            of the last j words of its suffix.
    """

    def __init__(self, bounds, splits=None):
        """``bounds``: the root's last-word ranges; ``splits``: {path: bounds} where a path is
        a tuple (root range, then at each split node the index of the one-word range split
        further) and bounds the ranges (of the word before the suffix; at the root's range
        itself, a finer division of its last words) of the node placed there."""
        bounds = np.asarray(bounds, np.int64)
        splits = dict(splits or {})
        nodes = []                          # (depth, suffix, bounds, children)

        def add(depth, suffix, bnds, path):
            me = len(nodes)
            nodes.append(None)
            kids = []
            for r in range(bnds.size - 1):
                sub = path + (r,)
                lo, hi = int(bnds[r]), int(bnds[r + 1])
                if sub in splits:
                    if depth == 0 and path == ():
                        kids.append(("node", add(0, (), np.asarray(splits[sub], np.int64), sub)))
                    else:
                        if hi - lo != 1:
                            raise ValueError(f"a split range holds one word ({lo}..{hi})")
                        kids.append(("node", add(depth + 1, (lo,) + suffix, np.asarray(splits[sub], np.int64),
                                                 sub)))
                else:
                    kids.append(("leaf", (suffix, lo, hi)))
            nodes[me] = (depth, suffix, bnds, kids)
            return me

        add(0, (), bounds, ())
        self.leaves = []
        self._owner = [0] * len(nodes)
        child_of = [[0] * (n[2].size - 1) for n in nodes]

        self.under = [None] * len(nodes)

        def number(n):
            start = len(self.leaves)
            for r, (kind, x) in enumerate(nodes[n][3]):
                if kind == "leaf":
                    child_of[n][r] = len(self.leaves)
                    self.leaves.append(x)
                else:
                    child_of[n][r] = -x - 1
                    number(x)
            self._owner[n] = start             # leaves are numbered depth first: a node's are consecutive
            self.under[n] = np.arange(start, len(self.leaves), dtype=np.int64)

        number(0)
        self.nodes = nodes
        self.depth = np.array([n[0] for n in nodes], np.int64)
        self.boff = np.concatenate([[0], np.cumsum([n[2].size for n in nodes])]).astype(np.int64)
        self.bnds = np.concatenate([n[2] for n in nodes]).astype(np.int64)
        self.coff = np.concatenate([[0], np.cumsum([n[2].size - 1 for n in nodes])]).astype(np.int64)
        self.child = np.array([c for cs in child_of for c in cs], np.int64)
        self.owner = np.array(self._owner, np.int64)
        owner_of = {nodes[n][1]: int(self.owner[n]) for n in range(len(nodes)) if nodes[n][0] > 0}
        self.own = [tuple(owner_of[s[-j:]] == i for j in range(1, len(s) + 1)) for i, (s, _, _) in
                    enumerate(self.leaves)]
        self.root_of = np.array([int(np.searchsorted(bounds, (s[-1] if s else lo), side="right")) - 1
                                 for s, lo, _ in self.leaves], np.int64)
        self.bounds = bounds
        self.divided = sorted(p[0] for p in splits if len(p) == 1)     # root ranges divided further

    @property
    def size(self) -> int:
        return len(self.leaves)

    @property
    def split(self) -> bool:
        return len(self.nodes) > 1

    def leaf_of(self, rows):
        """(leaf, node) of each row (int32 [n, m]): node >= 0 for a copy of a split suffix."""
        rows = np.ascontiguousarray(rows)
        leaf = np.empty(rows.shape[0], np.int64)
        node = np.empty(rows.shape[0], np.int64)
        if rows.shape[0]:
            _leaf_kernel(rows, self.depth, self.boff, self.bnds, self.coff, self.child, self.owner, leaf, node)
        return leaf, node

    def dest(self, rows):
        """int32: the leaf that answers for each row (the owner, for a copy)."""
        if not self.split:
            return np.searchsorted(self.bounds, rows[:, -1], side="right").astype(np.int32) - 1
        return self.leaf_of(rows)[0].astype(np.int32)

    def unigrams(self, counts):
        """Per leaf, (lo, hi, counts) of its unigrams: a range of words, or the copy of its
        suffix's last word."""
        out = []
        for s, lo, hi in self.leaves:
            if s:
                out.append((s[-1], s[-1] + 1, counts[s[-1]:s[-1] + 1]))
            else:
                out.append((lo, hi, counts[lo:hi]))
        return out

    def info(self, leaf: int) -> dict:
        """What a partition's tasks need to know of it: the length of its suffix and the copies
        it answers for."""
        s = self.leaves[leaf][0]
        return {"d": len(s), "own": self.own[leaf]}


# --- planning the splits -------------------------------------------------------------------------

def histogram(pieces, queries, V: int):
    """Task: over the pieces (lists of (rows, counts), read one at a time) of one root range,
    per query (suffix, lo, hi), the number of rows longer than the suffix that end in it, by
    their word before it (within [lo, hi)): (words, rows) of the words present."""
    from .cluster import Later, _load
    if isinstance(pieces, Later):
        pieces = pieces.value
    acc = [np.zeros(V, np.int64) for _ in queries]
    for piece in pieces:
        for r, _ in piece:
            if not r.shape[0]:
                continue
            m = r.shape[1]
            rows = None
            for q, (s, lo, hi) in enumerate(queries):
                d = len(s)
                if m <= d:
                    continue
                if rows is None:
                    rows = _load(r)
                sel = np.ones(rows.shape[0], np.bool_)
                for j, w in enumerate(reversed(s)):
                    sel &= rows[:, m - 1 - j] == w
                x = rows[sel, m - 1 - d]
                x = x[(x >= lo) & (x < hi)]
                acc[q] += np.bincount(x, minlength=V)
    out = []
    for a in acc:
        nz = np.flatnonzero(a)
        out.append((nz.astype(np.int64), a[nz]))
    return out


def _cuts(words, weights, lo: int, hi: int, target: int):
    """Ranges covering [lo, hi) of at most ``target`` rows each where the words allow (a word
    heavier than that alone in its range), and the one-word ranges still heavier."""
    bnds = [lo]
    heavy = []
    acc = 0
    for w, c in zip(words.tolist(), weights.tolist()):
        if c > target:
            if w > bnds[-1]:
                bnds.append(w)
            bnds.append(w + 1)
            heavy.append(w)
            acc = 0
            continue
        if acc + c > target and w > bnds[-1]:
            bnds.append(w)
            acc = 0
        acc += c
    if bnds[-1] < hi:
        bnds.append(hi)
    return np.array(bnds, np.int64), heavy


def plan(runner, bounds, sizes, pieces_of, N: int, V: int, target: int):
    """The layout whose leaves hold at most ``target`` rows where the n-grams allow (a suffix
    of N - 1 words cannot be split further).

    Args:
        sizes: rows per root range (as routed: the pieces' rows, summed).
        pieces_of: root range -> the list of its pieces (for a :class:`Later`).
    """
    from .cluster import Later
    splits = {}
    # pending: per root range, the nodes still to divide: (path, suffix, lo, hi)
    pending = {r: [((r,), (), int(bounds[r]), int(bounds[r + 1]))] for r in range(bounds.size - 1)
               if sizes[r] > target}
    rounds = 0
    while pending:
        rounds += 1
        rs = sorted(pending)
        futs = [runner.submit(histogram, Later(pieces_of(r)), [q[1:] for q in pending[r]], V) for r in rs]
        runner.wait(futs, f"estimation: dividing the largest partitions (level {rounds})", "ranges")
        res = runner.gather(futs)
        nxt = {}
        for r, got in zip(rs, res):
            for (path, s, lo, hi), (words, cnt) in zip(pending[r], got):
                b, heavy = _cuts(words, cnt, lo, hi, target)
                if b.size <= 2 and not heavy and s == ():
                    continue                      # the range is not heavier than the target after all
                splits[path] = b
                for w in heavy:
                    if len(s) + 1 >= N:
                        continue                  # N-grams: one row per word
                    i = int(np.searchsorted(b, w, side="right")) - 1
                    nxt.setdefault(r, []).append((path + (i,), (w,) + s, 0, V))
        pending = nxt
    return Layout(bounds, splits)


def reroute(pieces, layout: Layout, ranges):
    """Task: one source's pieces of the split root ``ranges`` (per range, lists of (rows,
    counts) per order) divided among the leaves of those ranges: per leaf (in the order of
    ``layout.leaves``, those under the ranges), its pieces; a split suffix's copy to every
    leaf under its node."""
    from .cluster import Later, _load
    if isinstance(pieces, Later):
        pieces = pieces.value
    mine = np.flatnonzero(np.isin(layout.root_of, np.asarray(ranges, np.int64)))
    slot = {int(x): i for i, x in enumerate(mine)}
    out = [[] for _ in mine]
    for piece in pieces:
        for r, c in piece:
            rows = np.ascontiguousarray(_load(r), np.int32)
            cnt = _load(c)
            if not rows.shape[0]:
                continue
            leaf, node = layout.leaf_of(rows)
            copies = np.flatnonzero(node >= 0)
            extra_l, extra_i = [leaf], [np.arange(rows.shape[0])]
            for i in copies.tolist():
                others = layout.under[int(node[i])]
                others = others[others != leaf[i]]
                extra_l.append(others)
                extra_i.append(np.full(others.size, i))
            L = np.concatenate(extra_l)
            I = np.concatenate(extra_i)
            o = np.argsort(L, kind="stable")
            L, I = L[o], I[o]
            edges = np.searchsorted(L, mine)
            ends = np.searchsorted(L, mine, side="right")
            for j, (a, b) in enumerate(zip(edges, ends)):
                if b > a:
                    out[j].append((rows[I[a:b]], cnt[I[a:b]]))
    return out

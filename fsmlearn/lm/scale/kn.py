"""Estimating a backoff model as Dask passes over partitions of the n-grams.

The distributed twin of :func:`fsmlearn.lm.estimate.estimate`: the same three estimators
(interpolated modified Kneser-Ney as lmplz computes it, Witten-Bell, absolute discounting),
the same cutoffs, pruning and handling of counts cut before estimation, the same
formulas evaluated in the same floating-point order, so that every probability is the
in-memory one bit for bit (backoff weights of pruned contexts: to the rounding of a sum
taken in another order).

The n-grams are partitioned by their **last word** (ranges of word ids).  Inside a
partition every n-gram's suffixes (w2..wk, w3..wk, ...) are present, so

* continuation counts (the number of distinct words before an n-gram: the
  (k+1)-grams whose suffix it is) and
* the interpolation p(w | h) = u(w | h) + gamma(h) p(w | h') (h' = h without its first word)

are local.  What a context h needs from its extensions h w (their total, their number, the
numbers with adjusted count 1, 2 and 3+) crosses partitions: the extensions of h lie in
the partitions of their last words, h in the partition of its own last word.  Passes:

1. *build*: each range's pieces of every counting or Web1T task merged; rows given
   suffix keys (id of w2..wk, then w1) so that the suffix of any n-gram is a few hash probes away;
2. *adjust*: Kneser-Ney's continuation counts; the client sums each order's
   count-of-counts t1..t4 into the discounts (and the empty context's statistics);
3. *context statistics*: per context, partial sums sent to the context's partition
   (a shuffle keyed by the context), summed there into its total and interpolation
   weight gamma(h), and sent back to the partitions that asked (a second shuffle);
4. *interpolate*: p of every order, lowest first, locally;
5. *prune* (with cutoffs, or counts cut before estimation): from the highest order
   down, the kept extensions' probability sums sent to their context's partition, which
   computes the context's backoff weight, alpha(h) = (1 - sum_kept p(w | h)) /
   (1 - sum_kept p(w | h')), and keeps the context itself;
6. *write*: each partition's ARPA lines of each order written by its worker; the client
   writes the header and joins the pieces into the output (compressed by its name), which
   appears only when complete.

Public names: estimate_parts, estimate_text, estimate_web1t.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numba as nb
import numpy as np

from ...errors import ArgumentError
from ...fsm.hashing import hash_insert, hash_lookup, new_table
from ..estimate import (METHODS, _FALLBACK, check_kn_discounts, check_options, cutoff_per_order,
                        discounts_from_counts_of_counts)
from ..model import IMPOSSIBLE
from ..vocab import BOS, EOS, UNK
from .count import group_rows


class MissingNGramError(ArgumentError):
    """An n-gram whose prefix or suffix (``kind``) is not among the counts (``words``: its words)."""

    def __init__(self, message: str, kind: str, words):
        super().__init__(message)
        self.kind = kind
        self.words = list(words)

    def __reduce__(self):
        return (type(self), (self.args[0], self.kind, self.words))


def _missing(kind: str, words, row) -> MissingNGramError:
    """``row``: the k-gram whose suffix is missing, or (``kind`` "prefix") the missing (k-1)-gram
    that some k-grams extend."""
    if isinstance(words, str):                  # a count.Words
        words = words.list()
    ws = [words[int(w)] for w in row]
    if kind == "suffix":
        k = len(ws)
        return MissingNGramError(f"the counts' {k}-gram {' '.join(ws)!r} has no suffix {' '.join(ws[1:])!r} among "
                                 f"the {k - 1}-grams (a suffix's count is at least the n-gram's)", kind, ws)
    k = len(ws) + 1
    return MissingNGramError(f"the counts have {k}-grams that extend {' '.join(ws)!r}, which is not among the "
                             f"{k - 1}-grams (a prefix's count is at least the n-gram's)", kind, ws)


# --- lookups inside a partition ----------------------------------------------------------------

@nb.njit(cache=True)
def _fill(keys, tk, tv, mask):
    """Hash every key (non-negative int64) to its position."""
    for i in range(keys.shape[0]):
        hash_insert(tk, tv, mask, keys[i], i)


@nb.njit(cache=True)
def _probe(tk, tv, mask, idx, w, V, out):
    """out[i] = the position of key idx[i] * V + w[i] (-1 when absent or idx[i] < 0)."""
    for i in range(idx.shape[0]):
        out[i] = -1 if idx[i] < 0 else hash_lookup(tk, tv, mask, idx[i] * V + np.int64(w[i]))


def _keys(st, j: int):
    """int64: the order-j rows' keys, (index of w2..wj) * V + w1 (order 1: the word), computed
    from the rows and their suffix indices (not stored: 8 bytes an n-gram less on disk)."""
    w1 = st["rows"][j][:, 0].astype(np.int64)
    return w1 if j == 1 else st["suf"][j].astype(np.int64) * st["V"] + w1


def _table(st, j: int):
    """The hash of the order-j keys (built on first use in a task, never stored with the state)."""
    tabs = st.setdefault("_tab", {})
    if j not in tabs:
        keys = _keys(st, j)
        tk, tv, mask = new_table(keys.size)
        _fill(keys, tk, tv, mask)
        tabs[j] = (tk, tv, mask)
    return tabs[j]


def _find(st, rows):
    """Index of each row (int32 [n, m]) in the partition's order-m table, -1 when absent.

    The table of order 1 is the range's words in order; of order j keyed by (index of
    w2..wj) * V + w1, one hash probe per word."""
    n, m = rows.shape
    V = st["V"]
    w = rows[:, m - 1].astype(np.int64)
    idx = np.where((w >= st["lo"]) & (w < st["hi"]), w - st["lo"], -1)
    for j in range(2, m + 1):
        tk, tv, mask = _table(st, j)
        out = np.empty(n, np.int64)
        _probe(tk, tv, mask, idx, np.ascontiguousarray(rows[:, m - j]), V, out)
        idx = out
    return idx


# --- pass 1: build ------------------------------------------------------------------------------

def build(lo: int, hi: int, uni, pieces, N: int, V: int, words, info=None):
    """Task: the partition of last words ``lo``..``hi``: every order's rows, sorted by suffix key,
    with their raw counts and the index of their suffix.

    Args:
        uni: int64 [hi - lo], the unigram counts of the range's words.
        pieces: lists of (rows, counts) pieces (any orders 2..N), each already in global ids;
            in a :class:`~fsmlearn.lm.scale.cluster.Later`, read one order at a time (the
            partition of a frequent last word can be several times the average).
        words: the vocabulary (for error messages).
        info: a split partition's :meth:`~fsmlearn.lm.scale.layout.Layout.info` (its
            unigram, ``lo``, is a copy of its suffix's last word).
    """
    from .cluster import Later, _load
    from .count import unique_sum
    if isinstance(pieces, Later):
        pieces = pieces.value
    st = {"lo": lo, "hi": hi, "N": N, "V": V, "rows": {}, "raw": {}, "suf": {}}
    st.update(info or {})
    w = np.arange(lo, hi, dtype=np.int32)
    st["rows"][1] = w[:, None]
    st["raw"][1] = np.asarray(uni, np.float64)
    for k in range(2, N + 1):
        got = [(r, c) for piece in pieces for r, c in piece if r.shape[0] and r.shape[1] == k]
        if got:
            rows = np.concatenate([_load(r) for r, _ in got])
            cnt = np.concatenate([_load(c) for _, c in got])
            rows, cnt = unique_sum(rows, cnt)
        else:
            rows, cnt = np.zeros((0, k), np.int32), np.zeros(0, np.int64)
        suf = _find(st, rows[:, 1:])
        if (suf < 0).any():
            raise _missing("suffix", words, rows[int(np.argmax(suf < 0))])
        key = suf * V + rows[:, 0].astype(np.int64)
        o = np.argsort(key, kind="stable")         # suffixes in order: the later passes' gathers run ahead
        st["rows"][k] = np.ascontiguousarray(rows[o])
        st["raw"][k] = cnt[o].astype(np.float64)
        st["suf"][k] = suf[o].astype(np.int32)     # an index inside the partition
        del rows, cnt, suf, key, o, got
    st.pop("_tab", None)
    summary = {k: (int(st["raw"][k].size), float(st["raw"][k].min()) if st["raw"][k].size else 0.0)
               for k in range(2, N + 1)}
    return st, summary


# --- pass 2: adjusted counts --------------------------------------------------------------------

def _sums(idx, values, n: int):
    """float64 [n]: the sum of ``values`` at each index (in the order given; exact for integers)."""
    return np.bincount(idx, weights=values, minlength=n)


def _split(dest, P: int):
    """Per destination 0..P-1, the positions (ascending) whose ``dest`` it is: one sort, not P scans."""
    o = np.argsort(dest, kind="stable")
    edges = np.searchsorted(dest[o], np.arange(P + 1))
    return [o[edges[d]:edges[d + 1]] for d in range(P)]


def _merged(parts):
    """One partition's state from the pieces the passes returned (later ones add their arrays),
    and the values of the copies of split suffixes it holds set as their owners found them
    (a part ``{"fix": {name: {order: value}}}``, :mod:`~fsmlearn.lm.scale.layout`)."""
    st = {}
    fixes = []
    for part in parts:
        if "fix" in part:
            fixes.append(part["fix"])
        else:
            st.update(part)
    for fix in fixes:
        for name, vals in fix.items():
            arrs = dict(st[name])
            for j, v in vals.items():
                a = np.array(arrs[j])
                a[:] = v                        # a copy's order holds that one row
                arrs[j] = a
            st[name] = arrs
    return st


def _copies(st) -> int:
    """The orders 1..d whose rows are copies of a split suffix (one row each); 0 for a range."""
    return st.get("d", 0)


def _home(st, k: int):
    """bool: the order-k rows the partition answers for (None: all of them)."""
    if k > _copies(st):
        return None
    return np.full(st["rows"][k].shape[0], st["own"][k - 1], np.bool_)


def adjust(parts, kn: bool, bos: int):
    """Task: the counts the discounts apply to (``a``: continuation counts of Kneser-Ney's lower
    orders, except n-grams starting with ``<s>``; raw counts otherwise) and, per order, the
    count-of-counts t1..t4 of ``a`` and the empty context's statistics.

    The copies of a split suffix are left out of both: the driver sums their continuation
    counts over the partitions that hold them (``copies``: per order 1..d, the rows this
    partition counts before the copy, its raw count and whether it starts with ``<s>``)."""
    st = _merged(parts)
    N = st["N"]
    d = _copies(st)
    st["a"] = {}
    for k in range(1, N + 1):
        raw = st["raw"][k]
        if kn and k < N:
            home = _home(st, k + 1)
            cont = np.bincount(st["suf"][k + 1], weights=None if home is None else home.astype(np.float64),
                               minlength=raw.size).astype(np.float64)
            st["a"][k] = np.where(st["rows"][k][:, 0] == bos, raw, cont)
        else:
            st["a"][k] = raw
    copies = [(float(st["a"][k][0]) if kn and k < N else 0.0, float(st["raw"][k][0]), bool(st["rows"][k][0, 0] == bos))
              for k in range(1, d + 1)]
    t = {}
    for k in range(1, N + 1):
        a = st["a"][k][st["rows"][k][:, -1] != bos] if k > d else np.zeros(0)
        t[k] = [int(np.count_nonzero(a == j)) for j in (1, 2, 3, 4)]
    a1 = st["a"][1]
    nb = (st["rows"][1][:, 0] != bos) & (d == 0)
    x = a1[nb]
    uni = (float(x.sum()), int(np.count_nonzero(x > 0)), int(np.count_nonzero(x == 1)),
           int(np.count_nonzero(x == 2)), int(np.count_nonzero(x >= 3)), float(st["raw"][1][nb].sum()))
    return {"a": st["a"]}, (t, uni, copies)


def copies_counted(copies, kn: bool, N: int, bos: int, t: dict, uni: list):
    """The copies' ``a`` summed over the partitions that hold them (``copies``: suffix ->
    (rows before it, raw count, starts with ``<s>``) summed), their count-of-counts added to
    ``t`` and the unigrams' statistics to ``uni`` (lists, in place); returns suffix -> a."""
    a = {}
    for s, (cont, raw, at_bos) in copies.items():
        k = len(s)
        x = raw if not kn or k == N or at_bos else cont
        a[s] = x
        if s[-1] == bos:
            continue
        for j in (1, 2, 3, 4):
            t[k][j - 1] += int(x == j)
        if k == 1:
            for i, v in enumerate((x, x > 0, x == 1, x == 2, x >= 3, raw)):
                uni[i] += v
    return a


# --- pass 3: context statistics -----------------------------------------------------------------

def ctx_map(parts, layout, bos: int):
    """Task: per destination partition, per order k >= 2, the contexts h (rows [G, k-1]) of this
    partition's k-grams with their partial statistics (sum of a, types, n1, n2, n3 over the
    extensions that are not ``<s>``, and the number of extensions; nothing from a copy another
    partition answers for); and the state with each row's context group."""
    st = _merged(parts)
    N = st["N"]
    P = layout.size
    out = [dict() for _ in range(P)]
    st["grp"] = {}
    for k in range(2, N + 1):
        rows = st["rows"][k]
        a = st["a"][k]
        M = rows.shape[0]
        if M == 0:
            st["grp"][k] = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                            np.zeros((0, k - 1), np.int32))
            for d in range(P):
                out[d][k] = (np.zeros((0, k - 1), np.int32), np.zeros((0, 6)))
            continue
        h = rows[:, :-1]
        gid, first = group_rows(h)              # contexts in order of first appearance
        gid = gid.astype(np.int32)
        G = first.size
        nb = rows[:, -1] != bos
        home = _home(st, k)
        if home is not None:
            nb = nb & home
        x = np.where(nb, a, 0.0)
        stats = np.zeros((G, 6))
        stats[:, 0] = _sums(gid, x, G)
        stats[:, 1] = _sums(gid, (nb & (x > 0)).astype(np.float64), G)
        stats[:, 2] = _sums(gid, (nb & (x == 1)).astype(np.float64), G)
        stats[:, 3] = _sums(gid, (nb & (x == 2)).astype(np.float64), G)
        stats[:, 4] = _sums(gid, (nb & (x >= 3)).astype(np.float64), G)
        stats[:, 5] = np.bincount(gid, minlength=G) if home is None else _sums(gid, home.astype(np.float64), G)
        hrows = np.ascontiguousarray(h[first])
        dest = layout.dest(hrows)
        pos = np.empty(G, np.int32)            # each group's position in its destination's list
        for d, sel in enumerate(_split(dest, P)):
            pos[sel] = np.arange(sel.size)
            out[d][k] = (hrows[sel], stats[sel])
        st["grp"][k] = (gid, dest, pos, hrows)
    return out, {"grp": st["grp"]}


def ctx_reduce(parts, pieces, method: int, Ds, precut: bool, backoff_missing: bool, words):
    """Task: this partition's contexts' totals and interpolation weights from every source's
    partial statistics (summed exactly: integers in float64), as ``_group_probs`` computes
    them; returns the state (gamma, short, extension counts of its n-grams as contexts) and per
    source, per order, (total, types, gamma) aligned with that source's contexts."""
    st = _merged(parts)
    N = st["N"]
    gamma = {k: np.ones(st["rows"][k].shape[0]) for k in range(1, N + 1)}
    short = {k: np.zeros(st["rows"][k].shape[0], np.bool_) for k in range(1, N + 1)}
    next_ = {k: np.zeros(st["rows"][k].shape[0], np.bool_) for k in range(1, N + 1)}
    replies = [dict() for _ in pieces]
    for k in range(2, N + 1):
        m = k - 1
        hs = [p[k][0] for p in pieces]
        ss = [p[k][1] for p in pieces]
        if not any(h.shape[0] for h in hs):
            for s in range(len(pieces)):
                replies[s][k] = np.zeros((0, 3))
            continue
        allh = np.concatenate(hs)
        idx = _find(st, allh)
        if (idx < 0).any():
            i = int(np.argmax(idx < 0))
            raise _missing("prefix", words, allh[i])
        M = st["rows"][m].shape[0]
        acc = np.zeros((M, 5))
        allS = np.concatenate(ss)
        for j in range(5):
            acc[:, j] = _sums(idx, allS[:, j + 1], M)
        tot = _sums(idx, allS[:, 0], M)
        types, n1, n2, n3, nx = acc[:, 0], acc[:, 1], acc[:, 2], acc[:, 3], acc[:, 4]
        nx_present = nx > 0
        raw = st["raw"][m]
        use_ctx = method != 0 or precut or k == N
        missing = np.zeros(M)
        if use_ctx:
            more = nx_present & (raw > tot)
            missing = np.where(more, raw - tot, 0.0)
            tot = np.where(more, raw, tot)
            if backoff_missing:
                short[m] = more
                missing = np.zeros(M)
        D1, D2, D3 = Ds[k - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            if method == 0:
                gam = (D1 * n1 + D2 * n2 + D3 * n3 + missing) / tot
            elif method == 1:
                gam = (types + missing) / (tot + types)
            else:
                gam = (D1 * types + missing) / tot
        gam = np.where(tot > 0, gam, 1.0)
        gamma[m] = np.where(nx_present, gam, gamma[m])
        next_[m] = nx > 0
        start = 0
        for s, h in enumerate(hs):
            sel = idx[start:start + h.shape[0]]
            start += h.shape[0]
            replies[s][k] = np.stack([tot[sel], types[sel], gamma[m][sel]], axis=1)
    any_short = any(bool(x.any()) for x in short.values())
    return {"gamma": gamma, "short": short, "next": next_}, replies, any_short   # next: has an extension


# --- pass 4: interpolation ----------------------------------------------------------------------

def interpolate(parts, replies, method: int, Ds, uni_ctx, V_uniform: float, smooth: float, bos: int):
    """Task: p(w | h) of every n-gram of the partition, lowest order first (``_group_probs``'s
    formulas, in its order of operations)."""
    st = _merged(parts)
    N = st["N"]
    p = {}
    tot0, types0, gam0, uni_raw_total = uni_ctx
    for k in range(1, N + 1):
        rows = st["rows"][k]
        x = st["a"][k]
        D1, D2, D3 = Ds[k - 1]
        if k == 1:
            tot = np.full(x.size, tot0)
            types = np.full(x.size, float(types0))
            gam = np.full(x.size, gam0)
        else:
            gid, dest, pos, _ = st["grp"][k]
            G = dest.size
            vals = np.zeros((G, 3))
            for d, sel in enumerate(_split(dest, len(replies))):
                if sel.size:
                    vals[sel] = replies[d][k][pos[sel]]
            tot, types, gam = vals[gid, 0], vals[gid, 1], vals[gid, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            if method == 0:
                d = np.where(x == 1, D1, np.where(x == 2, D2, np.where(x >= 3, D3, 0.0)))
                u = (x - d) / tot
            elif method == 1:
                u = x / (tot + types)
            else:
                u = np.maximum(x - D1, 0.0) / tot
        u = np.where(tot > 0, u, 0.0)
        if k == 1:
            if method == 2 and smooth > 0.0:
                base = (st["raw"][1] + smooth) / (uni_raw_total + smooth * V_uniform)
            else:
                base = np.full(x.size, 1.0 / V_uniform)
        else:
            base = p[k - 1][st["suf"][k]]
        pk = u + gam * base
        pk[rows[:, -1] == bos] = 0.0
        p[k] = pk
    return {"p": p}


# --- pass 5: pruning ----------------------------------------------------------------------------

def keep_init(parts, cut):
    """Task: the n-grams kept by the cutoffs (raw count >= the order's cutoff; every unigram)."""
    st = _merged(parts)
    return {"keep": {k: (np.ones(st["raw"][k].size, np.bool_) if k == 1 else st["raw"][k] >= cut[k - 1])
                     for k in range(1, st["N"] + 1)}, "alpha": {}, "is_ctx": {}}


def prune_map(parts, k: int, layout):
    """Task: the order-k rows' contributions to their contexts (sum of kept p, sum of kept p of
    the suffixes, any pruned with p > 0, any kept) per destination (nothing from a copy another
    partition answers for); the suffixes of kept rows kept (and whether the copy of order
    k - 1, if any, is now kept)."""
    st = _merged(parts)
    P = layout.size
    keep = st["keep"][k]
    home = _home(st, k)
    mine = keep if home is None else keep & home
    p = st["p"][k]
    psuf = st["p"][k - 1][st["suf"][k]]
    gid, dest, pos, hrows = st["grp"][k]
    G = dest.size
    acc = np.zeros((G, 4))
    acc[:, 0] = _sums(gid, np.where(mine, p, 0.0), G)
    acc[:, 1] = _sums(gid, np.where(mine, psuf, 0.0), G)
    pruned = (~keep) & (p > 0.0)
    acc[:, 2] = _sums(gid, (pruned if home is None else pruned & home).astype(np.float64), G)
    acc[:, 3] = _sums(gid, mine.astype(np.float64), G)
    keeps = dict(st["keep"])
    km = keeps[k - 1].copy()
    km[st["suf"][k][keep]] = True
    keeps[k - 1] = km
    out = []
    for sel in _split(dest, P):
        out.append((hrows[sel], acc[sel]))
    copy = bool(km[0]) if k - 1 <= _copies(st) else None
    return out, {"keep": keeps}, copy


def prune_reduce(parts, k: int, pieces):
    """Task: the backoff weights of this partition's (k-1)-grams as contexts (``_renormalise``),
    whether they are contexts of kept n-grams, and the contexts of kept n-grams kept; and
    whether the copy of order k - 1 it answers for (if any) is kept."""
    st = _merged(parts)
    m = k - 1
    hs = np.concatenate([p[0] for p in pieces])
    acc = np.concatenate([p[1] for p in pieces])
    M = st["rows"][m].shape[0]
    sums = np.zeros((M, 4))
    if hs.shape[0]:
        idx = _find(st, hs)
        for j in range(4):
            sums[:, j] = _sums(idx, acc[:, j], M)
    sp, sl, pruned, kept = sums[:, 0], sums[:, 1], sums[:, 2] > 0, sums[:, 3] > 0
    gamma = st["gamma"][m]
    with np.errstate(divide="ignore", invalid="ignore"):
        renorm = np.where(1.0 - sl > 0.0, (1.0 - sp) / (1.0 - sl), 0.0)
    alpha = dict(st["alpha"])
    alpha[m] = np.where(pruned | st["short"][m], renorm, gamma)
    is_ctx = dict(st["is_ctx"])
    is_ctx[m] = kept
    keep = dict(st["keep"])
    keep[m] = keep[m] | kept
    copy = bool(keep[m][0]) if m <= _copies(st) and st["own"][m - 1] else None
    return {"keep": keep, "alpha": alpha, "is_ctx": is_ctx}, copy


def no_pruning(parts):
    """Task: without cutoffs or short contexts: every n-gram kept, alpha = gamma, a context is any
    n-gram with an extension."""
    st = _merged(parts)
    N = st["N"]
    return {"keep": {k: np.ones(st["raw"][k].size, np.bool_) for k in range(1, N + 1)},
            "alpha": {k: st["gamma"][k] for k in range(1, N)},
            "is_ctx": {k: st["next"][k] for k in range(1, N)}}


# --- pass 6: ARPA lines --------------------------------------------------------------------------

def model_rows(st, k: int, bos: int, copies: bool = True):
    """The model's order-k n-grams of an estimated partition: the kept rows, their log10
    probability (0 for ``<s>``, :data:`IMPOSSIBLE` for p = 0) and backoff (log10 alpha of a
    context, 0 otherwise and at the highest order), as the ARPA file and the compiled model
    both take them; without ``copies``, not the copies of split suffixes others answer for."""
    keep = st["keep"][k]
    home = None if copies else _home(st, k)
    if home is not None:
        keep = keep & home
    rows = np.ascontiguousarray(st["rows"][k][keep])
    with np.errstate(divide="ignore"):
        lp = np.log10(st["p"][k][keep])
    lp[rows[:, -1] == bos] = 0.0
    lp[~np.isfinite(lp)] = IMPOSSIBLE
    if k < st["N"]:
        alpha = st["alpha"][k][keep]
        bo = np.where(st["is_ctx"][k][keep], np.log10(np.maximum(alpha, 1e-300)), 0.0)
    else:
        bo = np.zeros(rows.shape[0])
    return rows, lp, bo


def write_part(parts, wb, bos: int, tmpdir: str, part: int):
    """Task: this partition's ARPA lines of each order into ``tmpdir`` (one file per order);
    returns the n-grams written per order."""
    from ..arpa import arpa_lines
    st = _merged(parts)
    N = st["N"]
    wbuf, woff = wb
    sizes = []
    for k in range(1, N + 1):
        rows, lp, bo = model_rows(st, k, bos, copies=False)
        hb = np.full(rows.shape[0], k < N, np.bool_)
        path = Path(tmpdir) / f"{k}-{part:05d}.arpa"
        tmp = path.with_name(path.name + f".{os.getpid()}.part")
        with open(tmp, "wb") as f:
            for data in arpa_lines(rows, lp, bo, hb, wbuf, woff):
                f.write(data)
        os.replace(tmp, path)
        sizes.append(int(rows.shape[0]))
    return sizes


#: the arrays of a partition's state that its ARPA lines of one order are made of
_LINE_ARRAYS = ("rows", "p", "keep", "alpha", "is_ctx")


def _order_state(parts, k: int, names):
    """A partition's state for order ``k`` alone, read from its files (``parts``: the values of
    the passes, arrays in files): the order-k entries of the per-order tables ``names`` and the
    small values, with the copies of split suffixes fixed (:func:`_merged`); nothing else is
    read."""
    from .cluster import Saved, _load
    st: dict = {}
    fixes = []
    for part in parts:
        if "fix" in part:
            fixes.append(part["fix"])
            continue
        for key, val in part.items():
            if isinstance(val, dict):
                if key in names and k in val:
                    st[key] = {k: _load(val[k])}
            elif not isinstance(val, Saved):
                st[key] = val
    fix = {name: {j: v for j, v in vals.items() if j == k}
           for f in fixes for name, vals in f.items() if name in st}
    return _merged([st, {"fix": fix}] if fix else [st])


def kept_counts(parts) -> list:
    """Task: the n-grams of each order the partition writes (kept, and not a copy another
    partition answers for); ``parts`` in a :class:`~fsmlearn.lm.scale.cluster.Later`."""
    parts = parts.value
    N = next(p["N"] for p in parts if "N" in p)
    out = []
    for k in range(1, N + 1):
        st = _order_state(parts, k, ("keep",))
        n = int(np.count_nonzero(st["keep"][k]))
        if k <= _copies(st) and not st["own"][k - 1]:
            n = 0
        out.append(n)
    return out


def append_order(parts, wb, bos: int, path: str, k: int):
    """Task: the partition's ARPA lines of order ``k`` appended to the file ``path`` (opened
    O_APPEND; each write whole lines, so that partitions appending at once interleave blocks,
    never lines); ``parts`` in a :class:`~fsmlearn.lm.scale.cluster.Later`, only order k read.
    Returns (lines, bytes) written."""
    from ..arpa import arpa_lines
    st = _order_state(parts.value, k, _LINE_ARRAYS)
    rows, lp, bo = model_rows(st, k, bos, copies=False)
    hb = np.full(rows.shape[0], k < st["N"], np.bool_)
    wbuf, woff = wb
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    written = 0
    try:
        for data in arpa_lines(rows, lp, bo, hb, wbuf, woff):
            m = os.write(fd, data)
            if m != len(data):
                raise OSError(f"{path}: {m} of {len(data)} bytes written (a full disk?)")
            written += m
    finally:
        os.close(fd)
    return int(rows.shape[0]), written


# --- the driver ---------------------------------------------------------------------------------

def estimate_parts(runner, vocab, N: int, sources, output, method: str = "kneser-ney", *, discounts=None,
                   discount_fallback=_FALLBACK, discount: float = 0.25, smoothing: float = 0.0, cutoffs=None,
                   keep_bigrams: bool = False, cut_mass: str = "backoff", ranges: int | None = None,
                   trans=None, precut: bool | None = None, routed=None, compiled=None, leaf_rows: int | None = None):
    """Estimate from n-gram pieces already in global ids and write the ARPA file ``output`` (None:
    none) and the compiled model ``compiled`` (None: none; :mod:`~fsmlearn.lm.scale.compile`).

    Args:
        runner: a :class:`~fsmlearn.lm.scale.cluster.Runner`.
        vocab: the :class:`~fsmlearn.lm.scale.count.GlobalVocab` (unigram counts).
        N: the order.
        sources: futures of lists of (rows, counts) pieces (orders 2..N, any mix), one per
            counting task or Web1T file.
        trans: per source, int32 [v] global id of each of its word ids (None: already global).
        routed: (bounds, futures) of sources already split by last word into the ranges
            ``bounds`` (instead of ``sources``).
        precut: whether the counts were cut before estimation (None: when some order >= 2's
            smallest count is above 1, as :func:`~fsmlearn.lm.web1t.read_web1t` records it).
        output: the ARPA path (``.gz``/``.bz2``/``.xz`` compress).
        method ... cut_mass: as :func:`fsmlearn.lm.estimate.estimate`.
        ranges: the number of last-word partitions (default: from the data and the budget).
        leaf_rows: the most rows a partition should hold: a range with more is divided by the
            words before its last (:mod:`~fsmlearn.lm.scale.layout`; default: from the budget).

    Returns:
        The n-grams written per order.
    """
    from .count import ranges_for, route
    say = runner.say
    check_options(method, discount, smoothing, cut_mass)
    if discounts is not None:
        check_kn_discounts(discounts, N)
    words = vocab.words
    V = vocab.size
    bos = vocab.id[BOS]
    for w in (BOS, EOS, UNK):
        if w not in vocab.id:
            raise ArgumentError(f"the vocabulary has no {w}")
    method_id = METHODS.index(method)
    if routed is None:
        bounds = vocab.bounds(ranges_for(runner, vocab, N, ranges, divided=True))
        trans = trans or [None] * len(sources)
        routed = [runner.submit(route, s, t, bounds, -1) for s, t in zip(sources, trans)]
    else:
        bounds, routed = routed
    from .cluster import Later
    from .count import Words
    from .layout import plan, reroute
    wf = runner.share(Words("\n".join(words)))
    # every stage ends at a checkpoint: its results are files, the client holds their names
    runner.wait(routed, "splitting the n-grams by last word", "partitions")
    routed = runner.checkpoint(routed)              # values: a build task reads them order by order
    R0 = bounds.size - 1
    sizes = [sum(int(r.shape[0]) for src in routed for r, _ in src[b]) for b in range(R0)]
    target = max(1, int(leaf_rows or runner.task_memory // ROW_BYTES))
    layout = plan(runner, bounds, sizes, lambda b: [src[b] for src in routed], N, V, target)
    P = layout.size
    split_ranges = layout.divided
    if layout.split:
        big = max(sizes)
        say(f"estimation: {len(split_ranges)} of {R0} last-word ranges (the largest {big:,} rows) divided by the "
            f"words before their last into {P - R0 + len(split_ranges)} partitions of at most {target:,} rows "
            f"where the n-grams allow")
        rr = [runner.submit(reroute, Later([src[b] for b in split_ranges]), layout, split_ranges) for src in routed]
        runner.wait(rr, "estimation: dividing the largest partitions", "sources")
        rr = runner.checkpoint(rr)
    else:
        rr = []
    slot = {int(x): i for i, x in enumerate(np.flatnonzero(np.isin(layout.root_of, split_ranges)))}
    built = []
    for p, (lo, hi, uni) in enumerate(layout.unigrams(vocab.counts)):
        if p in slot:
            pieces = [x[slot[p]] for x in rr]
        else:
            pieces = [r[int(layout.root_of[p])] for r in routed]
        built.append(runner.submit(build, lo, hi, uni, Later(pieces), N, V, wf, layout.info(p)))
    runner.wait(built, "estimation: merging the n-grams by last word", "partitions")
    built = runner.checkpoint(built)
    runner.discard(rr + runner.checkpoint(routed) + runner.checkpoint(list(sources or [])))
    del routed, sources, rr
    summaries = [b[1] for b in built]
    B = [b[0] for b in built]       # rows, raw counts, suffixes: the partition itself
    if precut is None:
        precut = any(min((s[k][1] for s in summaries if s[k][0]), default=1.0) > 1 for k in range(2, N + 1))
    kn = method == "kneser-ney"
    if kn and precut:
        say("the counts were cut before estimation (e.g. Web1T): continuation counts cannot be recovered, "
            "so every order uses raw counts (modified absolute discounting with Kneser-Ney's three discounts)")
    # each pass returns only the arrays it adds; a task reads the ones it needs
    adj = [runner.submit(adjust, [b], kn and not precut, bos) for b in B]
    runner.wait(adj, "estimation: continuation counts", "partitions")
    adj = runner.checkpoint(adj)
    stats = [a[1] for a in adj]
    A = [a[0] for a in adj]
    t_all = {k: [sum(s[0][k][j] for s in stats) for j in range(4)] for k in range(1, N + 1)}
    uni_all = [sum(s[1][j] for s in stats) for j in range(6)]
    # the copies of split suffixes: continuation counts summed over the partitions holding them
    copies = {}
    for p, s in enumerate(stats):
        suffix = layout.leaves[p][0]
        for j, (cont, raw, at_bos) in enumerate(s[2], 1):
            c = copies.setdefault(suffix[-j:], [0.0, raw, at_bos])
            c[0] += cont
    fixed_a = copies_counted(copies, kn and not precut, N, bos, t_all, uni_all)
    fix = [_fix(layout, p, {"a": fixed_a}) for p in range(P)]
    Ds = []
    for k in range(1, N + 1):
        if kn:
            given = None if discounts is None or k - 1 >= len(discounts) else discounts[k - 1]
            if given is not None:
                D = tuple(float(x) for x in given)
            else:
                D, _ = discounts_from_counts_of_counts(t_all[k], discount_fallback, k)
            say(f"order {k}: discounts {', '.join(f'{d:.4f}' for d in D)}")
        else:
            D = (discount, discount, discount)
        Ds.append(D)
    tot0, types0, n1, n2, n3, uni_raw_total = uni_all
    D1, D2, D3 = Ds[0]
    if tot0 > 0:
        gam0 = ((D1 * n1 + D2 * n2 + D3 * n3) / tot0 if method_id == 0 else
                types0 / (tot0 + types0) if method_id == 1 else D1 * types0 / tot0)
    else:
        gam0 = 1.0
    # context statistics: there and back
    cm = [runner.submit(ctx_map, [B[p], A[p], fix[p]], layout, bos) for p in range(P)]
    runner.wait(cm, "estimation: context statistics", "partitions")
    cm = runner.checkpoint(cm)
    G = [c[1] for c in cm]
    red = [runner.submit(ctx_reduce, [B[d]], [c[0][d] for c in cm], method_id,
                         Ds, precut, cut_mass == "backoff", wf) for d in range(P)]
    runner.wait(red, "estimation: context totals and weights", "partitions")
    red = runner.checkpoint(red)
    runner.discard([c[0] for c in cm])
    R = [r[0] for r in red]
    inter = [runner.submit(interpolate, [B[s], A[s], G[s], fix[s]], [r[1][s] for r in red], method_id,
                           Ds, (tot0, types0, gam0, uni_raw_total), float(V - 1), float(smoothing), bos)
             for s in range(P)]
    runner.wait(inter, "estimation: interpolation", "partitions")
    Pr = runner.checkpoint(inter)
    runner.discard([r[1] for r in red] + A)
    cut = cutoff_per_order(cutoffs, N, keep_bigrams)
    # contexts whose raw count exceeds their extensions' (counts cut before estimation, or an
    # <s> inside a sentence) are renormalised as pruned ones are, as lm.estimate does
    any_short = any(r[2] for r in red)
    kept = {}                                   # copies of split suffixes: kept or not, as their owners say
    if cut is None and not any_short:
        K = [runner.submit(no_pruning, [B[p], R[p]]) for p in range(P)]
        runner.wait(K, "estimation: backoff weights", "partitions")
        K = runner.checkpoint(K)
    else:
        K = [runner.submit(keep_init, [B[p]], cut or [1] * N) for p in range(P)]
        for k in range(N, 1, -1):
            fk = [_fix(layout, p, {"keep": kept}) for p in range(P)]
            pm = [runner.submit(prune_map, [B[p], G[p], Pr[p], K[p], fk[p]], k, layout)
                  for p in range(P)]
            runner.wait(pm, f"estimation: pruning order {k}", "partitions")
            pm = runner.checkpoint(pm)
            marks = {}
            for p, x in enumerate(pm):
                if x[2] is not None:
                    s = layout.leaves[p][0][-(k - 1):]
                    marks[s] = marks.get(s, False) or x[2]
            fk = [_fix(layout, p, {"keep": {**kept, **marks}}) for p in range(P)]
            K2 = [runner.submit(prune_reduce, [B[d], R[d], K[d], pm[d][1], fk[d]], k,
                                [x[0][d] for x in pm]) for d in range(P)]
            runner.wait(K2, f"estimation: backoff weights of order {k - 1}", "partitions")
            K2 = runner.checkpoint(K2)
            for p, x in enumerate(K2):
                if x[1] is not None:
                    kept[layout.leaves[p][0][-(k - 1):]] = x[1]
            runner.discard(pm + runner.checkpoint(K))
            K = [x[0] for x in K2]
    fk = [_fix(layout, p, {"keep": kept}) for p in range(P)]
    states = [[B[p], Pr[p], K[p], fk[p]] for p in range(P)]
    counts = None
    if compiled is not None:
        from .compile import compile_parts, model_from_estimate
        mp = [runner.submit(model_from_estimate, s, bos) for s in states]
        runner.wait(mp, "compiling: the model's n-grams", "partitions")
        mp = runner.checkpoint(mp)
        counts = [sum(m[1][k] for m in mp) for k in range(N)]
        states_n, arcs_n = compile_parts(runner, words, N, layout, [m[0] for m in mp], compiled)
        say(f"wrote {compiled}: {states_n:,} states, {arcs_n:,} arcs")
    if output is not None:
        counts = _write_arpa(runner, states, vocab, N, output, bos)
    runner.release()
    return counts


#: bytes a partition's row may take at the peak of a pass (the build's merge, the context
#: statistics): a partition is divided until its rows times this fit a task's budget (the
#: largest process peaked at about 190 bytes a row above the interpreter, docs/bench-scale.md)
ROW_BYTES = 300


def _fix(layout, p: int, tables: dict) -> dict:
    """The part that sets partition ``p``'s copies of split suffixes (``tables``: name ->
    suffix -> value) as their owners found them."""
    s = layout.leaves[p][0]
    fix = {}
    for name, table in tables.items():
        vals = {j: table[s[-j:]] for j in range(1, len(s) + 1) if s[-j:] in table}
        if vals:
            fix[name] = vals
    return {"fix": fix}


def check_output(output) -> None:
    """Refuse, before any work, an ARPA output that cannot be written: a directory in the way, a
    folder that does not exist (None: no output)."""
    if output is None:
        return
    output = Path(os.path.abspath(output))
    if output.is_dir():
        raise ArgumentError(f"{output}: cannot write here: a directory is in the way")
    if not output.parent.is_dir():
        raise ArgumentError(f"{output}: cannot write here: no such folder ({output.parent})")


def _write_arpa(runner, states, vocab, N: int, output, bos: int):
    """The model's ARPA file ``output``, atomically: a plain file on one host by
    :func:`_append_arpa`, else (a compressed file, workers on several hosts, or a write task that
    ran twice) by :func:`_join_arpa`."""
    from ..arpa import _ext
    output = Path(os.path.abspath(output))
    check_output(output)
    if runner.one_host and not _ext(output):
        counts = _append_arpa(runner, states, vocab, N, output, bos)
        if counts is not None:
            return counts
        runner.say("a task that appended ARPA lines ran twice (a worker lost?): writing the file again from "
                   "pieces")
    return _join_arpa(runner, states, vocab, N, output, bos)


def _append_arpa(runner, states, vocab, N: int, output, bos: int):
    """The ARPA file written in place: the header (the counts from :func:`kept_counts`), then per
    order every partition's lines appended by the workers (:func:`append_order`), with no
    copy of the text: within an order the partitions' blocks come in the order they are
    written.  Returns the counts, or None when the file's size is not the header's and the
    tasks' bytes (a task ran twice: the file is removed, nothing is left)."""
    from ...fsm.atomic import atomic_path
    from ..vocab import word_bytes
    from .cluster import Later
    wb = runner.share(word_bytes(vocab.words))
    cf = [runner.submit(kept_counts, Later(s)) for s in states]
    runner.wait(cf, "counting the ARPA file's n-grams", "partitions")
    per = runner.gather(cf)
    counts = [sum(c[k] for c in per) for k in range(N)]

    def append(path, text: str) -> int:
        b = text.encode()
        with open(path, "ab") as f:
            f.write(b)
        return len(b)

    try:
        with atomic_path(output, suffix=".tmp") as tmp:
            expected = append(tmp, "\\data\\\n" + "".join(f"ngram {k}={c}\n" for k, c in enumerate(counts, 1)))
            for k in range(1, N + 1):
                expected += append(tmp, f"\n\\{k}-grams:\n")
                fs = [runner.submit(append_order, Later(s), wb, bos, str(tmp), k) for s in states]
                runner.wait(fs, f"writing ARPA lines of order {k}", "partitions")
                done = runner.gather(fs)
                if sum(d[0] for d in done) != counts[k - 1]:
                    raise _TwiceError
                expected += sum(d[1] for d in done)
            expected += append(tmp, "\n\\end\\\n")
            if os.path.getsize(tmp) != expected:
                raise _TwiceError
    except _TwiceError:
        return None
    finally:
        runner.release()
    return counts


class _TwiceError(Exception):
    """An ARPA file written in place whose size is not what its tasks wrote."""


def _join_arpa(runner, states, vocab, N: int, output, bos: int):
    """The partitions' ARPA pieces joined under the header into ``output``, atomically."""
    from ...data.text import open_text
    from ...fsm.atomic import atomic_path
    from ..arpa import _ext
    from ..vocab import word_bytes
    import tempfile
    output = Path(os.path.abspath(output))
    # the workers write their pieces beside the output (a folder the client reads and, on a
    # cluster of several hosts, one the workers must see too: docs/cluster.md)
    check_output(output)
    try:
        pieces = Path(tempfile.mkdtemp(prefix=output.name + ".", suffix=".parts", dir=output.parent))
    except OSError as e:
        why = f"no such folder ({output.parent})" if isinstance(e, FileNotFoundError) else (e.strerror or str(e))
        raise ArgumentError(f"{output}: cannot write here: {why}") from None
    runner.leftovers.append(str(pieces))        # removed after the workers stop, whatever happens
    try:
        wb = runner.share(word_bytes(vocab.words))
        writes = [runner.submit(write_part, s, wb, bos, str(pieces), p) for p, s in enumerate(states)]
        runner.wait(writes, "writing ARPA lines", "partitions")
        sizes = runner.gather(writes)
        counts = [sum(s[k] for s in sizes) for k in range(N)]
        with atomic_path(output, suffix=".tmp" + _ext(output)) as tmp:
            with open_text(tmp, "wb") as out:
                out.write(b"\\data\\\n")
                for k, c in enumerate(counts, 1):
                    out.write(f"ngram {k}={c}\n".encode())
                for k in range(1, N + 1):
                    out.write(f"\n\\{k}-grams:\n".encode())
                    for p in range(len(states)):
                        piece = pieces / f"{k}-{p:05d}.arpa"
                        _append(out, piece, plain=not _ext(output))
                        os.unlink(piece)            # the disk holds the ARPA text about once
                out.write(b"\n\\end\\\n")
    finally:
        shutil.rmtree(pieces, ignore_errors=True)
        runner.release()
    return counts


def _append(out, path: Path, plain: bool) -> None:
    """``path``'s bytes appended to the open file ``out``: by the kernel (``copy_file_range``,
    no copy through this process) when ``out`` is a plain file, else through ``out`` (its
    compressor)."""
    with open(path, "rb") as f:
        if plain and hasattr(os, "copy_file_range"):
            out.flush()
            left = os.fstat(f.fileno()).st_size
            try:
                while left > 0:
                    n = os.copy_file_range(f.fileno(), out.fileno(), left)
                    if n == 0:
                        break
                    left -= n
                if left == 0:
                    return
            except OSError:
                pass                        # a file system without it: the bytes not yet copied, below
            f.seek(os.fstat(f.fileno()).st_size - left)
            out.seek(0, os.SEEK_END)
        shutil.copyfileobj(f, out, 1 << 22)


def estimate_text(runner, parts, order: int, output, ranges: int | None = None, **kw):
    """Text partitions -> counts -> an ARPA model (the twin of ``count_ngrams`` + ``estimate``)."""
    from .count import count_parts
    check_output(output)
    check_output(kw.get("compiled"))
    vocab, bounds, routed = count_parts(runner, parts, order, -1, ranges, divided=True)
    return estimate_parts(runner, vocab, order, None, output, routed=(bounds, routed), precut=False, **kw)


def estimate_web1t(runner, root, output, max_order: int | None = None, **kw):
    """A Web1T directory (its files the partitions) -> an ARPA model (the twin of ``read_web1t``
    + ``estimate``)."""
    from .count import read_web1t_parts
    from .count import web1t_parts
    check_output(output)
    check_output(kw.get("compiled"))
    vocab, order, reads = read_web1t_parts(runner, root, max_order)
    sources = [f for k in sorted(reads) for f in reads[k]]
    try:
        return estimate_parts(runner, vocab, order, sources, output, **kw)
    except MissingNGramError as e:
        raise _locate_missing(e, web1t_parts(root, max_order)[1]) from None


def _locate_missing(e: MissingNGramError, files: dict):
    """The Web1T line of the n-gram ``e`` names (the first that extends a missing prefix), as
    :func:`~fsmlearn.lm.web1t.read_web1t` words the error; ``e`` itself when not found."""
    from ...errors import CorpusFormatError
    from ..web1t import _lines
    from .count import _TO_WEB1T
    ws = [_TO_WEB1T.get(w, w) for w in e.words]
    k = len(ws) + (1 if e.kind == "prefix" else 0)
    head = " ".join(ws) + (" " if e.kind == "prefix" else "\t")
    for f in files.get(k, []):
        for ln, line in _lines(Path(f)):
            if line.startswith(head):
                words = line.split("\t", 1)[0]
                if e.kind == "prefix":
                    held = files.get(k - 1, [])
                    names = ", ".join(f"{Path(q).parent.name}/{Path(q).name}" for q in held[:2]) + \
                        (", ..." if len(held) > 2 else "")
                    reason = (f"{k}-gram without its prefix {' '.join(ws)!r} among the {k - 1}-grams ({names}; a "
                              f"prefix's count is at least the n-gram's)")
                else:
                    reason = (f"{k}-gram without its suffix {' '.join(ws[1:])!r} among the {k - 1}-grams (a "
                              f"suffix's count is at least the n-gram's)")
                return CorpusFormatError(f"{reason}: {words!r}", Path(f), ln)
    return e

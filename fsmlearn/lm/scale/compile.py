"""Compiling a backoff model as Dask passes over its last-word partitions, written straight
into the memory-mapped file of a compiled LM: the twin of :func:`fsmlearn.lm.model.compile_lm`
followed by :meth:`~fsmlearn.lm.compiled.CompiledLM.save`.

The construction is ``compile_lm``'s (Allauzen, Mohri and Roark 2003, failure arcs): every
history h (an n-gram that some listed n-gram extends, and ``<s>``) is a state, the empty
history state 0; every n-gram h w but those ending in ``<s>``/``</s>`` and the impossible
ones gives an arc from state(h) labelled w + 1, weight -ln p(w | h) (= -log10 p * ln 10),
to the state of the longest suffix of h w that is a history; h ``</s>`` gives h's final
weight; every history has a failure (phi) arc to the state of its longest proper suffix that
is a history, weight -ln of its backoff weight.

Partitioned by the **last word**, an n-gram's suffixes lie in its own partition, so an
arc's destination, a history's failure state and its depth in the failure forest are
local.  Two things cross partitions, both keyed by the history h of an n-gram h w, which
lies in the partition of h's last word:

1. *prefixes*: each partition sends the distinct h of its n-grams to their partitions,
   which mark them as histories (a missing h is an error, as ``compile_lm`` raises it) and
   count them; the client turns the counts into each partition's first state id;
2. *state ids*: each partition numbers its histories and answers every asker with the
   state of each h it sent.

Then each partition writes its arcs, final weights and its states' failure arcs into the
scratch folder, and the client writes the file: a header, then each array filled in place
in the mapped file (:func:`~fsmlearn.lm.mapfile.write_mapped_with`): the per-state arrays
by slices, the final weights scattered, the arcs inserted into the (state, label) hash of
:func:`~fsmlearn.algo.score.label_hash` partition by partition.  The client holds the
arrays being written and one partition's arcs, never the model.

States are numbered by partition (then order, then row), not as ``compile_lm`` numbers
them, and the hash's rows lie where this insertion order puts them: the file scores every
sentence exactly as ``compile_lm``'s does (same weights, same walk), but is not the same
bytes.

Public names: model_from_estimate, compile_parts.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from ...errors import ArgumentError
from ...fsm.hashing import hash64, table_capacity
from ..model import IMPOSSIBLE
from ..vocab import BOS, EOS, LN10, UNK, ByteVocab
from .cluster import _load
from .count import Words, group_rows
from .kn import _copies, _find, _home, _merged, _missing, _split, model_rows


# --- the model partition: rows, log10 probabilities and backoffs, suffix indices ----------------

def model_from_estimate(parts, bos: int):
    """Task: an estimated partition (:mod:`~fsmlearn.lm.scale.kn`'s state: rows, p, keep,
    alpha, is_ctx) as the model it writes: per order the kept rows, their log10 probability
    and backoff exactly as ``write_part`` writes them, suffix indices into the kept rows;
    and the n-grams per order."""
    st = _merged(parts)
    N, V = st["N"], st["V"]
    mp = {"lo": st["lo"], "hi": st["hi"], "N": N, "V": V, "rows": {}, "lp": {}, "bo": {}, "suf": {},
          "d": _copies(st), "own": st.get("own", ())}
    prev = None
    for k in range(1, N + 1):
        keep = st["keep"][k]
        rows, lp, bo = model_rows(st, k, bos)
        if k > 1:
            remap = np.cumsum(prev) - 1             # kept index of each kept (k-1)-gram
            mp["suf"][k] = remap[st["suf"][k][keep]].astype(np.int32)
        prev = keep
        mp["rows"][k], mp["lp"][k], mp["bo"][k] = rows, lp, bo
    return mp, [int(mp["rows"][k].shape[0]) for k in range(1, N + 1)]


# --- pass 1: prefixes to their partitions -------------------------------------------------------

def prefix_map(parts, layout):
    """Task: per destination partition, per order k >= 2, the distinct histories h (rows
    [G, k-1]) of this partition's k-grams; the state keeps each row's group, its
    destination and its place in that destination's list."""
    st = _merged(parts)
    N = st["N"]
    P = layout.size
    out = [dict() for _ in range(P)]
    grp = {}
    for k in range(2, N + 1):
        rows = st["rows"][k]
        h = rows[:, :-1]
        gid, first = group_rows(h)
        hrows = np.ascontiguousarray(h[first])
        dest = layout.dest(hrows)
        pos = np.empty(first.size, np.int64)
        for d, sel in enumerate(_split(dest, P)):
            pos[sel] = np.arange(sel.size)
            out[d][k] = hrows[sel]
        grp[k] = (gid, dest, pos)
    return out, {"pgrp": grp}


# --- pass 2: histories marked and counted -------------------------------------------------------

def mark(parts, pieces, bos: int, words):
    """Task: which of this partition's n-grams are histories (asked for by some partition, and
    ``<s>``), the position in this partition of every history asked for, and how many there
    are; and whether each copy of a split suffix it answers for is a history (per order)."""
    st = _merged(parts)
    N = st["N"]
    is_ctx = {k: np.zeros(st["rows"][k].shape[0], np.bool_) for k in range(1, N + 1)}
    if st["lo"] <= bos < st["hi"] and (_copies(st) == 0 or st["own"][0]):
        is_ctx[1][bos - st["lo"]] = True      # the start state, even in a unigram model
    ask = {}
    for k in range(2, N + 1):
        m = k - 1
        hs = [p.get(k, np.zeros((0, m), np.int32)) for p in pieces]
        allh = np.concatenate(hs) if hs else np.zeros((0, m), np.int32)
        idx = _find(st, allh) if allh.shape[0] else np.zeros(0, np.int64)
        if (idx < 0).any():
            raise _missing("prefix", words, allh[int(np.argmax(idx < 0))])
        is_ctx[m][idx] = True
        ask[k] = (idx, np.array([h.shape[0] for h in hs], np.int64))
    n = sum(int(np.count_nonzero(v)) for v in is_ctx.values())
    copies = {j: bool(is_ctx[j][0]) for j in range(1, _copies(st) + 1) if st["own"][j - 1]}
    return {"is_ctx": is_ctx, "ask": ask}, n, copies


# --- pass 3: state ids, and the answers -----------------------------------------------------------

def number(parts, first: int):
    """Task: the state id of each history of this partition (``first`` on, by order then row;
    -1 for the other n-grams), and per asking partition, per order, the states of the
    histories it sent; and the state of each copy of a split suffix it answers for that is a
    history (per order)."""
    st = _merged(parts)
    N = st["N"]
    sid = {}
    nxt = first
    for k in range(1, N + 1):
        c = st["is_ctx"][k]
        s = np.full(c.size, -1, np.int64)
        n = int(np.count_nonzero(c))
        s[c] = np.arange(nxt, nxt + n)
        nxt += n
        sid[k] = s
    replies = None
    for k in range(2, N + 1):
        idx, sizes = st["ask"][k]
        if replies is None:
            replies = [dict() for _ in range(sizes.size)]
        ends = np.cumsum(sizes)
        for s, (a, b) in enumerate(zip(ends - sizes, ends)):
            replies[s][k] = sid[k - 1][idx[a:b]]
    copies = {j: int(sid[j][0]) for j in range(1, _copies(st) + 1) if st["own"][j - 1] and sid[j][0] >= 0}
    return {"sid": sid}, replies or [], copies


# --- pass 4: arcs, final weights, failure arcs --------------------------------------------------

@nb.njit(cache=True)
def _state_of_suffix(g, j, is_ctx_flat, off, suf_flat, sid_flat):
    """The state of the longest history among the order-j n-gram g of the partition and its
    suffixes (0: none); arrays of every order laid end to end (order j at off[j])."""
    while j >= 1 and g >= 0:
        x = off[j] + g
        if is_ctx_flat[x]:
            return sid_flat[x]
        g = suf_flat[x]
        j -= 1
    return 0


@nb.njit(cache=True)
def _arcs_kernel(rows_last, lp, src, suf_k, k, N, is_ctx_flat, off, suf_flat, sid_flat, bos, eos,
                 a_src, a_lab, a_dst, a_w, f_state, f_w):
    """The arcs and final weights of the order-k rows (``_build_arcs``'s rule, row by row);
    returns (arcs, finals) written."""
    a = 0
    f = 0
    for i in range(rows_last.shape[0]):
        w = rows_last[i]
        s = src[i]
        if w == eos:
            f_state[f] = s
            f_w[f] = -lp[i] * LN10
            f += 1
            continue
        if w == bos or lp[i] <= IMPOSSIBLE:
            continue
        x = off[k] + i
        if k < N and is_ctx_flat[x]:
            d = sid_flat[x]
        else:
            d = _state_of_suffix(suf_k[i], k - 1, is_ctx_flat, off, suf_flat, sid_flat)
        a_src[a] = s
        a_lab[a] = w + 1
        a_dst[a] = d
        a_w[a] = -lp[i] * LN10
        a += 1
    return a, f


@nb.njit(cache=True)
def _failure_kernel(k, M, bo, suf_k, is_ctx_flat, off, suf_flat, sid_flat, depth_flat, home, back, cost, hist,
                    depth_out, at):
    """The failure arc of every history among the M order-k rows (those the partition answers
    for, ``home``), at positions ``at``.. of the partition's state arrays; each history's
    depth in the failure forest."""
    for i in range(M):
        x = off[k] + i
        if not is_ctx_flat[x]:
            continue
        if k == 1:
            b = 0
            dep = 1
        else:
            b = 0
            dep = 1
            g = suf_k[i]
            j = k - 1
            while j >= 1 and g >= 0:
                y = off[j] + g
                if is_ctx_flat[y]:
                    b = sid_flat[y]
                    dep = depth_flat[y] + 1
                    break
                g = suf_flat[y]
                j -= 1
        depth_flat[x] = dep
        if not home:
            continue
        back[at] = b
        cost[at] = -bo[i] * LN10
        hist[at] = k
        depth_out[at] = dep
        at += 1
    return at


def arcs(parts, replies, bos: int, eos: int):
    """Task: this partition's arcs (state, label, destination, -ln p), final weights (state,
    -ln p) and its states' failure state, cost, history length, in state order; the
    number of arcs, the largest label and failure depth, and the start state if ``<s>`` is
    here."""
    st = _merged(parts)
    N = st["N"]
    sizes = [st["rows"][k].shape[0] for k in range(1, N + 1)]
    off = np.zeros(N + 2, np.int64)
    off[2:] = np.cumsum(sizes)               # order k's rows at off[k]
    is_ctx_flat = np.concatenate([st["is_ctx"][k] for k in range(1, N + 1)])
    sid_flat = np.concatenate([st["sid"][k] for k in range(1, N + 1)])
    suf_flat = np.concatenate([np.full(sizes[0], -1, np.int64)] +
                              [st["suf"][k].astype(np.int64) for k in range(2, N + 1)])
    n_ctx = sum(int(np.count_nonzero(st["is_ctx"][k])) for k in range(1, N + 1) if _home(st, k) is None or
                st["own"][k - 1])
    back = np.empty(n_ctx, np.int32)
    cost = np.empty(n_ctx)
    hist = np.empty(n_ctx, np.int8)
    depth = np.empty(n_ctx, np.int64)
    depth_flat = np.zeros(is_ctx_flat.size, np.int64)
    at = 0
    A_src, A_lab, A_dst, A_w, F_s, F_w = [], [], [], [], [], []
    for k in range(1, N + 1):
        rows = st["rows"][k]
        M = rows.shape[0]
        suf_k = st["suf"][k].astype(np.int64) if k > 1 else np.full(M, -1, np.int64)
        home = k > _copies(st) or bool(st["own"][k - 1])
        at = _failure_kernel(k, M, st["bo"][k], suf_k, is_ctx_flat, off, suf_flat, sid_flat, depth_flat, home,
                             back, cost, hist, depth, at)
        if k == 1:
            src = np.zeros(M, np.int64)
        else:
            gid, dest, pos = st["pgrp"][k]
            vals = np.zeros(dest.size, np.int64)
            for d, sel in enumerate(_split(dest, len(replies))):
                if sel.size:
                    vals[sel] = replies[d][k][pos[sel]]
            src = vals[gid]
        a_src, a_lab = np.empty(M, np.int64), np.empty(M, np.int32)
        a_dst, a_w = np.empty(M, np.int64), np.empty(M)
        f_s, f_w = np.empty(M, np.int64), np.empty(M)
        na, nf = 0, 0                   # a copy another partition answers for gives no arc here
        if home:
            na, nf = _arcs_kernel(np.ascontiguousarray(rows[:, -1]), st["lp"][k], src, suf_k, k, N, is_ctx_flat,
                                  off, suf_flat, sid_flat, bos, eos, a_src, a_lab, a_dst, a_w, f_s, f_w)
        A_src.append(a_src[:na]), A_lab.append(a_lab[:na]), A_dst.append(a_dst[:na]), A_w.append(a_w[:na])
        F_s.append(f_s[:nf]), F_w.append(f_w[:nf])
    out = {"src": np.concatenate(A_src), "lab": np.concatenate(A_lab), "dst": np.concatenate(A_dst),
           "w": np.concatenate(A_w), "final_state": np.concatenate(F_s), "final_w": np.concatenate(F_w),
           "back": back, "cost": cost, "hist": hist}
    start = int(st["sid"][1][bos - st["lo"]]) if st["lo"] <= bos < st["hi"] and (
        _copies(st) == 0 or st["own"][0]) else -1
    info = (int(out["src"].size), int(out["lab"].max(initial=0)), int(depth.max(initial=0)), start)
    return out, info


# --- the driver -----------------------------------------------------------------------------------

@nb.njit(cache=True)
def _insert_arcs(T, mask, L, src, lab, dst, w):
    """Rows [state * L + label, destination, -ln p] into the arc hash (``_build_label_hash``'s
    probe sequence); returns the index of an arc whose (state, label) is already there, or -1."""
    for a in range(src.shape[0]):
        key = src[a] * L + lab[a]
        j = np.int64(hash64(key) & np.uint64(mask))
        while T[j, 0] >= 0.0:
            if T[j, 0] == key:
                return a
            j = (j + 1) & mask
        T[j, 0] = key
        T[j, 1] = dst[a]
        T[j, 2] = w[a]
    return -1


def compile_parts(runner, words: list, N: int, layout, model, output) -> tuple[int, int]:
    """Compile the model partitions ``model`` (futures or checkpointed values of
    :func:`model_from_estimate`'s state, partition p the leaf p of the
    :class:`~fsmlearn.lm.scale.layout.Layout`) into the compiled-LM file ``output``, atomically.

    Returns:
        (states, arcs) of the machine.

    Raises:
        ArgumentError: a history missing from the model (named), no ``<s>``/``</s>``/``<unk>``.
    """
    from ..compiled import LM_FORMAT, LM_VERSION
    from ..mapfile import write_mapped_with
    wid = {w: i for i, w in enumerate(words)}
    for w in (BOS, EOS, UNK):
        if w not in wid:
            raise ArgumentError(f"the model has no {w} unigram")
    bos, eos, unk = wid[BOS], wid[EOS], wid[UNK]
    from .kn import _fix
    P = layout.size
    wf = runner.share(Words("\n".join(words)))
    pm = [runner.submit(prefix_map, [model[p]], layout) for p in range(P)]
    runner.wait(pm, "compiling: histories to their partitions", "partitions")
    pm = runner.checkpoint(pm)
    mk = [runner.submit(mark, [model[d]], [x[0][d] for x in pm], bos, wf) for d in range(P)]
    runner.wait(mk, "compiling: histories marked", "partitions")
    mk = runner.checkpoint(mk)
    runner.discard([x[0] for x in pm])
    firsts = np.concatenate([[1], 1 + np.cumsum([m[1] for m in mk])])
    n_states = int(firsts[-1])
    nu = [runner.submit(number, [model[p], mk[p][0]], int(firsts[p])) for p in range(P)]
    runner.wait(nu, "compiling: state ids", "partitions")
    nu = runner.checkpoint(nu)
    # the copies of split suffixes: histories and states as their owners numbered them
    is_ctx = {layout.leaves[p][0][-j:]: v for p, m in enumerate(mk) for j, v in m[2].items()}
    sid = {layout.leaves[p][0][-j:]: v for p, x in enumerate(nu) for j, v in x[2].items()}
    ar = [runner.submit(arcs, [model[s], mk[s][0], nu[s][0], pm[s][1], _fix(layout, s, {"is_ctx": is_ctx,
                                                                                        "sid": sid})],
                        [r[1][s] for r in nu], bos, eos)
          for s in range(P)]
    runner.wait(ar, "compiling: arcs", "partitions")
    ar = runner.checkpoint(ar)
    runner.discard([r[1] for r in nu] + [m[0] for m in mk])
    E = sum(a[1][0] for a in ar)
    L = max([a[1][1] for a in ar] + [0]) + 1
    max_back = max([a[1][2] for a in ar] + [0])
    start = max(a[1][3] for a in ar)
    if n_states * L >= 2 ** 53:
        raise ArgumentError(f"{n_states} states x {L} labels: too many for the arc hash's exact keys")
    cap = table_capacity(E)
    bv = ByteVocab(words)
    V = len(words)
    meta = dict(order=N, num_states=n_states, start=start, unk_label=unk + 1, num_labels=L, vocab_size=V,
                hash_mask=cap - 1, word_table_mask=int(bv.mask), max_back=int(max_back),
                num_arcs=int(E + n_states - 1))
    specs = dict(arcs=(np.float64, (cap, 3)), back=(np.int32, (n_states,)), back_cost=(np.float64, (n_states,)),
                 final=(np.float64, (n_states,)), hist_len=(np.int8, (n_states,)),
                 words=(np.uint8, (bv.wbuf.size,)), word_offsets=(np.int64, (V + 1,)),
                 word_table=(np.int64, (bv.table.size,)))

    last = [time.time()]

    def fill(v):
        v["arcs"][:] = -1.0
        v["back"][0], v["back_cost"][0], v["hist_len"][0] = -1, 0.0, 0
        v["final"][:] = np.inf
        for p, (a, _) in enumerate(ar):
            x = _load(a)                    # one partition's arcs, read from the scratch folder
            lo, n = int(firsts[p]), x["back"].size
            v["back"][lo:lo + n] = x["back"]
            v["back_cost"][lo:lo + n] = x["cost"]
            v["hist_len"][lo:lo + n] = x["hist"]
            v["final"][x["final_state"]] = x["final_w"]
            dup = _insert_arcs(v["arcs"], cap - 1, L, x["src"], x["lab"], x["dst"], x["w"])
            if dup >= 0:
                    raise ArgumentError(f"two arcs with label {words[int(x['lab'][dup]) - 1]!r} leave state "
                                    f"{int(x['src'][dup])}: an n-gram is listed twice")
            now = time.time()
            if now - last[0] >= 5 or p == P - 1:
                runner.say(f"compiling: the arcs of {p + 1}/{P} partitions written into the file")
                last[0] = now
        v["words"][:] = bv.wbuf
        v["word_offsets"][:] = bv.woff
        v["word_table"][:] = bv.table

    write_mapped_with(output, LM_FORMAT, LM_VERSION, meta, specs, fill)
    return n_states, int(E + n_states - 1)

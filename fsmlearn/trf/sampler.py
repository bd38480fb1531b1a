"""Trans-dimensional mixture sampling from q(j, x^j) (Wang, Ou and Tan, section 4.3, Table 1).

q(j, x^j; lambda, zeta) is proportional to pi0_j exp(-zeta_j) exp(lambda . f(x^j))
(equation 12).  One step of a chain (Algorithm 2 of Table 1, class-based; with one class it
is Algorithm 1):

* local jump: from length k propose j ~ Gamma(k, .) (equation 19, uniform on {k-1, k, k+1}
  within 1..M); for j = k + 1 draw a class c0 ~ Q_{k+1} and u from c0 by equation (35), so
  g_{k+1}(u | x) = Q_{k+1}(c0) g(u | x, c0) (36), accept by (20); for j = k - 1 accept by (21)
  with g_k(x_k | x_{1:k-1}) = Q_k(c_k) g(x_k | x_{1:k-1}, c_k) (37);
* Markov move: at every position i, draw c0 ~ Q_i, accept it as the new class with
  probability (34), then draw the token from its class given everything else.

Q_i(c) is the reduced model of Appendix C: exp of the summed weights of the features that
depend on x_i only through its class.  All conditionals come from the feature acceptor's
arcs, read through the *hole index*: for each template and each of its slots, the features
whose other tokens are fixed by the sentence, keyed by the template id and those tokens with
the slot's token replaced by HOLE; its entries (token or class, feature) are sorted by class
so the features of one class are a binary search away.  Changes of lambda . f(x) under a
jump only involve the firings at or after the changed position, so no sentence is ever
re-scored.

Chains run in parallel, one per thread (Appendix D), each with its own counter-based random
stream (splitmix64), so the samples do not depend on the number of threads.

Public names: HoleIndex, build_hole_index, Sampler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import ArgumentError
from ..fsm.buffers import upper_bound
from ..fsm.hashing import hash_insert, hash_lookup, new_table
from .features import HOLE, ID_BITS, KIND_C, MAX_SLOTS, FeatureSet, _fires, _key


@dataclass
class HoleIndex:
    """Features grouped by their key with one slot replaced by HOLE (see the module docstring).

    Attributes:
        table: (keys, vals, mask): hole key -> group.
        ptr: int64 [G+1]; group g's entries are ptr[g]:ptr[g+1].
        tok: int32 [n], the token (word slots) or class (class slots) filling the hole.
        cls: int32 [n], the class of tok (for class slots tok itself): entries sorted by it.
        feat: int64 [n], the feature index.
        class_entries: int64 [k], the entries of class slots.
    """
    table: tuple
    ptr: np.ndarray
    tok: np.ndarray
    cls: np.ndarray
    feat: np.ndarray
    class_entries: np.ndarray


def build_hole_index(fs: FeatureSet) -> HoleIndex:
    """The hole index of a feature set (slots holding <s>, </s> or their classes are never
    holes, so they are left out)."""
    t = fs.templates
    keys = fs.keys
    tid = keys >> (ID_BITS * MAX_SLOTS)
    V, C = fs.vocab_size, fs.n_classes
    hk_all, tok_all, cls_all, feat_all, kind_all = [], [], [], [], []
    feat_ids = np.arange(len(keys), dtype=np.int64)
    for t_id in np.unique(t.tid):
        r = int(np.flatnonzero(t.tid == t_id)[0])
        L = int(t.length[r])
        sel = tid == t_id
        k = keys[sel]
        f = feat_ids[sel]
        for s in range(L):
            shift = ID_BITS * (MAX_SLOTS - 1 - s)
            tok = (k >> shift) & HOLE
            is_c = t.kind[r, s] == KIND_C
            boundary = tok >= (C if is_c else V)
            hk = (k & ~(np.int64(HOLE) << shift)) | (np.int64(HOLE) << shift)
            keep = ~boundary
            hk_all.append(hk[keep])
            kind_all.append(np.full(int(keep.sum()), bool(is_c)))
            tok_all.append(tok[keep])
            cls_all.append(tok[keep] if is_c else fs.classes[tok[keep]])
            feat_all.append(f[keep])
    hk = np.concatenate(hk_all) if hk_all else np.zeros(0, np.int64)
    tok = np.concatenate(tok_all).astype(np.int32) if tok_all else np.zeros(0, np.int32)
    cl = np.concatenate(cls_all).astype(np.int32) if cls_all else np.zeros(0, np.int32)
    feat = np.concatenate(feat_all).astype(np.int64) if feat_all else np.zeros(0, np.int64)
    is_c = np.concatenate(kind_all) if kind_all else np.zeros(0, bool)
    order = np.lexsort((tok, cl, hk))
    hk, tok, cl, feat, is_c = hk[order], tok[order], cl[order], feat[order], is_c[order]
    starts = np.flatnonzero(np.r_[True, hk[1:] != hk[:-1]]) if len(hk) else np.zeros(0, np.int64)
    ptr = np.r_[starts, len(hk)].astype(np.int64)
    tk, tv, mask = new_table(len(starts))
    _insert_groups(hk[starts] if len(hk) else hk, tk, tv, mask)
    return HoleIndex((tk, tv, mask), ptr, tok, cl, feat, np.flatnonzero(is_c).astype(np.int64))


@nb.njit(cache=True)
def _insert_groups(gkeys, tk, tv, mask):
    for g in range(gkeys.shape[0]):
        hash_insert(tk, tv, mask, gkeys[g], g)


# ---------------------------------------------------------------------------------------
# random numbers: splitmix64 per chain


@nb.njit(cache=True)
def _rand(state, c):
    """A uniform double in [0, 1) from chain c's stream."""
    state[c] += np.uint64(0x9E3779B97F4A7C15)
    z = state[c]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True)
def _max_and_sum_exp(logits, n):
    """(max of logits[:n], sum of exp(logits[:n] - max))."""
    mx = -np.inf
    for i in range(n):
        if logits[i] > mx:
            mx = logits[i]
    tot = 0.0
    for i in range(n):
        tot += math.exp(logits[i] - mx)
    return mx, tot


@nb.njit(cache=True)
def _draw(logits, n, u):
    """Index drawn from softmax(logits[:n]) with the uniform u; returns (index, log-sum-exp)."""
    mx, tot = _max_and_sum_exp(logits, n)
    target = u * tot
    acc = 0.0
    pick = n - 1
    for i in range(n):
        acc += math.exp(logits[i] - mx)
        if acc > target:
            pick = i
            break
    return pick, mx + math.log(tot)


@nb.njit(cache=True)
def _lse(logits, n):
    mx, tot = _max_and_sum_exp(logits, n)
    return mx + math.log(tot)


# ---------------------------------------------------------------------------------------
# conditionals at one position


@nb.njit(cache=True)
def _conditional(y, n_pad, p, cls, C, tid, length, offset, kind, minoff,
                 htk, htv, hmask, hptr, hcls, htok, hfeat, hval, cscore, active):
    """Class scores (features depending on x_p through its class) into cscore[:C]; the hole
    groups of word slots into active; returns the number of active groups."""
    for c in range(C):
        cscore[c] = 0.0
    na = 0
    R = tid.shape[0]
    for r in range(R):
        for s in range(length[r]):
            i = p - offset[r, s]
            if not _fires(r, i, n_pad, minoff, length):
                continue
            g = hash_lookup(htk, htv, hmask, _key(y, cls, i, r, tid, length, offset, kind, s))
            if g < 0:
                continue
            if kind[r, s] == KIND_C:
                for e in range(hptr[g], hptr[g + 1]):
                    cscore[htok[e]] += hval[e]
            else:
                active[na] = g
                na += 1
    return na


@nb.njit(cache=True)
def _class_range(hcls, lo, hi, c):
    """The entries lo:hi (sorted by class) whose class is c."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) >> 1
        if hcls[mid] < c:
            a = mid + 1
        else:
            b = mid
    return a, upper_bound(hcls, a, hi, c)


@nb.njit(cache=True)
def _word_scores(c, active, na, hptr, hcls, htok, hfeat, lam, mptr, mpos, wscore):
    """Scores of the word features for the members of class c into wscore[:size]; the size."""
    size = mptr[c + 1] - mptr[c]
    for k in range(size):
        wscore[k] = 0.0
    for a in range(na):
        g = active[a]
        lo, hi = _class_range(hcls, hptr[g], hptr[g + 1], c)
        for e in range(lo, hi):
            wscore[mpos[htok[e]]] += lam[hfeat[e]]
    return size


@nb.njit(cache=True)
def _score_from(y, n_pad, i0, cls, tid, length, offset, kind, minoff, ftk, ftv, fmask, lam):
    """Sum of lambda over the firings at positions i0..n_pad-1."""
    acc = 0.0
    for i in range(max(i0, 1), n_pad):
        for r in range(tid.shape[0]):
            if _fires(r, i, n_pad, minoff, length):
                f = hash_lookup(ftk, ftv, fmask, _key(y, cls, i, r, tid, length, offset, kind, -1))
                if f >= 0:
                    acc += lam[f]
    return acc


@nb.njit(cache=True)
def _log_gamma_ratio(k, j, M):
    """ln Gamma(j, k) - ln Gamma(k, j) for the jump k -> j (equation 19)."""
    gk = 0.5 if (k == 1 or k == M) else 1.0 / 3.0
    gj = 0.5 if (j == 1 or j == M) else 1.0 / 3.0
    return math.log(gj) - math.log(gk)


@nb.njit(cache=True)
def _chain(ch, steps, y, n_len, M, len_w, cls, C, members, mptr, mpos,
           tid, length, offset, kind, minoff, ftk, ftv, fmask,
           htk, htv, hmask, hptr, hcls, htok, hfeat, hval, lam, rng, out_tok, out_len, stats):
    """Run chain ch for ``steps`` steps from y (padded, length n_len); write each step's sample."""
    cscore = np.empty(C)
    maxc = 0
    for c in range(C):
        maxc = max(maxc, mptr[c + 1] - mptr[c])
    wscore = np.empty(maxc)
    wscore2 = np.empty(maxc)
    active = np.empty(tid.shape[0] * 4 + 4, np.int64)
    k = n_len
    for t in range(steps):
        # ---- local jump
        u1 = _rand(rng, ch)
        if M == 1:
            j = 1
        elif k == 1:
            j = 1 if u1 < 0.5 else 2
        elif k == M:
            j = M - 1 if u1 < 0.5 else M
        else:
            j = k - 1 if u1 < 1.0 / 3.0 else (k if u1 < 2.0 / 3.0 else k + 1)
        if j == k + 1:
            eos = y[k + 1]
            y[k + 1] = 0
            y[k + 2] = eos
            na = _conditional(y, k + 3, k + 1, cls, C, tid, length, offset, kind, minoff,
                              htk, htv, hmask, hptr, hcls, htok, hfeat, hval, cscore, active)
            c0, lq = _draw(cscore, C, _rand(rng, ch))
            size = _word_scores(c0, active, na, hptr, hcls, htok, hfeat, lam, mptr, mpos, wscore)
            w, lw = _draw(wscore, size, _rand(rng, ch))
            u = members[mptr[c0] + w]
            y[k + 1] = u
            log_g = cscore[c0] - lq + wscore[w] - lw
            new = _score_from(y, k + 3, k + 1, cls, tid, length, offset, kind, minoff, ftk, ftv, fmask, lam)
            y[k + 1] = eos
            old = _score_from(y, k + 2, k + 1, cls, tid, length, offset, kind, minoff, ftk, ftv, fmask, lam)
            log_a = _log_gamma_ratio(k, j, M) + len_w[j] - len_w[k] + new - old - log_g
            stats[ch, 0] += 1
            if math.log(_rand(rng, ch) + 1e-300) < log_a:
                y[k + 1] = u
                y[k + 2] = eos
                k = j
                stats[ch, 1] += 1
        elif j == k - 1:
            na = _conditional(y, k + 2, k, cls, C, tid, length, offset, kind, minoff,
                              htk, htv, hmask, hptr, hcls, htok, hfeat, hval, cscore, active)
            lq = _lse(cscore, C)
            xk = y[k]
            c = cls[xk]
            size = _word_scores(c, active, na, hptr, hcls, htok, hfeat, lam, mptr, mpos, wscore)
            lw = _lse(wscore, size)
            log_g = cscore[c] - lq + wscore[mpos[xk]] - lw
            old = _score_from(y, k + 2, k, cls, tid, length, offset, kind, minoff, ftk, ftv, fmask, lam)
            eos = y[k + 1]
            y[k] = eos
            new = _score_from(y, k + 1, k, cls, tid, length, offset, kind, minoff, ftk, ftv, fmask, lam)
            log_a = _log_gamma_ratio(k, j, M) + len_w[j] - len_w[k] + new - old + log_g
            stats[ch, 2] += 1
            if math.log(_rand(rng, ch) + 1e-300) < log_a:
                k = j
                stats[ch, 3] += 1
            else:
                y[k] = xk
        # ---- Markov move: class-based Gibbs over positions 1..k
        n_pad = k + 2
        for p in range(1, k + 1):
            na = _conditional(y, n_pad, p, cls, C, tid, length, offset, kind, minoff,
                              htk, htv, hmask, hptr, hcls, htok, hfeat, hval, cscore, active)
            cur = cls[y[p]]
            if C > 1:
                c0, lq = _draw(cscore, C, _rand(rng, ch))
            else:
                c0 = 0
            if c0 != cur:
                s0 = _word_scores(c0, active, na, hptr, hcls, htok, hfeat, lam, mptr, mpos, wscore)
                s1 = _word_scores(cur, active, na, hptr, hcls, htok, hfeat, lam, mptr, mpos, wscore2)
                # (34): the class parts of Q and p cancel
                log_a = _lse(wscore, s0) - _lse(wscore2, s1)
                stats[ch, 4] += 1
                if math.log(_rand(rng, ch) + 1e-300) < log_a:
                    stats[ch, 5] += 1
                    w, _ = _draw(wscore, s0, _rand(rng, ch))
                    y[p] = members[mptr[c0] + w]
                else:
                    w, _ = _draw(wscore2, s1, _rand(rng, ch))
                    y[p] = members[mptr[cur] + w]
            else:
                s1 = _word_scores(cur, active, na, hptr, hcls, htok, hfeat, lam, mptr, mpos, wscore)
                w, _ = _draw(wscore, s1, _rand(rng, ch))
                y[p] = members[mptr[cur] + w]
        out_len[ch, t] = k
        for p in range(k):
            out_tok[ch, t, p] = y[p + 1]
    return k


@nb.njit(cache=True, parallel=True)
def _run_chains(steps, Y, L, M, len_w, cls, C, members, mptr, mpos,
                tid, length, offset, kind, minoff, ftk, ftv, fmask,
                htk, htv, hmask, hptr, hcls, htok, hfeat, hval, lam, rng, out_tok, out_len, stats):
    for ch in nb.prange(Y.shape[0]):
        L[ch] = _chain(ch, steps, Y[ch], L[ch], M, len_w, cls, C, members, mptr, mpos,
                       tid, length, offset, kind, minoff, ftk, ftv, fmask,
                       htk, htv, hmask, hptr, hcls, htok, hfeat, hval, lam, rng, out_tok, out_len, stats)


@nb.njit(cache=True, parallel=True)
def _gather(lam, feat, where, out):
    """out[where] = lam[feat[where]], in parallel."""
    for k in nb.prange(where.shape[0]):
        e = where[k]
        out[e] = lam[feat[e]]


class Sampler:
    """Parallel chains of trans-dimensional mixture sampling for one feature set.

    Args:
        fs: the feature set.
        max_length: M, the largest length the chains visit.
        chains: the number of chains (run on the numba threads; Appendix D).
        seed: seed of the chains' random streams.

    The chains start at length 1 with the lowest token id of class 0 (or where
    :meth:`start_from` puts them) and keep their state between calls.
    """

    def __init__(self, fs: FeatureSet, max_length: int, chains: int = 2, seed: int = 0,
                 holes: HoleIndex | None = None):
        if max_length < 1:
            raise ArgumentError(f"TRF sampler: the largest length must be >= 1, got {max_length}")
        if chains < 1:
            raise ArgumentError(f"TRF sampler: at least one chain, got {chains}")
        self.fs = fs
        self.M = int(max_length)
        self.holes = holes if holes is not None else build_hole_index(fs)
        V, C = fs.vocab_size, fs.n_classes
        cls = fs.classes[:V]
        order = np.lexsort((np.arange(V), cls))
        self.members = order.astype(np.int32)
        self.mptr = np.zeros(C + 1, np.int64)
        np.cumsum(np.bincount(cls, minlength=C), out=self.mptr[1:])
        if np.any(np.diff(self.mptr) == 0):
            raise ArgumentError("TRF sampler: every class needs at least one token")
        self.mpos = np.empty(V + 2, np.int64)
        self.mpos[order] = np.arange(V) - self.mptr[cls[order]]
        self.mpos[V:] = 0
        self.Y = np.zeros((chains, self.M + 3), np.int32)
        self.Y[:, 0] = fs.bos
        self.Y[:, 1] = self.members[0]
        self.Y[:, 2] = fs.eos
        self.L = np.ones(chains, np.int64)
        # independent streams per (seed, chain): numpy's SeedSequence hashes the pair
        self.rng = np.random.SeedSequence([int(seed) % 2**63]).generate_state(chains, dtype=np.uint64)
        self.stats = np.zeros((chains, 6), np.int64)
        self._hv = None

    def start_from(self, sentences) -> None:
        """Set each chain's state to one of ``sentences`` (token sequences of length 1..M),
        e.g. training sentences, instead of the one-token start."""
        if len(sentences) != self.chains:
            raise ArgumentError(f"TRF sampler: {self.chains} starting sentences needed, got {len(sentences)}")
        for c, x in enumerate(sentences):
            x = np.asarray(x, np.int32)
            if not 1 <= len(x) <= self.M or x.min() < 0 or x.max() >= self.fs.vocab_size:
                raise ArgumentError(f"TRF sampler: starting sentence {c} must have 1..{self.M} tokens "
                                    f"with ids 0..{self.fs.vocab_size - 1}")
            self.Y[c, 0] = self.fs.bos
            self.Y[c, 1:len(x) + 1] = x
            self.Y[c, len(x) + 1] = self.fs.eos
            self.L[c] = len(x)

    def _hval(self, lam):
        """lambda of the class-slot entries of the hole index, in the index's order (the class
        scan of every conditional then reads memory in sequence)."""
        if self._hv is None:
            self._hv = np.zeros(len(self.holes.feat))
        _gather(lam, self.holes.feat, self.holes.class_entries, self._hv)
        return self._hv

    @property
    def chains(self) -> int:
        return self.Y.shape[0]

    def sample(self, steps: int, lam: np.ndarray, len_w: np.ndarray):
        """Run every chain ``steps`` steps; returns (tokens int32 [chains*steps, M], lengths
        int64 [chains*steps]), chain by chain.

        Args:
            steps: steps per chain (K / chains in AugSA).
            lam: float64 [d], the feature weights.
            len_w: float64 [M+1], ln pi0_j - zeta_j for j = 1..M (entry 0 unused).
        """
        lam = np.ascontiguousarray(lam, np.float64)
        len_w = np.ascontiguousarray(len_w, np.float64)
        if lam.shape != (self.fs.num_features,) or len_w.shape != (self.M + 1,):
            raise ArgumentError(f"TRF sampler: lambda must have {self.fs.num_features} entries and the "
                                f"length weights {self.M + 1}; got {lam.shape}, {len_w.shape}")
        n = self.chains
        out_tok = np.zeros((n, steps, self.M), np.int32)
        out_len = np.zeros((n, steps), np.int64)
        fs, t, h = self.fs, self.fs.templates, self.holes
        _run_chains(int(steps), self.Y, self.L, self.M, len_w, fs.classes, fs.n_classes, self.members, self.mptr,
                    self.mpos, t.tid, t.length, t.offset, t.kind, t.minoff, *fs.table, *h.table, h.ptr, h.cls,
                    h.tok, h.feat, self._hval(lam), lam, self.rng, out_tok, out_len, self.stats)
        return out_tok.reshape(n * steps, self.M), out_len.reshape(n * steps)

    def acceptance(self) -> dict:
        """Acceptance rates so far: jumps up, jumps down, class moves (34)."""
        s = self.stats.sum(axis=0)
        rate = lambda a, b: float(s[b] / s[a]) if s[a] else float("nan")  # noqa: E731
        return {"up": rate(0, 1), "down": rate(2, 3), "class": rate(4, 5),
                "jump": float((s[1] + s[3]) / max(1, s[0] + s[2]))}

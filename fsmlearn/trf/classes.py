"""Word classes by exchange clustering (Martin, Liermann and Ney 1998).

Martin, Liermann and Ney (1998), "Algorithms for bigram and trigram word
clustering", Speech Communication 24(1), section 2 (the bigram criterion,
their eq. (5)) and the exchange algorithm of their section 3: a partition of
the vocabulary into classes c(w) is scored by the maximum-likelihood class
bigram model p(w_i | w_{i-1}) = p(c(w_i) | c(w_{i-1})) p(w_i | c(w_i)), whose
log-likelihood on the training bigrams is, up to the constant
sum_w N(w) log N(w),

    F = sum_{c,c'} N(c, c') log N(c, c') - sum_c N_l(c) log N_l(c)
        - sum_c N_r(c) log N_r(c)                                   (Martin et al., eq. 5)

with N(c, c') the class bigram counts and N_l(c) = sum_c' N(c, c'),
N_r(c') = sum_c N(c, c') the counts of c as left and as right member of a
bigram.  The exchange algorithm visits the words in order of decreasing
frequency and moves each to the class that most increases F, pass after
pass, until a pass moves no word (or a pass limit is reached).

Sentence boundaries.  Every sentence s = w_1 .. w_n is counted as the n + 1
bigrams (<s>, w_1), (w_1, w_2), ..., (w_n, </s>): the corpus is read as
``B s_1 B s_2 B ... s_K B`` with one boundary token B that plays </s> on the
left of a bigram and <s> on its right.  B is in a class of its own (index
``n_classes`` of the count matrix) and is never moved.  Since every token is
followed by one token (or </s>) and preceded by one (or <s>), N_l(c) = N_r(c)
= N(c), the number of tokens of class c (the boundary class has K, the
number of sentences), so F = sum N(c, c') log N(c, c') - 2 sum_c N(c) log N(c),
boundary class included.

Cost.  For the word w taken out of its class a, its counts to each class,
r_w(c) = sum_{v: c(v) = c} N(w, v) and l_w(c) = sum_{u: c(u) = c} N(u, w), are
gathered once from its successor and predecessor lists (O(deg w)); the gain of
putting w into class b then touches only row b and column b of the class
bigram matrix at the classes w has counts with, so all C targets cost
O(C * d_w) with d_w <= C + 1 the number of such classes, and a pass
O(sum_w C d_w) <= O(V C^2).  x log x is read from a table over the integer
counts 0 .. (number of bigrams), never computed in the loop.  A move is made
only when it gains more than ``1e-10 * T log T`` (T the number of bigrams), a
margin above the rounding of the gains; a move that would empty a class is
never made (it merges two classes, which cannot increase F), so every class
given keeps at least one word.

Public names: ClusterInfo, exchange_clusters, class_bigram_criterion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import ArgumentError

__all__ = ["ClusterInfo", "exchange_clusters", "class_bigram_criterion"]

_INITS = ("top", "round-robin", "random")


@dataclass
class ClusterInfo:
    """Per-pass figures of :func:`exchange_clusters`.

    Attributes:
        initial_criterion: F (module docstring) of the initial partition, natural log.
        criterion: list of float, F after each pass.
        moves: list of int, the words moved in each pass.
        seconds: list of float, the wall time of each pass.
        converged: True when the last pass moved no word.
        n_bigrams: int, the number of bigrams counted (tokens + sentences).
        constant: float, sum_w N(w) log N(w): F + constant is the training log-likelihood of
            the maximum-likelihood class bigram model (so its training perplexity is
            exp(-(F + constant) / n_bigrams)).
    """
    initial_criterion: float
    criterion: list = field(default_factory=list)
    moves: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    converged: bool = False
    n_bigrams: int = 0
    constant: float = 0.0

    def perplexity(self) -> float:
        """The training perplexity of the class bigram model after the last pass (or the
        initial partition when no pass ran)."""
        f = self.criterion[-1] if self.criterion else self.initial_criterion
        return float(np.exp(-(f + self.constant) / self.n_bigrams))


def _bigrams(sentences, vocab_size: int):
    """Count the bigrams of the corpus read as ``B s_1 B ... s_K B`` (B = vocab_size).

    Returns:
        (left int64 [P], right int64 [P], count int64 [P], word_count int64 [V], n_sentences):
        the P distinct bigrams over the ids 0 .. V (V is the boundary), sorted by
        (left, right), and the token count of each word.
    """
    V = vocab_size
    parts = []
    n_sent = 0
    for i, s in enumerate(sentences):
        a = np.asarray(s)
        if a.ndim != 1:
            raise ArgumentError(f"sentence {i} must be a 1-d array of token ids, got shape {a.shape}")
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise ArgumentError(f"sentence {i} must hold integer token ids, got dtype {a.dtype}")
        a = a.astype(np.int64, copy=False)
        if a.size and (a.min() < 0 or a.max() >= V):
            bad = a[(a < 0) | (a >= V)][0]
            raise ArgumentError(f"sentence {i} holds token id {int(bad)} outside 0 .. {V - 1}")
        parts.append(np.array([V], np.int64))
        parts.append(a)
        n_sent += 1
    if n_sent == 0:
        raise ArgumentError("sentences is empty: no bigram to cluster")
    parts.append(np.array([V], np.int64))
    seq = np.concatenate(parts)
    keys = seq[:-1] * (V + 1) + seq[1:]
    uniq, cnt = np.unique(keys, return_counts=True)
    word_count = np.bincount(seq[seq < V], minlength=V).astype(np.int64)
    return uniq // (V + 1), uniq % (V + 1), cnt.astype(np.int64), word_count, n_sent


def _xlogx_table(n: int) -> np.ndarray:
    """float64 [n + 1]: x log x for x = 0 .. n (0 log 0 = 0)."""
    x = np.arange(n + 1, dtype=np.float64)
    out = np.zeros(n + 1)
    out[1:] = x[1:] * np.log(x[1:])
    return out


@nb.njit(cache=True)
def _class_counts(cls, left, right, count, word_count, n_sent, n_classes):
    """The class bigram matrix int64 [C + 1, C + 1] and class counts int64 [C + 1]."""
    M = np.zeros((n_classes + 1, n_classes + 1), np.int64)
    for k in range(left.shape[0]):
        M[cls[left[k]], cls[right[k]]] += count[k]
    Nc = np.zeros(n_classes + 1, np.int64)
    for w in range(word_count.shape[0]):
        Nc[cls[w]] += word_count[w]
    Nc[n_classes] = n_sent
    return M, Nc


@nb.njit(cache=True)
def _criterion(M, Nc, xl):
    """F = sum x log x over M minus 2 sum x log x over Nc (table lookups)."""
    f = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            f += xl[M[i, j]]
    for i in range(Nc.shape[0]):
        f -= 2.0 * xl[Nc[i]]
    return f


@nb.njit(cache=True)
def _gain(b, M, Nc, xl, rc, lc, tr, nr, tl, nl, s, n):
    """The change of F when the word (out of every class; counts rc, lc, self count s,
    token count n) is put into class b."""
    g = 0.0
    for i in range(nr):
        c = tr[i]
        if c != b:
            x = M[b, c]
            g += xl[x + rc[c]] - xl[x]
    for i in range(nl):
        c = tl[i]
        if c != b:
            x = M[c, b]
            g += xl[x + lc[c]] - xl[x]
    x = M[b, b]
    g += xl[x + rc[b] + lc[b] + s] - xl[x]
    x = Nc[b]
    g -= 2.0 * (xl[x + n] - xl[x])
    return g


@nb.njit(cache=True, inline="always")
def _neighbour_classes(w, ptr, nbr, cnt, cls, acc, touched):
    """Add word w's neighbour counts (CSR ptr, nbr, cnt) into acc by the neighbours' classes,
    listing in ``touched`` each class met while its sum is still 0; returns how many it listed."""
    n = 0
    for k in range(ptr[w], ptr[w + 1]):
        c = cls[nbr[k]]
        if acc[c] == 0:
            touched[n] = c
            n += 1
        acc[c] += cnt[k]
    return n


@nb.njit(cache=True)
def _exchange_pass(order, cls, sp, sv, sc, pp, pv, pc, selfc, word_count, M, Nc, members, xl, tol):
    """One exchange pass over the words in ``order``; updates cls, M, Nc, members in place.

    Returns:
        The number of words moved.
    """
    C = Nc.shape[0] - 1                       # word classes 0 .. C-1; C is the boundary
    rc = np.zeros(C + 1, np.int64)
    lc = np.zeros(C + 1, np.int64)
    tr = np.empty(C + 1, np.int64)
    tl = np.empty(C + 1, np.int64)
    moves = 0
    for w in order:
        n = word_count[w]
        a = cls[w]
        if n == 0 or members[a] == 1:
            continue
        nr = _neighbour_classes(w, sp, sv, sc, cls, rc, tr)
        nl = _neighbour_classes(w, pp, pv, pc, cls, lc, tl)
        s = selfc[w]
        # take w out of a
        for i in range(nr):
            c = tr[i]
            M[a, c] -= rc[c]
        for i in range(nl):
            c = tl[i]
            M[c, a] -= lc[c]
        M[a, a] -= s
        Nc[a] -= n
        # the best class to put it back into
        ga = _gain(a, M, Nc, xl, rc, lc, tr, nr, tl, nl, s, n)
        best = a
        gbest = ga
        for b in range(C):
            if b == a:
                continue
            g = _gain(b, M, Nc, xl, rc, lc, tr, nr, tl, nl, s, n)
            if g > gbest:
                gbest = g
                best = b
        t = a
        if best != a and gbest > ga + tol:
            t = best
            moves += 1
            members[a] -= 1
            members[t] += 1
            cls[w] = t
        for i in range(nr):
            c = tr[i]
            M[t, c] += rc[c]
        for i in range(nl):
            c = tl[i]
            M[c, t] += lc[c]
        M[t, t] += s
        Nc[t] += n
        for i in range(nr):
            rc[tr[i]] = 0
        for i in range(nl):
            lc[tl[i]] = 0
    return moves


def _csr(rows, cols, vals, n_rows):
    """CSR (ptr int64 [n_rows + 1], cols, vals) of entries given with rows sorted."""
    ptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows)[:n_rows], out=ptr[1:])
    return ptr, cols, vals


def _initial(init, order, vocab_size, n_classes, seed):
    cls = np.empty(vocab_size + 1, np.int64)
    if init == "top":
        rank = np.arange(vocab_size)
        cls[order] = np.minimum(rank, n_classes - 1)
    elif init == "round-robin":
        cls[order] = np.arange(vocab_size) % n_classes
    else:
        rng = np.random.default_rng(seed)
        perm = rng.permutation(vocab_size)
        cls[perm] = np.arange(vocab_size) % n_classes
    cls[vocab_size] = n_classes
    return cls


def _check_int(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{name} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        rng = f"{low} .. {high}" if high is not None else f">= {low}"
        raise ArgumentError(f"{name} must be in {rng}, got {value}")
    return int(value)


def exchange_clusters(sentences, vocab_size: int, n_classes: int = 200, *, max_passes: int = 20,
                      init: str = "top", seed: int = 0, progress=None):
    """Cluster the words of a corpus into classes by the exchange algorithm (bigram criterion).

    Maximises F (the module docstring; Martin et al. 1998, eq. 5) over partitions of the
    ids 0 .. vocab_size - 1 into ``n_classes`` classes, sentence boundaries counted as a
    fixed class of their own.  Words are visited in order of decreasing frequency (ties
    by id), each moved to the class that most increases F, until a pass moves no word or
    ``max_passes`` passes have run.  Words that never occur keep their initial class.

    Args:
        sentences: iterable of integer arrays [n_s] (any int dtype), token ids in
            0 .. vocab_size - 1; one per sentence, without boundary markers.
        vocab_size: V, the number of word ids.
        n_classes: C, 2 .. V.
        max_passes: the most passes to run (>= 1).
        init: the initial partition, by the words' frequency rank r (0 = most frequent):
            ``"top"`` (Martin et al.: class min(r, C - 1), the C - 1 most frequent words
            each in a class of their own, the rest in the last), ``"round-robin"`` (class
            r mod C) or ``"random"`` (a random permutation of the ids dealt round-robin,
            drawn from ``seed``).
        seed: the seed of ``init="random"`` (unused otherwise: the algorithm is
            deterministic).
        progress: optional callable(str), called once per pass with a line of figures.

    Returns:
        (classes, info): classes is int32 [V], the class 0 .. C - 1 of every id; info a
        :class:`ClusterInfo` with the per-pass moves, F and seconds.

    Raises:
        ArgumentError: vocab_size < 2, n_classes outside 2 .. V, max_passes < 1, an
            unknown init, a sentence that is not a 1-d integer array or holds an id
            outside 0 .. V - 1, or no sentence at all.
    """
    V = _check_int("vocab_size", vocab_size, 2)
    C = _check_int("n_classes", n_classes, 2, V)
    max_passes = _check_int("max_passes", max_passes, 1)
    if init not in _INITS:
        raise ArgumentError(f"init must be one of {', '.join(_INITS)}, got {init!r}")
    left, right, count, word_count, n_sent = _bigrams(sentences, V)

    self_mask = left == right
    selfc = np.zeros(V + 1, np.int64)
    selfc[left[self_mask]] = count[self_mask]
    keep = ~self_mask
    sl, sr, sc = left[keep], right[keep], count[keep]              # sorted by (left, right)
    sp, sv, scnt = _csr(sl, sr, sc, V)
    po = np.lexsort((sl, sr))                                         # by (right, left)
    pp, pv, pcnt = _csr(sr[po], sl[po], sc[po], V)
    sv, scnt = np.ascontiguousarray(sv), np.ascontiguousarray(scnt)
    pv, pcnt = np.ascontiguousarray(pv), np.ascontiguousarray(pcnt)

    n_bigrams = int(count.sum())
    xl = _xlogx_table(n_bigrams)
    tol = 1e-10 * max(1.0, float(xl[-1]))
    order = np.argsort(-word_count, kind="stable").astype(np.int64)
    cls = _initial(init, order, V, C, seed)
    M, Nc = _class_counts(cls, left, right, count, word_count, n_sent, C)
    members = np.bincount(cls[:V], minlength=C).astype(np.int64)

    info = ClusterInfo(initial_criterion=float(_criterion(M, Nc, xl)), n_bigrams=n_bigrams,
                       constant=float(xl[word_count].sum()))
    active = order[word_count[order] > 0]
    for p in range(max_passes):
        t0 = time.perf_counter()
        moved = int(_exchange_pass(active, cls, sp, sv, scnt, pp, pv, pcnt, selfc, word_count,
                                   M, Nc, members, xl, tol))
        f = float(_criterion(M, Nc, xl))
        dt = time.perf_counter() - t0
        info.moves.append(moved)
        info.criterion.append(f)
        info.seconds.append(dt)
        if progress is not None:
            progress(f"exchange pass {p + 1}/{max_passes}: {moved} words moved, F = {f:.6g}, "
                     f"perplexity {info.perplexity():.2f}, {dt:.2f} s")
        if moved == 0:
            info.converged = True
            break
    return cls[:V].astype(np.int32), info


def class_bigram_criterion(sentences, vocab_size: int, classes) -> float:
    """F (module docstring) of a given partition, computed directly with numpy.

    Args:
        sentences: iterable of integer arrays [n_s], ids in 0 .. vocab_size - 1.
        vocab_size: V.
        classes: int array [V], the class of every id (any non-negative ints).

    Returns:
        F, a float (natural log), boundaries a class of their own.

    Raises:
        ArgumentError: as :func:`exchange_clusters` for the sentences; classes not of
            shape [V] or with a negative entry.
    """
    V = _check_int("vocab_size", vocab_size, 2)
    classes = np.asarray(classes)
    if classes.shape != (V,) or not np.issubdtype(classes.dtype, np.integer) or (classes < 0).any():
        raise ArgumentError(f"classes must be non-negative ints of shape ({V},), got shape "
                            f"{classes.shape} dtype {classes.dtype}")
    left, right, count, word_count, n_sent = _bigrams(sentences, V)
    C = int(classes.max()) + 1
    cls = np.append(classes.astype(np.int64), C)
    M = np.zeros((C + 1, C + 1), np.float64)
    np.add.at(M, (cls[left], cls[right]), count)
    N = np.bincount(cls[:V], weights=word_count, minlength=C + 1)
    N[C] = n_sent

    def xlogx(x):
        x = x[x > 0]
        return float((x * np.log(x)).sum())

    return xlogx(M.ravel()) - 2.0 * xlogx(N)

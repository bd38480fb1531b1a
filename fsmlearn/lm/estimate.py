"""Estimating backoff n-gram models from counts.

Three interpolated estimators share one skeleton.  For every order k and
every context h (the first k-1 words), with counts a(h x) of the k-grams that
extend h::

    u(w | h)   = discounted count of (h w) / sum_x a(h x)
    gamma(h)   = mass left over / sum_x a(h x)
    p(w | h)   = u(w | h) + gamma(h) p(w | h')      (h' = h without its first word)

and the unigram distribution interpolated with the uniform distribution over
the vocabulary (``<s>`` excluded).  The ARPA backoff weight of h is gamma(h).

* ``kneser-ney``: interpolated modified Kneser-Ney (Chen and Goodman 1998) as
  in KenLM's lmplz (Heafield et al. 2013): the highest order uses raw counts,
  lower orders continuation counts (the number of distinct words seen before
  the n-gram), except n-grams that start with ``<s>``, which keep their raw
  counts; three discounts per order D1, D2, D3+ from the count-of-counts
  t1..t4 of those adjusted counts (Y = t1 / (t1 + 2 t2), Dj = j - (j+1) Y
  t_{j+1} / t_j), with a fallback (default 0.5 1 1.5) when a discount is out
  of range, like lmplz's ``--discount_fallback``.
* ``witten-bell``: u = c / (c(h) + T(h)), gamma = T(h) / (c(h) + T(h)), with T
  the number of distinct words after h.
* ``absolute``: absolute discounting (Ney, Essen and Kneser 1994) with one
  discount D at every order, and additive smoothing s of the unigrams
  (p0(w) = (c(w) + s) / (N + s |V|)); the reified-context-models decipherment
  uses D = 0.25, s = 0.01.

Count cutoffs prune n-grams whose raw count is below their order's cutoff
(never unigrams; every 2-gram with ``keep_bigrams``, as Smith and Eisner do).
Pruned n-grams keep their interpolated probabilities; backoff weights are
then recomputed so that every context stays normalised:
alpha(h) = (1 - sum_kept p(w | h)) / (1 - sum_kept p(w | h')).  Statistics
(continuation counts, discounts) come from the counts given.

Counts may arrive cut already (Web1T; ``counts.cutoffs`` > 1 at some order
>= 2).  Then a context's total is its own raw count, not the sum of its kept
extensions, so frequent contexts do not pretend their few kept continuations
are all there is.  By default (``cut_mass="backoff"``) the cut extensions'
mass goes to the backoff weight alone, as for n-grams ``cutoffs`` prunes:
the kept extensions keep their interpolated probabilities (with the discount
mass of the kept ones) and alpha(h) is the normalising ratio above.  Putting
it into the interpolation weight instead (``cut_mass="interpolate"``) hands
it to every word of the lower order, the ones the context already lists
included: on 5-grams at cutoff 20 of a 200M-token corpus that made the
model expect "the" 1.35 times and "/" 21 times as often as the corpus has
them (L1 distance between the model's and the corpus's word distributions
0.33, against 0.14 with the default).  And since continuation counts cannot
be recovered from cut counts,
``kneser-ney`` uses raw counts at every order (modified absolute discounting
with Kneser-Ney's three discounts per order, the fallback where the cut
count-of-counts leave them out of range).

Public names: estimate, kneser_ney_discounts, discounts_from_counts_of_counts, check_options, check_kn_discounts,
cutoff_per_order, METHODS.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..errors import ArgumentError
from .counts import NGramCounts
from .index import NGramIndex, NGramIndexError
from .model import BOS, EOS, IMPOSSIBLE, UNK, BackoffLM

METHODS = ("kneser-ney", "witten-bell", "absolute")
_FALLBACK = (0.5, 1.0, 1.5)


def kneser_ney_discounts(adjusted: np.ndarray, fallback=_FALLBACK, order: int = 0):
    """(D1, D2, D3+) from adjusted counts; ``fallback`` when out of range (or None to raise)."""
    t = [int(np.count_nonzero(adjusted == j)) for j in (1, 2, 3, 4)]
    return discounts_from_counts_of_counts(t, fallback, order)


def discounts_from_counts_of_counts(t, fallback=_FALLBACK, order: int = 0):
    """(D1, D2, D3+) and ``t`` from the count-of-counts t1..t4 (Chen and Goodman 1998, eq. 26 of
    the technical report: Y = t1 / (t1 + 2 t2), Dj = j - (j + 1) Y t_{j+1} / t_j), ``fallback``
    when out of range (or None to raise)."""
    t = [int(x) for x in t]
    ok = all(x > 0 for x in t)
    if ok:
        Y = t[0] / (t[0] + 2 * t[1])
        D = (1 - 2 * Y * t[1] / t[0], 2 - 3 * Y * t[2] / t[1], 3 - 4 * Y * t[3] / t[2])
        ok = all(0 < D[j] <= j + 1 for j in range(3))
    if ok:
        return D, t
    if fallback is None:
        raise ArgumentError(f"order {order}: Kneser-Ney discounts are out of range (count-of-counts t1..t4 = {t}); "
                       "use a discount fallback")
    return tuple(float(x) for x in fallback), t


def cutoff_per_order(cutoffs, N: int, keep_bigrams: bool = False) -> list[int] | None:
    """The minimum raw count of each order 1..N that :func:`estimate` keeps (None: no cutoffs):
    an int for orders >= 2 or a list from the 1-grams (its last value repeated); 1-grams never
    cut, 2-grams not with ``keep_bigrams``."""
    if cutoffs is None:
        return None
    cut = [1] + [int(cutoffs)] * (N - 1) if isinstance(cutoffs, (int, np.integer)) else list(cutoffs)
    cut = cut + [cut[-1]] * (N - len(cut))
    cut[0] = 1
    if keep_bigrams and N >= 2:
        cut[1] = 1
    return cut[:N]


def check_options(method: str, discount: float, smoothing: float, cut_mass: str) -> None:
    """The estimator's options, as :func:`estimate` takes them.

    Raises:
        ArgumentError: an unknown method or ``cut_mass``, a discount outside (0, 1) for
            absolute discounting, a negative smoothing.
    """
    if method not in METHODS:
        raise ArgumentError(f"unknown estimation method {method!r}; expected one of {METHODS}")
    if method == "absolute" and not (0 < discount < 1):
        raise ArgumentError(f"absolute discounting needs 0 < discount < 1, got {discount}")
    if smoothing < 0:
        raise ArgumentError(f"smoothing must be >= 0, got {smoothing}")
    if cut_mass not in ("interpolate", "backoff"):
        raise ArgumentError(f"cut_mass must be 'interpolate' or 'backoff', got {cut_mass!r}")


def check_kn_discounts(discounts, order: int | None = None) -> None:
    """Given Kneser-Ney discounts, per order from 1 a triple (D1, D2, D3+), each in
    0 <= Dj <= j as lmplz requires (a discount above its count would take more mass than
    the count has, and the model would not sum to 1), and no more orders than ``order``.

    Raises:
        ArgumentError: naming the order, the discount and its value.
    """
    if order is not None and len(discounts) > order:
        raise ArgumentError(f"Kneser-Ney discounts given for {len(discounts)} orders; the model has {order}")
    for k, triple in enumerate(discounts, 1):
        if len(triple) != 3:
            raise ArgumentError(f"order {k}: Kneser-Ney discounts are three numbers (D1, D2, D3+), got {len(triple)}")
        for j, d in enumerate(triple):
            if not 0.0 <= float(d) <= j + 1:
                raise ArgumentError(f"order {k}: Kneser-Ney discount D{j + 1}{'+' if j == 2 else ''} = {float(d):g} "
                                    f"is out of range (0 <= D{j + 1} <= {j + 1})")


@nb.njit(cache=True)
def _continuation(lo, hi, out, lo_next, hi_next, suffix):
    """out[g - lo] = number of (k+1)-grams whose first-word-dropped suffix is g."""
    for g in range(lo_next, hi_next):
        s = suffix[g]
        if lo <= s < hi:
            out[s - lo] += 1


@nb.njit(cache=True)
def _group_probs(lo, hi, prefix, suffix, a, method, D1, D2, D3, p_final, gamma_ctx,
                 is_bos_word, last_word, V_uniform, smooth, unigram_total_raw, raw, use_ctx,
                 short, backoff_missing):
    """Interpolated probabilities of the k-grams lo..hi (grouped by prefix).

    For each context ``h`` (a run of equal ``prefix``) and each extension
    ``h w``: ``p(w | h) = u(w | h) + gamma(h) p(w | suffix)``, where ``u`` is
    the discounted count share and ``gamma(h)`` the interpolation weight of
    the method (modified Kneser-Ney, Witten-Bell or absolute discounting);
    unigrams interpolate with the uniform distribution over the ``V_uniform``
    words (or, for absolute discounting with ``smooth > 0``, the additively
    smoothed unigram counts).  Orders must be done in increasing order, since
    ``p_final`` of the suffixes is read.

    With ``use_ctx`` (the counts ``a`` of this order are raw counts) a context's
    total is at least its own raw count: extensions cut before the counts
    reached us (Web1T) then leave their mass to the lower order (or, with
    ``backoff_missing``, to the backoff weight: ``short[h]`` is set).

    Args:
        lo, hi: global n-gram ids of one order (:class:`~fsmlearn.lm.index.NGramIndex`).
        prefix, suffix: int64 [G], global id of each n-gram's prefix and
            suffix (-1 for unigrams).
        a: float64 [G], the counts the discounts apply to (adjusted counts for
            Kneser-Ney's lower orders, raw counts otherwise).
        method: 0 Kneser-Ney, 1 Witten-Bell, 2 absolute (index in :data:`METHODS`).
        D1, D2, D3: the discounts for counts 1, 2 and 3+ (absolute: D1 alone).
        p_final: float64 [G], out: the interpolated probabilities.
        gamma_ctx: float64 [G + 1], out: each context's interpolation weight
            (the last entry: the empty context's).
        is_bos_word: bool [V], the word is ``<s>`` (never predicted, p 0).
        last_word: int64 [G], each n-gram's last word id.
        V_uniform, smooth, unigram_total_raw: float, the uniform base's word
            count, the additive smoothing and the unigram raw total.
        raw: float64 [G], the raw counts.
        use_ctx: bool, see above; short: bool [G], out; backoff_missing: bool.
    """
    i = lo
    while i < hi:
        h = prefix[i]
        j = i
        tot = 0.0
        n1 = 0
        n2 = 0
        n3 = 0
        types = 0
        while j < hi and prefix[j] == h:
            if not is_bos_word[last_word[j]]:
                x = a[j]
                tot += x
                if x > 0:
                    types += 1
                if x == 1:
                    n1 += 1
                elif x == 2:
                    n2 += 1
                elif x >= 3:
                    n3 += 1
            j += 1
        missing = 0.0
        if use_ctx and h >= 0 and raw[h] > tot:
            missing = raw[h] - tot
            tot = raw[h]
            if backoff_missing:      # the cut extensions' mass: left to the backoff weight
                short[h] = True
                missing = 0.0
        if method == 0:      # modified Kneser-Ney
            gam = (D1 * n1 + D2 * n2 + D3 * n3 + missing) / tot if tot > 0 else 1.0
        elif method == 1:    # Witten-Bell
            gam = (types + missing) / (tot + types) if tot > 0 else 1.0
        else:                # absolute discounting
            gam = (D1 * types + missing) / tot if tot > 0 else 1.0
        if h >= 0:
            gamma_ctx[h] = gam
        else:
            gamma_ctx[gamma_ctx.shape[0] - 1] = gam
        for r in range(i, j):
            w = last_word[r]
            if is_bos_word[w]:
                p_final[r] = 0.0
                continue
            x = a[r]
            if method == 0:
                d = D1 if x == 1 else (D2 if x == 2 else (D3 if x >= 3 else 0.0))
                u = (x - d) / tot if tot > 0 else 0.0
            elif method == 1:
                u = x / (tot + types) if tot > 0 else 0.0
            else:
                u = max(x - D1, 0.0) / tot if tot > 0 else 0.0
            if h < 0:   # unigrams: interpolate with uniform (or smoothed) base
                if method == 2 and smooth > 0.0:
                    base = (raw[r] + smooth) / (unigram_total_raw + smooth * V_uniform)
                else:
                    base = 1.0 / V_uniform
            else:
                s = suffix[r]
                base = p_final[s] if s >= 0 else 0.0
            p_final[r] = u + gam * base
        i = j


@nb.njit(cache=True)
def _renormalise(lo, hi, prefix, suffix, p, keep, alpha, gamma_ctx, short):
    """Backoff weights of contexts whose extensions were pruned (or cut before
    estimation, ``short``): exact normalisation."""
    i = lo
    while i < hi:
        h = prefix[i]
        j = i
        sp = 0.0
        sl = 0.0
        any_pruned = False
        while j < hi and prefix[j] == h:
            if keep[j]:
                sp += p[j]
                s = suffix[j]
                sl += p[s] if s >= 0 else 0.0
            elif p[j] > 0.0:
                any_pruned = True
            j += 1
        if h >= 0:
            if any_pruned or short[h]:
                num = 1.0 - sp
                den = 1.0 - sl
                alpha[h] = num / den if den > 0.0 else 0.0
            else:
                alpha[h] = gamma_ctx[h]
        i = j


def estimate(counts: NGramCounts, method: str = "kneser-ney", *, discounts=None,
             discount_fallback=_FALLBACK, discount: float = 0.25, smoothing: float = 0.0,
             cutoffs=None, keep_bigrams: bool = False, cut_mass: str = "backoff",
             progress=None) -> BackoffLM:
    """Estimate a backoff model from counts.

    Args:
        counts: raw n-gram counts of orders 1..N (``count_ngrams``, Web1T).
        method: "kneser-ney", "witten-bell" or "absolute".
        discounts: Kneser-Ney only: per order (D1, D2, D3+) overriding the
            estimated ones (a list, one entry per order, None entries estimated).
        discount_fallback: Kneser-Ney discounts used when the estimated ones
            are out of range (None: raise instead).
        discount: absolute discounting's D.
        smoothing: absolute discounting's additive unigram smoothing s.
        cutoffs: minimum raw count per order (int for orders >= 2, or list);
            unigrams are never cut.
        keep_bigrams: keep every 2-gram whatever the cutoff.
        cut_mass: counts cut before estimation: where a context's cut
            extensions' mass goes: ``"backoff"`` (the default: into the
            backoff weight only, as for n-grams ``cutoffs`` prunes: the kept
            extensions keep their own interpolated probabilities and the mass
            goes to the words the context does not list) or ``"interpolate"``
            (into the interpolation weight, so every word's lower-order share
            grows, the kept ones' too).
        progress: optional callable(str).

    Returns:
        A normalised BackoffLM (every context's distribution sums to 1).

    Raises:
        ArgumentError: an unknown method, bad parameters, counts without ``<s>``/``</s>``,
            or an n-gram without its prefix or listed twice (the words named).
    """
    say = progress or (lambda msg: None)
    check_options(method, discount, smoothing, cut_mass)
    vocab = list(counts.vocab)
    wid = {w: i for i, w in enumerate(vocab)}
    for w in (BOS, EOS):
        if w not in wid:
            raise ArgumentError(f"the counts have no {w}")
    ngrams = [g for g in counts.ngrams]
    raw_counts = [c.astype(np.float64) for c in counts.counts]
    # <unk> is always in the model (probability from the uniform share)
    if UNK not in wid:
        wid[UNK] = len(vocab)
        vocab.append(UNK)
    V = len(vocab)
    uni_words = ngrams[0][:, 0]
    missing = np.setdiff1d(np.arange(V), uni_words)
    if missing.size:   # words in the vocabulary but never counted (e.g. <unk>): count 0
        ngrams[0] = np.concatenate([ngrams[0], missing[:, None].astype(np.int32)])
        raw_counts[0] = np.concatenate([raw_counts[0], np.zeros(missing.size)])
        order1 = np.argsort(ngrams[0][:, 0], kind="stable")
        ngrams[0] = ngrams[0][order1]
        raw_counts[0] = raw_counts[0][order1]
    N = len(ngrams)
    try:
        idx = NGramIndex(ngrams, V)
    except NGramIndexError as e:
        k = len(e.row)
        words = " ".join(vocab[int(w)] for w in e.row)
        if e.kind == "missing":
            raise ArgumentError(f"the counts' {k}-gram {words!r} has no prefix among the {k - 1}-grams "
                                "(a prefix's count is at least the n-gram's)") from None
        raise ArgumentError(f"the counts list the {k}-gram {words!r} twice") from None
    off = idx.offsets
    total = idx.total
    raw = np.concatenate(raw_counts)
    last_word = np.concatenate([g[:, -1].astype(np.int64) for g in ngrams])
    first_word = np.concatenate([g[:, 0].astype(np.int64) for g in ngrams])
    bos = wid[BOS]
    is_bos_word = np.zeros(V, np.bool_)
    is_bos_word[bos] = True
    # adjusted counts
    a = raw.copy()
    precut = any(c > 1 for c in counts.cutoffs[1:])
    if method == "kneser-ney" and precut:
        say("the counts were cut before estimation (e.g. Web1T): continuation counts cannot be recovered, "
            "so every order uses raw counts (modified absolute discounting with Kneser-Ney's three discounts)")
    if method == "kneser-ney" and not precut:
        for k in range(1, N):
            lo, hi = int(off[k - 1]), int(off[k])
            cont = np.zeros(hi - lo)
            _continuation(lo, hi, cont, int(off[k]), int(off[k + 1]), idx.suffix)
            starts_bos = first_word[lo:hi] == bos
            adj = np.where(starts_bos, raw[lo:hi], cont)
            a[lo:hi] = adj
    # discounts per order
    Ds = []
    if discounts is not None:
        check_kn_discounts(discounts, N)
    if method == "kneser-ney":
        for k in range(1, N + 1):
            lo, hi = int(off[k - 1]), int(off[k])
            given = None if discounts is None or k - 1 >= len(discounts) else discounts[k - 1]
            if given is not None:
                D = tuple(float(x) for x in given)
            else:
                sel = ~is_bos_word[last_word[lo:hi]]
                D, t = kneser_ney_discounts(a[lo:hi][sel], discount_fallback, k)
            Ds.append(D)
            say(f"order {k}: discounts {', '.join(f'{d:.4f}' for d in D)}")
    else:
        Ds = [(discount, discount, discount)] * N
    method_id = METHODS.index(method)
    p = np.zeros(total)
    gamma_ctx = np.ones(total + 1)   # last slot: the empty context
    short = np.zeros(total, np.bool_)  # contexts whose cut extensions' mass goes to the backoff
    V_uniform = V - 1                 # every word but <s>
    uni_raw_total = float(raw[:int(off[1])][~is_bos_word[last_word[:int(off[1])]]].sum())
    for k in range(1, N + 1):
        lo, hi = int(off[k - 1]), int(off[k])
        D1, D2, D3 = Ds[k - 1]
        raw_order = method != "kneser-ney" or precut or k == N
        _group_probs(lo, hi, idx.prefix, idx.suffix, a, method_id, D1, D2, D3, p, gamma_ctx,
                     is_bos_word, last_word, float(V_uniform), float(smoothing), uni_raw_total, raw,
                     raw_order, short, cut_mass == "backoff")
        say(f"estimated {hi - lo:,} {k}-grams")
    # cutoffs
    keep = np.ones(total, np.bool_)
    if cutoffs is not None:
        cut = cutoff_per_order(cutoffs, N, keep_bigrams)
        for k in range(2, N + 1):
            lo, hi = int(off[k - 1]), int(off[k])
            keep[lo:hi] = raw[lo:hi] >= cut[k - 1]
        # contexts of kept n-grams must stay, and so must the suffix each kept
        # n-gram backs off to
        for k in range(N, 1, -1):
            lo, hi = int(off[k - 1]), int(off[k])
            kept = np.flatnonzero(keep[lo:hi]) + lo
            keep[idx.prefix[kept]] = True
            s = idx.suffix[kept]
            keep[s[s >= 0]] = True
    alpha = gamma_ctx[:total].copy()
    if not keep.all() or short.any():
        for k in range(2, N + 1):
            lo, hi = int(off[k - 1]), int(off[k])
            _renormalise(lo, hi, idx.prefix, idx.suffix, p, keep, alpha, gamma_ctx, short)
    # contexts: n-grams that some kept n-gram extends
    is_ctx = np.zeros(total, np.bool_)
    kept_all = np.flatnonzero(keep)
    pre = idx.prefix[kept_all]
    is_ctx[pre[pre >= 0]] = True
    out_ngrams, out_lp, out_bo, out_hb = [], [], [], []
    with np.errstate(divide="ignore"):
        for k in range(1, N + 1):
            lo, hi = int(off[k - 1]), int(off[k])
            sel = np.flatnonzero(keep[lo:hi]) + lo
            out_ngrams.append(ngrams[k - 1][sel - lo])
            lp = np.log10(p[sel])
            lp[last_word[sel] == bos] = 0.0   # never predicted; KenLM writes 0
            bad = ~np.isfinite(lp)
            lp[bad] = IMPOSSIBLE
            out_lp.append(lp)
            if k < N:
                bo = np.where(is_ctx[sel], np.log10(np.maximum(alpha[sel], 1e-300)), 0.0)
                out_bo.append(bo)
                out_hb.append(np.ones(sel.size, np.bool_))
            else:
                out_bo.append(np.zeros(sel.size))
                out_hb.append(np.zeros(sel.size, np.bool_))
    return BackoffLM(vocab, out_ngrams, out_lp, out_bo, out_hb)

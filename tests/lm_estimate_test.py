"""Estimation from counts: against lmplz, normalisation of every method, cutoffs."""

from __future__ import annotations

import math
from collections import Counter

import kenlm
import numpy as np
import pytest

from lm_model_test import conll_sentences
from fsmlearn.algo import total_weight
from fsmlearn.lm.arpa import read_arpa
from fsmlearn.errors import FsmError
from fsmlearn.lm.counts import apply_cutoffs, count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import check_normalised, compile_lm
from fsmlearn.lm.tools import run_lmplz


@pytest.fixture(scope="module")
def text():
    s = conll_sentences()
    return s[:5000], s[5000:5600]


@pytest.mark.parametrize("order", [3, 5])
def test_kneser_ney_agrees_with_lmplz(text, tmp_path, order):
    train, held = text
    arpa = tmp_path / "ken.arpa"
    run_lmplz(train, order, arpa, discount_fallback=True)
    ken = read_arpa(arpa)
    ours = estimate(count_ngrams(train, order))
    assert ours.counts == ken.counts
    kv = {w: i for i, w in enumerate(ken.vocab)}
    remap = np.array([kv[w] for w in ours.vocab])
    for k in range(order):
        a = {tuple(r): (p, b) for r, p, b in zip(remap[ours.ngrams[k]].tolist(), ours.logprob[k], ours.backoff[k])}
        b = {tuple(r): (p, bb) for r, p, bb in zip(ken.ngrams[k].tolist(), ken.logprob[k], ken.backoff[k])}
        assert a.keys() == b.keys()
        dp = max(abs(a[g][0] - b[g][0]) for g in a)
        db = max(abs(a[g][1] - b[g][1]) for g in a)
        assert dp < 1e-3 and db < 1e-3     # measured: 4e-7 (KenLM prints 7 digits)
    # held-out perplexity within 0.5% (measured: identical to 4 decimals)
    c = compile_lm(ours)
    lp, _ = c.score(held)
    km = kenlm.Model(str(arpa))
    ref = sum(km.score(s) for s in held)
    assert abs(lp.sum() - ref) / abs(ref) < 0.005


def contexts_sum_to_one(lm):
    return check_normalised(lm)


@pytest.mark.parametrize("method,kw", [("kneser-ney", {}), ("witten-bell", {}),
                                       ("absolute", {"discount": 0.25, "smoothing": 0.01}),
                                       ("absolute", {"discount": 0.7})])
@pytest.mark.parametrize("cut", [None, 2])
def test_every_method_is_normalised(text, method, kw, cut):
    train = text[0][:1500]
    lm = estimate(count_ngrams(train, 3), method, cutoffs=cut, **kw)
    assert contexts_sum_to_one(lm) < 1e-9
    assert math.exp(-total_weight(compile_lm(lm).machine)) == pytest.approx(1.0, abs=1e-6)


def _unigram_and_bigram_counts(sents):
    """By hand: the counts of the words (</s> too, not <s>) and of the bigrams of ``sents``."""
    uni = Counter()
    big = Counter()
    for s in sents:
        t = ["<s>"] + s.split() + ["</s>"]
        big.update(zip(t, t[1:]))
        uni.update(t[1:])
    return uni, big


def test_witten_bell_and_absolute_match_their_formulas():
    sents = ["a b", "a b a", "b b c"]
    c = count_ngrams(sents, 2)
    wid = c.word_ids
    uni, big = _unigram_and_bigram_counts(sents)
    V = len(c.vocab) - 1            # uniform over every word but <s>
    N = sum(uni.values())
    h = "a"
    ch = sum(n for (x, _), n in big.items() if x == h)
    T = sum(1 for (x, _) in big if x == h)
    wb = estimate(c, "witten-bell")
    ad = estimate(c, "absolute", discount=0.5, smoothing=0.1)

    def lookup(lm, words):
        ids = [wid[w] for w in words]
        k = len(words) - 1
        row = np.flatnonzero((lm.ngrams[k] == ids).all(axis=1))[0]
        return 10 ** lm.logprob[k][row]

    Tu = len(uni)
    for w in ("b", "</s>"):
        p_uni_wb = uni[w] / (N + Tu) + Tu / (N + Tu) / V
        want = big[(h, w)] / (ch + T) + T / (ch + T) * p_uni_wb
        assert lookup(wb, [h, w]) == pytest.approx(want, rel=1e-12)
        base = (uni[w] + 0.1) / (N + 0.1 * V)
        p_uni_ad = max(uni[w] - 0.5, 0) / N + 0.5 * Tu / N * base
        want = max(big[(h, w)] - 0.5, 0) / ch + 0.5 * T / ch * p_uni_ad
        assert lookup(ad, [h, w]) == pytest.approx(want, rel=1e-12)


def test_cutoffs_prune_and_keep_bigrams(text):
    train = text[0][:3000]
    c = count_ngrams(train, 4)
    full = estimate(c)
    cut = estimate(c, cutoffs=3)
    keep = estimate(c, cutoffs=3, keep_bigrams=True)
    assert cut.counts[0] == full.counts[0]
    assert cut.counts[1] < full.counts[1] and keep.counts[1] == full.counts[1]
    assert cut.counts[3] < full.counts[3] / 3
    # the kept n-grams keep their interpolated probabilities
    fk = {tuple(r): p for r, p in zip(full.ngrams[3].tolist(), full.logprob[3])}
    for r, p in zip(cut.ngrams[3].tolist(), cut.logprob[3]):
        assert p == pytest.approx(fk[tuple(r)], abs=1e-12)
    assert contexts_sum_to_one(cut) < 1e-9 and contexts_sum_to_one(keep) < 1e-9
    # pruning counts first then estimating also gives a normalised model
    assert contexts_sum_to_one(estimate(apply_cutoffs(c, [1, 2, 3, 3]))) < 1e-9


def test_bad_parameters():
    from fsmlearn.errors import FsmError
    c = count_ngrams(["a b"], 2)
    with pytest.raises(FsmError, match="unknown estimation method"):
        estimate(c, "magic")
    with pytest.raises(FsmError, match="0 < discount < 1"):
        estimate(c, "absolute", discount=1.5)
    with pytest.raises(FsmError, match="discounts are out of range"):
        estimate(c, discount_fallback=None)


def test_the_normalisation_check_catches_a_broken_model(text):
    lm = estimate(count_ngrams(text[0][:500], 3))
    assert check_normalised(lm) < 1e-9
    i = int(np.argmax(lm.logprob[1]))   # the most probable bigram, made 2.3% more likely
    assert 10 ** lm.logprob[1][i] > 0.1
    lm.logprob[1][i] += 0.01
    assert check_normalised(lm) > 2e-3


def test_precut_counts_use_each_contexts_own_count():
    """Counts cut before estimation (Web1T): a context's total is its raw count; the
    cut extensions' mass goes to the backoff weight (default) or into the
    interpolation weight; every method stays normalised, and Kneser-Ney falls
    back to raw counts (continuation counts are unrecoverable)."""
    sents = ["a b", "a b", "a b", "a c", "a c", "b a c", "c a b", "a"]
    full = count_ngrams(sents, 2)
    cut = apply_cutoffs(full, [1, 2])          # drops (b a), (c a), (<s> b), ...: counts of 1
    wid = full.word_ids
    uni, big = _unigram_and_bigram_counts(sents)
    V = len(full.vocab) - 1
    N = sum(uni.values())
    Tu = len(uni)

    def lookup(lm, words):
        ids = [wid[w] for w in words]
        k = len(words) - 1
        row = np.flatnonzero((lm.ngrams[k] == ids).all(axis=1))[0]
        return 10 ** lm.logprob[k][row], 10 ** lm.backoff[k][row]

    h = "a"                               # (a b) 4, (a c) 3 kept; count(a) = 8: (a </s>) 1 cut
    ch = uni[h]
    kept = {w: n for (x, w), n in big.items() if x == h and n >= 2}
    assert sum(kept.values()) < ch
    p_uni = {w: max(uni[w] - 0.5, 0) / N + 0.5 * Tu / N / V for w in uni}
    # "interpolate": the cut mass raises every word's share of the unigram, kept ones too
    ad = estimate(cut, "absolute", discount=0.5, cut_mass="interpolate")
    gamma = (0.5 * len(kept) + ch - sum(kept.values())) / ch
    for w in kept:
        assert lookup(ad, [h, w])[0] == pytest.approx((kept[w] - 0.5) / ch + gamma * p_uni[w], rel=1e-12)
    assert lookup(ad, [h])[1] == pytest.approx(gamma, rel=1e-12)
    # "backoff" (the default): kept words keep their interpolated probabilities, the
    # rest of the context's mass goes to the words it does not list
    for bd in (estimate(cut, "absolute", discount=0.5), estimate(cut, "absolute", discount=0.5, cut_mass="backoff")):
        gamma_d = 0.5 * len(kept) / ch
        want = {w: (kept[w] - 0.5) / ch + gamma_d * p_uni[w] for w in kept}
        for w in kept:
            assert lookup(bd, [h, w])[0] == pytest.approx(want[w], rel=1e-12)
        alpha = (1 - sum(want.values())) / (1 - sum(p_uni[w] for w in kept))
        assert lookup(bd, [h])[1] == pytest.approx(alpha, rel=1e-12)
    for method in ("kneser-ney", "witten-bell", "absolute"):
        for mode in ("interpolate", "backoff"):
            lm = estimate(cut, method, cut_mass=mode)
            assert contexts_sum_to_one(lm) < 1e-9
            assert math.exp(-total_weight(compile_lm(lm).machine)) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(FsmError, match="cut_mass"):
        estimate(cut, "absolute", cut_mass="drop")
    # uncut counts: unchanged (the own count equals the sum of the extensions)
    a, b = estimate(full, "absolute"), estimate(apply_cutoffs(full, 1), "absolute")
    assert all(np.array_equal(x, y) for x, y in zip(a.logprob, b.logprob))


def _expected_word_counts(lm):
    """Expected number of each word per sentence under a backoff model of any
    order, by brute force: the Markov chain over every history of up to N-1
    words (ARPA backoff semantics looked up n-gram by n-gram), solved directly."""
    wid = lm.word_ids
    bos, eos = wid["<s>"], wid["</s>"]
    table = {}
    for k in range(lm.order):
        for g, lp, bo in zip(lm.ngrams[k].tolist(), lm.logprob[k], lm.backoff[k]):
            table[tuple(g)] = (10.0 ** lp, 10.0 ** bo)

    def prob(h, w):
        if h + (w,) in table:
            return table[h + (w,)][0]
        return (table[h][1] if h in table else 1.0) * prob(h[1:], w)

    words = [i for i in range(len(lm.vocab)) if i != bos]
    states = {(bos,): 0}
    order = [(bos,)]
    rows = []
    i = 0
    while i < len(order):
        h = order[i]
        for w in words:
            p = prob(h, w)
            if w != eos and p > 0:
                nh = (h + (w,))[-(lm.order - 1):]
                if nh not in states:
                    states[nh] = len(order)
                    order.append(nh)
                rows.append((i, states[nh], w, p))
        i += 1
    P = np.zeros((len(order), len(order)))
    for a, b, w, p in rows:
        P[a, b] += p
    e0 = np.zeros(len(order))
    e0[0] = 1.0
    visits = np.linalg.solve(np.eye(len(order)) - P.T, e0)
    out = np.zeros(len(lm.vocab))
    for a, b, w, p in rows:
        out[w] += visits[a] * p
    out[eos] = sum(visits[a] * prob(h, eos) for h, a in states.items())
    return out


def test_cut_mass_to_the_backoff_keeps_the_corpus_word_counts():
    """Trigrams cut before estimation (every bigram kept): putting the cut
    extensions' mass into the interpolation weight hands it to the words each
    context already lists, so frequent words are expected more often than the
    corpus has them; leaving it to the backoff weight keeps every word's expected
    count much closer to its count (checked by brute force over the chain)."""
    rng = np.random.default_rng(7)
    vocab = ["the", "a", "dog", "cat", "runs", "sees", "and", "_"]
    sents = []
    for _ in range(3000):
        s = []
        for _ in range(rng.integers(1, 4)):
            s += [vocab[rng.integers(0, 2)], vocab[rng.integers(2, 4)], vocab[rng.integers(4, 6)]]
            if rng.random() < 0.3:
                s.append("and")
        if rng.random() < 0.05:
            s += ["_"] * int(rng.integers(1, 12))
        sents.append(" ".join(s))
    full = count_ngrams(sents, 3)
    cut = apply_cutoffs(full, [1, 1, 25])
    assert cut.counts[2].size < full.counts[2].size        # some trigrams were cut
    S = len(sents)
    obs = np.zeros(len(full.vocab) + 1)
    for w, n in Counter(w for s in sents for w in s.split() + ["</s>"]).items():
        obs[full.word_ids[w]] = n / S
    err = {}
    for mode in ("interpolate", "backoff"):
        lm = estimate(cut, "absolute", discount=0.25, cut_mass=mode)
        assert contexts_sum_to_one(lm) < 1e-9
        e = _expected_word_counts(lm)
        assert e[lm.word_ids["</s>"]] == pytest.approx(1.0, abs=1e-9)   # one end per sentence
        err[mode] = np.abs(e[:obs.size] - obs[:e.size]).sum() / obs.sum()
    assert err["backoff"] < 0.5 * err["interpolate"]
    assert err["backoff"] < 0.005

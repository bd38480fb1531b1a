"""Compiled backoff LMs: exact scores (KenLM), total probability, sampling."""

from __future__ import annotations

import math

import kenlm
import numpy as np
import pytest

from fsmlearn.algo import forward_backward, sample_paths, total_weight
from fsmlearn.data import iter_conll2000
from fsmlearn.lm.arpa import read_arpa
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import LN10, compile_lm
from fsmlearn.lm.tools import run_lmplz
from fsmlearn.testing import chi2_sf


def conll_sentences(member="train.txt"):
    """CoNLL-2000's sentences as written (words not unescaped), one space-separated str each."""
    return [" ".join(w for w, _ in s) for s in iter_conll2000([member], normalize=False)]


@pytest.fixture(scope="module")
def corpus():
    s = conll_sentences()
    return s[:6000], s[6000:6600]


@pytest.fixture(scope="module", params=[3, 5])
def kenlm_model(request, corpus, tmp_path_factory):
    train, _ = corpus
    d = tmp_path_factory.mktemp("lm")
    arpa = d / f"ken{request.param}.arpa"
    run_lmplz(train, request.param, arpa, discount_fallback=True)
    return arpa


def test_path_weights_equal_kenlm_scores(kenlm_model, corpus):
    _, held = corpus
    lm = read_arpa(kenlm_model)
    c = compile_lm(lm)
    k = kenlm.Model(str(kenlm_model))
    extra = ["zyzzyva qwerty the", "", "the the the", "unknownword"]
    sents = held + extra
    ours, oov = c.score(sents)
    ref = np.array([k.score(s, bos=True, eos=True) for s in sents])
    assert np.max(np.abs(ours - ref)) < 1e-4
    # unknown words are counted and scored as <unk>
    assert oov[-4] == 2 and oov[-1] == 1 and oov.sum() >= 3
    assert sum(1 for s, n in zip(held, oov[:len(held)]) if n) > 0   # the held-out text has OOVs too


def test_total_probability_is_one_for_a_normalised_lm(corpus):
    train, _ = corpus
    lm = estimate(count_ngrams(train, 3))
    c = compile_lm(lm)
    z = math.exp(-total_weight(c.machine))
    assert z == pytest.approx(1.0, abs=1e-6)
    # and the path weights of strings still agree with the ARPA arithmetic
    fb = forward_backward(c.machine)
    assert fb.final_posteriors.sum() == pytest.approx(1.0, abs=1e-6)


def test_total_probability_of_a_kenlm_model(kenlm_model):
    # KenLM rounds probabilities to 7 digits; the total stays within 1e-5 of 1
    c = compile_lm(read_arpa(kenlm_model))
    assert math.exp(-total_weight(c.machine)) == pytest.approx(1.0, abs=1e-5)


def _bigram_test(c, machine, n=40000, seed=3):
    """Chi-square test of sampled next-word counts against the model, in frequent contexts."""
    S = sample_paths(machine, n, seed=seed)
    vocab = c.vocab
    seqs = S.label_sequences(machine)
    # contexts: the first word after <s>; model distribution by scoring prefixes
    first = {}
    for lab in seqs:
        if len(lab) >= 2:
            first.setdefault(int(lab[0]), []).append(int(lab[1]))
    stats, df = 0.0, 0
    tested = 0
    for ctx, nxt in sorted(first.items(), key=lambda kv: -len(kv[1]))[:5]:
        words, counts = np.unique(nxt, return_counts=True)
        # p(w | <s> ctx) for the observed words and the rest
        w0 = vocab[ctx - 1]
        lp_ctx = c.score([w0])[0][0] - _final(c, w0)
        probs = []
        for w in words:
            two = f"{w0} {vocab[w - 1]}"
            probs.append(10 ** (c.score([two])[0][0] - _final(c, two) - lp_ctx))
        probs = np.array(probs)
        # the first word was followed by something (not </s>): condition on that
        p_end = 10 ** (_final(c, w0))
        probs = probs / (1 - p_end)
        total = len(nxt)
        exp_ = probs * total
        keep = exp_ >= 5
        obs = np.r_[counts[keep], total - counts[keep].sum()]
        exp2 = np.r_[exp_[keep], total - exp_[keep].sum()]
        ok = exp2 > 0
        stats += float(((obs[ok] - exp2[ok]) ** 2 / exp2[ok]).sum())
        df += int(ok.sum()) - 1
        tested += 1
    assert tested == 5
    return chi2_sf(stats, df)


def _final(c, prefix):
    """log10 p(</s> | <s> prefix): score(prefix) minus the score without </s>."""
    from fsmlearn.algo.score import score_sequences
    ptr, lab, _ = c.encode([prefix])
    with_end = score_sequences(c.machine, ptr, lab, final=True).weight[0]
    without = score_sequences(c.machine, ptr, lab, final=False).weight[0]
    return -(with_end - without) / LN10


def test_sampled_sentences_reproduce_ngram_probabilities(corpus):
    train, _ = corpus
    c = compile_lm(estimate(count_ngrams(train, 3)))
    assert _bigram_test(c, c.machine) > 1e-3


def test_sampling_test_can_fail(corpus):
    # the same sampler and test must reject samples of a different model: the
    # epsilon approximation (a proper distribution that double-counts paths)
    from fsmlearn.lm.model import epsilon_approximation
    train, _ = corpus
    c = compile_lm(estimate(count_ngrams(train, 3)))
    e = epsilon_approximation(c)
    assert _bigram_test(c, e.machine) < 1e-6


def test_epsilon_approximation_is_normalised_and_different(corpus):
    from fsmlearn.lm.model import epsilon_approximation
    train, _ = corpus
    c = compile_lm(estimate(count_ngrams(train, 3)))
    e = epsilon_approximation(c)
    assert not e.machine.has_phi
    # every state's outgoing mass (phi as epsilon) is 1: a proper distribution
    w, f = e.machine.neglog_weights()
    tot = np.bincount(e.machine.arc_src, np.exp(-w), minlength=e.machine.num_states) + np.exp(-f)
    assert np.allclose(tot, 1.0, atol=1e-9)
    assert math.exp(-total_weight(e.machine, phi="epsilon")) == pytest.approx(1.0, abs=1e-6)
    # it is an approximation: sentence scores differ from the exact model
    ours, _ = c.score(["the company said", "it is"])
    approx, _ = e.score(["the company said", "it is"])
    assert np.all(np.abs(ours - approx) > 1e-6)

"""n-gram EM's kernels (fsmlearn.algo.tied.kernels): several threads give the one-thread sums."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.data import iter_sentences
from fsmlearn.data.tagsets import tag_dictionary
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import compile_lm
from fsmlearn.tag.ngram.approx import setup_from_lm
from fsmlearn.tag.ngram.em import NGramEM
from fsmlearn.algo.tied.objective import estep_parallel, expected_stats, phi_gradient
from fsmlearn.algo.tied.kernels import ParIndex
from tag_ngram_common import random_phi, random_theta


@pytest.mark.parametrize("threads", [2, 3])
def test_threaded_kernels_give_the_single_threaded_sums(threads):
    """The multi-threaded kernels (one part per thread, arc-major block scores)
    compute the same counts, bound, gradient and block update as the serial ones,
    on an LM of real text with failure arcs, whatever the number of parts."""
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:300]
    lm = compile_lm(estimate(count_ngrams(sents, 3), "absolute"))
    st = setup_from_lm(lm, tagdict=tag_dictionary("tag17"))
    cs = st.cs
    rng = np.random.default_rng(threads)
    T, V = len(st.tags), len(st.vocab)
    lt, le = random_theta(rng, T, V, st.allowed)
    phi = random_phi(rng, cs)
    px = ParIndex(cs, threads)
    assert px.threads == threads and px.ev_bounds[-1] == cs.ev_src.size
    a, b = expected_stats(cs, phi, lt, le), expected_stats(cs, phi, lt, le, px)
    for x, y in ((a.trans, b.trans), (a.emit, b.emit), (a.alpha2, b.alpha2)):
        assert np.allclose(x, y, rtol=1e-12, atol=1e-14)
    assert b.bound == pytest.approx(a.bound, rel=1e-12)
    (A1, B1), (A2, B2) = phi_gradient(cs, phi, lt, le, a.alpha2), phi_gradient(cs, phi, lt, le, a.alpha2, px)
    assert np.allclose(A1, A2, rtol=1e-12, atol=1e-14) and np.allclose(B1, B2, rtol=1e-12, atol=1e-12)
    p1 = estep_parallel(cs, phi, lt, le, a.alpha2)
    p2 = estep_parallel(cs, phi, lt, le, a.alpha2, px)
    assert np.allclose(p1, p2, rtol=1e-10, atol=1e-14)
    runs = []
    for th in (1, threads):
        tr = NGramEM(cs, st.allowed, lt, le, threads=th)
        assert tr.parts == th      # the fused pass (fsmlearn.algo.tied.sweep), one part per thread
        tr.run(3)
        runs.append([r.bound for r in tr.history])
    assert np.allclose(runs[0], runs[1], rtol=1e-10)

"""The materialised cq (fsmlearn.algo.tied.materialise): with n_q = n_p on a corpus,
n-gram EM is ordinary EM."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fsmlearn.fsm import Machine
from fsmlearn.algo.tied.materialise import joint_posterior_phi, stats_materialised
from fsmlearn.algo.tied.objective import estep_parallel, expected_stats
from fsmlearn.tag.ngram.em import mstep
from fsmlearn.algo.tied.structure import TiedStructure
from tag_ngram_common import random_theta


def corpus_machine(sentences, V):
    """c = the empirical distribution of a corpus: a union of straight-line sentences, 1/N each."""
    N = len(sentences)
    src, dst, lab, wt = [], [], [], []
    final = {}
    nxt = 1
    for s in sentences:
        q = 0
        for i, x in enumerate(s):
            src.append(q)
            dst.append(nxt)
            lab.append(x)
            wt.append(math.log(N) if i == 0 else 0.0)
            q = nxt
            nxt += 1
        final[q] = 0.0
    return Machine.from_arcs(nxt, 0, final, src, dst, lab, weight=wt)


def test_reduces_to_em_on_a_corpus_when_nq_equals_np():
    rng = np.random.default_rng(8)
    V, T = 4, 3
    sents = [list(rng.integers(1, V + 1, size=rng.integers(1, 6))) for _ in range(7)]
    c = corpus_machine(sents, V)
    allowed = np.ones((V + 1, T), bool)
    allowed[1, 0] = False
    allowed[3, 2] = False
    cs = TiedStructure.build(c, np.maximum(c.ilabel - 1, 0), allowed)
    lt, le = random_theta(rng, T, V, allowed)
    lt[T, T] = -np.inf
    # ordinary EM by enumeration of every tagging of every sentence
    ll = 0.0
    trans = np.zeros((T + 1, T + 1))
    emit = np.zeros((T, V + 1))
    for s in sents:
        w = [x - 1 for x in s]
        tot = 0.0
        rows = []
        for tags in itertools.product(range(T), repeat=len(s)):
            lp = lt[T, tags[0]] + lt[tags[-1], T] + sum(le[t, x] for t, x in zip(tags, w))
            lp += sum(lt[a, b] for a, b in zip(tags, tags[1:]))
            if np.isfinite(lp):
                rows.append((tags, math.exp(lp)))
                tot += math.exp(lp)
        ll += math.log(tot)
        for tags, p in rows:
            r = p / tot
            trans[T, tags[0]] += r
            trans[tags[-1], T] += r
            for a, b in zip(tags, tags[1:]):
                trans[a, b] += r
            for t, x in zip(tags, w):
                emit[t, x] += r
    # n_q = n_p = 2 at the optimal phi (posteriors of c * p_theta)
    phi2 = joint_posterior_phi(cs, lt, le)
    tr, em, bound = stats_materialised(cs, phi2, lt, le)
    N = len(sents)
    assert bound * N == pytest.approx(ll, abs=1e-8)
    assert np.allclose(tr * N, trans, atol=1e-9) and np.allclose(em * N, emit, atol=1e-9)
    lt1, le1 = mstep(tr, em, allowed)
    lt2, le2 = mstep(trans, emit, allowed)
    fin = np.isfinite(lt2)
    assert np.array_equal(fin, np.isfinite(lt1)) and np.allclose(np.exp(lt1), np.exp(lt2), atol=1e-6)
    assert np.allclose(np.exp(le1), np.exp(le2), atol=1e-6)
    # and n_q = 1 is a bound below it
    st = expected_stats(cs, estep_parallel(cs, cs.uniform_phi(), lt, le), lt, le)
    assert st.bound * N <= ll + 1e-9

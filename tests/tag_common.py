"""Helpers of the tagger tests: random HMMs and sentences, brute-force taggings,
the WSJ fixtures (imported by the tests/tag_*_test.py files that use them)."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from fsmlearn import Machine
from fsmlearn.data import load_dataset
from fsmlearn.tag import HMM, train_supervised


def random_hmm(rng, T=3, V=4, order=2, zero=0.3, suffix=False):
    """A random smoothed HMM; some emissions are zero, but every tag emits and
    every word (the unknown one too) is emitted by some tag."""
    tags = [f"T{i}" for i in range(T)]
    vocab = [f"w{i}" for i in range(V)]
    tc = rng.random((T + 1,) * order) * 5 * (rng.random((T + 1,) * order) > 0.2)
    ec = rng.random((T, V + 1)) * 5 * (rng.random((T, V + 1)) > zero)
    ec[np.arange(T), rng.integers(0, V + 1, T)] += 1.0
    ec[rng.integers(0, T, V + 1), np.arange(V + 1)] += 1.0
    return HMM.from_counts(tags, vocab, tc, ec, smoothing=0.2)


def random_sentence(rng, hmm, L):
    V = hmm.V
    return [hmm.vocab[i] if i < V else f"oov{i}" for i in rng.integers(0, V + 1, L)]


def brute_force(hmm, words):
    """(ln p of every tagging, taggings) by enumeration, over emissions and transitions."""
    ids = hmm.encode_words(words)
    T = hmm.T
    out, seqs = [], []
    for tg in itertools.product(range(T), repeat=len(words)):
        lp = 0.0
        hist = [T] * (hmm.order - 1)
        for w, t in zip(ids, tg):
            lp += (hmm.log_trans[hist[-1], t] if hmm.order == 2 else hmm.log_trans3[hist[-2], hist[-1], t])
            lp += hmm.log_emit[t, w]
            hist.append(t)
        lp += hmm.log_trans[hist[-1], T] if hmm.order == 2 else hmm.log_trans3[hist[-2], hist[-1], T]
        out.append(lp)
        seqs.append(tg)
    return np.array(out), seqs


def depth_of_states(m: Machine) -> np.ndarray:
    """Distance (in arcs) of every state from the start (a straight-line input makes it unique)."""
    d = np.full(m.num_states, -1)
    d[m.start] = 0
    order = [m.start]
    for s in order:
        for a in m.out_arcs(s):
            q = int(m.dst[a])
            if d[q] < 0:
                d[q] = d[s] + 1
                order.append(q)
            assert d[q] == d[s] + 1
    return d


def position_posteriors_of(m: Machine, post: np.ndarray, L: int, T: int) -> np.ndarray:
    """[L, T] posteriors of a composition's arcs by (position, tag); epsilon outputs skipped."""
    depth = depth_of_states(m)
    out = np.zeros((L, T))
    for a in range(m.num_arcs):
        if m.olabel[a] > 0:
            out[depth[m.arc_src[a]], m.olabel[a] - 1] += post[a]
    return out


@pytest.fixture(scope="module")
def wsj():
    return load_dataset("wsj-train"), load_dataset("wsj-small")


@pytest.fixture(scope="module")
def supervised(wsj):
    t0 = time.time()
    hmm = train_supervised(wsj[0], order=2)
    return hmm, time.time() - t0

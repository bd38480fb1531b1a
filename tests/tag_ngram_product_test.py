"""n-gram EM's bound, expected counts and gradient from the engine's tagged product
(fsmlearn.algo.tied.general over fsmlearn.algo.product, nothing materialised) equal the
specialised sums of the production path (objective, the fused passes of NGramEM), the
materialised machine, and finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.data import iter_sentences
from fsmlearn.data.tagsets import tag_dictionary
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import compile_lm
from fsmlearn.tag.ngram.approx import initial_theta, setup_from_lm
from fsmlearn.algo.tied.cond import CondBlocks
from fsmlearn.tag.ngram.em import NGramEM
from fsmlearn.algo.tied.materialise import bound_materialised, stats_materialised
from fsmlearn.algo.tied.objective import d_bound_d_phi, expected_stats
from fsmlearn.algo.tied.general import bound_product, d_bound_d_phi_product, stats_product
from tag_ngram_common import random_phi, random_phi2, tiny


def _tangent(g, cs):
    """g with each block's mean removed: its component along the blocks' simplices."""
    arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
    n = np.diff(cs.blk_start)[arc_of]
    s = np.zeros(cs.machine.num_arcs)
    np.add.at(s, arc_of, g)
    return g - s[arc_of] / n


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bound_counts_and_gradient_equal_the_specialised_sums(seed):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    st = expected_stats(cs, phi, lt, le)
    got = stats_product(cs, phi, lt, le)
    assert got.bound == pytest.approx(st.bound, rel=1e-9, abs=1e-9)
    assert bound_product(cs, phi, lt, le) == pytest.approx(st.bound, rel=1e-9, abs=1e-9)
    assert got.entropy == pytest.approx(st.entropy, rel=1e-9, abs=1e-9)
    assert np.allclose(got.trans, st.trans, rtol=1e-9, atol=1e-11)
    assert np.allclose(got.emit, st.emit, rtol=1e-9, atol=1e-11)
    # the gradient: the specialised one assumes normalised blocks (the product's backward
    # values 1), so the two agree along the blocks' simplices
    tol = 1e-14             # the solves' stopping rule: the bound to about this, so differences to 1e-9
    g = d_bound_d_phi_product(cs, phi, lt, le, tol=tol)
    assert np.allclose(_tangent(g, cs), _tangent(d_bound_d_phi(cs, phi, lt, le), cs), rtol=1e-7, atol=1e-9)
    # and the product's gradient is that of its own expectation everywhere (finite differences)
    eps = 1e-5
    for j in rng.choice(phi.size, size=min(10, phi.size), replace=False):
        p1, p2 = phi.copy(), phi.copy()
        p1[j] += eps
        p2[j] -= eps
        fd = (bound_product(cs, p1, lt, le, tol=tol) - bound_product(cs, p2, lt, le, tol=tol)) / (2 * eps)
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("seed", [1, 2])
def test_blocks_conditioned_on_the_previous_tag_equal_the_materialised_machine(seed):
    """n_q = 2: phi [K, T+1]; the materialised machine over (state, tag) pairs is the reference."""
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    cb = CondBlocks.build(cs, "all")
    phi2 = random_phi2(rng, cs, cb)
    full = np.empty((cs.num_params, cs.T + 1))
    for a in range(cs.machine.num_arcs):
        lo, hi = cs.blk_start[a], cs.blk_start[a + 1]
        if hi > lo:
            full[lo:hi] = phi2[cb.crow[a]:cb.crow[a] + hi - lo]
    tr, em, b = stats_materialised(cs, full, lt, le)
    got = stats_product(cs, full, lt, le)
    assert got.bound == pytest.approx(b, rel=1e-9, abs=1e-9)
    assert bound_materialised(cs, full, lt, le) == pytest.approx(b, rel=1e-12)
    assert np.allclose(got.trans, tr, rtol=1e-9, atol=1e-11)
    assert np.allclose(got.emit, em, rtol=1e-9, atol=1e-11)
    # the gradient by previous tag against central differences of the product's expectation
    tol = 1e-14
    g = d_bound_d_phi_product(cs, full, lt, le, tol=tol)
    assert g.shape == full.shape
    eps = 1e-5
    for j, tp in zip(rng.choice(full.shape[0], size=8), rng.choice(full.shape[1], size=8)):
        p1, p2 = full.copy(), full.copy()
        p1[j, tp] += eps
        p2[j, tp] -= eps
        fd = (bound_product(cs, p1, lt, le, tol=tol) - bound_product(cs, p2, lt, le, tol=tol)) / (2 * eps)
        assert g[j, tp] == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_the_production_passes_equal_the_engine_on_a_real_trigram():
    """NGramEM's fused passes (the production path) after two iterations, on a backoff
    trigram of real text: the bound and the counts are the engine's on the product."""
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:150]
    st = setup_from_lm(compile_lm(estimate(count_ngrams(sents, 3), "absolute")), tagdict=tag_dictionary("tag17"))
    lt, le = initial_theta(st)
    with NGramEM(st.cs, st.allowed, lt, le) as tr:
        tr.run(2)
        phi = tr.phi.copy()
        got = stats_product(st.cs, phi, tr.log_trans, tr.log_emit)
        ref = tr.bound()
        assert got.bound == pytest.approx(ref, rel=1e-9)
        assert np.allclose(got.trans, tr.stats.trans, rtol=1e-8, atol=1e-10)
        assert np.allclose(got.emit, tr.stats.emit, rtol=1e-8, atol=1e-10)

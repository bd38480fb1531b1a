"""n-gram EM's bound with n_q = 1 (fsmlearn.algo.tied.objective): the bound, its counts
and gradient against brute-force enumeration, the materialised machine and finite
differences; the block update is the block optimum."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.algo.tied.materialise import bound_materialised, stats_materialised
from fsmlearn.algo.tied.objective import d_bound_d_phi, estep_parallel, expected_stats
from tag_ngram_common import brute, random_phi, tiny


# -------------------------------------------------------------------- tests
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bound_counts_and_gradient_match_the_materialised_machine(seed):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    st = expected_stats(cs, phi, lt, le)
    # the engine's expectation-semiring relaxation over the (state, tag) machine
    assert st.bound == pytest.approx(bound_materialised(cs, phi, lt, le), rel=1e-9, abs=1e-9)
    tr, em, _ = stats_materialised(cs, phi, lt, le)
    assert np.allclose(st.trans, tr, atol=1e-10) and np.allclose(st.emit, em, atol=1e-10)
    # alpha: c's own forward, total final mass 1
    assert float((cs.fin_k * cs.alpha[cs.fin_state]).sum()) == pytest.approx(1.0, abs=1e-9)
    # gradient against central finite differences
    g = d_bound_d_phi(cs, phi, lt, le)
    eps = 1e-6
    for j in rng.choice(phi.size, size=min(12, phi.size), replace=False):
        p1, p2 = phi.copy(), phi.copy()
        p1[j] += eps
        p2[j] -= eps
        fd = (expected_stats(cs, p1, lt, le).bound - expected_stats(cs, p2, lt, le).bound) / (2 * eps)
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("seed", [4, 5])
def test_bound_matches_enumeration_and_is_a_lower_bound(seed):
    rng, c, cs, allowed, lt, le = tiny(seed, V=2, T=2, p_final=0.85)
    for trial in range(2):
        phi = random_phi(rng, cs)
        b_enum, ll = brute(cs, c, 2, 2, phi, lt, le)
        st = expected_stats(cs, phi, lt, le)
        # the strings left out carry < 1e-11 of the mass, each with |value| < 200
        assert st.bound == pytest.approx(b_enum, abs=1e-10 + 200 * brute.tail)
        assert st.bound <= ll + 1e-9
        # theta gradient = expected counts: d r / d log theta(t | t')
        eps = 1e-6
        lt1 = lt.copy()
        lt1[0, 1] += eps
        lt2 = lt.copy()
        lt2[0, 1] -= eps
        fd = (brute(cs, c, 2, 2, phi, lt1, le)[0] - brute(cs, c, 2, 2, phi, lt2, le)[0]) / (2 * eps)
        assert st.trans[0, 1] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    # the phi gradient against finite differences of the enumerated bound
    g = d_bound_d_phi(cs, phi, lt, le)
    j = int(np.argmax(np.abs(g)))
    p1, p2 = phi.copy(), phi.copy()
    p1[j] += 1e-6
    p2[j] -= 1e-6
    fd = (brute(cs, c, 2, 2, p1, lt, le)[0] - brute(cs, c, 2, 2, p2, lt, le)[0]) / 2e-6
    assert g[j] == pytest.approx(fd, rel=1e-5)


def test_block_update_is_the_block_optimum():
    rng, c, cs, allowed, lt, le = tiny(7, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    new = estep_parallel(cs, phi, lt, le)
    # change one block only: the bound must not go down, and perturbing that block hurts.
    # Exact for an arc whose destination does not back off to its source (else
    # the block also feeds its own source's tag mass and the update is the
    # stationary point of the linearised objective).
    def chain(q):
        out = {q}
        while cs.phi_dst[q] >= 0:
            q = int(cs.phi_dst[q])
            out.add(q)
        return out
    cands = [a for a in range(c.num_arcs) if cs.blk_start[a + 1] - cs.blk_start[a] > 1
             and int(c.arc_src[a]) not in chain(int(c.dst[a]))]
    assert cands
    a = cands[int(np.argmax([cs.alpha[c.arc_src[a]] for a in cands]))]
    lo, hi = cs.blk_start[a], cs.blk_start[a + 1]
    one = phi.copy()
    one[lo:hi] = new[lo:hi]
    b0 = expected_stats(cs, phi, lt, le).bound
    b1 = expected_stats(cs, one, lt, le).bound
    assert b1 >= b0 - 1e-12
    for _ in range(5):
        pert = one.copy()
        x = rng.dirichlet(np.ones(hi - lo))
        pert[lo:hi] = 0.9 * one[lo:hi] + 0.1 * x
        assert expected_stats(cs, pert, lt, le).bound <= b1 + 1e-12

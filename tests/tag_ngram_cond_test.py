"""Blocks conditioned on the previous tag (fsmlearn.algo.tied.cond): bound, counts and
gradients against the materialised machine and finite differences; vEM raises the bound;
every relaxation stopped at its sweep limit raises."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.errors import NotConvergedError
from fsmlearn.algo.tied.cond import (CondBlocks, d_bound_d_phi_cond, estep_parallel_cond, expected_stats_cond,
                                     phi_gradient_cond)
from fsmlearn.tag.ngram.em import NGramEM
from fsmlearn.algo.tied.materialise import bound_materialised, stats_materialised
from fsmlearn.algo.tied.objective import expected_stats
from fsmlearn.algo.tied.structure import TiedStructure
from tag_ngram_common import brute, random_phi, random_phi2, tiny


@pytest.mark.parametrize("seed,which", [(1, "roots"), (2, "roots"), (3, "all")])
def test_blocks_conditioned_on_the_previous_tag_match_the_materialised_machine(seed, which):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    cb = CondBlocks.build(cs, which)
    assert cb.K2 > 0
    phi = random_phi(rng, cs)
    phi2 = random_phi2(rng, cs, cb)
    st = expected_stats_cond(cs, cb, phi, phi2, lt, le)
    full = cb.full(cs, phi, phi2)
    tr, em, b = stats_materialised(cs, full, lt, le)
    assert st.bound == pytest.approx(b, rel=1e-9, abs=1e-9)
    assert np.allclose(st.trans, tr, atol=1e-10) and np.allclose(st.emit, em, atol=1e-10)
    # with nothing conditioned it is the n_q = 1 computation
    none = CondBlocks.build(cs, "none")
    assert expected_stats_cond(cs, none, phi, np.zeros((0, cs.T + 1)), lt, le).bound == pytest.approx(
        expected_stats(cs, phi, lt, le).bound, rel=1e-12)
    # gradients against central finite differences
    g, g2 = d_bound_d_phi_cond(cs, cb, phi, phi2, lt, le)
    eps = 1e-6
    for i in rng.choice(cb.K2, size=min(4, cb.K2), replace=False):
        for tp in range(cs.T + 1):
            p1, p2 = phi2.copy(), phi2.copy()
            p1[i, tp] += eps
            p2[i, tp] -= eps
            fd = (expected_stats_cond(cs, cb, phi, p1, lt, le).bound
                  - expected_stats_cond(cs, cb, phi, p2, lt, le).bound) / (2 * eps)
            assert g2[i, tp] == pytest.approx(fd, rel=1e-5, abs=1e-7)
    for j in rng.choice(phi.size, size=min(6, phi.size), replace=False):
        p1, p2 = phi.copy(), phi.copy()
        p1[j] += eps
        p2[j] -= eps
        fd = (expected_stats_cond(cs, cb, p1, phi2, lt, le).bound
              - expected_stats_cond(cs, cb, p2, phi2, lt, le).bound) / (2 * eps)
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_conditioned_blocks_bound_is_below_the_likelihood_and_vem_raises_it():
    rng, c, cs, allowed, lt, le = tiny(6, V=2, T=2, p_final=0.85)
    for which in ("roots", "all"):
        tr = NGramEM(cs, allowed, lt, le, cond=which)
        hist = tr.run(6)
        b = [h.bound for h in hist]
        assert b[-1] > b[0] + 1e-3
        assert all(y >= x - 1e-9 for x, y in zip(b[1:], b[2:]))
        _, ll = brute(cs, c, 2, 2, cs.uniform_phi(), tr.log_trans, tr.log_emit)
        assert b[-1] <= ll + 1e-9
        full = tr.cond.full(cs, tr.phi, tr.phi2)
        assert bound_materialised(cs, full, tr.log_trans, tr.log_emit) == pytest.approx(b[-1], rel=1e-8)
    # a conditioned block update never does worse than leaving phi2 alone, here
    cb = CondBlocks.build(cs, "all")
    phi, phi2 = random_phi(rng, cs), random_phi2(rng, cs, cb)
    b0 = expected_stats_cond(cs, cb, phi, phi2, lt, le).bound
    new, new2, _ = estep_parallel_cond(cs, cb, phi, phi2, lt, le)
    assert expected_stats_cond(cs, cb, new, new2, lt, le).bound >= b0 - 1e-12
    with pytest.raises(ValueError, match="vem"):
        NGramEM(cs, allowed, lt, le, optimizer="gradient", cond="roots")
    with pytest.raises(ValueError, match="conditioned"):
        CondBlocks.build(cs, "some")


def test_relaxations_stopped_at_their_sweep_limit_raise():
    """Every fixed point of n-gram EM raises NotConvergedError at its sweep limit: alpha2 and U of
    the conditioned path, and the plain path's alpha (the engine's forward on c)."""
    rng, c, cs, allowed, lt, le = tiny(1, V=3, T=3, p_final=0.3)
    cb = CondBlocks.build(cs, "roots")
    phi, phi2 = random_phi(rng, cs), random_phi2(rng, cs, cb)
    st = expected_stats_cond(cs, cb, phi, phi2, lt, le)
    assert st.solve_info.sweeps > 1
    with pytest.raises(NotConvergedError, match="alpha2.*within 1 sweeps"):
        expected_stats_cond(cs, cb, phi, phi2, lt, le, max_sweeps=1)
    *_, info = phi_gradient_cond(cs, cb, phi, phi2, lt, le, st.alpha2)
    assert info.sweeps > 1
    with pytest.raises(NotConvergedError, match="U .*within 1 sweeps"):
        phi_gradient_cond(cs, cb, phi, phi2, lt, le, st.alpha2, max_sweeps=1)
    with pytest.raises(NotConvergedError):
        TiedStructure.build(c, np.maximum(c.ilabel - 1, 0), allowed, max_sweeps=1)

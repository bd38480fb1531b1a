"""n-gram EM's fused pass (fsmlearn.algo.tied.sweep): its statistics are the materialised
machine's, its update is the parallel block update of the per-event kernels, for any
number of parts, and with words that are not a function of c's labels."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import backoff_machine
from fsmlearn.algo.tied.materialise import bound_materialised, stats_materialised
from fsmlearn.algo.tied.objective import estep_parallel, expected_stats
from fsmlearn.algo.tied.structure import TiedStructure
from fsmlearn.algo.tied.sweep import one_pass, sweep_bounds
from tag_ngram_common import random_phi, random_theta, tiny


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("parts", [1, 2, 5, 64])
def test_pass_statistics_are_the_materialised_machines(seed, parts):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    sw = sweep_bounds(cs, parts)
    sb, b = sw.bounds()
    assert sw.threads == parts and b[1][0] == 0 and b[1][-1] == c.num_arcs and b[2][-1] == cs.num_params
    assert np.all(np.diff(b[1]) >= 0) and np.all(np.diff(sb) >= 0)
    assert sb[0] == 0 and sb[-1] == c.num_states
    st = one_pass(cs, sw, phi.copy(), lt, le)
    assert st.bound == pytest.approx(bound_materialised(cs, phi, lt, le), rel=1e-9, abs=1e-9)
    tr, em, _ = stats_materialised(cs, phi, lt, le)
    assert np.allclose(st.trans, tr, atol=1e-10) and np.allclose(st.emit, em, atol=1e-10)
    ref = expected_stats(cs, phi, lt, le)
    assert np.allclose(st.alpha2, ref.alpha2, rtol=1e-12, atol=1e-14)
    assert np.allclose(st.G, ref.G, rtol=1e-12, atol=1e-14)
    assert st.entropy == pytest.approx(ref.entropy, rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("seed", [4, 5, 6])
@pytest.mark.parametrize("parts", [1, 3])
def test_updating_pass_is_the_block_update_then_its_statistics(seed, parts):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.5)
    phi = random_phi(rng, cs)
    st0 = expected_stats(cs, phi, lt, le)
    want = estep_parallel(cs, phi, lt, le, st0.alpha2, None, st0.G)
    got_phi = phi.copy()
    st = one_pass(cs, sweep_bounds(cs, parts), got_phi, lt, le, st0)
    assert np.allclose(got_phi, want, rtol=1e-12, atol=1e-14)
    ref = expected_stats(cs, want, lt, le)
    assert st.bound == pytest.approx(ref.bound, rel=1e-12)
    assert np.allclose(st.trans, ref.trans, rtol=1e-12, atol=1e-14)
    assert np.allclose(st.emit, ref.emit, rtol=1e-12, atol=1e-14)
    assert st.entropy == pytest.approx(ref.entropy, rel=1e-12)


def test_words_that_are_not_a_function_of_the_labels():
    """arc_word may give two arcs of one label different words: the structure then keeps
    the word per arc, and the pass reads it."""
    rng = np.random.default_rng(7)
    c = backoff_machine(rng, V=3, order=3, normalised=True, p_final=0.4)
    V, T = 5, 3
    allowed = rng.random((V + 1, T)) < 0.6
    allowed[np.arange(V + 1), rng.integers(0, T, V + 1)] = True
    arc_word = rng.integers(0, V + 1, c.num_arcs)
    cs = TiedStructure.build(c, arc_word, allowed)
    assert cs.wsrc is not c.ilabel
    words = c.ilabel > 0
    assert np.array_equal(cs.arc_word[words], arc_word[words])
    lt, le = random_theta(rng, T, V, allowed)
    phi = random_phi(rng, cs)
    st = one_pass(cs, sweep_bounds(cs, 2), phi.copy(), lt, le)
    assert st.bound == pytest.approx(bound_materialised(cs, phi, lt, le), rel=1e-9, abs=1e-9)
    tr, em, _ = stats_materialised(cs, phi, lt, le)
    assert np.allclose(st.trans, tr, atol=1e-10) and np.allclose(st.emit, em, atol=1e-10)

"""n-gram EM on both devices (fsmlearn.algo.tied.objective on "cpu", fsmlearn.algo.cuda.tied
on "cuda", in numba's simulator): the same test bodies against the materialised machine,
enumeration and finite differences, and the CUDA results against the CPU's to 1e-6."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.errors import ArgumentError
from fsmlearn.algo.cuda.tied import (cuda_cq, d_bound_d_phi_cuda, estep_parallel_cuda, expected_stats_cuda,
                                     phi_gradient_cuda)
from fsmlearn.tag.ngram.em import NGramEM
from fsmlearn.algo.tied.materialise import bound_materialised, stats_materialised
from fsmlearn.algo.tied.objective import d_bound_d_phi, estep_parallel, expected_stats, phi_gradient
from tag_ngram_common import brute, random_phi, tiny

DEVICES = ["cpu", "cuda"]


def stats_on(device, cs, phi, lt, le):
    return expected_stats(cs, phi, lt, le) if device == "cpu" else expected_stats_cuda(cs, phi, lt, le)


def grad_on(device, cs, phi, lt, le):
    return d_bound_d_phi(cs, phi, lt, le) if device == "cpu" else d_bound_d_phi_cuda(cs, phi, lt, le)


def estep_on(device, cs, phi, lt, le):
    return estep_parallel(cs, phi, lt, le) if device == "cpu" else estep_parallel_cuda(cs, phi, lt, le)


@pytest.mark.parametrize("device", DEVICES)
def test_bound_counts_and_gradient_match_the_materialised_machine(device):
    rng, c, cs, allowed, lt, le = tiny(1, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    st = stats_on(device, cs, phi, lt, le)
    assert st.bound == pytest.approx(bound_materialised(cs, phi, lt, le), rel=1e-9, abs=1e-9)
    tr, em, _ = stats_materialised(cs, phi, lt, le)
    assert np.allclose(st.trans, tr, atol=1e-10) and np.allclose(st.emit, em, atol=1e-10)
    g = grad_on(device, cs, phi, lt, le)
    eps = 1e-6
    for j in rng.choice(phi.size, size=min(4, phi.size), replace=False):
        p1, p2 = phi.copy(), phi.copy()
        p1[j] += eps
        p2[j] -= eps
        fd = (stats_on(device, cs, p1, lt, le).bound - stats_on(device, cs, p2, lt, le).bound) / (2 * eps)
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_bound_matches_enumeration_and_is_a_lower_bound(device):
    rng, c, cs, allowed, lt, le = tiny(4, V=2, T=2, p_final=0.85)
    phi = random_phi(rng, cs)
    b_enum, ll = brute(cs, c, 2, 2, phi, lt, le)
    st = stats_on(device, cs, phi, lt, le)
    assert st.bound == pytest.approx(b_enum, abs=1e-10 + 200 * brute.tail)
    assert st.bound <= ll + 1e-9


@pytest.mark.parametrize("device", DEVICES)
def test_block_update_raises_the_bound_at_fixed_theta(device):
    rng, c, cs, allowed, lt, le = tiny(7, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    new = estep_on(device, cs, phi, lt, le)
    # every block is a distribution, and the update is a softmax of the block scores
    arc_of = np.repeat(np.arange(c.num_arcs), np.diff(cs.blk_start))
    z = np.zeros(c.num_arcs)
    np.add.at(z, arc_of, new)
    used = np.diff(cs.blk_start) > 0
    assert np.allclose(z[used], 1.0, atol=1e-12)
    A, B = phi_gradient(cs, phi, lt, le)
    a = int(np.argmax(np.where(used, A, -1.0)))
    lo, hi = cs.blk_start[a], cs.blk_start[a + 1]
    x = B[lo:hi] / A[a]
    assert np.allclose(new[lo:hi], np.exp(x - x.max()) / np.exp(x - x.max()).sum(), atol=1e-12)
    assert stats_on(device, cs, new, lt, le).bound >= stats_on(device, cs, phi, lt, le).bound - 1e-12


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("optimizer", ["vem", "gradient"])
def test_training_improves_the_bound_and_stays_below_the_likelihood(device, optimizer):
    rng, c, cs, allowed, lt, le = tiny(6, V=2, T=2, p_final=0.85)
    tr = NGramEM(cs, allowed, lt, le, optimizer=optimizer, device=device)
    b = [h.bound for h in tr.run(4)]
    assert b[-1] > b[0] + 1e-3
    assert all(y >= x - 1e-12 for x, y in zip(b, b[1:]))
    _, ll = brute(cs, c, 2, 2, tr.phi, tr.log_trans, tr.log_emit)
    assert b[-1] <= ll + 1e-9


@pytest.mark.parametrize("seed", [2, 3])
def test_cuda_agrees_with_cpu_to_1e6(seed):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    a = expected_stats(cs, phi, lt, le)
    b = expected_stats_cuda(cs, phi, lt, le)
    for x, y in ((a.trans, b.trans), (a.emit, b.emit), (a.alpha2, b.alpha2.copy_to_host()),
                 (a.G, b.G.copy_to_host())):
        assert np.allclose(y, x, rtol=1e-6, atol=1e-15)
    assert b.bound == pytest.approx(a.bound, rel=1e-6)
    assert b.entropy == pytest.approx(a.entropy, rel=1e-6)
    A1, B1 = phi_gradient(cs, phi, lt, le)
    A2, B2 = phi_gradient_cuda(cs, phi, lt, le)
    assert np.allclose(A2, A1, rtol=1e-6, atol=0) and np.allclose(B2, B1, rtol=1e-6, atol=1e-15)
    assert np.allclose(estep_parallel_cuda(cs, phi, lt, le), estep_parallel(cs, phi, lt, le), rtol=1e-6, atol=1e-15)
    hc = NGramEM(cs, allowed, lt, le, device="cpu").run(3)
    hg = NGramEM(cs, allowed, lt, le, device="cuda").run(3)
    assert np.allclose([h.bound for h in hg], [h.bound for h in hc], rtol=1e-6, atol=0)


def test_cuda_arguments_are_checked():
    rng, c, cs, allowed, lt, le = tiny(1, V=2, T=2)
    with pytest.raises(ArgumentError, match="CUDA"):
        NGramEM(cs, allowed, lt, le, cond="all", device="cuda")
    with pytest.raises(ArgumentError, match="device"):
        NGramEM(cs, allowed, lt, le, device="tpu")
    with pytest.raises(ArgumentError, match="shape"):
        cuda_cq(cs).put(np.ones(cs.num_params + 1))

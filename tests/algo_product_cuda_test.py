"""The tagged product's systems on the device (fsmlearn.algo.cuda.product, in numba's
simulator): forward and backward values, posteriors, the expectation and its gradient on
device="cuda" equal the CPU's to the solves' tolerance, on cyclic backoff machines with
exclusion arcs, blocks by previous tag or not, with and without the transition factor,
and the device's errors are the CPU's."""

from __future__ import annotations

import numpy as np
import pytest

from algo_product_test import _random_product
from fsmlearn.algo.product import (product_backward, product_block_update, product_expectation,
                                   product_expectation_gradient, product_forward, product_posteriors,
                                   relax_block_system, tag_product)
from fsmlearn.errors import DivergenceError, NotConvergedError

TOL = 1e-12


def _pair(seed, by_prev, trans, schedule="auto"):
    m, T, ptr, tags, w, H = _random_product(seed, by_prev=by_prev, trans=trans)
    return [tag_product(m, T, ptr, tags, w, H, schedule=schedule, device=d) for d in ("cpu", "cuda")]


@pytest.mark.parametrize("seed,by_prev,trans,schedule", [(1, False, True, "auto"), (2, True, True, "auto"),
                                                         (3, False, False, "general"), (4, True, False, "auto"),
                                                         (5, False, False, "auto")])
def test_the_device_solves_like_the_cpu(seed, by_prev, trans, schedule):
    cpu, dev = _pair(seed, by_prev, trans, schedule)
    a0, i0 = product_forward(cpu, tol=TOL)
    a1, i1 = product_forward(dev, tol=TOL)
    assert i1.sweeps > 1 and abs(i1.sweeps - i0.sweeps) <= 1        # the same iteration, up to rounding
    assert np.allclose(a1, a0, rtol=1e-9, atol=1e-13)
    b0, _ = product_backward(cpu, tol=TOL)
    b1, _ = product_backward(dev, tol=TOL)
    assert np.allclose(b1, b0, rtol=1e-9, atol=1e-13)
    p0 = product_posteriors(cpu, tol=TOL)
    p1 = product_posteriors(dev, tol=TOL)
    for x, y in zip(p0, p1):
        assert np.allclose(y, x, rtol=1e-8, atol=1e-12)
    T = cpu.T
    rng = np.random.default_rng(seed)
    ev = rng.normal(size=cpu.blk_tag.shape[0])
    tv = rng.normal(size=(T + 1, T + 1))
    assert product_expectation(dev, ev, tv, tol=TOL) == pytest.approx(product_expectation(cpu, ev, tv, tol=TOL),
                                                                        rel=1e-8)
    g0 = product_expectation_gradient(cpu, ev, tv, tol=TOL)
    g1 = product_expectation_gradient(dev, ev, tv, tol=TOL)
    assert np.allclose(g1, g0, rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("schedule", ["auto", "general"])
def test_the_device_block_update_equals_the_cpus(schedule):
    cpu, dev = _pair(6, False, False, schedule)
    ev = np.random.default_rng(6).normal(size=cpu.blk_tag.shape[0])
    assert np.allclose(product_block_update(dev, ev, tol=TOL), product_block_update(cpu, ev, tol=TOL),
                       rtol=1e-9, atol=1e-12)


def _loop_system(k):
    """One state with a self-loop of weight k, one block of one entry, source 1."""
    z = np.zeros(1, np.int64)
    return dict(B=np.ones((1, 1)), src=z, dst=z, scale=np.array([k]), block=z, blk_ptr=np.array([0, 1]),
                blk_col=z, blk_w=np.ones((1, 1)), blk_row0=z, phi_parent=np.array([-1]), phi_weight=np.zeros(1),
                order=z)


def test_the_device_errors_are_the_cpus():
    for device in ("cpu", "cuda"):
        x, info = relax_block_system(**_loop_system(0.5), tol=1e-12, device=device)
        assert x[0, 0] == pytest.approx(2.0, rel=1e-10)
        with pytest.raises(DivergenceError):
            relax_block_system(**_loop_system(1.5), device=device)
        with pytest.raises(NotConvergedError):
            relax_block_system(**_loop_system(0.999), tol=1e-14, max_sweeps=2, device=device)
        bad = _loop_system(0.5)
        bad["B"] = np.full((1, 1), np.nan)
        with pytest.raises(DivergenceError, match="unbounded at state 0"):
            relax_block_system(**bad, device=device)

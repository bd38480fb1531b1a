"""Posteriors, gradients (finite differences) and the expectation semiring."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from conftest import random_machine, tiny_machines
from fsmlearn.algo import (arc_posteriors, expectation, forward_backward, logz_gradient,
                           total_weight)
from fsmlearn.testing import enumerate_paths


@pytest.mark.parametrize("cyclic", [False, True])
def test_gradient_matches_finite_differences(rng, cyclic):
    m = random_machine(rng, 40, 200, cyclic=cyclic, mass=0.8)
    ga, gf = logz_gradient(m)
    h = 1e-5
    for a in rng.choice(m.num_arcs, 15, replace=False):
        w = m.weight.copy()
        w[a] += h
        up = -total_weight(m.replace(weight=w), tol=1e-14)
        w[a] -= 2 * h
        down = -total_weight(m.replace(weight=w), tol=1e-14)
        assert ga[a] == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-9)
    for q in rng.choice(m.num_states, 5, replace=False):
        f = m.final.copy()
        f[q] += h
        up = -total_weight(m.replace(final=f), tol=1e-14)
        f[q] -= 2 * h
        down = -total_weight(m.replace(final=f), tol=1e-14)
        assert gf[q] == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-9)


def test_real_weight_gradient(rng):
    m = random_machine(rng, 30, 120, semiring="real", mass=0.7)
    ga, _ = logz_gradient(m)
    h = 1e-7
    a = 17
    w = m.weight.copy()
    w[a] += h
    up = math.log(total_weight(m.replace(weight=w), "real", tol=1e-14))
    w[a] -= 2 * h
    down = math.log(total_weight(m.replace(weight=w), "real", tol=1e-14))
    assert ga[a] == pytest.approx((up - down) / (2 * h), rel=1e-5)


@given(tiny_machines(cyclic=False))
def test_posteriors_and_expectations_equal_enumeration(m):
    paths = list(enumerate_paths(m))
    z = sum(p for _, p in paths)
    if z == 0:
        return
    post = np.zeros(m.num_arcs)
    for arcs, p in paths:
        for a in arcs:
            post[a] += p / z
    assert np.allclose(arc_posteriors(m), post, rtol=1e-10, atol=1e-12)
    v = np.stack([np.arange(m.num_arcs) % 3 - 1.0, np.cos(np.arange(m.num_arcs))], axis=1)
    want = sum(p * v[list(arcs)].sum(axis=0) for arcs, p in paths) / z
    got = expectation(m, v)
    assert np.allclose(got, want, rtol=1e-10, atol=1e-12)
    # and the expectation equals the posterior-weighted sum of the values
    assert np.allclose(got, arc_posteriors(m) @ v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cyclic", [False, True])
def test_expectation_semiring_equals_posterior_sum_on_larger_machines(rng, cyclic):
    m = random_machine(rng, 500, 4000, cyclic=cyclic)
    v = rng.normal(size=(m.num_arcs, 3))
    assert np.allclose(expectation(m, v), arc_posteriors(m) @ v, rtol=1e-8, atol=1e-10)


def test_posteriors_sum_to_expected_lengths(rng):
    m = random_machine(rng, 200, 1500, mass=0.9)
    fb = forward_backward(m)
    # each path stops once: final posteriors sum to 1
    assert fb.final_posteriors.sum() == pytest.approx(1.0, abs=1e-9)
    # expected length = sum of arc posteriors = E[#arcs] (1/(1-0.9) - 1 = 9 for this machine)
    assert fb.posteriors.sum() == pytest.approx(expectation(m, np.ones(m.num_arcs))[0], rel=1e-9)
    assert fb.posteriors.sum() == pytest.approx(9.0, rel=1e-6)

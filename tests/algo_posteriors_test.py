"""Posteriors, gradients (finite differences), the expectation semiring (values on arcs and on
final weights), entropy, and machines without an accepting path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import backoff_machine, random_machine, tiny_machines
from fsmlearn import Machine, NoAcceptingPathError
from fsmlearn.algo import (arc_posteriors, compose, entropy, expectation, final_posteriors, forward_backward,
                           log_partition_gradient, phi_expand, total_weight)
from fsmlearn.errors import SemiringError
from fsmlearn.testing import enumerate_paths


def _central_difference(m, field, i, h):
    """The central difference of -total_weight(m) in entry i of ``m.<field>`` ("weight" or "final")."""
    x = getattr(m, field).copy()
    x[i] += h
    up = -total_weight(m.replace(**{field: x}), tol=1e-14)
    x[i] -= 2 * h
    down = -total_weight(m.replace(**{field: x}), tol=1e-14)
    return (up - down) / (2 * h)


@pytest.mark.parametrize("cyclic", [False, True])
def test_gradient_matches_finite_differences(rng, cyclic):
    m = random_machine(rng, 40, 200, cyclic=cyclic, mass=0.8)
    ga, gf = log_partition_gradient(m)
    h = 1e-5
    for a in rng.choice(m.num_arcs, 15, replace=False):
        assert ga[a] == pytest.approx(_central_difference(m, "weight", a, h), rel=1e-5, abs=1e-9)
    for q in rng.choice(m.num_states, 5, replace=False):
        assert gf[q] == pytest.approx(_central_difference(m, "final", q, h), rel=1e-5, abs=1e-9)


def test_real_weight_gradient(rng):
    m = random_machine(rng, 30, 120, semiring="real", mass=0.7)
    ga, _ = log_partition_gradient(m)
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
        with pytest.raises(NoAcceptingPathError):
            expectation(m, np.ones(m.num_arcs))
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


# ---------------------------------------------------------------- names that say their sign


def test_forward_backward_names_say_their_sign(rng):
    m = random_machine(rng, 30, 120, mass=0.7)
    m = m.replace(final=m.final + 0.4)                  # Z < 1: ln Z < 0 < -ln Z
    fb = forward_backward(m)
    assert fb.cost == pytest.approx(total_weight(m), abs=1e-12)
    assert fb.log_partition == pytest.approx(-total_weight(m), abs=1e-12)
    assert fb.log_partition < 0 < fb.cost
    with pytest.raises(AttributeError, match="log_partition"):
        fb.logz
    assert not hasattr(fb, "logz")


# ---------------------------------------------------------------- final values and entropy


def as_log(m):
    """The same real-weight machine with its weights as negative logs."""
    w, f = m.neglog_weights()
    return m.replace(weight=w, final=f, semiring="log")


def end_state(m, arcs):
    return int(m.dst[arcs[-1]]) if arcs else m.start


@given(tiny_machines(cyclic=False), st.booleans())
def test_final_values_and_entropy_equal_enumeration(m, log):
    if log:
        m = as_log(m)
    paths = list(enumerate_paths(m))
    z = sum(p for _, p in paths)
    n = m.num_states
    v = np.stack([np.arange(m.num_arcs) % 3 - 1.0, np.sin(np.arange(m.num_arcs))], axis=1)
    fv = np.stack([np.arange(n) * 0.5 - 1.0, np.cos(np.arange(n) + 0.5)], axis=1)
    if z == 0:
        with pytest.raises(NoAcceptingPathError, match="no accepting path"):
            expectation(m, v, final_values=fv)
        with pytest.raises(NoAcceptingPathError, match="no accepting path"):
            entropy(m)
        return
    want = sum(p * (v[list(arcs)].sum(axis=0) + fv[end_state(m, arcs)]) for arcs, p in paths) / z
    assert np.allclose(expectation(m, v, final_values=fv), want, rtol=1e-10, atol=1e-12)
    # 1-D values, and final values alone
    want0 = sum(p * fv[end_state(m, arcs), 0] for arcs, p in paths) / z
    assert expectation(m, np.zeros(m.num_arcs), final_values=fv[:, 0])[0] == pytest.approx(want0, rel=1e-10,
                                                                                             abs=1e-12)
    # the entropy of the path distribution, final weights included
    H = -sum(p / z * math.log(p / z) for _, p in paths)
    got = entropy(m)
    assert got == pytest.approx(H, rel=1e-9, abs=1e-12)
    assert got >= -1e-12


def test_entropy_counts_the_final_weights():
    # two paths of the same arc weights that differ only in their final weights 0.3 and 0.7:
    # without the final weights the entropy would come out as ln 2 - (a wrong 0.0 for the costs)
    m = Machine.from_arcs(3, 0, np.array([0.0, 0.3, 0.7]), [0, 0], [1, 2], [1, 2], weight=[1.0, 1.0],
                          semiring="real")
    h = -(0.3 * math.log(0.3) + 0.7 * math.log(0.7))
    assert entropy(m) == pytest.approx(h, rel=1e-12)
    assert entropy(as_log(m)) == pytest.approx(h, rel=1e-12)
    # the expectation of the final weights' costs is what arc values alone leave out
    cost = expectation(m, np.zeros(2), final_values=[0.0, -math.log(0.3), -math.log(0.7)])[0]
    assert cost == pytest.approx(h, rel=1e-12)
    assert expectation(m, np.zeros(2))[0] == 0.0


@pytest.mark.parametrize("p,c", [(0.1, 1.0), (0.5, 3.0), (0.9, 0.2)])
@pytest.mark.parametrize("semiring", ["log", "real"])
def test_entropy_of_a_loop_has_the_closed_form(p, c, semiring):
    # one state, a self-loop of weight p and final weight c (1 - p): Z = c and the path
    # with k loops has probability p^k (1 - p), so H = (-p ln p - (1 - p) ln(1 - p)) / (1 - p)
    m = Machine.from_arcs(1, 0, np.array([c * (1 - p)]), [0], [0], [1], weight=[p], semiring="real")
    if semiring == "log":
        m = as_log(m)
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p)) / (1 - p)
    assert entropy(m) == pytest.approx(h, rel=1e-9)
    # E[loops] = p / (1 - p); a final value is collected once
    assert expectation(m, [1.0], final_values=[2.0])[0] == pytest.approx(p / (1 - p) + 2.0, rel=1e-9)


@pytest.mark.parametrize("p,q,f0,f1", [(0.5, 0.6, 0.2, 0.9), (0.9, 0.95, 1.5, 0.01), (0.3, 0.2, 0.0, 2.0)])
def test_entropy_of_a_two_state_cycle_has_the_closed_form(p, q, f0, f1):
    # 0 -p-> 1 -q-> 0, final weights f0, f1: (ab)^k ends at 0 with weight r^k f0, (ab)^k a
    # at 1 with weight r^k p f1 (r = pq); sum the geometric series for Z and E[cost]
    m = Machine.from_arcs(2, 0, np.array([f0, f1]), [0, 1], [1, 0], [1, 2], weight=[p, q], semiring="real")
    r = p * q
    s0, s1 = 1 / (1 - r), r / (1 - r) ** 2               # sum r^k, sum k r^k
    Z = (f0 + p * f1) * s0
    lg = lambda x: math.log(x) if x > 0 else 0.0        # (a zero final weight carries no paths)
    ec = (f0 * (-math.log(r) * s1 - lg(f0) * s0)
          + p * f1 * (-math.log(r) * s1 - (math.log(p) + lg(f1)) * s0)) / Z
    assert entropy(m) == pytest.approx(math.log(Z) + ec, rel=1e-9)
    assert entropy(as_log(m)) == pytest.approx(math.log(Z) + ec, rel=1e-9)
    # the probability of ending in state 1, by final values
    assert expectation(m, np.zeros(2), final_values=[0.0, 1.0])[0] == pytest.approx(p * f1 / (f0 + p * f1),
                                                                                     rel=1e-9)


@pytest.mark.parametrize("cyclic", [False, True])
def test_entropy_equals_the_posterior_weighted_costs(rng, cyclic):
    # H = ln Z + sum_a post(a) c(a) + sum_q fpost(q) c_f(q): the expectation semiring against
    # the forward-backward flows on a larger machine
    m = random_machine(rng, 300, 2000, cyclic=cyclic, mass=0.8)
    m = m.replace(final=m.final + rng.random(m.num_states))      # not normalised: Z != 1
    fb = forward_backward(m)
    want = fb.log_partition + fb.posteriors @ m.weight + fb.final_posteriors @ m.final
    assert entropy(m) == pytest.approx(want, rel=1e-8)
    fv = rng.normal(size=m.num_states)
    v = rng.normal(size=m.num_arcs)
    assert expectation(m, v, final_values=fv)[0] == pytest.approx(fb.posteriors @ v + fb.final_posteriors @ fv,
                                                                   rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("phi_final", [True, False])
def test_entropy_of_a_phi_machine_equals_that_of_its_expansion(seed, phi_final):
    # failure semantics: each path of the expansion is one path of the phi machine, same weight
    rng = np.random.default_rng(seed)
    m = backoff_machine(rng, V=3, order=3, normalised=bool(seed % 2))
    e = phi_expand(m, phi_final)
    assert entropy(m, phi_final=phi_final) == pytest.approx(entropy(e), rel=1e-8)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("phi_final", [True, False])
def test_final_values_of_a_phi_machine_are_the_final_weights_gradient(seed, phi_final):
    # E[1{the path ends by state r's final weight}] = d(-ln Z) / d(-ln f_r): the final value of
    # r is collected where r's final weight is used, also when a state fails over to it
    rng = np.random.default_rng(50 + seed)
    m = backoff_machine(rng, V=3, order=3, normalised=False)
    h = 1e-5
    cost = lambda f: total_weight(m.replace(final=f), phi_final=phi_final, tol=1e-14)
    finals = np.flatnonzero(np.isfinite(m.final))
    ev = expectation(m, np.zeros((m.num_arcs, finals.size)), final_values=np.eye(m.num_states)[:, finals],
                     phi_final=phi_final, tol=1e-14)
    for j, r in enumerate(finals):
        up, down = m.final.copy(), m.final.copy()
        up[r] += h
        down[r] -= h
        assert ev[j] == pytest.approx((cost(up) - cost(down)) / (2 * h), rel=1e-6, abs=1e-9)
    assert ev.sum() == pytest.approx(1.0, rel=1e-9)


# ---------------------------------------------------------------- no accepting path


def machines_without_a_path():
    return {
        "no start state": Machine.from_arcs(2, -1, {1: 0.0}, [0], [1], [1]),
        "final state unreachable": Machine.from_arcs(3, 0, {2: 0.0}, [0], [1], [1]),
        "only a zero-weight arc": Machine.from_arcs(2, 0, {1: 0.0}, [0], [1], [1], weight=[np.inf]),
        "no final weight": Machine.from_arcs(2, 0, np.zeros(2), [0], [1], [1], weight=[0.5], semiring="real"),
    }


@pytest.mark.parametrize("name", list(machines_without_a_path()))
def test_a_machine_without_an_accepting_path_raises(name):
    m = machines_without_a_path()[name]
    calls = {
        "forward_backward": lambda: forward_backward(m),
        "arc_posteriors": lambda: arc_posteriors(m),
        "final_posteriors": lambda: final_posteriors(m),
        "log_partition_gradient": lambda: log_partition_gradient(m),
        "expectation": lambda: expectation(m, np.ones(m.num_arcs)),
        "expectation with final values": lambda: expectation(m, np.ones(m.num_arcs),
                                                             final_values=np.ones(m.num_states)),
        "entropy": lambda: entropy(m),
    }
    for what, call in calls.items():
        with pytest.raises(NoAcceptingPathError, match=r"no accepting path.*Z = 0"):
            call()
    fb = forward_backward(m, allow_empty=True)
    assert fb.log_partition == -math.inf and fb.cost == math.inf
    assert not fb.posteriors.any() and not fb.final_posteriors.any()


def test_bad_final_values_are_refused(rng):
    m = random_machine(rng, 10, 30)
    with pytest.raises(SemiringError, match="final_values"):
        expectation(m, np.ones(m.num_arcs), final_values=np.ones(m.num_states + 1))
    with pytest.raises(SemiringError, match="final_values"):
        expectation(m, np.ones((m.num_arcs, 2)), final_values=np.ones((m.num_states, 3)))
    with pytest.raises(SemiringError, match="not finite"):
        expectation(m, np.ones(m.num_arcs), final_values=np.full(m.num_states, np.nan))


@pytest.mark.parametrize("seed", range(5))
def test_entropy_of_a_lattice_composed_with_a_backoff_lm_equals_enumeration(seed):
    # the trap: on a lattice composed with an LM the final weights carry the LM's </s>
    # probabilities, which an entropy from arc values alone leaves out
    rng = np.random.default_rng(70 + seed)
    lattice = random_machine(rng, 6, 12, cyclic=False, mass=0.9, labels=3)
    lm = backoff_machine(rng, V=3, order=3)
    m = compose(lattice, lm)
    paths = list(enumerate_paths(m))
    z = sum(p for _, p in paths)
    H = -sum(p / z * math.log(p / z) for _, p in paths)
    assert entropy(m) == pytest.approx(H, rel=1e-9, abs=1e-12)
    w, f = m.neglog_weights()
    end = [end_state(m, arcs) for arcs, _ in paths]
    assert np.isfinite(f[end]).all() and (f[end] > 0).any()    # the final weights carry mass here


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("phi_final", [True, False])
def test_gradient_of_a_phi_machine_matches_finite_differences(seed, phi_final):
    # d ln Z / d(cost of final weight r) counts the paths that fail over to r's final weight
    rng = np.random.default_rng(60 + seed)
    m = backoff_machine(rng, V=3, order=3, normalised=False)
    ga, gf = log_partition_gradient(m, phi_final=phi_final, tol=1e-14)
    lnz = lambda **c: -total_weight(m.replace(**c), phi_final=phi_final, tol=1e-14)
    h = 1e-5
    for r in np.flatnonzero(np.isfinite(m.final)):
        up, down = m.final.copy(), m.final.copy()
        up[r] += h
        down[r] -= h
        assert gf[r] == pytest.approx((lnz(final=up) - lnz(final=down)) / (2 * h), rel=1e-6, abs=1e-9)
    for a in rng.choice(m.num_arcs, 6, replace=False):
        up, down = m.weight.copy(), m.weight.copy()
        up[a] += h
        down[a] -= h
        assert ga[a] == pytest.approx((lnz(weight=up) - lnz(weight=down)) / (2 * h), rel=1e-6, abs=1e-9)
    # the same as the expected use of each final weight, by final values
    finals = np.flatnonzero(np.isfinite(m.final))
    ev = expectation(m, np.zeros((m.num_arcs, finals.size)), final_values=np.eye(m.num_states)[:, finals],
                     phi_final=phi_final, tol=1e-14)
    assert np.allclose(-gf[finals], ev, rtol=1e-9, atol=1e-12)
    assert not gf[~np.isfinite(m.final)].any()

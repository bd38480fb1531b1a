"""Layer 3: a one-column sweep's statistics (fsmlearn.algo.convergence.sweep_stats_rows), the
figures the stopping rule takes after each sweep, against numpy on the same rows: the largest
relative change, the extremes and the non-finite row exactly (they do not depend on the
order), the L1 change to the rounding of a sum of that many terms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmlearn.algo.convergence import sweep_stats_rows, sweep_stats_start
from fsmlearn.algo.solve_linear import sweep_stats


def reference(y, yold, has):
    """[dn, sd, ymax, ymin, bad] by numpy, as sweep_stats_rows defines them."""
    idx = np.flatnonzero(has)
    m = np.abs(y[idx])
    with np.errstate(invalid="ignore"):
        d = np.abs(y[idx] - yold[idx])
        badrows = idx[~(m < np.inf) | np.isnan(d)]
    pos = m > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        q = d[pos] / m[pos]
    dn = max(np.max(q, initial=0.0), 1.0 if np.any(d[~pos] > 0) else 0.0)
    return [dn, float(np.sum(d)), np.max(m[pos], initial=0.0), np.min(m[pos], initial=np.inf),
            float(badrows[-1]) if badrows.size else -1.0]


def check(st, want, terms):
    assert st[4] == want[4]
    if want[4] >= 0:
        return                  # the other figures are not to be used then
    assert st[0] == want[0] and st[2] == want[2] and st[3] == want[3]
    np.testing.assert_allclose(st[1], want[1], rtol=max(terms, 1) * 2.0**-52, atol=0)


def values(rng, n):
    """Values of magnitudes 1e-300 to 1e300, signs mixed, some zero, with changes of every size."""
    y = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-300, 300, n)
    y[rng.random(n) < 0.1] = 0.0
    yold = y * (1 + 10.0 ** rng.uniform(-17, 1, n) * rng.choice([-1.0, 1.0], n))
    yold[rng.random(n) < 0.05] = 0.0
    same = rng.random(n) < 0.1
    yold[same] = y[same]
    return y, yold


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17, 1000, 4099])
@pytest.mark.parametrize("dtype", [np.bool_, np.uint8])
def test_the_statistics_are_numpys_on_the_same_rows(rng, n, dtype):
    y, yold = values(rng, n)
    has = (rng.integers(0, 3, n) if dtype is np.uint8 else rng.random(n) < 0.8).astype(dtype)
    st = np.empty(5)
    sweep_stats_start(st)
    sweep_stats_rows(y, yold, has, 0, n, st)
    check(st, reference(y, yold, has != 0), n)
    # sweep_stats: the same, over every row
    st2 = np.full(5, np.nan)
    sweep_stats(y, yold, has, True, st2)
    assert np.array_equal(st, st2)
    sweep_stats(y, yold, has, False, st2)
    assert np.array_equal(st2, [0.0, 0.0, 0.0, np.inf, -1.0])


def test_rows_added_in_ranges_are_the_rows_added_at_once(rng):
    n = 5000
    y, yold = values(rng, n)
    has = rng.random(n) < 0.9
    cuts = np.r_[0, np.sort(rng.choice(np.arange(1, n), 7, replace=False)), n]
    st = np.empty(5)
    sweep_stats_start(st)
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        sweep_stats_rows(y, yold, has, lo, hi, st)
    check(st, reference(y, yold, has), n)


def test_a_zero_row_that_changed_counts_as_a_change_of_one():
    y = np.array([0.0, 2.0, 0.0])
    yold = np.array([1e-300, 2.0, 0.0])
    st = np.empty(5)
    sweep_stats(y, yold, np.ones(3, np.bool_), True, st)
    assert st[0] == 1.0 and st[1] == 1e-300 and st[2] == st[3] == 2.0 and st[4] == -1


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_the_last_non_finite_row_is_named(rng, bad):
    n = 300
    y, yold = values(rng, n)
    has = np.ones(n, np.bool_)
    y[[17, 203]] = bad
    yold[150] = np.nan            # a change that is NaN
    has[203] = False              # not a row with arcs: it does not count
    st = np.empty(5)
    sweep_stats(y, yold, has, True, st)
    assert st[4] == 150.0
    sweep_stats_start(st)
    sweep_stats_rows(y, yold, has, 0, 100, st)
    assert st[4] == 17.0
    sweep_stats_rows(y, yold, has, 200, 300, st)
    assert st[4] == 17.0          # rows 200-299 hold none that counts


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e300, 1e300), st.floats(-1e300, 1e300), st.booleans()), max_size=40))
def test_any_finite_rows(rows):
    y = np.array([r[0] for r in rows], float)
    yold = np.array([r[1] for r in rows], float)
    has = np.array([r[2] for r in rows], np.bool_)
    st = np.empty(5)
    with np.errstate(over="ignore"):
        want = reference(y, yold, has)
    sweep_stats(y, yold, has, True, st)
    check(st, want, len(rows))

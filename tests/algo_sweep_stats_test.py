"""Layer 3: a one-column sweep's statistics (fsmlearn.algo.convergence.sweep_stats_rows), the
figures the stopping rule takes after each sweep, against numpy on the same rows
(conftest.sweep_stats_reference): the largest relative change, the extremes and the last
non-finite row exactly (they do not depend on the order), the L1 change to the rounding of a
sum of that many terms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from conftest import assert_sweep_stats
from fsmlearn.algo.convergence import sweep_stats_rows, sweep_stats_start
from fsmlearn.algo.solve_linear import sweep_stats


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
    assert_sweep_stats(st, y, yold, has != 0)
    # sweep_stats: the same, over every row
    st2 = np.full(5, np.nan)
    sweep_stats(y, yold, has, True, st2)
    assert_sweep_stats(st2, y, yold, has != 0)
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
    assert_sweep_stats(st, y, yold, has)


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
    assert_sweep_stats(st, y, yold, has)
    sweep_stats_start(st)
    sweep_stats_rows(y, yold, has, 0, 100, st)
    assert st[4] == 17.0
    sweep_stats_rows(y, yold, has, 200, 300, st)
    assert st[4] == 17.0          # rows 200-299 hold none that counts
    assert_sweep_stats(st, np.r_[y[:100], y[200:]], np.r_[yold[:100], yold[200:]], np.r_[has[:100], has[200:]])


def test_a_nan_value_counts_only_as_a_bad_row():
    # the rows with finite values keep their figures, as a comparison with NaN leaves it out
    st = np.empty(5)
    sweep_stats(np.array([2.0, np.nan]), np.array([1.0, 1.0]), np.ones(2, np.bool_), True, st)
    assert st[0] == 0.5 and np.isnan(st[1]) and st[2] == st[3] == 2.0 and st[4] == 1
    sweep_stats(np.array([2.0, 3.0]), np.array([1.0, np.nan]), np.ones(2, np.bool_), True, st)
    assert st[0] == 0.5 and np.isnan(st[1]) and st[2] == 3.0 and st[3] == 2.0 and st[4] == 1


@settings(max_examples=60, deadline=None)
@given(hst.lists(hst.tuples(hst.floats(-1e300, 1e300), hst.floats(-1e300, 1e300), hst.booleans()), max_size=40))
def test_any_finite_rows(rows):
    y = np.array([r[0] for r in rows], float)
    yold = np.array([r[1] for r in rows], float)
    has = np.array([r[2] for r in rows], np.bool_)
    st = np.empty(5)
    sweep_stats(y, yold, has, True, st)
    assert_sweep_stats(st, y, yold, has)

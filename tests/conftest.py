"""Shared fixtures and hypothesis strategies for the fsmlearn tests."""

from __future__ import annotations

import os

# The CUDA path's tests (device="cuda") run in numba's CUDA simulator unless the
# caller chose otherwise (NUMBA_ENABLE_CUDASIM=0 on a machine with a GPU runs
# them on the GPU).  numba reads the variable when it is first imported, so it
# is set here, before anything imports numba; it changes numba.cuda only.
if "NUMBA_ENABLE_CUDASIM" not in os.environ:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fsmlearn import Machine
from fsmlearn.testing.machines import backoff_machine, random_machine  # noqa: F401 (tests import them from here)

settings.register_profile("default", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", deadline=None, max_examples=500,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("FSMLEARN_HYPOTHESIS", "default"))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@st.composite
def tiny_machines(draw, max_states=4, max_arcs=6, cyclic=True, max_weight=0.3, max_out=3, max_mass=0.5):
    """Tiny machines for brute-force checks: real weights in (0, max_weight].

    Cyclic ones have at most ``max_out`` arcs per state carrying at most
    ``max_mass`` in all, so that the paths heavier than 1e-9 stay few.
    """
    n = draw(st.integers(1, max_states))
    E = draw(st.integers(0, max_arcs))
    src = [draw(st.integers(0, n - 1)) for _ in range(E)]
    if cyclic:
        count = {}
        keep = []
        for s in src:
            if count.get(s, 0) < max_out:
                count[s] = count.get(s, 0) + 1
                keep.append(s)
        src = keep
        dst = [draw(st.integers(0, n - 1)) for _ in src]
    else:
        src = [s for s in src if s < n - 1]
        dst = [draw(st.integers(s + 1, n - 1)) for s in src]
    E = len(src)
    w = np.array([draw(st.floats(0.02, max_weight)) for _ in range(E)])
    if cyclic and E:
        tot = np.bincount(src, w, minlength=n)
        scale = np.minimum(1.0, max_mass / np.maximum(tot, 1e-300))
        w = w * scale[np.asarray(src)]
    lab = [draw(st.integers(1, 3)) for _ in range(E)]
    final = [draw(st.one_of(st.just(0.0), st.floats(0.05, 0.9))) for _ in range(n)]
    if not any(final):
        final[draw(st.integers(0, n - 1))] = 0.5
    return Machine.from_arcs(n, 0, np.array(final), src, dst, lab, weight=w, semiring="real")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """Kernels compiled from numba modules edited since the cache was filled are removed first:
    numba keys a kernel on its own file only, and one that inlines another module's kernel
    would run the old code (fsmlearn.testing.numba_cache).  Under pytest-xdist the controlling
    process does it before it starts the workers (they skip it: one of them would remove what
    another had just compiled)."""
    if hasattr(session.config, "workerinput"):
        return
    from fsmlearn.testing.numba_cache import clear_stale_cache
    clear_stale_cache()


def pytest_terminal_summary(terminalreporter):
    """The fuzz tests' tally per reader (``make fuzz`` prints it; see tests/fuzz.py)."""
    from fuzz import report_tally
    lines = report_tally()
    if lines:
        terminalreporter.section("fuzz: inputs tried per reader and the answers")
        for line in lines:
            terminalreporter.write_line(line)


def sweep_stats_reference(y, yold, has):
    """A one-column sweep's statistics [dn, sd, ymax, ymin, bad] by numpy, as
    fsmlearn.algo.convergence.sweep_stats_rows defines them: over the rows ``has``, with
    m = |y| and d = |y - yold|, the largest d / m over rows with 0 < m (NaN quotients left
    out) and 1 where a row with m = 0 changed; the sum of d; the largest and smallest m
    above 0 (a NaN m left out); the last row whose m is not finite or whose d is NaN, or -1."""
    idx = np.flatnonzero(has)
    m = np.abs(y[idx])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = np.abs(y[idx] - yold[idx])
        pos = m > 0                                   # False for NaN
        q = d[pos] / m[pos]
        badrows = idx[~(m < np.inf) | np.isnan(d)]
        sd = float(np.sum(d))
    q = q[~np.isnan(q)]
    dn = max(np.max(q, initial=0.0), 1.0 if np.any((m == 0) & (d > 0)) else 0.0)
    return np.array([dn, sd, np.max(m[pos], initial=0.0), np.min(m[pos], initial=np.inf),
                     float(badrows[-1]) if badrows.size else -1.0])


def assert_sweep_stats(st, y, yold, has):
    """st holds the statistics of :func:`sweep_stats_reference`: every figure exactly but the
    L1 change, which may be summed in another order (to the rounding of that many terms)."""
    want = sweep_stats_reference(y, yold, has)
    assert np.array_equal(st[[0, 2, 3, 4]], want[[0, 2, 3, 4]]), (st, want)
    np.testing.assert_allclose(st[1], want[1], rtol=max(int(np.sum(has)), 1) * 2.0**-52, atol=0, equal_nan=True)


def bigram_count_dir(d, bigrams: str):
    """A Web1T count directory ``d``: 1gms/vocab of the, <S> and </S>, 2gms/2gm-0000 of ``bigrams``."""
    (d / "1gms").mkdir(parents=True)
    (d / "1gms" / "vocab").write_text("the\t5\n<S>\t2\n</S>\t2\n")
    (d / "2gms").mkdir()
    (d / "2gms" / "2gm-0000").write_text(bigrams)
    return d

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

"""Tests of fsmlearn._threads: numba's parallel kernels run on the TBB layer (Linux x86-64,
where ``tbb`` is a dependency), and a process that ran them can fork a child that runs them
again.

Each case runs in a fresh interpreter (the layer is chosen once a process, at its first
parallel kernel).  On numba's GNU OpenMP layer the forked child of the second case is
terminated by the OpenMP runtime, so that case fails without fsmlearn._threads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# a parallel kernel of the package (-log of values, on two threads), then a forked child
# that runs it again; the parent reports the layer and the child's exit status
_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import fsmlearn, numba
    from fsmlearn.semiring.ops import scaled_to_neglog, scaled_to_neglog_par

    rng = np.random.default_rng(0)
    V = np.column_stack([rng.random(50_000) + 0.5, rng.integers(-900, 900, 50_000).astype(float)])
    want = np.empty(V.shape[0])
    scaled_to_neglog(V, want)

    def run():
        out = np.empty(V.shape[0])
        scaled_to_neglog_par(V, out)
        return np.array_equal(out, want)

    assert run()
    print("layer", numba.threading_layer(), flush=True)
    if len(sys.argv) > 1:
        pid = os.fork()
        if pid == 0:
            signal.alarm(120)                 # a hung child dies instead of outliving the test
            os._exit(0 if run() else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), flush=True)
        print("parent again", run(), flush=True)
""")


def _run(*args, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER") and k != "NUMBA_DISABLE_JIT"}
    e.update(NUMBA_NUM_THREADS="2", **env)
    return subprocess.run([sys.executable, "-c", _SCRIPT, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=300)


def test_parallel_kernels_run_on_tbb():
    r = _run()
    assert r.returncode == 0, r.stderr
    assert "layer tbb" in r.stdout


def test_a_child_forked_after_a_parallel_kernel_runs_one_again():
    r = _run("fork")
    assert r.returncode == 0, r.stderr
    assert "layer tbb" in r.stdout
    assert "child 0" in r.stdout, r.stdout + r.stderr
    assert "parent again True" in r.stdout


def test_a_layer_the_user_chose_is_kept():
    r = _run(NUMBA_THREADING_LAYER="workqueue")
    assert r.returncode == 0, r.stderr
    assert "layer workqueue" in r.stdout

"""numba's TBB threading layer made loadable, so that a process that ran a parallel kernel may fork.

Several kernels run on numba's threads: the acyclic pass on two threads
(:func:`fsmlearn.algo.solve_acyclic.acyclic_neglog_piped`), the banded sweep of a large
cyclic component (:func:`fsmlearn.algo.bands.banded_sweep1`), the reachability passes
and contraction that find a large machine's components
(:func:`fsmlearn.algo.schedule._reach_both`, :func:`fsmlearn.algo.schedule._contract`),
the sort of its arcs for its schedule and their band layout
(:func:`fsmlearn.algo.schedule._msd_lsd_sort3_par`, :func:`fsmlearn.algo.bands._fill_one`),
the gather and conversion of its rows and their plain factors
(:func:`fsmlearn.algo.solve_linear.gather_par`,
:func:`fsmlearn.semiring.ops.neglog_to_scaled_par`,
:func:`fsmlearn.semiring.ops.neglog_to_scaled_at_par`,
:func:`fsmlearn.algo.bands.build_plain_banded`), ``-log`` of long value
vectors, LM scoring and the TRF's sampling.  numba picks its threading layer once a
process, at the first parallel kernel (or the first call that asks for its thread
count), trying TBB, then OpenMP, then its own workqueue unless told otherwise.  With
TBB missing, a pip-installed numba on Linux takes GNU OpenMP, and a process that has run
an OpenMP parallel region cannot fork safely: a child that runs one again is terminated
("fork() called from a process already using GNU OpenMP"), so a ``multiprocessing``
pool with the ``fork`` start method (Python's default on Linux before 3.14, and what
the RCM decipherment and speech experiments use for ``--jobs``) waits forever on its
dead workers.  numba's TBB layer is fork-safe and thread-safe (numba's documentation,
"The Threading Layers"), and runs these kernels as fast here (docs/bench-engine.md).

The ``tbb`` package (a dependency on Linux x86-64) installs ``libtbb.so.12`` into the
environment's ``lib/``, which a virtual environment's loader does not search, so
numba's TBB layer fails to load and numba falls back to OpenMP.  :func:`load_tbb`, run
when ``fsmlearn`` is imported, loads that library first (numba's TBB module then finds
it by its name).  It changes no numba setting: ``NUMBA_THREADING_LAYER`` and the rest
choose as numba documents.  A layer that numba started before ``fsmlearn`` was imported
stays.

Public names: load_tbb.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["load_tbb"]

_TBB_LIB = "libtbb.so.12"


def load_tbb() -> bool:
    """Load the environment's ``lib/libtbb.so.12`` where there is one; True when it did
    (see the module docstring)."""
    lib = os.path.join(sys.prefix, "lib", _TBB_LIB)
    if not os.path.exists(lib):
        return False
    try:
        ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True

"""The threading layer numba's parallel kernels run on: TBB first, so that a process may fork.

Several kernels run on numba's threads: the acyclic pass on two threads
(:func:`fsmlearn.algo.solve_acyclic.acyclic_neglog_piped`), ``-log`` of long value
vectors, LM scoring and the TRF's sampling.  numba picks its threading layer at the
first such call.  On a pip-installed numba for Linux its default is GNU OpenMP, and a
process that has run an OpenMP parallel region cannot fork safely: the child that runs
one again is terminated ("fork() called from a process already using GNU OpenMP"), so
a ``multiprocessing`` pool with the ``fork`` start method (Python's default on Linux
before 3.14, and what the RCM decipherment and speech experiments use for ``--jobs``)
waits forever on its dead workers.  numba's TBB layer is fork-safe and thread-safe
(numba's documentation, "The Threading Layers"), and runs these kernels as fast here
(docs/bench-engine.md).

The ``tbb`` package (a dependency on Linux x86-64) installs ``libtbb.so.12`` into the
environment's ``lib/``, which a virtual environment's loader does not search: numba's
TBB layer would then fail to load and numba would fall back to OpenMP.  So
:func:`prefer_tbb`, run when ``fsmlearn`` is imported, loads that library first and puts
``tbb`` ahead of ``omp`` in numba's list.  It does nothing where the user chose a layer
(``NUMBA_THREADING_LAYER`` or ``NUMBA_THREADING_LAYER_PRIORITY`` set), and it cannot
change a layer that a parallel kernel already started before ``fsmlearn`` was imported.
Without TBB numba keeps its own order (OpenMP where it loads).

Public names: LAYER_PRIORITY, prefer_tbb.
"""

from __future__ import annotations

import ctypes
import os
import sys

import numba

__all__ = ["LAYER_PRIORITY", "prefer_tbb"]

#: the order numba tries its threading layers in, once :func:`prefer_tbb` ran
LAYER_PRIORITY = ("tbb", "omp", "workqueue")
_TBB_LIB = "libtbb.so.12"


def prefer_tbb() -> bool:
    """Put numba's TBB layer first where it can load; True when it did (see the module docstring)."""
    if os.environ.get("NUMBA_THREADING_LAYER") or os.environ.get("NUMBA_THREADING_LAYER_PRIORITY"):
        return False
    lib = os.path.join(sys.prefix, "lib", _TBB_LIB)
    if not os.path.exists(lib):
        return False
    try:
        ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    numba.config.THREADING_LAYER_PRIORITY = list(LAYER_PRIORITY)
    return True

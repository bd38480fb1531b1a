"""The numba.cuda twins of the engine's algorithms (layer 3, ``algo/cuda``).

The public functions of :mod:`fsmlearn.algo` (``forward``, ``backward``,
``shortest_distance``, ``total_weight``, ``forward_backward``,
``arc_posteriors``, ``expectation``) take ``device="cpu"`` (default) or
``device="cuda"``; with ``"cuda"`` the values are computed by the kernels of
:mod:`fsmlearn.algo.cuda.kernels` driven from :mod:`fsmlearn.algo.cuda.solve`:

* acyclic machines (phi-free): one level-synchronous pass, one kernel launch
  per level of the longest-path layering, one thread per state pulling its
  incoming (forward) or outgoing (backward) arcs in scaled rows;
* cyclic machines: Jacobi sweeps (one thread per state, double-buffered),
  warm-startable, stopped and declared divergent by the one rule of
  :mod:`fsmlearn.algo.convergence` (the same ``DivergenceError`` and
  ``NotConvergedError``);
* phi machines: the signed linear system of :mod:`fsmlearn.algo.phi` iterated
  as :mod:`fsmlearn.algo.solve_phi` does (exact failure semantics: one pull
  over the own and exclusion arcs, one level-synchronous pass over the phi
  forest per sweep);
* arc posteriors (flows) and their scatter to the machine's arcs on the device.

Without a CUDA device numba's simulator (``NUMBA_ENABLE_CUDASIM=1``, set before
numba is imported) runs the same kernels on the CPU, one Python thread per GPU
thread: this is how the test suite checks them.

Public names: check_device, cuda_available, DEVICES.
"""

from __future__ import annotations

import os

from ...errors import ArgumentError, FsmError

__all__ = ["check_device", "cuda_available", "DEVICES"]

DEVICES = ("cpu", "cuda")


def cuda_available() -> bool:
    """Whether numba.cuda can run kernels here: a CUDA device, or numba's simulator."""
    try:
        from numba import cuda
    except Exception:          # noqa: BLE001 - no numba.cuda at all (a broken CUDA install)
        return False
    try:
        return bool(cuda.is_available())
    except Exception:          # noqa: BLE001 - the driver is present but unusable
        return False


def check_device(device) -> str:
    """Validate a ``device`` argument; returns "cpu" or "cuda".

    Raises:
        ArgumentError: ``device`` is not "cpu" or "cuda".
        FsmError: ``device="cuda"`` and neither a CUDA device nor numba's
            simulator is available.
    """
    if device not in DEVICES:
        raise ArgumentError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and not cuda_available():
        sim = os.environ.get("NUMBA_ENABLE_CUDASIM", "")
        raise FsmError("device='cuda' needs a CUDA GPU with a working driver (numba.cuda found none"
                       + ("" if sim in ("", "0") else f"; NUMBA_ENABLE_CUDASIM={sim!r} was set too late, "
                          "after numba was imported")
                       + "); use device='cpu', or set NUMBA_ENABLE_CUDASIM=1 before starting Python to "
                       "run the kernels in numba's CUDA simulator")
    return device

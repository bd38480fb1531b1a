"""Compile every CUDA kernel of fsmlearn to PTX, without a GPU (a check for machines that have none).

numba's simulator (the test suite's CUDA path) runs the kernels as Python and
so cannot catch what only the CUDA compiler rejects (a construct numba.cuda
cannot type, an unsupported math function).  This script types and compiles
each kernel with NVVM for a compute capability (default 8.0) at the argument
types the drivers pass, and reports the ones that fail.

NVVM comes from a CUDA toolkit: point CUDA_HOME at one, e.g. the pip wheel
``nvidia-cuda-nvcc-cu12`` unpacked (``CUDA_HOME=.../nvidia/cuda_nvcc``).
numba asks the current device for its compute capability when it compiles a
device function; without a GPU the script answers for it.

Usage: CUDA_HOME=... python scripts/cuda_ptx_check.py [--cc 8.0]
Exit status 0 when every kernel compiles.
"""

from __future__ import annotations

import argparse
import os
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cc", default="8.0", help="compute capability to compile for (default 8.0)")
    a = ap.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        print("cuda_ptx_check: unset NUMBA_ENABLE_CUDASIM: the simulator compiles nothing", file=sys.stderr)
        return 2
    cc = tuple(int(x) for x in a.cc.split("."))
    from numba import cuda
    from numba import types as T
    import numba.cuda.dispatcher as disp
    try:
        cuda.get_current_device()
    except Exception:            # noqa: BLE001 - no GPU or driver: answer the compute capability ourselves
        disp.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
    from fsmlearn.algo.cuda import kernels as K
    from fsmlearn.algo.cuda import tied as NC
    from fsmlearn.algo.cuda import product as NP
    from fsmlearn.algo.cuda import chain as CH
    f2, f3, f1, i1, I, F = T.float64[:, :], T.float64[:, :, :], T.float64[:], T.int64[:], T.int64, T.float64
    sigs = {
        K.pull_level: (f2, i1, I, I, i1, i1, i1, f2, f1),
        K.pull_levels_block: (f2, i1, i1, I, I, i1, i1, i1, f2, f1),
        K.jacobi_sweep: (f2, f2, f2, i1, i1, i1, f2, f1, F, f1, f1, i1),
        K.reduce_change: (f1, f1, i1, f2),
        K.chunk_sums: (f1, f1),
        K.extrapolate_scaled: (f2, f2, F, f1),
        K.extrapolate_plain: (f2, f2, F),
        K.phi_pull: (f2, f2, f2, f2, i1, i1, f2, i1, f2, i1, T.boolean),
        K.phi_up_level: (f2, i1, I, I, i1, i1, f2),
        K.phi_down_level: (f2, i1, I, I, i1, f2, f2, i1),
        K.row_changes: (f2, f2, f2, f2),
        K.arc_flows: (f2, f2, f2, i1, i1, f1, f1, i1, f1),
        K.final_flows: (f2, f2, f1, f1, i1, f1),
        K.scatter_flows: (f1, f1, i1, i1),
        K.chain_flows: (f2, f2, f2, i1, i1, i1, i1, f1, f1, i1, f1),
        K.forest_up_rows: (f2, i1, I, I, i1, i1, f1),
        K.forest_down_rows: (f2, i1, I, I, i1, f1),
        K.zero_rows: (f2,),
        NC._alpha2_scatter: (f2, f1, i1, i1, i1, f1, i1, i1, f1, I, I),
        NC._state_tag_mass: (f2, i1, i1, f1, i1, i1, f1, f1, I),
        NC._emit_entropy: (f2, f1, f1, i1, i1, f1, i1),
        NC._trans_parts: (f2, f2, f3),
        NC._sum_parts: (f3, f2),
        NC._row_times: (f2, f2, f2),
        NC._out_scores: (f2, f2, f2),
        NC._block_scores: (f1, f1, f2, f2, f2, i1, i1, f1, i1, i1, i1, i1, i1),
        NC._softmax_blocks: (f1, f1, f1, i1, f1, F),
        NC._phi_grad: (f1, f1, f1, f1, i1),
        NP._times_trans_rows: (f2, f2, f2),
        NP._untimes_trans_rows: (f2, f2, f2),
        NP._apply_arcs: (f2, f2, f2, i1, i1, f1, i1, i1, i1, f2, i1, f2, T.boolean),
        CH.chain_fb: (i1, i1, i1, T.int32[:], f1, f2, F, f1, i1, T.boolean, f1, f2, f1, f1, f2, f2, f2, f1, f1,
                      f1),
    }
    failed = 0
    for k, sig in sigs.items():
        name = f"{k.py_func.__module__}.{k.py_func.__name__}"
        try:
            ptx, _ = cuda.compile_ptx(k.py_func, sig, cc=cc)
            print(f"ok    {name} ({len(ptx):,} bytes of PTX)")
        except Exception as e:   # noqa: BLE001 - report every failing kernel, then fail
            failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    print(f"{len(sigs) - failed}/{len(sigs)} kernels compiled to PTX for sm_{cc[0]}{cc[1]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

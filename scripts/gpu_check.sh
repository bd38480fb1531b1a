#!/usr/bin/env bash
# The GPU checks of docs/cuda.md in one short run, for a machine with an NVIDIA GPU
# (and for a lease with little time: each step has its own time limit and writes
# its log as it goes).
#
#   scripts/gpu_check.sh OUTDIR
#
# 1. the machine: GPU, driver, CPU, the Python packages the CUDA path uses;
# 2. bench/bench_cuda.py (forward on the engine benchmark's 1M-state machines,
#    the CPU side on all cores and on 2 threads; one n-gram EM iteration on the
#    5-grams of Mixed-text at cutoff 10), into OUTDIR/bench_cuda.json;
# 3. bench/bench_batch.py --device cuda: the tagger's 100,000 Mixed-text sentence
#    lattices as one MachineBatch, forward-backward on the CPU and the GPU, into
#    OUTDIR/bench_batch.json;
# 4. the CUDA test files on the GPU itself (NUMBA_ENABLE_CUDASIM=0).
#
# Needs python3 with numba (and numba.cuda), numpy, scipy, pytest and hypothesis;
# no pynini, kenlm or dask. The corpora come from FSMLEARN_DATA or ../shared/data.
# Step limits (seconds): BENCH_S, BATCH_S, TEST_S; BENCH_ARGS adds arguments to bench_cuda
# (e.g. --profile). GPU_CHECK_SMOKE=1 checks the script without a GPU.
set -u
out=${1:-reports/gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 NUMBA_ENABLE_CUDASIM=0
smoke=
if [ -n "${GPU_CHECK_SMOKE:-}" ]; then   # checks this script without a GPU: simulator, tiny inputs
  export NUMBA_ENABLE_CUDASIM=1
  smoke=--smoke
fi

step() { echo "== $* ($(date -u +%H:%M:%S))"; }

step machine
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  echo "cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  $py - <<'EOF'
import sys, numba, numpy, scipy
print("python", sys.version.split()[0], "numba", numba.__version__, "numpy", numpy.__version__,
      "scipy", scipy.__version__, "numba threads", numba.config.NUMBA_NUM_THREADS)
try:
    import numba_cuda
    print("numba-cuda", getattr(numba_cuda, "__version__", "?"))
except ImportError:
    print("numba-cuda: not installed (numba's own numba.cuda)")
from numba import cuda
print("cuda available", cuda.is_available())
if not cuda.is_available():
    raise SystemExit("numba.cuda finds no GPU")
d = cuda.get_current_device()
print("device", d.name, "compute capability", d.compute_capability,
      "multiprocessors", d.MULTIPROCESSOR_COUNT)
try:
    print("runtime", cuda.runtime.get_version(), "driver", cuda.driver.driver.get_version())
except Exception as e:  # noqa: BLE001 - information only
    print("versions:", e)
EOF
} 2>&1 | tee "$out/machine.txt"

step bench_cuda
timeout "${BENCH_S:-240}" $py bench/bench_cuda.py $smoke ${BENCH_ARGS:-} --cpu-threads 0,2 --out "$out/bench_cuda.json" 2>&1 \
  | tee "$out/bench_cuda.log"
echo "bench_cuda rc=${PIPESTATUS[0]}"

step bench_batch
sentences=100000
[ -n "$smoke" ] && sentences=60
timeout "${BATCH_S:-150}" $py bench/bench_batch.py --device cuda --sentences $sentences --out "$out/bench_batch.json" \
  2>&1 | tee "$out/bench_batch.log"
echo "bench_batch rc=${PIPESTATUS[0]}"

step tests on the GPU
timeout "${TEST_S:-150}" $py -m pytest -q -rfE -p no:cacheprovider \
  tests/algo_cuda_test.py tests/algo_product_cuda_test.py tests/tag_ngram_cuda_test.py \
  tests/algo_batch_test.py 2>&1 \
  | tee "$out/tests.log" | tail -40
echo "tests rc=${PIPESTATUS[0]}"

step done

#!/usr/bin/env bash
# GPU check of the protected linear kernels (csrc/gemm), one call of the device tool:
#   build (cpp_extension, in the background; a carried .build/libftgemm.so is used meanwhile),
#   smoke correctness (stop there if it fails: a hung kernel must not eat the session),
#   residual diagnostics, pytest tests/test_cuda_gemm.py, benchmark, optional ncu (NCU=1).
# Everything lands in $OUT (at most 8 files); a short table is printed last.
set -u
OUT=${OUT:-/tmp/gemm_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; nproc; } > "$OUT/env.log" 2>&1

# The build users get: cpp_extension + ninja into TORCH_EXTENSIONS_DIR.
( unset FTCOMPILE_GEMM_LIB; start=$(date +%s)
  timeout 300 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build(verbose=True))"
  echo "build rc=$? seconds=$(( $(date +%s) - start ))" ) > /tmp/build.log 2>&1 &
BUILD=$!
if [ -f .build/libftgemm.so ]; then
  export FTCOMPILE_GEMM_LIB=$PWD/.build/libftgemm.so
else
  wait $BUILD
  export FTCOMPILE_GEMM_LIB=$(grep -E '\.so$' /tmp/build.log | tail -1)
fi
echo "library: $FTCOMPILE_GEMM_LIB" >> "$OUT/env.log"

timeout 60 python3 benchmarks/bench_gemm.py --smoke > "$OUT/smoke.log" 2>&1
SMOKE=$?
echo "smoke rc=$SMOKE" >> "$OUT/smoke.log"
if [ $SMOKE -ne 0 ]; then
  cat "$OUT/env.log" "$OUT/smoke.log"; kill $BUILD 2>/dev/null; exit 1
fi
if [ "${SKIP_TESTS:-0}" != 1 ]; then  # SKIP_TESTS=1: benchmark-only rerun of tested code
  timeout 60 python3 benchmarks/bench_gemm.py --diag > "$OUT/diag.log" 2>&1
  echo "diag rc=$?" >> "$OUT/diag.log"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py --timeout=60 -ra \
    > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$?" >> "$OUT/pytest.log"
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  timeout 240 python3 benchmarks/bench_gemm.py --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  echo "bench rc=$?" >> "$OUT/bench.log"
fi
if [ "${NCU:-0}" = 1 ]; then
  NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 150 "$NCU_BIN" --clock-control none -k "regex:${NCU_KERNELS:-gemm_}" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    python3 benchmarks/bench_gemm.py --profile > "$OUT/ncu.log" 2>&1
fi
wait $BUILD 2>/dev/null
tail -3 /tmp/build.log >> "$OUT/env.log"
cat "$OUT/env.log"; tail -3 "$OUT/smoke.log"; tail -2 "$OUT/diag.log" | cut -c1-300
tail -12 "$OUT/pytest.log"
[ -f "$OUT/gemm_bench.md" ] && cat "$OUT/gemm_bench.md" || tail -30 "$OUT/bench.log" 2>/dev/null

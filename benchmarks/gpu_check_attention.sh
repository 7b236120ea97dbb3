#!/usr/bin/env bash
# One device run for the EFTA attention kernel: build, smoke diagnostics, tests, benchmark.
# Results (logs, JSON, markdown) go to $OUT; a short summary is printed last.
#   bash benchmarks/gpu_check_attention.sh [full|check|quick|tests|bench] [extra bench args...]
#   full: + memcheck; check: smoke, tests, benchmark; quick: shorter timing; tests / bench: one part;
#   perf: overhead breakdown (measurement builds) and Nsight Compute sections of both kernels
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/.gpu_out}
mkdir -p "$OUT"
MODE=${1:-full}
shift || true
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch_ext}
LOG="$OUT/run.log"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$LOG"; }

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -1
} >>"$LOG" 2>&1
python3 -m pip install -q -e . --no-deps --no-build-isolation >>"$LOG" 2>&1 || stamp "pip install -e failed"

stamp "build"
python3 -c "import ftcompile.ops.cuda_attention as ca; ca.library(); print('library built')" >>"$LOG" 2>&1 \
  || { stamp "BUILD FAILED"; tail -c 6000 "$LOG"; exit 1; }
stamp "built"

if [[ $MODE == full || $MODE == check || $MODE == quick || $MODE == tests ]]; then
  stamp "smoke (plain kernel, separate process)"
  timeout 90 python3 benchmarks/bench_attention.py --smoke plain >"$OUT/smoke.log" 2>&1 || stamp "smoke plain rc=$?"
  stamp "smoke (all)"
  timeout 120 python3 benchmarks/bench_attention.py --smoke all >>"$OUT/smoke.log" 2>&1 || stamp "smoke all rc=$?"
  if [[ $MODE == full ]]; then
    stamp "memcheck (tiny)"
    timeout 120 compute-sanitizer --tool memcheck --print-limit 20 python3 benchmarks/bench_attention.py --smoke tiny \
      >"$OUT/memcheck.log" 2>&1 || stamp "memcheck rc=$?"
    grep -E "ERROR SUMMARY|Invalid|out of bounds" "$OUT/memcheck.log" | head -8 | tee -a "$LOG"
  fi
  stamp "tests"
  timeout ${TEST_TIMEOUT:-330} pytest -q -rfEs -p no:cacheprovider tests/test_cuda_attention.py >"$OUT/tests.log" 2>&1 || stamp "tests rc=$?"
  stamp "tests done"
fi

if [[ $MODE == full || $MODE == check || $MODE == quick || $MODE == bench ]]; then
  BENCH=()
  [[ $MODE == quick ]] && BENCH=(--quick)
  stamp "bench"
  timeout ${BENCH_TIMEOUT:-240} python3 benchmarks/bench_attention.py --out "$OUT" "${BENCH[@]}" "$@" >"$OUT/bench.log" 2>&1 \
    || stamp "bench rc=$?"
  stamp "bench done"
fi

if [[ $MODE == perf ]]; then
  stamp "ablation"
  timeout 240 python3 benchmarks/bench_attention.py --ablate --out "$OUT" >"$OUT/ablation.log" 2>&1 || stamp "ablation rc=$?"
  stamp "ncu"
  [[ ${PERF_NCU:-1} == 1 ]] && for cfg in "16x64 s4096" "32x128 s4096"; do
    timeout 150 ncu --clock-control none -k regex:attn_fwd_ --launch-count 2 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section InstructionStats --section SchedulerStats --section ComputeWorkloadAnalysis \
      python3 benchmarks/bench_attention.py --profile "$cfg" >>"$OUT/ncu.log" 2>&1 || stamp "ncu rc=$?"
  done
  stamp "perf done"
fi

echo "==================== summary ===================="
[[ -f $OUT/smoke.log ]] && { grep -c OK "$OUT/smoke.log" | sed 's/^/smoke OK lines: /'; grep -E "BAD|Error|error" "$OUT/smoke.log" | head -12; }
[[ -f $OUT/tests.log ]] && { grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -25; tail -3 "$OUT/tests.log"; }
[[ -f $OUT/bench.log ]] && tail -40 "$OUT/bench.log"
[[ -f $OUT/ablation.log ]] && tail -8 "$OUT/ablation.log"
[[ -f $OUT/ncu.log ]] && grep -E "attn_fwd_|Duration|Registers Per|Achieved Occupancy|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Compute \(SM\) Throughput|One or More" "$OUT/ncu.log" | head -60
stamp "end"

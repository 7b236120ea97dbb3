#!/usr/bin/env bash
# run 74e (session 66), the final code: thin_phases.py where the thin kernel's protection costs most
# (32-64 rows); the thread table with the final automatic choice; every GEMM CUDA test; the
# end-to-end and other CUDA tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 400 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run74e_attn_build.txt 2>&1) &
timeout 300 python3 - > $OUT/run74e_build.txt 2>&1 <<'PY'
from concurrent.futures import ThreadPoolExecutor
from ftcompile.ops import cuda, cuda_gemm
with ThreadPoolExecutor(2) as ex:
    a = ex.submit(cuda_gemm.build)
    b = ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_sm90a_stamps", extra_cuda_cflags=["-DPHASE_STAMPS"])
    print(a.result()); print(b.result())
PY
st build rc=$?; tail -2 $OUT/run74e_build.txt
wait; st attention build; tail -1 $OUT/run74e_attn_build.txt
timeout 120 python3 benchmarks/thin_phases.py --out $OUT --shapes 32x768x768,32x2304x768,64x2304x768,24x11008x4096,32x11008x4096,16x11008x4096 > $OUT/run74e_phases.txt 2>&1; st phases rc=$?
cut -c1-260 $OUT/run74e_phases.txt | head -80
timeout 100 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run74e_table.txt 2>&1; st table rc=$?
grep -E "^\| (1|8|16|32|64|128)x" $OUT/gemm_bench.md | head -48 | cut -d'|' -f2-8
timeout 250 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run74e_gemm_tests.txt 2>&1; st gemm tests rc=$?
tail -1 $OUT/run74e_gemm_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run74e_gemm_tests.txt | head -10
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_e2e.py tests/test_cuda_decode.py tests/test_fastpath.py \
  tests/test_replay.py tests/test_cudagraphs.py tests/test_inference_ops.py > $OUT/run74e_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run74e_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run74e_tests.txt | head -10

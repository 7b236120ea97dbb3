#!/usr/bin/env bash
# run 72f (session 64): R1 with the whole ring prefetched at one row (PRE's cap only behind the pass):
# builds tree / pass1, the thin and thread CUDA tests on the tree, gemm_ab of the two (two rounds).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
FLAGS="tree=;pass1=-DFTG_THIN_ONE_ROW_PASS=1"
GEMM_AB_FLAGS="$FLAGS" timeout 200 python3 - > $OUT/run72f_build.txt 2>&1 <<'PY'
import os
from concurrent.futures import ThreadPoolExecutor
from ftcompile.ops import cuda
specs = dict(v.partition("=")[::2] for v in os.environ["GEMM_AB_FLAGS"].split(";"))
with ThreadPoolExecutor(4) as ex:
    futs = {n: ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_" + n, f.split()) for n, f in specs.items()}
    for n, f in futs.items():
        print(n, f.result())
PY
st build rc=$?; tail -2 $OUT/run72f_build.txt
GEMM_AB_FLAGS="$FLAGS" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x14336x4096,1x12288x4096,1x16384x4096,1x8192x4096,1x11008x4096 \
  timeout 150 python3 benchmarks/gemm_ab.py > $OUT/run72f_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run72f_ab.txt | tail -20; grep -i "error\|Traceback" $OUT/run72f_ab.txt | head -5
left=$(( 380 - ($(date +%s) - t0) ))
FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1) timeout $left python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run72f_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run72f_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run72f_tests.txt | head -10

#!/usr/bin/env bash
# run 72a (session 64): XR (the x-side pass's sums inside the thin kernel at x padded to 32, split 1)
# and CK (the column checks' sums gathered in the reduce, -DFTG_THIN_CHECK_IN_REDUCE=1). Builds tree
# / pass (-DFTG_THIN_XR=0) / ck in parallel, the thin and thread tests on tree, gemm_ab of the three
# (two rounds), then the thin and thread tests on ck.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
FLAGS="tree=;pass=-DFTG_THIN_XR=0;ck=-DFTG_THIN_CHECK_IN_REDUCE=1"
GEMM_AB_FLAGS="$FLAGS" timeout 200 python3 - > $OUT/run72a_build.txt 2>&1 <<'PY'
import os
from concurrent.futures import ThreadPoolExecutor
from ftcompile.ops import cuda
specs = dict(v.partition("=")[::2] for v in os.environ["GEMM_AB_FLAGS"].split(";"))
with ThreadPoolExecutor(4) as ex:
    futs = {n: ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_" + n, f.split()) for n, f in specs.items()}
    for n, f in futs.items():
        print(n, f.result())
PY
st build rc=$?; tail -3 $OUT/run72a_build.txt
lib() { ls /tmp/torch_ext/ftcompile_gemm_ab_$1/*.so | head -1; }
FTCOMPILE_GEMM_LIB=$(lib tree) timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run72a_tests_tree.txt 2>&1; st tests-tree rc=$?
tail -2 $OUT/run72a_tests_tree.txt; grep -E "^(FAILED|ERROR)" $OUT/run72a_tests_tree.txt | head -10
GEMM_AB_FLAGS="$FLAGS" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x14336x4096,8x14336x4096,16x14336x4096,32x14336x4096,1x11008x4096,16x11008x4096,32x11008x4096,64x4096x4096,128x4096x4096,64x4096x11008,128x4096x11008,128x2304x768,128x3072x768,128x11008x4096 \
  timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run72a_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run72a_ab.txt | tail -50; grep -i "error\|Traceback" $OUT/run72a_ab.txt | head -5
left=$(( 570 - ($(date +%s) - t0) ))
FTCOMPILE_GEMM_LIB=$(lib ck) timeout $left python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run72a_tests_ck.txt 2>&1; st tests-ck rc=$?
tail -2 $OUT/run72a_tests_ck.txt; grep -E "^(FAILED|ERROR)" $OUT/run72a_tests_ck.txt | head -10

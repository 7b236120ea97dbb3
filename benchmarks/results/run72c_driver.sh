#!/usr/bin/env bash
# run 72c (session 64): PRE as the production rule (at most 4 stages of W before the thin kernel's
# dependency wait, protected) against the whole ring (pre8) and 3 / 6 stages: gemm_ab, three rounds;
# the thin and thread CUDA tests on the tree.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
FLAGS="tree=;pre8=-DFTG_THIN_PRE_PROT=8;pre3=-DFTG_THIN_PRE_PROT=3;pre6=-DFTG_THIN_PRE_PROT=6"
GEMM_AB_FLAGS="$FLAGS" timeout 200 python3 - > $OUT/run72c_build.txt 2>&1 <<'PY'
import os
from concurrent.futures import ThreadPoolExecutor
from ftcompile.ops import cuda
specs = dict(v.partition("=")[::2] for v in os.environ["GEMM_AB_FLAGS"].split(";"))
with ThreadPoolExecutor(4) as ex:
    futs = {n: ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_" + n, f.split()) for n, f in specs.items()}
    for n, f in futs.items():
        print(n, f.result())
PY
st build rc=$?; tail -4 $OUT/run72c_build.txt
FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1) timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run72c_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run72c_tests.txt; grep -E "^(FAILED|ERROR)" $OUT/run72c_tests.txt | head -10
GEMM_AB_FLAGS="$FLAGS" GEMM_AB_ROUNDS=3 \
GEMM_AB_SHAPES=64x4096x4096,128x4096x4096,64x4096x11008,128x4096x11008,128x3072x768,64x2304x768,1x14336x4096,16x14336x4096,32x14336x4096,32x11008x4096,64x14336x4096 \
  timeout 330 python3 benchmarks/gemm_ab.py > $OUT/run72c_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run72c_ab.txt | tail -40; grep -i "error\|Traceback" $OUT/run72c_ab.txt | head -5

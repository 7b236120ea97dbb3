#!/usr/bin/env bash
# run 73c (session 65): the rotated replica (acc2) at 17-32 rows: builds tree / base (9e67512:
# REP at <= 16 rows, the pass above) / load0 (-DFTG_THIN_REP_LOAD=0: the rotated replica at every
# row count); every GEMM CUDA test on the tree; gemm_ab of the three (two rounds); harness_order_probe.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 - > $OUT/run73c_build.txt 2>&1 <<'PY'
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from ftcompile.ops import cuda
with ThreadPoolExecutor(4) as ex:
    futs = {"tree": ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_tree"),
            "load0": ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_load0", ["-DFTG_THIN_REP_LOAD=0"]),
            "base": ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_base", (), (), False, Path("ab_base/csrc"))}
    for n, f in futs.items():
        print(n, f.result())
PY
st build rc=$?; tail -3 $OUT/run73c_build.txt
TREE=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TREE timeout 230 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run73c_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run73c_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run73c_tests.txt | head -10
GEMM_AB_FLAGS="tree=;load0=-DFTG_THIN_REP_LOAD=0" GEMM_AB_BASE=ab_base/csrc GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x14336x4096,16x14336x4096,16x8192x4096,17x14336x4096,24x14336x4096,32x14336x4096,32x11008x4096,32x4096x11008,32x12288x4096,32x16384x4096 \
  timeout 150 python3 benchmarks/gemm_ab.py > $OUT/run73c_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run73c_ab.txt | grep -v cublas | tail -30; grep -i "error\|Traceback" $OUT/run73c_ab.txt | head -5
FTCOMPILE_GEMM_LIB=$TREE timeout 60 python3 benchmarks/harness_order_probe.py > $OUT/run73c_order.txt 2>&1; st order rc=$?
cat $OUT/run73c_order.txt | cut -c1-300

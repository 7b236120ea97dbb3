#!/usr/bin/env bash
# run 73a (session 65): REP, x's replica instead of the x-side pass at up to 16 rows of the thin
# kernel: builds tree / base (HEAD's sources, ab_base/csrc), the thin and thread CUDA tests on the
# tree, gemm_ab of the two (two rounds).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 - > $OUT/run73a_build.txt 2>&1 <<'PY'
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from ftcompile.ops import cuda
with ThreadPoolExecutor(4) as ex:
    futs = {"tree": ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_tree"),
            "base": ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_base", (), (), False, Path("ab_base/csrc"))}
    for n, f in futs.items():
        print(n, f.result())
PY
st build rc=$?; tail -2 $OUT/run73a_build.txt
TREE=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TREE timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run73a_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run73a_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run73a_tests.txt | head -10
GEMM_AB_FLAGS="tree=" GEMM_AB_BASE=ab_base/csrc GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x14336x4096,2x14336x4096,4x14336x4096,8x14336x4096,16x14336x4096,8x11008x4096,16x11008x4096,16x8192x4096,16x12288x4096,16x16384x4096,1x11008x4096,32x14336x4096 \
  timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run73a_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run73a_ab.txt | grep -v cublas | tail -30; grep -i "error\|Traceback" $OUT/run73a_ab.txt | head -5

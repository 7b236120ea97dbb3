#!/usr/bin/env bash
# run 75c (session 67): ALIAS (the loaded replica at 1-8 rows from x's one atom, no second box) with
# XREP: every GEMM CUDA test on the tree; gemm_ab tree / alias0 (-DFTG_THIN_REP_ALIAS=0) two rounds;
# the attention library built alongside for run 75d's end-to-end tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 500 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run75c_attn_build.txt 2>&1) &
export GEMM_AB_FLAGS="tree=;alias0=-DFTG_THIN_REP_ALIAS=0" GEMM_AB_ROUNDS=2
export GEMM_AB_SHAPES=1x11008x4096,4x11008x4096,8x11008x4096,12x11008x4096,1x14336x4096,4x14336x4096,8x14336x4096,1x4096x4096:thin,8x4096x4096:thin
GEMM_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run75c_build.txt 2>&1; st build rc=$?
tail -2 $OUT/run75c_build.txt
TREE=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TREE timeout 260 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run75c_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run75c_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run75c_tests.txt | head -10
timeout 150 python3 benchmarks/gemm_ab.py > $OUT/run75c_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run75c_ab.txt | grep -v cublas | tail -18; grep -i "error\|Traceback" $OUT/run75c_ab.txt | head -5
wait; st attention build; tail -1 $OUT/run75c_attn_build.txt

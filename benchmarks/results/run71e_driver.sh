#!/usr/bin/env bash
# run 71e (session 63): X3b, the x-side sums on two warps (slot parity), x loaded before W, extrema packed;
# split 1 (no pass kernel). gemm_ab tree against pass (-DFTG_THIN_XPASS_ALWAYS=1: the pass at every
# padding), two rounds; then the thin and thread GEMM CUDA tests on the tree.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
GEMM_AB_FLAGS="tree=;pass=-DFTG_THIN_XPASS_ALWAYS=1" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x14336x4096,8x14336x4096,16x14336x4096,32x14336x4096,1x11008x4096,16x11008x4096,32x11008x4096,64x4096x4096,64x14336x4096 \
  timeout 330 python3 benchmarks/gemm_ab.py > $OUT/run71e_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run71e_ab.txt | tail -40; grep -i "error\|Traceback" $OUT/run71e_ab.txt | head -5
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
left=$(( 575 - ($(date +%s) - t0) ))
FTCOMPILE_GEMM_LIB=$TL timeout $left python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run71e_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run71e_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run71e_tests.txt | head -10

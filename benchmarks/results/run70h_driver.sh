#!/usr/bin/env bash
# run 70h (session 62): X1, the thin kernel's x-side pass unrolled 16 deep: gemm_ab base = HEAD's
# sources (ab_base70/, untracked, carried with the tree), tree; three rounds; the thin CUDA tests on
# the tree's library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
GEMM_AB_BASE=ab_base70/csrc GEMM_AB_FLAGS="tree=" GEMM_AB_ROUNDS=3 \
GEMM_AB_SHAPES=128x4096x4096,128x2304x768,128x11008x4096,100x14336x4096,64x4096x4096 \
  timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run70h_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run70h_ab.txt | tail -20
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TL timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin" > $OUT/run70h_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run70h_tests.txt

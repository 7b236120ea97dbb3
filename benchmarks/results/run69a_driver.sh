#!/usr/bin/env bash
# run 69a (session 61): T3, the thin kernel's decode epilogue from registers: the A/B against HEAD's
# sources (ab_base69a/, untracked, carried with the tree) at the thin kernel's decode rows and two
# controls, two rounds; then the thin kernel's CUDA tests on the tree's library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
GEMM_AB_BASE=ab_base69a/csrc GEMM_AB_FLAGS="tree=" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x11008x4096,8x11008x4096,16x11008x4096,32x11008x4096,1x14336x4096,16x14336x4096,64x11008x4096,16x4096x4096 \
  timeout 400 python3 benchmarks/gemm_ab.py > $OUT/run69a_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run69a_ab.txt | tail -30
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
cp "$TL" $OUT/ftcompile_gemm_tree.so
FTCOMPILE_GEMM_LIB=$TL timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin" > $OUT/run69a_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run69a_tests.txt

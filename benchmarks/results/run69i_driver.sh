#!/usr/bin/env bash
# run 69i (session 61): S7, only the warps with chunks fold their partials (depth 1): the A/B
# against HEAD's sources (ab_base69i/, untracked, carried with the tree) at the streaming kernel's
# decode shapes, two rounds; then the streaming CUDA tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
GEMM_AB_BASE=ab_base69i/csrc GEMM_AB_FLAGS="tree=" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x768x768,16x768x768,1x2304x768,16x2304x768,1x3072x768,16x3072x768,1x768x3072,16x768x3072 \
  timeout 290 python3 benchmarks/gemm_ab.py > $OUT/run69i_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run69i_ab.txt | tail -40
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TL timeout 70 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "stream" > $OUT/run69i_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run69i_tests.txt

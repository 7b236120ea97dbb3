#!/usr/bin/env bash
# run 70d (session 62): H, the thin kernel's own partial tile read from its shared memory, the
# others over DSMEM: gemm_ab base = HEAD's sources (ab_base70/, untracked, carried with the tree),
# tree; three rounds at the split > 1 shapes; the thin / thread CUDA tests on the tree's library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
GEMM_AB_BASE=ab_base70/csrc GEMM_AB_FLAGS="tree=" GEMM_AB_ROUNDS=3 \
GEMM_AB_SHAPES=64x4096x4096,128x4096x4096,64x4096x11008,128x4096x11008,128x2304x768,128x3072x768,64x2304x768 \
  timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run70d_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run70d_ab.txt | tail -40
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TL timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run70d_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run70d_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run70d_tests.txt | head -10

#!/usr/bin/env bash
# run 74a (session 66): SREP, the streaming kernel's replica at <= 8 rows: builds tree / rep0
# (-DFTG_STREAM_REPLICA=0) and the attention library (for run 74b's tests); gemm_ab tree / rep0 at
# the streaming kernel's decode shapes (two rounds); every GEMM CUDA test on the tree.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 400 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run74a_attn_build.txt 2>&1) &
export GEMM_AB_FLAGS="tree=;rep0=-DFTG_STREAM_REPLICA=0" GEMM_AB_ROUNDS=2
export GEMM_AB_SHAPES=1x768x768,8x768x768,1x2304x768,8x2304x768,1x3072x768,8x3072x768,1x768x3072,8x768x3072,1x4096x4096,4x4096x4096,8x4096x4096,16x4096x4096,1x4096x11008,8x4096x11008
GEMM_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run74a_build.txt 2>&1; st build rc=$?
tail -3 $OUT/run74a_build.txt
wait; st attention build; tail -1 $OUT/run74a_attn_build.txt
timeout 200 python3 benchmarks/gemm_ab.py > $OUT/run74a_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run74a_ab.txt | grep -v cublas | tail -32; grep -i "error\|Traceback" $OUT/run74a_ab.txt | head -5
TREE=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TREE timeout 250 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run74a_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run74a_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run74a_tests.txt | head -10

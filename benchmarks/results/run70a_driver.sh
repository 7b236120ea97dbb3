#!/usr/bin/env bash
# run 70a (session 62): T4, the thin kernel's register epilogue at every padding of x (split 1):
# the A/B against the same sources built with -DFTG_THIN_REG_EPILOGUE_NX=32 (session 61's kernel),
# two rounds; the thin CUDA tests on the tree's library; then thin_phases.py at split > 1 shapes
# (its production and stamped libraries built in the background of the A/B).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 300 python3 -c "
import sys; sys.path.insert(0, 'benchmarks')
from ftcompile.ops import cuda, cuda_gemm; cuda_gemm.build()
cuda.build_library('gemm', 'ftcompile_gemm_sm90a_stamps', extra_cuda_cflags=['-DPHASE_STAMPS'])" > $OUT/run70a_prebuild.txt 2>&1) &
GEMM_AB_FLAGS="t3=-DFTG_THIN_REG_EPILOGUE_NX=32;tree=" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=48x14336x4096,64x14336x4096,128x14336x4096,64x11008x4096,100x11008x4096,128x11008x4096,16x11008x4096,64x4096x4096 \
  timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run70a_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run70a_ab.txt | tail -30
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TL timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin" > $OUT/run70a_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run70a_tests.txt
wait; st prebuild
timeout 90 python3 benchmarks/thin_phases.py --out $OUT --shapes 64x4096x4096,128x4096x4096,64x4096x11008,128x2304x768 > $OUT/run70a_phases.txt 2>&1; st phases rc=$?
cat $OUT/run70a_phases.txt | cut -c1-400

#!/usr/bin/env bash
# run 70b (session 62): E (the thin kernel's rows checked in the row loop) and F (a warp's rows of a
# cluster reduced four at a time) and T4 at 64: gemm_ab base = HEAD's sources (ab_base70/, untracked,
# carried with the tree), e, ef, tree, two rounds; the thin / thread CUDA tests on the tree's
# library; thin_phases on the tree (its libraries built in the background of the A/B).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 300 python3 -c "
from ftcompile.ops import cuda, cuda_gemm; cuda_gemm.build()
cuda.build_library('gemm', 'ftcompile_gemm_sm90a_stamps', extra_cuda_cflags=['-DPHASE_STAMPS'])" > $OUT/run70b_prebuild.txt 2>&1) &
GEMM_AB_BASE=ab_base70/csrc GEMM_AB_FLAGS="e=-DFTG_THIN_ROW_BATCH=1 -DFTG_THIN_REG_EPILOGUE_NX=32;ef=-DFTG_THIN_REG_EPILOGUE_NX=32;tree=" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=64x4096x4096,128x4096x4096,64x4096x11008,128x4096x11008,64x2304x768,128x2304x768,128x3072x768,48x14336x4096,128x14336x4096,100x11008x4096,128x11008x4096,16x11008x4096 \
  timeout 330 python3 benchmarks/gemm_ab.py > $OUT/run70b_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run70b_ab.txt | tail -40
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TL timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run70b_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run70b_tests.txt
wait; st prebuild
timeout 70 python3 benchmarks/thin_phases.py --out $OUT --shapes 64x4096x4096,128x4096x4096,128x2304x768 > $OUT/run70b_phases.txt 2>&1; st phases rc=$?
cut -c1-330 $OUT/run70b_phases.txt

#!/usr/bin/env bash
# run 75g (session 67, the last device minutes): where XREP64 (-DFTG_THIN_REPLICA_NX=64) beats the
# checksum rows at 40-64 rows, over more widths (gemm_ab tree / r64, two rounds), for a per-call rule.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export GEMM_AB_FLAGS="tree=;r64=-DFTG_THIN_REPLICA_NX=64" GEMM_AB_ROUNDS=2
export GEMM_AB_SHAPES=64x768x768:thin,64x1024x1024:thin,64x2048x2048,64x4096x1024,64x1024x4096,64x8192x4096,64x6144x4096,64x4096x14336,64x16384x4096,64x12288x4096,48x2304x768,40x3072x768,64x2304x768,64x14336x4096
GEMM_AB_BUILD_ONLY=1 timeout 120 python3 benchmarks/gemm_ab.py > $OUT/run75g_build.txt 2>&1; st build rc=$?
timeout 100 python3 benchmarks/gemm_ab.py > $OUT/run75g_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run75g_ab.txt | grep " on " | tail -16

#!/usr/bin/env bash
# run 71c (session 63): the thin kernel's W stream against its CTA count (thin_cta_sweep.py, split 1,
# M = 1 / 64, 32-132 tiles of 128 rows at K = 4096), then where its k-loop's protection goes at the
# split-1 decode shapes (ablate_thin.sh builds 0 1 3 11 17 27: bits 8 no checksum-row loads, 16 the
# wgmma without the checksum columns).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(ABLATE="0 1 3 11 17 27" STAGE=build timeout 240 bash benchmarks/ablate_thin.sh > $OUT/run71c_ablate_build.txt 2>&1) &
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run71c_build.txt 2>&1; st build rc=$?
timeout 200 python3 benchmarks/thin_cta_sweep.py --out $OUT/thin_cta_sweep_run71c.json > $OUT/run71c_sweep.txt 2>&1; st sweep rc=$?
cat $OUT/run71c_sweep.txt | grep -v Warn
wait; st ablate-build
SHAPES="1x14336x4096,16x14336x4096,1x11008x4096,64x4096x4096" ABLATE="0 1 3 11 17 27" STAGE=run timeout 200 bash benchmarks/ablate_thin.sh > $OUT/run71c_ablate.txt 2>&1; st ablate rc=$?
cat $OUT/run71c_ablate.txt | grep -v Warn

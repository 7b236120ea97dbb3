#!/usr/bin/env bash
# run 69d (session 61): where the thin kernel's protection goes at the decode rows: builds 0, 1 (no
# column checks) and 3 (no checks, no x-side pass) of ablate_thin.sh, two turns.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export SHAPES=1x11008x4096,16x11008x4096,1x14336x4096,16x14336x4096,32x14336x4096
ABLATE="0 1 3" timeout 300 bash benchmarks/ablate_thin.sh > $OUT/run69d_r1.txt 2>&1; st r1 rc=$?
ABLATE="3 1 0" STAGE=run timeout 200 bash benchmarks/ablate_thin.sh > $OUT/run69d_r2.txt 2>&1; st r2 rc=$?
cat $OUT/run69d_r1.txt $OUT/run69d_r2.txt | grep -v "^\s*$" | cut -c1-200

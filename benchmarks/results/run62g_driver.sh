#!/usr/bin/env bash
# run 62g: where the tile-local check's cost goes now (FTG_ABLATE builds of the tree), bench protocol with bias
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
ABLATE="0 2 5 21 23" STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1; st build rc=$?; ls /tmp/ablate/*.so
OUT=/tmp/ab ABLATE="0 2 5 21 23" STAGE=run NAMES=on@tiles BASE=off#192 SHAPES=8192x2304x768,4096x3072x768,8192x768x3072 timeout 200 bash benchmarks/ablate_global.sh > /dev/null 2>&1; st run rc=$?
cp /tmp/ab/ablate_global.txt $OUT/run62g_ablate.txt; cat $OUT/run62g_ablate.txt

#!/usr/bin/env bash
# run 77c (session 69): the read ceiling at the decode table's weight sizes (benchmarks/read_ceiling.py).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 400 python3 benchmarks/read_ceiling.py --out $OUT > $OUT/run77c_read.txt 2>&1; st read rc=$?
cat $OUT/run77c_read.txt | tail -20

#!/usr/bin/env bash
# run 78b (session 70): slab_read_probe.py (reads of W in 128 / 64 / 32-row slabs along K, and 132 even slabs).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "import triton; print('triton', triton.__version__)"
timeout 240 python3 benchmarks/slab_read_probe.py --out $OUT > $OUT/run78b_probe.txt 2>&1; st probe rc=$?
cat $OUT/run78b_probe.txt | sed 's/  /\n  /g' | head -60

#!/usr/bin/env bash
# run 64d (session 57): G1, the many-row split cost and the check's one-wave rule (NOTES_gemm.md
# session 57): the new automatic choices (off, on) against the old ones as explicit variants, two
# rounds (knob_ab.py); the global CUDA tests; the global table.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1; st build rc=$?
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "global" > $OUT/run64d_tests.txt 2>&1; st tests rc=$?
grep -E "passed|failed|FAILED" $OUT/run64d_tests.txt | tail -6
ab() {  # $1 tag, $2 shapes, $3 variants
  KNOB_AB_SHAPES=$2 KNOB_AB_VARIANTS=$3 timeout 150 python3 benchmarks/knob_ab.py > $OUT/run64d_$1.txt 2>&1; st $1 rc=$?
  grep "^|" $OUT/run64d_$1.txt
}
ab split2 2048x1024x4096,1024x2048x4096,2048x1024x2048,512x4096x4096 off,off#256/2,on,on@rows#256/2
ab split4 1024x1024x4096,1024x1024x2048,512x2048x4096,512x2048x2048 off,off#256/4,on,on@rows#256/4
ab check 384x4096x4096,512x1024x4096,384x2048x4096 off,on,on@rows
timeout 120 python3 benchmarks/bench_gemm.py --parts global --out $OUT > $OUT/run64d_table.log 2>&1; st table rc=$?

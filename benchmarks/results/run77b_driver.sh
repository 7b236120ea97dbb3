#!/usr/bin/env bash
# run 77b (session 69): run 77a's 128-key builds with a ring of 4 stages (512 keys in flight), tree /
# k128r4 / k128s4, attention_ab.py, two rounds.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;k128r4=-DEFTA_K128=1 -DEFTA_K128_STAGES=4;k128s4=-DEFTA_K128=1 -DEFTA_P_SMEM=1 -DEFTA_K128_STAGES=4"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run77b_abbuild.txt 2>&1; st ab-build rc=$?
tail -1 $OUT/run77b_abbuild.txt
left=$(( 585 - ($(date +%s) - t0) ))
ATTN_AB_ROUNDS=2 timeout $left python3 benchmarks/attention_ab.py > $OUT/run77b_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS\|Error\|error" $OUT/run77b_ab.txt | grep -v DIGESTS | head -60

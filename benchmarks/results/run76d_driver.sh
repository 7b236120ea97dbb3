#!/usr/bin/env bash
# run 76d (session 68): B52 variants: tree (lazy 2), exact, alpha (alpha in every tile), l1 (margin 2^1);
# attention_ab.py two rounds, no tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;exact=-DEFTA_LAZY_LOG2=0;alpha=-DEFTA_LAZY_ALPHA_ALWAYS=1;l1=-DEFTA_LAZY_LOG2=1"
ATTN_AB_BUILD_ONLY=1 timeout 320 python3 benchmarks/attention_ab.py > $OUT/run76d_abbuild.txt 2>&1; st ab-build rc=$?
tail -2 $OUT/run76d_abbuild.txt
left=$(( 585 - ($(date +%s) - t0) ))
ATTN_AB_ROUNDS=2 timeout $left python3 benchmarks/attention_ab.py > $OUT/run76d_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS\|Error\|error" $OUT/run76d_ab.txt | head -40

#!/usr/bin/env bash
# run 71b (session 63): B51 with more prepass CTAs: tree (16) / p32 / p64 / grid
# (-DEFTA_PREPASS_STREAM=0), two rounds.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;p32=-DEFTA_PREPASS_CTAS=32;p64=-DEFTA_PREPASS_CTAS=64;grid=-DEFTA_PREPASS_STREAM=0"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run71b_abbuild.txt 2>&1; st ab-build rc=$?
TREE=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_tree', []))" 2>/dev/null | tail -1)
echo "tree library: $TREE"
ATTN_AB_ROUNDS=2 timeout 220 python3 benchmarks/attention_ab.py > $OUT/run71b_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS\|Error\|error" $OUT/run71b_ab.txt | head -40

#!/usr/bin/env bash
# run 76c (session 68): B52, the lazy max: attention_ab.py tree against exact (-DEFTA_LAZY_LOG2=0), two
# rounds; the attention CUDA tests and the fast path's attention cases on the tree.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;exact=-DEFTA_LAZY_LOG2=0"
ATTN_AB_BUILD_ONLY=1 timeout 320 python3 benchmarks/attention_ab.py > $OUT/run76c_abbuild.txt 2>&1; st ab-build rc=$?
tail -2 $OUT/run76c_abbuild.txt
TREE=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_tree', []))" 2>/dev/null | tail -1)
echo "tree library: $TREE"
FTCOMPILE_ATTN_LIB=$TREE timeout 150 python3 -m pytest -q -p no:cacheprovider --maxfail=5 -rf tests/test_cuda_attention.py > $OUT/run76c_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run76c_tests.txt; grep -E "^(FAILED|ERROR)" $OUT/run76c_tests.txt | head
left=$(( 585 - ($(date +%s) - t0) ))
ATTN_AB_ROUNDS=2 timeout $left python3 benchmarks/attention_ab.py > $OUT/run76c_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS\|Error\|error" $OUT/run76c_ab.txt | head -40

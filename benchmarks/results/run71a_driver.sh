#!/usr/bin/env bash
# run 71a (session 63): B51, the streamed checksum prepass. A/B tree (stream, 16 CTAs) / grid
# (-DEFTA_PREPASS_STREAM=0), two rounds; then the attention CUDA tests and the fast
# path's attention cases on the tree.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;grid=-DEFTA_PREPASS_STREAM=0"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run71a_abbuild.txt 2>&1; st ab-build rc=$?
TREE=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_tree', []))" 2>/dev/null | tail -1)
echo "tree library: $TREE"
ATTN_AB_ROUNDS=2 timeout 220 python3 benchmarks/attention_ab.py > $OUT/run71a_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS\|Error\|error" $OUT/run71a_ab.txt | head -40
FTCOMPILE_ATTN_LIB=$TREE timeout 150 python3 -m pytest -q -p no:cacheprovider --maxfail=5 -rf tests/test_cuda_attention.py > $OUT/run71a_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run71a_tests.txt; grep -E "^(FAILED|ERROR)" $OUT/run71a_tests.txt | head
left=$(( 580 - ($(date +%s) - t0) ))
FTCOMPILE_ATTN_LIB=$TREE timeout $left python3 -m pytest -q -p no:cacheprovider -rf tests/test_fastpath.py -k attention > $OUT/run71a_fastpath.txt 2>&1; st fastpath rc=$?
tail -3 $OUT/run71a_fastpath.txt

#!/usr/bin/env bash
# run 66b (session 59, wip/b46-keys128): B46 step 2, the protected d=64 kernel at 128 keys a step
# (two consumer warpgroups), against the tree (64 keys) and the 128-key build with two warpgroups
# unprotected too (k128w2); hang probe first, then the A/B, then the attention CUDA tests on k128
# (cut at the call's end; run66c_driver.sh finishes them).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;k128=-DEFTA_KEYS128=1;k128w2=-DEFTA_KEYS128=2"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run66b_build.txt 2>&1; st build rc=$?
tail -3 $OUT/run66b_build.txt
K128=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_k128', ['-DEFTA_KEYS128=1']))" 2>/dev/null | tail -1)
echo "k128 library: $K128"
FTCOMPILE_ATTN_LIB=$K128 timeout 250 python3 benchmarks/attention_probe.py --timeout 30 > $OUT/run66b_probe.txt 2>&1; st probe rc=$?
grep -v "OK err" $OUT/run66b_probe.txt; grep -c "OK err.*pass" $OUT/run66b_probe.txt
if grep -q "HANG\|FAIL\|OVER" $OUT/run66b_probe.txt; then cat $OUT/run66b_probe.txt; echo "probe failed: no A/B"; exit 1; fi
ATTN_AB_ROUNDS=2 timeout 200 python3 benchmarks/attention_ab.py > $OUT/run66b_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS" $OUT/run66b_ab.txt
left=$(( 575 - ($(date +%s) - t0) ))
FTCOMPILE_ATTN_LIB=$K128 timeout $left python3 -m pytest -q -p no:cacheprovider --maxfail=5 -rf tests/test_cuda_attention.py \
  > $OUT/run66b_tests.txt 2>&1; st tests rc=$?
tail -8 $OUT/run66b_tests.txt

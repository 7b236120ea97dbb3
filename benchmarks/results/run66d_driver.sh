#!/usr/bin/env bash
# run 66d (session 59, wip/b48-d128-3wg): B48, the d=128 wgmma kernel with three consumer warpgroups
# (192-row CTAs, 160 registers) against the tree's two (128 rows, 232 registers); hang probe of the
# d=128 cases first, then the A/B, then the d=128 attention CUDA tests on the 3-warpgroup build.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;w3=-DEFTA_D128_3WG=1"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run66d_build.txt 2>&1; st build rc=$?
W3=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_w3', ['-DEFTA_D128_3WG=1']))" 2>/dev/null | tail -1)
echo "w3 library: $W3"
FTCOMPILE_ATTN_LIB=$W3 timeout 150 python3 benchmarks/attention_probe.py --timeout 30 --d 128 > $OUT/run66d_probe.txt 2>&1; st probe rc=$?
cat $OUT/run66d_probe.txt
if grep -q "HANG\|FAIL\|OVER" $OUT/run66d_probe.txt; then echo "probe failed: no A/B"; exit 1; fi
ATTN_AB_ROUNDS=2 timeout 200 python3 benchmarks/attention_ab.py > $OUT/run66d_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS" $OUT/run66d_ab.txt
left=$(( 570 - ($(date +%s) - t0) ))
FTCOMPILE_ATTN_LIB=$W3 timeout $left python3 -m pytest -q -p no:cacheprovider --maxfail=5 -rf tests/test_cuda_attention.py -k "128" \
  > $OUT/run66d_tests.txt 2>&1; st tests rc=$?
tail -4 $OUT/run66d_tests.txt

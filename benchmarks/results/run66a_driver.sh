#!/usr/bin/env bash
# run 66a (prepared in session 58 on wip/b46-keys128): B46's first step, the unprotected d=64 wgmma
# kernel stepping through 128 keys (-DEFTA_KEYS128=1: calls without a mask tensor) against the tree
# as is (whose builds are main's, SASS compared here); hang probe first (each case its own process),
# then the A/B, then the attention CUDA tests on the 128-key library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;k128=-DEFTA_KEYS128=1"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run66a_build.txt 2>&1; st build rc=$?
K128=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_k128', ['-DEFTA_KEYS128=1']))" 2>/dev/null | tail -1)
echo "k128 library: $K128"
FTCOMPILE_ATTN_LIB=$K128 timeout 200 python3 benchmarks/attention_probe.py --timeout 30 > $OUT/run66a_probe.txt 2>&1; st probe rc=$?
cat $OUT/run66a_probe.txt
if grep -q "HANG\|FAIL\|OVER" $OUT/run66a_probe.txt; then echo "probe failed: no A/B"; exit 1; fi
ATTN_AB_ROUNDS=2 timeout 180 python3 benchmarks/attention_ab.py > $OUT/run66a_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS" $OUT/run66a_ab.txt
FTCOMPILE_ATTN_LIB=$K128 timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_attention.py \
  > $OUT/run66a_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run66a_tests.txt

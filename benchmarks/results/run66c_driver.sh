#!/usr/bin/env bash
# run 66c (session 59): the attention CUDA tests on the 128-key build, whole (run 66b cuts them at
# its call's end); K128_DONE: pytest -k expression of those already passed, skipped here.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
K128=$(timeout 200 python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_k128', ['-DEFTA_KEYS128=1']))" 2>&1 | tail -1)
st "k128 library: $K128"
FTCOMPILE_ATTN_LIB=$K128 timeout 500 python3 -m pytest -q -p no:cacheprovider --maxfail=5 -rf tests/test_cuda_attention.py ${K128_DONE:+-k "not ($K128_DONE)"} \
  > $OUT/run66c_tests.txt 2>&1; st tests rc=$?
tail -8 $OUT/run66c_tests.txt

#!/usr/bin/env bash
# run 76b (session 68), on run 76a's machine (both libraries built there): the end-to-end, decode,
# fast-path, replay, CUDA-graph and inference-op tests with WIDE on.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 400 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run76b_attn_build.txt 2>&1; st attention rc=$?
timeout 230 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_e2e.py tests/test_cuda_decode.py tests/test_fastpath.py \
  tests/test_replay.py tests/test_cudagraphs.py tests/test_inference_ops.py > $OUT/run76b_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run76b_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run76b_tests.txt | head -10

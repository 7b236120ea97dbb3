#!/usr/bin/env bash
# run 71f (session 63): SK, the thin kernel's stream-K (one CTA per SM, runs of k-steps across
# tiles, partials through a workspace). The thin / thread / stream-K CUDA tests, then
# thin_sk_probe.py (split-K against stream-K in one process), then the rest of the GEMM tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run71f_build.txt 2>&1; st build rc=$?
tail -3 $OUT/run71f_build.txt | cut -c1-300
timeout 90 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_gemm.py -k "stream_k or thin or thread" > $OUT/run71f_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run71f_tests.txt; grep -E "^(FAILED|ERROR)|Error|assert" $OUT/run71f_tests.txt | head -10
timeout 100 python3 benchmarks/thin_sk_probe.py --out $OUT/thin_sk_probe_run71f.json > $OUT/run71f_probe.txt 2>&1; st probe rc=$?
grep -v Warn $OUT/run71f_probe.txt | tail -16
left=$(( 440 - ($(date +%s) - t0) ))
timeout $left python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "not (stream_k or thin or thread)" > $OUT/run71f_tests2.txt 2>&1; st tests2 rc=$?
tail -2 $OUT/run71f_tests2.txt; grep -E "^(FAILED|ERROR)" $OUT/run71f_tests2.txt | head -5

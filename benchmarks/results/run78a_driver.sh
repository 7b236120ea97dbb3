#!/usr/bin/env bash
# run 78a (session 70): FULL (FTG_THIN_REPLICA_NX 128, the rule still off): the library, the thin /
# thread / choice CUDA tests (the new 65-128-row tier), replica_rows_probe.py.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=$PWD/build/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 240 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run78a_build.txt 2>&1; st build rc=$?
tail -1 $OUT/run78a_build.txt; mkdir -p $OUT/lib && cp build/torch_ext/ftcompile_gemm_sm90a/ftcompile_gemm_sm90a.so $OUT/lib/ 2>/dev/null
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda_gemm.py -k "thin or thread or choice" > $OUT/run78a_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run78a_tests.txt; grep -E "^(FAILED|ERROR)|SKIPPED" $OUT/run78a_tests.txt | head -10
timeout 200 python3 benchmarks/replica_rows_probe.py > $OUT/run78a_probe.txt 2>&1; st probe rc=$?
sed -E 's/ \(/(/g' $OUT/run78a_probe.txt | cut -c1-330

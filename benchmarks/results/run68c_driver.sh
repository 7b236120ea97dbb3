#!/usr/bin/env bash
# run 68c (session 60): T2, the global kernel's tail split: the global GEMM CUDA tests (with the
# tail test) and the replay tests on the tree, then tail_ab.py (whole against tail, one library).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run68c_build.txt 2>&1; st build rc=$?
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_gemm.py -k "global or tail" > $OUT/run68c_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run68c_tests.txt
timeout 200 python3 benchmarks/tail_ab.py > $OUT/run68c_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run68c_ab.txt
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_fastpath.py tests/test_replay.py > $OUT/run68c_replay.txt 2>&1; st replay rc=$?
tail -2 $OUT/run68c_replay.txt

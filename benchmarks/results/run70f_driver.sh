#!/usr/bin/env bash
# run 70f (session 62): run 70e's thread table again on the same warm machine, nothing building
# in the background (the libraries from run 70e).
export OUT=${OUT:-/tmp/o} TORCH_EXTENSIONS_DIR=/tmp/torch_ext
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run70f_table.log 2>&1; echo rc=$?
grep -A60 "Thread scheme (bf16)" $OUT/gemm_bench.md | grep -E "^\| (1|16|32|64|128)x" | cut -d'|' -f2,4,5,6,8

#!/usr/bin/env bash
# run 73h (session 65): the thread table on the final code (ring up to 12 stages, L2 flushed before
# each timed replay), on run 73g's warm machine (library already built there).
export TORCH_EXTENSIONS_DIR=/tmp/torch_ext
timeout 100 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run73h_table.txt 2>&1; echo rc=$?
grep -E "^\| (1|8|16|32|64|128)x(14336|11008)x4096 " $OUT/gemm_bench.md | cut -d'|' -f2-9

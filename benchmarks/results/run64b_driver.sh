#!/usr/bin/env bash
# A record: it ran on session 57's R1 tree (Args::mt_runs, FTCOMPILE_GEMM_MT_RUNS), reverted after
# runs 64a-b (NOTES_gemm.md session 57 describes it); it does not apply to main.
# run 64b (session 57): does R1's run order cost what its held k-loop saves? The package's library
# and a build whose units never keep the range (-DFTG_NO_HELD: the run order alone); runs off / on
# in alternating processes with each library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT" ab_ref
printf '#define FTG_NO_HELD 1\n#include "global_gemm.cu"\n' > ab_ref/noheld.cu
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1 &
ABLATE=0 REF="ab_ref/noheld.cu" STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1
wait; st build; ls /tmp/ablate/*.so
S=8192x2304x768,4096x3072x768,4096x2304x768
for r in 1 2; do
  KNOB_AB_ROUNDS=1 KNOB_AB_SHAPES=$S timeout 90 python3 benchmarks/knob_ab.py > $OUT/run64b_held_$r.txt 2>&1; st held $r
  FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_ref1.so KNOB_AB_ROUNDS=1 KNOB_AB_SHAPES=$S timeout 90 python3 benchmarks/knob_ab.py > $OUT/run64b_noheld_$r.txt 2>&1; st noheld $r
done
for f in $OUT/run64b_*.txt; do echo "== $f"; grep "^| [0-9]" $f; done

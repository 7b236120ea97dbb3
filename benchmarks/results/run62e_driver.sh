#!/usr/bin/env bash
# run 62e: the micro with the package's ways one at a time (62d hung: see NOTES); the package's kernel
# with W in one box / 40-232 registers / both, and without PDL, against HEAD's build, bench protocol
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1; st pip rc=$?
R="ab_ref/onebox.cu ab_ref/regs40.cu ab_ref/both.cu"
( ABLATE=0 REF="$R" STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1 ) &
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icsrc/common -o /tmp/pingpong benchmarks/micro/pingpong_gemm.cu -lcublas 2>&1 | grep -v Warn
wait; st build; ls /tmp/ablate/*.so
timeout 90 /tmp/pingpong > $OUT/run62e_micro.txt 2>&1; st micro rc=$?
S=8192x2304x768,4096x3072x768,8192x768x3072
OUT=/tmp/ab1 ABLATE=0 REF="$R" STAGE=run NAMES=off#192,on BASE=cublas SHAPES=$S timeout 200 bash benchmarks/ablate_global.sh > /dev/null 2>&1; st ab rc=$?
cp /tmp/ab1/ablate_global.txt $OUT/run62e_ab.txt
FTCOMPILE_PDL=0 OUT=/tmp/ab2 ABLATE=0 STAGE=run NAMES=off#192,on BASE=cublas SHAPES=$S timeout 100 bash benchmarks/ablate_global.sh > /dev/null 2>&1; st nopdl rc=$?
cp /tmp/ab2/ablate_global.txt $OUT/run62e_nopdl.txt
cat $OUT/run62e_micro.txt $OUT/run62e_ab.txt $OUT/run62e_nopdl.txt

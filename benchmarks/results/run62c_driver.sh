#!/usr/bin/env bash
# run 62c: the ping-pong micro (4 and 12 input sets) and the package's global kernel under bench_gemm's protocol
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1; st pip rc=$?
ABLATE=0 STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1; st build rc=$?; ls /tmp/ablate/*.so
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icsrc/common -o /tmp/pingpong benchmarks/micro/pingpong_gemm.cu -lcublas 2>&1 | grep -v Warn
/tmp/pingpong > $OUT/run62c_micro4.txt 2>&1; st micro4
FT_SETS=12 /tmp/pingpong > $OUT/run62c_micro12.txt 2>&1; st micro12
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 200 python3 benchmarks/global_calibrate.py > $OUT/run62c_calibrate.txt 2>&1; st calibrate rc=$?
cat $OUT/run62c_micro4.txt $OUT/run62c_micro12.txt $OUT/run62c_calibrate.txt

#!/usr/bin/env bash
# run 62d: the micro with the global kernel's features one at a time; the package's kernel with and without PDL
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1; st pip rc=$?
( ABLATE=0 STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1 ) &
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icsrc/common -o /tmp/pingpong benchmarks/micro/pingpong_gemm.cu -lcublas 2>&1 | grep -v Warn
wait; st build; ls /tmp/ablate/*.so
/tmp/pingpong > $OUT/run62d_micro.txt 2>&1; st micro
FTCOMPILE_PDL=0 FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 200 python3 benchmarks/global_calibrate.py > $OUT/run62d_calibrate_nopdl.txt 2>&1; st calibrate nopdl rc=$?
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 200 python3 benchmarks/global_calibrate.py > $OUT/run62d_calibrate.txt 2>&1; st calibrate rc=$?
cat $OUT/run62d_micro.txt $OUT/run62d_calibrate_nopdl.txt $OUT/run62d_calibrate.txt

#!/usr/bin/env bash
# run 62f: the micro's coop192s4 under bench_gemm's protocol next to the package's kernel (tree: 40 / 232
# registers unprotected); the global GEMM CUDA tests on the tree
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1; st pip rc=$?
( ABLATE=0 STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1 ) &
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icsrc/common -Xcompiler -fPIC -shared -DPINGPONG_LIB -o /tmp/pingpong.so benchmarks/micro/pingpong_gemm.cu 2>&1 | grep -v Warn
wait; st build; ls /tmp/ablate/*.so /tmp/pingpong.so
PINGPONG_LIB=/tmp/pingpong.so FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 150 python3 benchmarks/global_calibrate.py > $OUT/run62f_calibrate.txt 2>&1; st calibrate rc=$?
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 150 python3 -m pytest -q -p no:cacheprovider -ra --timeout=60 tests/test_cuda_gemm.py -k global > $OUT/run62f_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run62f_tests.txt; grep -E "^(FAILED|ERROR)" $OUT/run62f_tests.txt | head
cat $OUT/run62f_calibrate.txt

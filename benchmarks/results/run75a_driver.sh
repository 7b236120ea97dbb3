#!/usr/bin/env bash
# run 75a (session 67): XREP, the thin kernel's crossed replica at 17-32 rows: builds tree / rot
# (-DFTG_THIN_CROSS_REPLICA=0: the rotated replica, the code before) / xall (-DFTG_THIN_REP_LOAD=0:
# the crossed replica at 1-16 rows too); gemm_ab two rounds; the thin and thread CUDA tests on tree,
# the replica tests on xall.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export GEMM_AB_FLAGS="tree=;rot=-DFTG_THIN_CROSS_REPLICA=0;xall=-DFTG_THIN_REP_LOAD=0" GEMM_AB_ROUNDS=2
export GEMM_AB_SHAPES=12x11008x4096,16x11008x4096,24x11008x4096,32x11008x4096,16x14336x4096,32x14336x4096,32x4096x4096,32x4096x11008,16x4096x4096,32x768x768,32x2304x768,32x3072x768,32x768x3072
GEMM_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run75a_build.txt 2>&1; st build rc=$?
tail -4 $OUT/run75a_build.txt
TREE=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
XALL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_xall/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TREE timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run75a_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run75a_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run75a_tests.txt | head -10
timeout 220 python3 benchmarks/gemm_ab.py > $OUT/run75a_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run75a_ab.txt | grep -v cublas | tail -26; grep -i "error\|Traceback" $OUT/run75a_ab.txt | head -5
FTCOMPILE_GEMM_LIB=$XALL timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "replica or thin_kernel_corrects" > $OUT/run75a_tests_xall.txt 2>&1; st xall tests rc=$?
tail -2 $OUT/run75a_tests_xall.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run75a_tests_xall.txt | head -10

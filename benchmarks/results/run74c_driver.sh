#!/usr/bin/env bash
# run 74c (session 66): the thin kernel's replica-checked stage without the checksum rows' 8 (NC =
# NX): builds tree / base (efd0180, HEAD before this session); the thin and thread CUDA tests on the
# tree; gemm_ab tree / base at the thin kernel's shapes (two rounds); kernel_choice_probe.py (every
# thread kernel forced where the automatic choice is weakest).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export GEMM_AB_FLAGS="tree=" GEMM_AB_BASE=ab_base/csrc GEMM_AB_ROUNDS=2
export GEMM_AB_SHAPES=1x11008x4096,8x11008x4096,16x11008x4096,24x11008x4096,32x11008x4096,1x14336x4096,16x14336x4096,32x14336x4096,16x8192x4096,32x4096x11008
GEMM_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run74c_build.txt 2>&1; st build rc=$?
tail -2 $OUT/run74c_build.txt
export FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run74c_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run74c_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run74c_tests.txt | head -10
(unset FTCOMPILE_GEMM_LIB; timeout 200 python3 benchmarks/gemm_ab.py > $OUT/run74c_ab.txt 2>&1); st ab rc=$?
grep "^|" $OUT/run74c_ab.txt | grep -v cublas | tail -22; grep -i "error\|Traceback" $OUT/run74c_ab.txt | head -5
timeout 150 python3 benchmarks/kernel_choice_probe.py > $OUT/run74c_choice.txt 2>&1; st choice rc=$?
cut -c1-400 $OUT/run74c_choice.txt

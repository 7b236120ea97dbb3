#!/usr/bin/env bash
# run 74d (session 66): the thin kernel's NC = NX again (run 74c's A/B failed: the base library
# lacked ft_gemm_thin_replica_checked; the snapshot now has a stub saying 'no'); the new automatic
# choice (the thin kernel at 9-128 rows): kernel_choice_probe.py where it changes or is unmeasured,
# the thread table, the thin / thread / stream CUDA tests and the end-to-end ones.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 400 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run74d_attn_build.txt 2>&1) &
export GEMM_AB_FLAGS="tree=" GEMM_AB_BASE=ab_base/csrc GEMM_AB_ROUNDS=2
export GEMM_AB_SHAPES=1x11008x4096,8x11008x4096,16x11008x4096,24x11008x4096,32x11008x4096,1x14336x4096,16x14336x4096,32x14336x4096,16x8192x4096,32x4096x11008
GEMM_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/gemm_ab.py > $OUT/run74d_build.txt 2>&1; st build rc=$?
tail -2 $OUT/run74d_build.txt
wait; st attention build; tail -1 $OUT/run74d_attn_build.txt
timeout 150 python3 benchmarks/gemm_ab.py > $OUT/run74d_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run74d_ab.txt | grep -v cublas | tail -22; grep -i "error\|Traceback" $OUT/run74d_ab.txt | head -5
export FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
timeout 100 python3 benchmarks/kernel_choice_probe.py --shapes 1x768x768,8x768x768,1x2304x768,8x2304x768,1x3072x768,8x3072x768,1x768x3072,8x768x3072,1x4096x4096,8x4096x4096,16x4096x4096,1x4096x11008,8x4096x11008,16x4096x11008,24x768x768,24x2304x768,48x768x768,48x768x3072,64x1024x1024,128x1024x1024,12x11008x4096,16x22016x4096 > $OUT/run74d_choice.txt 2>&1; st choice rc=$?
cut -c1-330 $OUT/run74d_choice.txt
timeout 100 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run74d_table.txt 2>&1; st table rc=$?
grep -E "^\| (1|8|16|32|64|128)x" $OUT/gemm_bench.md | head -48 | cut -d'|' -f2-8
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_e2e.py tests/test_cuda_decode.py tests/test_fastpath.py \
  tests/test_replay.py tests/test_cudagraphs.py tests/test_inference_ops.py > $OUT/run74d_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run74d_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run74d_tests.txt | head -10

#!/usr/bin/env bash
# run 68b (session 60): the thread kernels' strided checksum summed on the tensor cores (T1,
# thread_abft.cuh add_block): the A/B against HEAD's sources at the decode shapes, then the ring
# and streaming kernels' CUDA tests on the tree's library; cuDNN's kernels on the paper configurations; the
# SASS tools copied back for screening here.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
cp "$(command -v cuobjdump)" "$(dirname "$(command -v cuobjdump)")/nvdisasm" $OUT/ 2>/dev/null
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
# ab_base68b/: HEAD's csrc/gemm and csrc/common (git archive), untracked, carried with the tree
timeout 60 python3 benchmarks/cudnn_kernel_probe.py > $OUT/run68b_cudnn.txt 2>&1; st cudnn rc=$?
cut -c1-220 $OUT/run68b_cudnn.txt
GEMM_AB_BASE=ab_base68b/csrc GEMM_AB_FLAGS="tree=" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x768x768,16x768x768,1x2304x768,16x2304x768,1x3072x768,16x3072x768,1x768x3072,16x768x3072,1x4096x4096,16x4096x4096,1x4096x11008,1x11008x4096 \
  timeout 330 python3 benchmarks/gemm_ab.py > $OUT/run68b_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run68b_ab.txt | tail -40
TL=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TL timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_gemm.py -k "thread or stream" > $OUT/run68b_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run68b_tests.txt

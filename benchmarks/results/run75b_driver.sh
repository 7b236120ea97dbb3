#!/usr/bin/env bash
# run 75b (session 67): the thin kernel's K split at 32-128 rows with the crossed replica
# (thin_split_sweep.py: every split protected and not, against the model's pick), GPT-2's widths and
# two Llama shapes.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run75b_build.txt 2>&1; st build rc=$?
timeout 300 python3 benchmarks/thin_split_sweep.py --m 32,64,128 --nk 768x768,2304x768,3072x768,768x3072,4096x4096,4096x11008 \
  --out $OUT/thin_split_sweep_run75b.json > $OUT/run75b_sweep.txt 2>&1; st sweep rc=$?
cut -c1-400 $OUT/run75b_sweep.txt

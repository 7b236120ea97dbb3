#!/usr/bin/env bash
# run 65a (prepared in session 57): the global scheme's three widths (each at its automatic split and unsplit),
# unprotected, and both checks at their automatic widths, over the table's shapes and more layer
# shapes, two rounds (knob_ab.py); then benchmarks/fit_global_model.py on the result: the model's
# picks, their regret against the measured best, and a grid of its constants.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1; echo "[$(( $(date +%s) - t0 ))s] build"
S=8192x2304x768,8192x768x3072,4096x4096x4096,4096x2304x768,4096x768x768,4096x3072x768,4096x768x3072,2048x4096x4096
S=$S,2048x11008x4096,2048x4096x11008,2048x1024x4096,2048x14336x4096,2048x4096x14336,1024x1024x1024,2048x2048x2048
S=$S,512x4096x4096,1024x4096x4096,512x11008x4096,1024x11008x4096,4096x11008x4096,1024x4096x11008,512x2304x768
S=$S,1024x2304x768,1024x768x3072,512x768x3072,1024x3072x768,2048x3072x768,8192x3072x768,1024x2048x2048
S=$S,4096x1024x4096,4096x2048x2048
KNOB_AB_SHAPES=$S KNOB_AB_VARIANTS=off#256,off#192,off#128,off#256/1,off#192/1,off#128/1,on@rows,on@tiles timeout 420 python3 benchmarks/knob_ab.py \
  > $OUT/run65a_widths.txt 2>&1; echo "[$(( $(date +%s) - t0 ))s] widths rc=$?"
python3 benchmarks/fit_global_model.py $OUT/run65a_widths.txt | tee $OUT/run65a_fit.txt | head -90

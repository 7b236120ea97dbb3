#!/usr/bin/env bash
# run 68a (session 60): where a protected decode-size linear's time goes now (the streaming kernel at
# GPT-2's M <= 16 shapes, the thin kernel at Llama's 11008 x 4096), from the phase-stamped builds.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run68a_build.txt 2>&1; st build rc=$?
timeout 240 python3 benchmarks/stream_phases.py --out $OUT/stream \
  --shapes 1x768x768,16x768x768,1x2304x768,16x2304x768,1x3072x768,16x3072x768,1x768x3072,16x768x3072 \
  > $OUT/run68a_stream_phases.txt 2>&1; st stream rc=$?
timeout 150 python3 benchmarks/thin_phases.py --out $OUT/thin --shapes 1x11008x4096,16x11008x4096,16x14336x4096 \
  > $OUT/run68a_thin_phases.txt 2>&1; st thin rc=$?
grep -v "^\s*$" $OUT/run68a_stream_phases.txt | tail -40

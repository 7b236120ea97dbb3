#!/usr/bin/env bash
# run 69f (session 61): S6 again, three rounds, with a build of its code whose W loads all follow the wait (e0): the A/B
# against HEAD's sources (ab_base69e/, untracked, carried with the tree) at the streaming kernel's
# decode shapes, three rounds.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
GEMM_AB_BASE=ab_base69e/csrc GEMM_AB_FLAGS="tree=;e0=-DFTG_STREAM_W_EARLY=0" GEMM_AB_ROUNDS=3 \
GEMM_AB_SHAPES=1x768x768,16x768x768,1x2304x768,16x2304x768,1x3072x768,16x3072x768,1x768x3072,1x4096x4096,16x4096x4096,1x4096x11008 \
  timeout 400 python3 benchmarks/gemm_ab.py > $OUT/run69f_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run69f_ab.txt | tail -40

#!/usr/bin/env bash
# run 70g (session 62): the decode rows, T3's sources (ce372fd: mkdir ab_base70 && git archive ce372fd
# csrc/gemm csrc/common | tar -x -C ab_base70/) against G, three rounds.
export OUT=${OUT:-/tmp/o} TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16 PYTHONUNBUFFERED=1
GEMM_AB_BASE=ab_base70/csrc GEMM_AB_FLAGS="tree=" GEMM_AB_ROUNDS=3 \
GEMM_AB_SHAPES=1x11008x4096,16x11008x4096,1x14336x4096,16x14336x4096,32x11008x4096 \
  timeout 280 python3 benchmarks/gemm_ab.py > $OUT/run70g_ab.txt 2>&1; echo rc=$?
grep "^|" $OUT/run70g_ab.txt

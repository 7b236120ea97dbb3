#!/usr/bin/env bash
# Sourced by the ablation scripts (ablate_global.sh, ablate_thin.sh): the GEMM library is built
# once per variant of one kernel source; the other kernels of csrc/gemm are compiled once, as
# object files in /tmp/ablate, and linked into every variant.
ABLATE_FLAGS=(-O3 -std=c++17 -Icsrc/common -Icsrc/gemm -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC)

# Compile every csrc/gemm/*.cu but $1 (a file name) in the background (the caller waits).
ablate_compile_others() {
  local f
  for f in csrc/gemm/*.cu; do
    [ "$(basename "$f")" = "$1" ] && continue
    nvcc "${ABLATE_FLAGS[@]}" -c "$f" -o "/tmp/ablate/$(basename "$f" .cu).o" \
      > "/tmp/ablate/build_$(basename "$f").log" 2>&1 &
  done
}

# The object files of those kernels (every csrc/gemm/*.cu but $1).
ablate_other_objects() {
  local f
  for f in csrc/gemm/*.cu; do
    [ "$(basename "$f")" = "$1" ] || echo "/tmp/ablate/$(basename "$f" .cu).o"
  done
}

#!/usr/bin/env bash
# Where the thin kernel's protection cost goes: builds the kernel library with parts of the
# protection dropped (FTG_THIN_ABLATE bits, csrc/gemm/thin_gemm.cu: 1 no column checks, 2 no x-side
# pass, 4 no correction path, 8 no checksum-row loads, 16 the k-loop wgmma without the checksum
# columns) and times thin on (and off, in build 0) on a few shapes, each build in its own process.
# ABLATE: the builds (default "0 1 4"); SHAPES="MxNxK,...": other shapes;
# STAGE=build or run: only that half (to build in the background of other GPU work).
# Diagnostics only: the ablated builds give unchecked or wrong answers.
# Usage (device tool): bash benchmarks/ablate_thin.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ftcompile_out}
mkdir -p "$OUT" /tmp/ablate
builds="${ABLATE:-0 1 4}"
stage=${STAGE:-all}
if [ "$stage" != run ]; then
  source benchmarks/ablate_build.sh
  ablate_compile_others thin_gemm.cu
  for a in $builds; do
    nvcc "${ABLATE_FLAGS[@]}" -c -DFTG_THIN_ABLATE=$a csrc/gemm/thin_gemm.cu -o /tmp/ablate/thin_$a.o \
      > /tmp/ablate/build_thin_$a.log 2>&1 &
  done
  wait
  for a in $builds; do
    nvcc -shared -gencode=arch=compute_90a,code=sm_90a /tmp/ablate/thin_$a.o $(ablate_other_objects thin_gemm.cu) \
      -o /tmp/ablate/libgemm_thin_$a.so >> /tmp/ablate/build_thin_$a.log 2>&1 || cat /tmp/ablate/build_thin_$a.log
  done
fi
[ "$stage" = build ] && exit 0
cat > /tmp/ablate/run_thin.py <<'PY'
import os, sys; sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
import torch
from bench_gemm import Runner, graph_times, make_sets
r = Runner()
names = sys.argv[1].split(",")
shapes = os.environ.get("SHAPES", "32x11008x4096,32x14336x4096,64x4096x4096,64x11008x4096,128x11008x4096,64x2304x768")
for shape in [tuple(int(v) for v in s.split("x")) for s in shapes.split(",")]:
    sets = make_sets(*shape, torch.bfloat16)
    t = graph_times({n: r.variant(n, "linear_thread", kernel="thin") for n in names}, sets)
    print("x".join(map(str, shape)), " ".join(f"{n}={v * 1e3:.1f}us" for n, v in t.items()), flush=True)
PY
for a in $builds; do
  echo "== FTG_THIN_ABLATE=$a (1: no column checks, 2: no x-side pass, 4: no correction path)"
  names=on
  [ "$a" = 0 ] && names=off,on
  FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_thin_$a.so timeout 120 python3 /tmp/ablate/run_thin.py "$names" 2>&1 | grep -v Warning
done | tee "$OUT/ablate_thin.txt"

#!/usr/bin/env bash
# Where the thin kernel's protection cost goes: builds the kernel library with parts of the
# protection dropped (FTG_THIN_ABLATE bits, csrc/gemm/thin_gemm.cu: 1 no column checks, 2 no x-side
# pass, 4 no correction path) and times thin on (and off, in build 0) on a few shapes, each build
# in its own process. ABLATE: the builds (default "0 1 4"); SHAPES="MxNxK,...": other shapes;
# STEP=build or run: only that half (to build in the background of other GPU work).
# Diagnostics only: the ablated builds give unchecked or wrong answers.
# Usage (device tool): bash benchmarks/ablate_thin.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ftcompile_out}
mkdir -p "$OUT" /tmp/ablate
builds="${ABLATE:-0 1 4}"
STEP=${STEP:-all}
if [ "$STEP" != run ]; then
flags=(-O3 -std=c++17 -Icsrc/common -Icsrc/gemm -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC)
# The other kernels once, the thin kernel per build (object files, linked per build).
for f in csrc/gemm/*.cu; do
  [ "$(basename "$f")" = thin_gemm.cu ] && continue
  nvcc "${flags[@]}" -c "$f" -o "/tmp/ablate/$(basename "$f" .cu).o" > "/tmp/ablate/build_$(basename "$f").log" 2>&1 &
done
for a in $builds; do
  nvcc "${flags[@]}" -c -DFTG_THIN_ABLATE=$a csrc/gemm/thin_gemm.cu -o /tmp/ablate/thin_$a.o > /tmp/ablate/build_thin_$a.log 2>&1 &
done
wait
others=$(for f in csrc/gemm/*.cu; do b=$(basename "$f" .cu); [ "$b" = thin_gemm ] || echo "/tmp/ablate/$b.o"; done)
for a in $builds; do
  nvcc -shared -gencode=arch=compute_90a,code=sm_90a /tmp/ablate/thin_$a.o $others \
    -o /tmp/ablate/libgemm_thin_$a.so >> /tmp/ablate/build_thin_$a.log 2>&1 || cat /tmp/ablate/build_thin_$a.log
done
fi
[ "$STEP" = build ] && exit 0
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

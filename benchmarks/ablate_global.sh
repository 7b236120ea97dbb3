#!/usr/bin/env bash
# Where the global kernel's protection cost goes: builds the kernel library with parts of the
# protection dropped (FTG_ABLATE bits, csrc/gemm/global_gemm.cu) and times the protected kernel
# of each build against the unprotected one on a few compute-bound shapes (which builds: ABLATE,
# default "0 1 3 7"; NAMES: the variants timed in every build, default on; BASE: timed in build 0
# too, default off. A name is a bench_gemm variant ("on@tiles": the tile-local check) with an
# optional "#width": "off#192" is the unprotected kernel on 192-wide tiles). REF="path ...": more
# builds, "ref1", "ref2", ..., of other versions of global_gemm.cu (e.g. the last commit's, for an
# A/B in one session), timed with BASE and NAMES as build 0.
# STAGE=build only builds (e.g. in the background while the CUDA tests run), STAGE=run only times
# what an earlier STAGE=build left in /tmp/ablate (default: both). SHAPES="MxNxK,...": these shapes
# instead of the default ones (MORE=1 adds to the defaults).
# Diagnostics only: the ablated builds give wrong answers. Usage (device tool): bash benchmarks/ablate_global.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ftcompile_out}
mkdir -p "$OUT" /tmp/ablate
stage=${STAGE:-all}
[ "$stage" = build ] || python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/ablate/env.log 2>&1
refs=()
for r in ${REF:-}; do refs+=("$r"); done
builds="${ABLATE:-0 1 3 7}"
for i in "${!refs[@]}"; do builds+=" ref$((i + 1))"; done
if [ "$stage" != run ]; then
  source benchmarks/ablate_build.sh
  ablate_compile_others global_gemm.cu
  for a in ${ABLATE:-0 1 3 7}; do
    nvcc "${ABLATE_FLAGS[@]}" -c -DFTG_ABLATE=$a csrc/gemm/global_gemm.cu -o /tmp/ablate/global_$a.o > /tmp/ablate/build_$a.log 2>&1 &
  done
  for i in "${!refs[@]}"; do
    nvcc "${ABLATE_FLAGS[@]}" -c "${refs[$i]}" -o /tmp/ablate/global_ref$((i + 1)).o > /tmp/ablate/build_ref$((i + 1)).log 2>&1 &
  done
  wait
  for a in $builds; do  # every other kernel linked in: the package's loader binds all their entry points
    nvcc -shared -gencode=arch=compute_90a,code=sm_90a /tmp/ablate/global_$a.o $(ablate_other_objects global_gemm.cu) \
      -o /tmp/ablate/libgemm_$a.so >> /tmp/ablate/build_$a.log 2>&1
  done
fi
[ "$stage" = build ] && exit 0
cat > /tmp/ablate/run.py <<'PY'
import os, sys; sys.path.insert(0, "benchmarks")
import torch
from bench_gemm import Runner, graph_times, make_sets
r = Runner()
names = sys.argv[1].split(",")

shapes = [(8192, 2304, 768), (4096, 768, 3072), (4096, 4096, 4096), (2048, 4096, 4096)]
if os.environ.get("SHAPES"):
    shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
elif "--more" in sys.argv:
    shapes += [(4096, 3072, 768), (2048, 2048, 2048), (4096, 768, 768), (8192, 8192, 8192), (8192, 768, 3072),
               (1024, 1024, 1024), (4096, 2304, 768)]
for shape in shapes:
    sets = make_sets(*shape, torch.bfloat16, budget=6 << 30)
    t = graph_times({n: r.global_variant(n) for n in names}, sets)
    print("x".join(map(str, shape)), " ".join(f"{n}={v * 1e3:.1f}us" for n, v in t.items()), flush=True)
PY
for a in $builds; do
  echo "== FTG_ABLATE=$a (1: no verification, 2: no x statistics, 4: no row sums, 8: no correction, 16: n192/n128)"
  names=${NAMES:-on}
  [ "$a" = 0 ] || [[ "$a" = ref* ]] && names=${BASE:-off},$names
  FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_$a.so python3 /tmp/ablate/run.py "$names" \
    ${MORE:+--more} 2>&1 | grep -v Warning
done | tee "$OUT/ablate_global.txt"

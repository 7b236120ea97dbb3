#!/usr/bin/env bash
# run 72b (session 64): PRE, at most n stages of W before the thin kernel's dependency wait when
# protected (-DFTG_THIN_PRE_MAX=n). Builds tree / pre4 / pre2 and the phase-stamp library in parallel,
# gemm_ab of the three (two rounds), then thin_phases on the tree at the decode shapes.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
FLAGS="tree=;pre4=-DFTG_THIN_PRE_MAX=4;pre2=-DFTG_THIN_PRE_MAX=2"
GEMM_AB_FLAGS="$FLAGS" timeout 240 python3 - > $OUT/run72b_build.txt 2>&1 <<'PY'
import os
from concurrent.futures import ThreadPoolExecutor
from ftcompile.ops import cuda
specs = dict(v.partition("=")[::2] for v in os.environ["GEMM_AB_FLAGS"].split(";"))
specs_l = {"ftcompile_gemm_ab_" + n: f.split() for n, f in specs.items()}
specs_l["ftcompile_gemm_sm90a_stamps"] = ["-DPHASE_STAMPS"]
with ThreadPoolExecutor(4) as ex:
    futs = {n: ex.submit(cuda.build_library, "gemm", n, f) for n, f in specs_l.items()}
    for n, f in futs.items():
        print(n, f.result())
PY
st build rc=$?; tail -4 $OUT/run72b_build.txt
GEMM_AB_FLAGS="$FLAGS" GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x14336x4096,8x14336x4096,16x14336x4096,32x14336x4096,1x11008x4096,32x11008x4096,64x4096x4096,128x4096x4096,64x4096x11008,128x2304x768,128x14336x4096 \
  timeout 280 python3 benchmarks/gemm_ab.py > $OUT/run72b_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run72b_ab.txt | tail -40; grep -i "error\|Traceback" $OUT/run72b_ab.txt | head -5
FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1) \
  timeout 90 python3 benchmarks/thin_phases.py --out $OUT --shapes 1x14336x4096,16x14336x4096,64x4096x4096 > $OUT/run72b_phases.txt 2>&1; st phases rc=$?
cut -c1-330 $OUT/run72b_phases.txt | grep -v Warn

#!/usr/bin/env bash
# run 75f (session 67): XREP64, the crossed replica at 33-64 rows (-DFTG_THIN_REPLICA_NX=64: no pass, no
# checksum rows; twice the tensor work): a correctness probe on it (no false alarm, one fault per call
# corrected bit for bit, through the tests' own helper), then gemm_ab tree / r64, two rounds.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export GEMM_AB_FLAGS="tree=;r64=-DFTG_THIN_REPLICA_NX=64" GEMM_AB_ROUNDS=2
export GEMM_AB_SHAPES=48x14336x4096,64x14336x4096,64x11008x4096,48x11008x4096,64x4096x11008,64x4096x4096,64x2304x768,64x3072x768,64x768x3072
GEMM_AB_BUILD_ONLY=1 timeout 200 python3 benchmarks/gemm_ab.py > $OUT/run75f_build.txt 2>&1; st build rc=$?
export FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_r64/*.so | head -1)
timeout 60 python3 - > $OUT/run75f_probe.txt 2>&1 <<'PY'
import sys; sys.path.insert(0, "tests")
import torch, ftcompile
import test_cuda_gemm as t
for dtype in (torch.bfloat16, torch.float16):
    name = f"r64-{dtype}"
    s = ftcompile.telemetry.site(t.site(name))
    f = t._replicas_correct_exactly(name, s, dtype, dict(kernel="thin"), [
        (1, 40, 1000, 520, 1, True), (1, 64, 4096, 4096, 2, False), (1, 33, 2048, 1032, 4, True),
        (3, 64, 300, 256, 1, False), (1, 57, 300, 1024, 3, True), (1, 64, 11008, 512, 1, False)])
    st = t._stats(name)
    print(dtype, "faults", f, st, "OK" if st["detected"] == f and st["corrected"] == f else "MISMATCH", flush=True)
PY
st probe rc=$?; tail -3 $OUT/run75f_probe.txt
unset FTCOMPILE_GEMM_LIB
timeout 150 python3 benchmarks/gemm_ab.py > $OUT/run75f_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run75f_ab.txt | grep -v cublas | tail -18; grep -i "error\|Traceback" $OUT/run75f_ab.txt | head -5

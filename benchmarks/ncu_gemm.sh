#!/usr/bin/env bash
# Nsight Compute on a GEMM kernel, protected vs unprotected, one shape (default 4096^3): the
# sections that say where a kernel's time goes, and the SASS lines with the most stall samples of
# each kernel (what benchmarks/NOTES_gemm.md reads when protection costs more than predicted).
# Usage (device tool): [SCHEME=global|ring|stream|thin] [STAGES=d] [WARPS=w] [SPLIT=s] bash benchmarks/ncu_gemm.sh [M N K]
#   (STAGES, WARPS: the streaming kernel's ring depth and warps per CTA; STAGES, SPLIT: the thin kernel's;
#   thin: its x-side pass is profiled too)
#   (SCHEME: the global kernel (default) or one of the thread scheme's two; 2 files land in $OUT:
#   ncu_details_<scheme>_<shape>.txt, ncu_hot_<scheme>_<shape>.txt; report and CSV stay in /tmp/ncu)
set -u
M=${1:-4096} N=${2:-4096} K=${3:-4096}
SCHEME=${SCHEME:-global}
case $SCHEME in
  global) op=linear_global kind=None regex=gemm_global ;;
  ring) op=linear_thread kind='"ring"' regex=gemm_thread ;;
  stream) op=linear_thread kind='"stream"' regex=gemm_stream ;;
  thin) op=linear_thread kind='"thin"' regex=thin ;;
  *) echo "SCHEME must be global, ring, stream or thin"; exit 2 ;;
esac
tag=${SCHEME}${SPLIT:+_s$SPLIT}_${M}x${N}x${K}
skip=2 count=2
[ "$SCHEME" = thin ] && skip=3 count=3  # "on" launches the x-side pass and the GEMM
source "$(dirname "$0")/ncu_env.sh" gemm
cat > /tmp/ncu_gemm_run.py <<EOF
import sys; sys.path.insert(0, "benchmarks")
import torch
from bench_gemm import Runner, make_sets
r = Runner()
x, w, b = make_sets($M, $N, $K, torch.bfloat16, budget=1)[0]
for name in ("off", "on", "off", "on"):  # the first two warm up (build, caches, workspace)
    r.variant(name, "$op", kernel=$kind, stages=${STAGES:-None}, warps=${WARPS:-None},
              split=${SPLIT:-None})(x, w, b)
torch.cuda.synchronize()
EOF
"$NCU_BIN" --clock-control none -k regex:$regex --launch-skip $skip --launch-count $count --set full \
  --import-source no -f -o /tmp/ncu/$tag python3 /tmp/ncu_gemm_run.py > /tmp/ncu/run.log 2>&1
ncu_reports "$tag" 30
grep -E "gemm_|thin_|Duration|Elapsed Cycles|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Local Memory" "$OUT/ncu_details_$tag.txt" | head -40
head -${HOT_LINES:-60} "$OUT/ncu_hot_$tag.txt"
tail -3 /tmp/ncu/run.log

#!/usr/bin/env bash
# Nsight Compute, one shape at M <= 16: cuBLAS, the streaming thread kernel off / on at each
# depth (1, 2 = rolling) and warps per CTA (8, 16), and the ring kernel, in one process (profiler
# range around the calls only). Prints each kernel's duration, DRAM throughput and bytes, and its
# warp-state summary: where a memory-bound call's time goes that graph timing alone does not say
# (NOTES_gemm.md, run 14).
# Usage (device tool): bash benchmarks/ncu_stream.sh [M N K]   (1 file lands in $OUT)
set -u
M=${1:-1} N=${2:-4096} K=${3:-4096}
tag=${M}x${N}x${K}
source "$(dirname "$0")/ncu_env.sh" gemm
cat > /tmp/ncu_stream_run.py <<PY
import sys; sys.path.insert(0, "benchmarks")
import torch
from bench_gemm import Runner, make_sets
r = Runner()
x, w, b = make_sets($M, $N, $K, torch.bfloat16, budget=1)[0]
calls = [("cublas", None, {})] + [(v, "linear_thread", dict(kernel="stream", stages=d, warps=w))
                                  for d, w in ((1, 8), (2, 8), (1, 16), (2, 16)) for v in ("off", "on")]
calls += [("on", "linear_thread", dict(kernel="ring"))]
fns = [r.variant(name, op, **kw) for name, op, kw in calls]
for f in fns:  # warm-up: build, caches, workspaces
    f(x, w, b)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for f in fns:
    f(x, w, b)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("calls:", [c[0] + str(c[2]) for c in calls])
PY
"$NCU_BIN" --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
  --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct \
  -f -o /tmp/ncu/stream_$tag python3 /tmp/ncu_stream_run.py > /tmp/ncu/run.log 2>&1
"$NCU_BIN" --import /tmp/ncu/stream_$tag.ncu-rep --page details > "$OUT/ncu_stream_$tag.txt" 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|dram__bytes_read.sum|dram__throughput|lts__t_sector_hit|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Grid Size|Registers Per|Dynamic Shared" \
  "$OUT/ncu_stream_$tag.txt" | sed -E 's/ +/ /g' | cut -c1-150
tail -2 /tmp/ncu/run.log

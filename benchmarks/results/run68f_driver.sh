#!/usr/bin/env bash
# run 68f (session 60): cuDNN's SDPA kernel under Nsight Compute at 16x64 s512 and 32x128 s512:
# its launch shape and occupancy (registers, shared memory, CTAs per SM), for the B50 design note.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; mkdir -p "$OUT" /tmp/ncu
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for cfg in 16x64s512 32x128s512 16x64s16384; do
  timeout 100 "$NCU_BIN" --clock-control none -k regex:cudnn --launch-count 1 --section LaunchStats --section Occupancy \
    --section SpeedOfLight --section SchedulerStats python3 benchmarks/cudnn_kernel_probe.py --ncu --configs $cfg \
    > $OUT/run68f_ncu_$cfg.txt 2>&1
  grep -E "Duration|Registers Per|Shared Memory Configuration Size|Dynamic Shared|Static Shared|Block Size|Grid Size|Block Limit|Theoretical Occupancy|Achieved Occupancy|Waves Per SM|Active Warps Per Scheduler|Issued Warp|Compute \(SM\) Thr|Memory Thr" $OUT/run68f_ncu_$cfg.txt | sed "s/^/$cfg: /"
done

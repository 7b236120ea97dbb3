#!/usr/bin/env bash
# Nsight Compute on the attention kernel, unprotected then protected, one configuration of
# bench_attention.py (default "16x64 s4096"): the sections that say where the time goes and the
# SASS lines with the most stall samples (benchmarks/ncu_hot.py). What NOTES_attention.md reads
# when protection costs more than predicted.
# Usage (device tool): [KERNEL=wgmma|mma] bash benchmarks/ncu_attention.sh ["16x64 s4096"]
#   3 files land in $OUT: ncu_details_attn_<cfg>.txt, ncu_hot_attn_<cfg>.txt, ncu_source_attn_<cfg>.csv.gz
#   (the per-line SASS counts and samples, for reading offline)
set -u
CFG=${1:-16x64 s4096}
tag=attn_$(echo "$CFG" | tr -c 'A-Za-z0-9\n' '_')
export FTCOMPILE_ATTN_KERNEL=${KERNEL:-auto}
source "$(dirname "$0")/ncu_env.sh" attention
"$NCU_BIN" --clock-control none -k regex:attn_fwd_ --launch-count 2 --set full --import-source no -f \
  -o /tmp/ncu/$tag python3 benchmarks/bench_attention.py --profile "$CFG" > /tmp/ncu/run.log 2>&1
ncu_reports "$tag" 40
grep -E "attn_fwd_|Duration|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Local Memory|Compute \(SM\) Throughput" \
  "$OUT/ncu_details_$tag.txt" | head -30
grep -E "^== |stalls:|executed warp" "$OUT/ncu_hot_$tag.txt"
gzip -c /tmp/ncu/source.csv > "$OUT/ncu_source_$tag.csv.gz"
tail -3 /tmp/ncu/run.log

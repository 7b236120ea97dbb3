#!/usr/bin/env bash
# Nsight Compute on the tensor-core decode split kernel, one unprotected then one protected call of
# a shape (bf16, eager): where the time goes and the SASS lines with the most stall samples
# (benchmarks/ncu_hot.py). What NOTES_attention.md (session 49) read when protection cost more than
# predicted.
# Usage (device tool): bash benchmarks/ncu_decode.sh ["B HQ HK SQ SK D", default "8 12 12 1 4096 64"]
set -u
SHAPE=${1:-8 12 12 1 4096 64}
tag=decode_$(echo "$SHAPE" | tr ' ' '_')
source "$(dirname "$0")/ncu_env.sh" attention
"$NCU_BIN" --clock-control none -k regex:decode_tc_split --launch-count 2 --set full --import-source no -f \
  -o /tmp/ncu/$tag python3 - $SHAPE > /tmp/ncu/run.log 2>&1 <<'PY'
import sys
import torch
import ftcompile
from ftcompile.ops import cuda_attention as ca
ca.DECODE_IMPL = "tc"
b, hq, hk, sq, sk, d = map(int, sys.argv[1:])
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for h, s in ((hq, sq), (hk, sk), (hk, sk)))
sid = ftcompile.register_site("ncu_decode", "attention")
ca.attention(q, k, v, None, False, None, hq != hk, protect=False)
torch.ops.ftcompile.attention(q, k, v, None, False, None, hq != hk, sid)
torch.cuda.synchronize()
PY
ncu_reports "$tag" 30
grep -E "decode_tc_split|Duration|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Local Memory|Achieved Occupancy|Memory Throughput|Block Limit" \
  "$OUT/ncu_details_$tag.txt" | head -40
grep -E "^== |stalls:|executed warp" "$OUT/ncu_hot_$tag.txt"
tail -3 /tmp/ncu/run.log

#!/usr/bin/env bash
# Builds and runs wgmma_rate.cu: SM cycles per m64nNk16 wgmma (bf16, A and B from shared memory) for
# the N below, two and one warpgroups issuing. Usage (device tool): bash benchmarks/micro/wgmma_rate.sh
set -eu
cd "$(dirname "$0")/../.."
NS=${NS:-"64 72 128 136 144 160 176 184 192 200 208 216 224 232 240 248 256"}
gen=/tmp/wgmma_rate && mkdir -p $gen
python3 - "$gen/wgmma_rate_ops.cuh" $NS <<'PY'
import sys
sys.path.insert(0, "csrc/common")
import gen_wgmma as g
ns = [int(n) for n in sys.argv[2:]]
body = "".join(g.ss(n, "bf16", "bf16") for n in ns)
each = " ".join(f"F({n})" for n in ns)
open(sys.argv[1], "w").write("#pragma once\n#include <cuda_bf16.h>\n#include <stdint.h>\nnamespace sm90 {\n" + body
                             + "}\n#define FTW_EACH_N(F) " + each + "\n")
PY
nvcc -O3 -std=c++17 -Icsrc/common -I$gen -gencode=arch=compute_90a,code=sm_90a -o $gen/rate benchmarks/micro/wgmma_rate.cu
$gen/rate

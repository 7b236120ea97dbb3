"""Global kernel: time per call by K split (forced), unprotected, protected (the automatic check)
and with the tile-local check, on shapes whose tiles leave SMs idle (NOTES_gemm.md, runs 18 and
26). Usage: python3 benchmarks/split_sweep.py [--bn 256|192|128] [--shapes MxNxK,...] [--max-split S]"""
import argparse
import math
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bn", type=int, default=256)
ap.add_argument("--shapes", default="1024x1024x1024,2048x1024x4096,64x4096x4096,128x11008x4096,256x11008x4096")
ap.add_argument("--max-split", type=int, default=6)
args = ap.parse_args()
variants = ("off", "on") + (("on@tiles",) if args.bn in cuda_gemm.TILE_CHECK_BNS else ())
sms = torch.cuda.get_device_properties(0).multi_processor_count
r = Runner()
for shape in [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]:
    sets = make_sets(*shape, torch.bfloat16, budget=6 << 30)
    auto = cuda_gemm.global_split(*shape, 1, sms, args.bn)
    row = []
    for split in range(1, min(args.max_split, math.ceil(shape[2] / cuda_gemm.K_TILE)) + 1):
        t = {n: v * 1e3 for n, v in graph_times({n: r.variant(n, "linear_global", split=split, bn=args.bn)
                                                 for n in variants}, sets).items()}
        row.append(f"k{split} " + "/".join(f"{t[n]:.1f}" for n in variants))
    print("x".join(map(str, shape)), f"bn {args.bn} (auto split {auto}) us {'/'.join(variants)}:", "  ".join(row),
          flush=True)

"""Global kernel: time per call by K split (forced, 128x256 tiles), unprotected and protected, on the
shapes whose 128x256 tiles leave SMs idle (NOTES_gemm.md, run 18). Usage: python3 benchmarks/split_sweep.py"""
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

r = Runner()
for shape in [(1024, 1024, 1024), (2048, 1024, 4096), (64, 4096, 4096), (128, 11008, 4096), (256, 11008, 4096)]:
    sets = make_sets(*shape, torch.bfloat16, budget=6 << 30)
    auto = cuda_gemm.global_split(*shape, 1, torch.cuda.get_device_properties(0).multi_processor_count)
    row = []
    for split in range(1, 7):
        t = {n: v * 1e3 for n, v in graph_times({n: r.variant(n, "linear_global", split=split, bn=256)
                                                 for n in ("off", "on")}, sets).items()}
        row.append(f"k{split} {t['off']:.1f}/{t['on']:.1f}")
    print("x".join(map(str, shape)), f"(auto {auto}) us off/on:", "  ".join(row), flush=True)

"""The CUDA kernels one linear call launches, per variant, with their device time (torch.profiler,
graph_profile.kernels_per_forward) on bench_gemm's rotated input sets, eager or (--graph) replayed
from one CUDA graph as bench_gemm times them: where a protected call's time goes beyond the GEMM
itself (extra launches, memsets). Back to back (--graph), a kernel launched with programmatic
dependent launch starts before the previous call ends and waits for it, so its device time counts
that wait too and the kernel time per call can exceed the wall: read the launches and the wall.

    python benchmarks/kernel_list_probe.py --shapes 4096x768x768,2048x2048x2048 --variants off,on@rows,on@tiles
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gemm  # noqa: E402
from graph_profile import kernels_per_forward  # noqa: E402
from ftcompile.timing import median_ms  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="4096x768x768,2048x2048x2048")
ap.add_argument("--variants", default="cublas,off,on,on@rows,on@tiles")
ap.add_argument("--calls", type=int, default=48)
ap.add_argument("--graph", action="store_true", help="replay one CUDA graph of the calls (as bench_gemm times)")
args = ap.parse_args()
runner = bench_gemm.Runner()
for shape in args.shapes.split(","):
    m, n, k = (int(v) for v in shape.split("x"))
    sets = bench_gemm.make_sets(m, n, k, torch.bfloat16)
    inputs = [sets[i % len(sets)] for i in range(args.calls)]
    for variant in args.variants.split(","):
        call = runner.variant(variant, "linear_global")
        for x, w, b in sets:  # warm: caches, workspaces
            call(x, w, b)
        torch.cuda.synchronize()
        if args.graph:
            fn = bench_gemm.capture(call, inputs).replay
        else:
            def fn():
                for a in inputs:
                    call(*a)
        per = kernels_per_forward(fn, calls=1)  # {kernel: (launches, ms)} over the args.calls calls
        wall = median_ms(fn, reps=5) * 1e3 / args.calls
        total = sum(ms for _, ms in per.values()) * 1e3 / args.calls
        print(f"{shape} {variant}: {total:.1f} us of kernels per call, {wall:.1f} us wall"
              + (" (graph)" if args.graph else ""))
        for name, (cnt, ms) in sorted(per.items(), key=lambda kv: -kv[1][1]):
            print(f"    {cnt / args.calls:5.2f}/call {ms * 1e3 / cnt:8.1f} us  {name[:110]}")

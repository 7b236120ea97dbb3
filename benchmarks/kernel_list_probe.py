"""The CUDA kernels one linear call launches, per variant, with their device time (torch.profiler
over eager calls on bench_gemm's rotated input sets): where a protected call's time goes beyond
the GEMM itself (extra launches, memsets).

    python benchmarks/kernel_list_probe.py --shapes 4096x768x768,2048x2048x2048 --variants off,on@rows,on@tiles
"""
import argparse
import collections
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gemm  # noqa: E402

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
    for variant in args.variants.split(","):
        call = runner.variant(variant, "linear_global")
        for x, w, b in sets:  # warm: caches, workspaces
            call(x, w, b)
        torch.cuda.synchronize()
        graph = bench_gemm.capture(call, [sets[i % len(sets)] for i in range(args.calls)]) if args.graph else None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            start.record()
            if graph is not None:
                graph.replay()
            else:
                for i in range(args.calls):
                    call(*sets[i % len(sets)])
            end.record()
            torch.cuda.synchronize()
        wall = start.elapsed_time(end) * 1e3 / args.calls
        per = collections.defaultdict(lambda: [0, 0.0])
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                per[ev.name][0] += 1
                per[ev.name][1] += ev.device_time_total
        total = sum(t for _, t in per.values()) / args.calls
        print(f"{shape} {variant}: {total:.1f} us of kernels per call, {wall:.1f} us wall"
              + (" (graph)" if graph is not None else ""))
        for name, (cnt, t) in sorted(per.items(), key=lambda kv: -kv[1][1]):
            print(f"    {cnt / args.calls:5.2f}/call {t / cnt:8.1f} us  {name[:110]}")

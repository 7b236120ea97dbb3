"""Where a whole model's GPU time goes, ft against inductor, both under CUDA graphs
(mode="reduce-overhead") unless --no-graphs: wall ms per forward, then the heaviest kernels of
one forward (torch.profiler), grouped by kernel name. A capture refusal is printed in full.

    python benchmarks/graph_profile.py --only llama-1b --top 15 [--static-log] [--sequence N]
"""
from __future__ import annotations

import argparse
import collections
import traceback

import torch

import ftcompile
from bench_models import CONFIGS, build
from ftcompile.timing import median_ms


def kernels_per_forward(fn, calls: int = 3):
    """{kernel name: (launches, ms)} per forward, from the profiler's device events."""
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            total[ev.name][0] += 1
            total[ev.name][1] += ev.device_time_total / 1e3
    return {k: (n / calls, ms / calls) for k, (n, ms) in total.items()}


def sequence(fn, count: int) -> None:
    """The first `count` kernels of one forward in start order: start (us from the first), duration,
    the gap since the previous kernel ended (negative: they overlap), name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    evs = sorted((ev for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA),
                 key=lambda ev: ev.time_range.start)[:count]
    t0, prev_end = evs[0].time_range.start if evs else 0, None
    for ev in evs:
        start, end = ev.time_range.start, ev.time_range.end
        gap = f"{start - prev_end:7.1f}" if prev_end is not None else "      -"
        print(f"  {start - t0:9.1f} us {end - start:8.1f} us gap {gap}  {ev.name[:90]}")
        prev_end = end if prev_end is None else max(prev_end, end)


def report(label: str, fn, top: int) -> None:
    try:
        fn()
        fn()
        wall = median_ms(fn)
    except ftcompile.GraphCaptureError:
        print(f"== {label}: capture refused")
        traceback.print_exc(limit=12)
        return
    ks = kernels_per_forward(fn)
    gpu = sum(ms for _, ms in ks.values())
    launches = sum(n for n, _ in ks.values())
    print(f"== {label}: {wall:.2f} ms per forward; kernels {gpu:.2f} ms in {launches:.0f} launches")
    for name, (n, ms) in sorted(ks.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {ms:8.3f} ms {n:5.0f}x  {name[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="llama-1b", help="substring of a bench_models config name")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-graphs", action="store_true")
    parser.add_argument("--static-log", action="store_true", help="log which inputs the graphs treat as static")
    parser.add_argument("--sequence", type=int, default=0, help="print the first N kernels of a forward in order")
    args = parser.parse_args()
    if args.static_log:
        torch._logging.set_logs(cudagraph_static_inputs=True)
    mode = None if args.no_graphs else "reduce-overhead"
    for name, (kind, dtype, batch, seq) in CONFIGS.items():
        if args.only not in name:
            continue
        torch.manual_seed(0)
        model = build(kind).eval().cuda().to(dtype)
        ids = torch.randint(0, 1000, (batch, seq), device="cuda")
        with torch.no_grad():
            for backend in ("inductor", "ft"):
                torch._dynamo.reset()
                compiled = torch.compile(model, backend=backend, mode=mode)
                report(f"{name} {backend} mode={mode}", lambda: compiled(ids), args.top)
                if args.sequence:
                    sequence(lambda: compiled(ids), args.sequence)
                del compiled
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

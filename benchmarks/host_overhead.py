"""Host time per protected op call, part by part (the graph-free models are host-bound: NOTES.md,
"Host time of a forward through ft"). For each op: the eager op it replaces (F.linear, SDPA), the
protected op through torch.ops (what inductor's wrapper calls; from its second call a launch plan's
replay, ops/replay.py), its CUDA implementation called directly (the full path without the custom-op
machinery; it makes the plan anew each call), its inference-only twin (ops/inference.py: what a
graph compiled with grad disabled calls), and a do-nothing custom op registered the way ours are
(the machinery alone). Host us per call, enqueued without synchronising; shapes small enough
that the GPU never holds the host back. Then a cProfile of three of them, and optionally GPT-2
small (8x512) graph-free through inductor and backend="ft", its plans replayed by the C++ fast path
and by Python (ops/fastpath.py; wall and host time per forward).

    python benchmarks/host_overhead.py [--model] [--reps 300] [--out DIR]
(--out: also host_overhead.json there.)
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import time
from typing import Optional

import torch
import torch.nn.functional as F

import ftcompile  # noqa: F401  (registers the ops and the backend)
from ftcompile import telemetry
from ftcompile.ops import cuda_attention, cuda_gemm, fastpath


@torch.library.custom_op("ftbench::noop", mutates_args=())
def noop(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], site: int) -> torch.Tensor:
    return torch.empty_like(x)


@noop.register_fake
def _noop_fake(x, w, b, site):
    return torch.empty_like(x)


noop.register_autograd(lambda ctx, g: (g, None, None, None), setup_context=lambda ctx, i, o: None)


def host_us(fn, reps: int, rounds: int = 7) -> float:
    """Median over rounds of the host time per call of `reps` calls enqueued back to back."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t0) / reps * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def profile(fn, reps: int, top: int = 18) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(reps):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def forward_ms(m, ids, rounds: int = 1, warmup: int = 3) -> tuple:
    """(wall, host) ms per forward of m(ids): the median of 20 synchronised forwards, and the host's
    time per forward of 20 enqueued without waiting; medians over ``rounds``."""
    for _ in range(warmup):
        m(ids)
    torch.cuda.synchronize()
    walls, hosts = [], []
    for _ in range(rounds):
        for _ in range(20):
            t0 = time.perf_counter()
            m(ids)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        for _ in range(20):
            m(ids)
        hosts.append((time.perf_counter() - t0) / 20 * 1e3)
        torch.cuda.synchronize()
    return statistics.median(walls), statistics.median(hosts)


def model_rows() -> list:
    from bench_models import build
    rows = []
    model = build("gpt2").eval().cuda().half()
    ids = torch.randint(0, 1000, (8, 512), device="cuda")
    with torch.no_grad():
        # twins and public ops alternating, twice: the first ft row after inductor's ran slow in
        # runs 49a and 49c (the twins' both times), so each variant is timed early and late
        for name, backend in (("inductor", "inductor"), ("ft, Python replay", "ft"), ("ft", "ft"),
                              ("ft, Python replay (2)", "ft"), ("ft (2)", "ft")):
            torch._dynamo.reset()
            # "ft, Python replay": the twins' plans replayed by Python, not by ops/fastpath.py's C++
            if fastpath.module() is not None:
                fastpath.module().set_enabled("Python replay" not in name)
            m = torch.compile(model, backend=backend)
            wall, host = forward_ms(m, ids)
            rows.append((f"gpt2-small 8x512 {name}", wall, host, gpu_busy_ms(m, ids)))
    if fastpath.module() is not None:
        fastpath.module().set_enabled(True)
    return rows


def gpu_busy_ms(m, ids, reps: int = 5) -> float:
    """The GPU's kernel time per forward (torch.profiler, summed over kernels): with the wall and
    host times it says whether a forward waits for the host or for the GPU. Prints the top kernels."""
    from torch.profiler import ProfilerActivity
    try:
        with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                m(ids)
            torch.cuda.synchronize()
    except Exception as exc:  # a profiler that cannot run here must not cost the other rows
        print(f"    profiler unavailable: {exc}")
        return float("nan")
    events = sorted(prof.key_averages(), key=lambda e: -e.self_device_time_total)
    for e in events[:8]:
        print(f"    {e.self_device_time_total / reps / 1e3:7.3f} ms  x{e.count // reps:<4d} {e.key[:110]}")
    return sum(e.self_device_time_total for e in events) / reps / 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--model", action="store_true", help="also GPT-2 small through inductor and ft")
    parser.add_argument("--out", default=None, help="a folder for host_overhead.json")
    args = parser.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    reg = lambda name, kind, scheme: telemetry.site(telemetry.register(name, kind, scheme, "correct", 2.5, 1.0))
    g, t, a = (reg("bench.global", "linear", "linear_global"), reg("bench.thread", "linear", "linear_thread"),
               reg("bench.attention", "attention", "efta"))
    x = torch.randn(64, 768, device=dev, dtype=torch.float16)
    xt = torch.randn(8, 768, device=dev, dtype=torch.float16)
    w = torch.randn(768, 768, device=dev, dtype=torch.float16) / 30
    b = torch.randn(768, device=dev, dtype=torch.float16)
    q, k, v = (torch.randn(1, 12, 128, 64, device=dev, dtype=torch.float16) for _ in range(3))
    ops, twins = torch.ops.ftcompile, torch.ops.ftcompile_infer
    cases = {
        "torch.empty (floor)": lambda: torch.empty(64, 768, device=dev, dtype=torch.float16),
        "noop custom op": lambda: torch.ops.ftbench.noop(x, w, b, 0),
        "F.linear 64x768x768": lambda: F.linear(x, w, b),
        "op linear_global": lambda: ops.linear_global(x, w, b, g.id),
        "twin linear_global": lambda: twins.linear_global.default(x, w, b, g.id),
        "direct linear_global": lambda: cuda_gemm._linear_global(x, w, b, g),
        "F.linear 8x768x768": lambda: F.linear(xt, w, b),
        "op linear_thread": lambda: ops.linear_thread(xt, w, b, t.id),
        "twin linear_thread": lambda: twins.linear_thread.default(xt, w, b, t.id),
        "direct linear_thread": lambda: cuda_gemm._linear_thread(xt, w, b, t),
        "SDPA 1x12x128x64": lambda: F.scaled_dot_product_attention(q, k, v),
        "op attention": lambda: ops.attention(q, k, v, None, False, None, False, a.id),
        "twin attention": lambda: twins.attention.default(q, k, v, None, False, None, False, a.id),
        "direct attention": lambda: cuda_attention.kernel(q, k, v, None, False, None, False, a),
    }
    with torch.no_grad():
        rows = [(name, host_us(fn, args.reps)) for name, fn in cases.items()]
        if fastpath.module() is not None:  # the twins' linear ops again, replayed by Python
            fastpath.module().set_enabled(False)
            rows += [(f"{name}, Python replay", host_us(cases[name], args.reps))
                     for name in ("twin linear_global", "twin linear_thread")]
            fastpath.module().set_enabled(True)
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: host us per call "
              f"({args.reps} calls enqueued, median of 7 rounds)")
        print("| call | host us |\n|---|---|")
        for name, us in rows:
            print(f"| {name} | {us:.1f} |")
        for name in ("op linear_global", "twin linear_global", "direct linear_thread", "twin attention"):
            print(f"--- cProfile, {name} x {args.reps}\n{profile(cases[name], args.reps)[-5000:]}")
    models = model_rows() if args.model else []
    if models:
        print("| model | wall ms (synchronised) | host ms per forward (enqueued) | GPU kernel ms |\n|---|---|---|---|")
        for name, wall, host, busy in models:
            print(f"| {name} | {wall:.2f} | {host:.2f} | {busy:.2f} |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "host_overhead.json"), "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": args.reps,
                       "calls_host_us": dict(rows),
                       "models": [{"model": n, "wall_ms": w, "host_ms": h, "gpu_kernel_ms": g}
                                  for n, w, h, g in models]}, f, indent=1)


if __name__ == "__main__":
    main()

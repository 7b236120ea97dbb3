"""Where a replayed op call's host time goes, part by part (NOTES.md, session 44, run 50c): the twin
op, its Python body, the Python replay's lookup, the plan's launch closure, the C launcher alone
(the same argument block again), torch.empty. Host us per call, enqueued.

    FTCOMPILE_FASTPATH=0 python benchmarks/launch_probe.py
(with the C++ replay built, "twin op" is its time and the Python parts are still timed directly.)
"""
import ctypes

import torch
import torch.nn.functional as F

import ftcompile  # noqa: F401  (registers the ops)
from ftcompile import telemetry
from ftcompile.ops import cuda, cuda_attention, cuda_gemm, library
from host_overhead import host_us


def cells(fn):
    """A launch closure's captured values by name (its argument block, its C launcher)."""
    return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))


dev = torch.device("cuda")
reg = lambda name, kind, scheme: telemetry.site(telemetry.register(name, kind, scheme, "correct", 2.5, 1.0))
g = reg("probe.global", "linear", "linear_global")
a = reg("probe.attention", "attention", "efta")
twins = torch.ops.ftcompile_infer
rows = []
with torch.no_grad():
    for (m, n, k) in ((64, 768, 768), (4096, 2304, 768)):
        x = torch.randn(m, k, device=dev, dtype=torch.float16)
        w = torch.randn(n, k, device=dev, dtype=torch.float16) / 30
        b = torch.randn(n, device=dev, dtype=torch.float16)
        for _ in range(2):
            twins.linear_global.default(x, w, b, g.id)
        launch = [v[0] for v in cuda_gemm._plans._plans.values()][-1]
        c = cells(launch)
        blk = cuda_gemm._Args.from_buffer_copy(c["template"])
        y = torch.empty(m, n, device=dev, dtype=torch.float16)
        blk.x, blk.y = x.data_ptr(), y.data_ptr()
        fn = c["fn"]
        rep = cuda_gemm._replay("linear_global")
        cases = {
            f"F.linear {m}x{n}x{k}": lambda: F.linear(x, w, b),
            "twin op": lambda: twins.linear_global.default(x, w, b, g.id),
            "library body": lambda: library._linear_global(x, w, b, g.id),
            "cuda.replay": lambda: cuda.replay("linear_global", x, w, b, g.id, None),
            "replay_call": lambda: rep(x, w, b, g.id, None),
            "plan launch closure": lambda: launch(x),
            "C launcher, same block": lambda: fn(ctypes.byref(blk)),
            "torch.empty y": lambda: torch.empty(m, n, device=dev, dtype=torch.float16),
            "from_buffer_copy": lambda: cuda_gemm._Args.from_buffer_copy(c["template"]),
            "_plan_key": lambda: cuda_gemm._plan_key("linear_global", x, (w,), (b,), g.id, None),
        }
        reps = 300 if m < 1000 else 60
        for name, f in cases.items():
            rows.append((name if name.startswith("F.") else f"  {name}", host_us(f, reps)))
    q, kk, v = (torch.randn(1, 12, 128, 64, device=dev, dtype=torch.float16) for _ in range(3))
    for _ in range(2):
        twins.attention.default(q, kk, v, None, False, None, False, a.id)
    launch = [v_[0] for v_ in cuda_attention._plans._plans.values()][-1]
    c = cells(launch)
    blk = cuda_attention._HostArgs.from_buffer_copy(c["template"])
    out = torch.empty_like(q)
    keep = cuda_attention._checksum_buffers(blk, q.dtype, dev)
    blk.q, blk.k, blk.v, blk.o = q.data_ptr(), kk.data_ptr(), v.data_ptr(), out.data_ptr()
    fn = c["fn"]
    cases = {
        "SDPA 1x12x128x64": lambda: F.scaled_dot_product_attention(q, kk, v),
        "twin attention": lambda: twins.attention.default(q, kk, v, None, False, None, False, a.id),
        "plan launch closure": lambda: launch(q, kk, v, None),
        "C launcher, same block (prepass + kernel)": lambda: fn(ctypes.byref(blk)),
    }
    for name, f in cases.items():
        rows.append((name if name.startswith("SDPA") else f"  {name}", host_us(f, 300)))
print(f"{torch.cuda.get_device_name()}: host us per call (enqueued, median of 7 rounds)")
for name, us in rows:
    print(f"{name:48s} {us:7.1f}")

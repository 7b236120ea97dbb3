"""Global kernel: time per call at both tile widths (forced; each with its own automatic K split),
unprotected and protected, against cuBLAS, on the global table's bf16 shapes (NOTES_gemm.md, run
19). Usage: python3 benchmarks/tile_sweep.py"""
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import GLOBAL_SHAPES, Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

sms = torch.cuda.get_device_properties(0).multi_processor_count
r = Runner()
print("shape | auto (width, split) | cuBLAS us | off 256 | on 256 | off 192 | on 192 | on 192/256 | on/cuBLAS auto")
for shape in GLOBAL_SHAPES:
    sets = make_sets(*shape, torch.bfloat16, budget=6 << 30)
    auto = cuda_gemm.global_tile(*shape, 1, sms)
    calls = {"cublas": r.variant("cublas")}
    calls.update({f"{name}{bn}": r.variant(name, "linear_global", bn=bn) for bn in (256, 192) for name in ("off", "on")})
    t = {v: ms * 1e3 for v, ms in graph_times(calls, sets).items()}
    on_auto = t[f"on{auto[0]}"]
    print(" | ".join(["x".join(map(str, shape)), str(auto), f"{t['cublas']:.1f}"]
                     + [f"{t[v]:.1f}" for v in ("off256", "on256", "off192", "on192")]
                     + [f"{t['on192'] / t['on256']:.3f}", f"{on_auto / t['cublas']:.3f}"]), flush=True)

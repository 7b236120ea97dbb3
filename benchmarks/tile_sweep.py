"""Global kernel: time per call at every tile width (forced; each with its own automatic K split),
unprotected and protected (the automatic check, and the tile-local check forced at its widths),
against cuBLAS, on the global table's bf16 shapes (NOTES_gemm.md, run 19) and, with --midm, the
thread table's M = 32-256 Llama rows and GPT-2's at M = 128-256, where the thread kernel's time
is printed beside (runs 23 and 26). Writes the rows as JSON to --out PATH (default
benchmarks/results/gemm_tile_sweep.json).
--shapes MxNxK,... times those shapes instead (e.g. a model's layers).
Usage: python3 benchmarks/tile_sweep.py [--midm] [--only-midm] [--shapes LIST] [--out PATH]"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import GLOBAL_SHAPES, GPT2, LLAMA7, LLAMA8, Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

sms = torch.cuda.get_device_properties(0).multi_processor_count
r = Runner()
shapes = [] if "--only-midm" in sys.argv else list(GLOBAL_SHAPES)
midm = ([(m, n, k) for m in (32, 64, 128, 256) for k, n in dict.fromkeys(LLAMA7 + LLAMA8)]
        + [(m, n, k) for m in (128, 256) for k, n in GPT2])
if "--midm" in sys.argv or "--only-midm" in sys.argv:
    shapes += midm
if "--shapes" in sys.argv:
    shapes = [tuple(int(d) for d in s.split("x")) for s in sys.argv[sys.argv.index("--shapes") + 1].split(",")]
widths = cuda_gemm.GLOBAL_BNS
# on{bn}: the automatic check at that width; tiles{bn}: the tile-local check forced (its widths)
cols = [f"{name}{bn}" for bn in widths for name in ("off", "on")] + [f"tiles{bn}" for bn in cuda_gemm.TILE_CHECK_BNS]
print("shape | auto (width, split) | cuBLAS us | " + " | ".join(cols) + " | thread on | best on | best/cuBLAS")
rows = []
for shape in shapes:
    sets = make_sets(*shape, torch.bfloat16, budget=6 << 30)
    auto = cuda_gemm.global_tile(*shape, 1, sms)
    calls = {"cublas": r.variant("cublas")}
    calls.update({f"{name}{bn}": r.variant(name, "linear_global", bn=bn) for bn in widths for name in ("off", "on")})
    calls.update({f"tiles{bn}": r.variant("on@tiles", "linear_global", bn=bn) for bn in cuda_gemm.TILE_CHECK_BNS})
    if shape in midm:
        calls["thread"] = r.variant("on", "linear_thread")
    t = {v: ms * 1e3 for v, ms in graph_times(calls, sets).items()}
    best = min((v for v in t if v.startswith(("on", "tiles"))), key=t.get)
    rows.append({"shape": shape, "auto": auto, "us": t, "best": best})
    print(" | ".join(["x".join(map(str, shape)), str(auto), f"{t['cublas']:.1f}"]
                     + [f"{t[v]:.1f}" for v in cols] + [f"{t['thread']:.1f}" if "thread" in t else "-", best,
                                                        f"{t[best] / t['cublas']:.3f}"]), flush=True)
out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "benchmarks/results/gemm_tile_sweep.json"
Path(out).write_text(json.dumps(rows, indent=1))

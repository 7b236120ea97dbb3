"""Sibling linears as one GEMM (ftcompile.linear_group) against the members one by one, on the
projection groups of real models: cuBLAS per member and on the joined weight, ours per member
(protected) and as a group (unprotected, protected). CUDA-graph timed, the variants of a row in
turn (bench_gemm.graph_times). Writes group_bench.json to --out.

    python benchmarks/group_bench.py [--out DIR]
"""
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import Runner, graph_times  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

# (label, member N's, K): attention q/k/v and MLP gate/up
GROUPS = [("llama-1b qkv", (2048, 512, 512), 2048), ("llama-1b gate/up", (8192, 8192), 2048),
          ("llama-8b qkv", (4096, 1024, 1024), 4096), ("bert qkv", (768, 768, 768), 768)]
ROWS = (2048, 4096)


def main() -> None:
    out = Path(sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else os.environ.get("OUT", "."))
    site = Runner().site
    rows = []
    print("group | M | cuBLAS each | cuBLAS joined | ours each | group off | group on | on/cuBLAS each")
    for label, ns, k in GROUPS:
        for m in ROWS:
            sets = []
            for _ in range(4):
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                ws = tuple(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5 for n in ns)
                sets.append((x, ws, torch.cat(ws)))
            calls = {
                "cublas_each": lambda x, ws, wj: [F.linear(x, w) for w in ws],
                "cublas_joined": lambda x, ws, wj: F.linear(x, wj),
                "ours_each": lambda x, ws, wj: [cuda_gemm.run("linear_global", x, w, None, site) for w in ws],
                "group_off": lambda x, ws, wj: cuda_gemm.run("linear_global", x, ws, None, site, protect=False),
                "group_on": lambda x, ws, wj: cuda_gemm.run("linear_global", x, ws, None, site),
            }
            us = {name: ms * 1e3 for name, ms in graph_times(calls, sets).items()}
            rows.append({"group": label, "M": m, "N": list(ns), "K": k, "us": us})
            print(f"{label} | {m} | " + " | ".join(f"{us[c]:.1f}" for c in calls)
                  + f" | {us['group_on'] / us['cublas_each']:.3f}", flush=True)
    (out / "group_bench.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""Which thread-scheme kernel is fastest where the automatic choice (cuda_gemm.thread_kernel) is
weakest against cuBLAS: each kernel forced (streaming, thin at its time model's split and at
splits 1-4, ring), protected and not, beside cuBLAS, in one process (graph-timed, L2 flushed
before each replay: bench_gemm.graph_times).

    python benchmarks/kernel_choice_probe.py [--shapes 16x768x768,...]

Prints one line per shape: the auto choice, then us per call of each variant and its ratio to
cuBLAS; variants that fail to capture (a kernel that does not take the shape) print as '-'.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

GPT2 = ((2304, 768), (768, 768), (3072, 768), (768, 3072))
SHAPES = [(m, n, k) for m in (16, 32, 64, 128) for n, k in GPT2]
SHAPES += [(m, n, k) for m in (32, 64, 128) for n, k in ((4096, 4096), (4096, 11008))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=None, help="MxNxK,... (default: GPT-2's widths at 16-128 rows, 4096 at 32-128)")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    r = Runner()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    scheme = "linear_thread"
    for m, n, k in shapes:
        variants = {"cublas": r.variant("cublas")}
        for kern in ("stream", "thin", "ring"):
            if kern == "thin" and m > cuda_gemm.THIN_MAX_ROWS:
                continue
            for name in ("on", "off"):
                variants[f"{kern}_{name}"] = r.variant(name, scheme, kernel=kern)
        if m <= cuda_gemm.THIN_MAX_ROWS:
            for split in (1, 2, 3, 4):
                variants[f"thin_on_s{split}"] = r.variant("on", scheme, kernel="thin", split=split)
        failed = {}
        t = graph_times(variants, make_sets(m, n, k, torch.bfloat16, budget=6 << 30), failed)
        auto = cuda_gemm.thread_kernel(m, n, k, 1, sms)
        thin_split = cuda_gemm.thin_config(m, n, k, 1, sms)[1] if m <= cuda_gemm.THIN_MAX_ROWS else None
        base = t["cublas"]
        cells = "  ".join(f"{v} {t[v] * 1e3:.2f} ({t[v] / base:.2f})" if v in t else f"{v} -" for v in variants)
        print(f"{m}x{n}x{k} auto={auto} thin_split={thin_split}: {cells}", flush=True)
        for v, exc in failed.items():
            print(f"  {v}: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()

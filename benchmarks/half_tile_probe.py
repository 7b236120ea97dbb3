"""The thin kernel with 64-row tiles against 128-row ones at up to 32 rows (x padded to 32), each
forced (bn=64 / 128), protected and not, beside cuBLAS and what the automatic choice runs, in one
process (graph-timed, L2 flushed before each replay: bench_gemm.graph_times).

    python benchmarks/half_tile_probe.py [--shapes 1x11008x4096,...]

Prints one line per shape: us per call of each variant and its ratio to cuBLAS, and the tile rows
cuda_gemm.thin_rows takes.
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

SHAPES = [(m, n, 4096) for m in (1, 8, 16, 32) for n in (11008, 14336, 8192)]
SHAPES += [(1, 12288, 4096), (1, 16384, 4096)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=None, help="MxNxK,... (default: decode rows of Llama widths)")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    r = Runner()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    scheme = "linear_thread"
    for m, n, k in shapes:
        variants = {"cublas": r.variant("cublas"), "auto": r.variant("on", scheme)}
        for rows in (128, 64):
            for name in ("off", "on"):
                variants[f"t{rows}_{name}"] = r.variant(name, scheme, kernel="thin", bn=rows)
        failed = {}
        t = graph_times(variants, make_sets(m, n, k, torch.bfloat16, budget=6 << 30), failed)
        base = t["cublas"]
        cells = "  ".join(f"{v} {t[v] * 1e3:.2f} ({t[v] / base:.3f})" if v in t else f"{v} -" for v in variants)
        print(f"{m}x{n}x{k} auto={cuda_gemm.thread_kernel(m, n, k, 1, sms)}/{cuda_gemm.thin_rows(m, n, 1, sms)}: "
              f"{cells}", flush=True)
        for v, exc in failed.items():
            print(f"  {v}: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()

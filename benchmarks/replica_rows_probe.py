"""The thin kernel at 65-128 rows (x padded to 128): checked against its crossed replica or against
checksum rows (with the x-side pass), each forced through gemm.THIN_REPLICA_FULL_MAX_N while its
graph is captured, beside cuBLAS, the unprotected thin kernel and what the automatic choice runs
today, in one process (graph-timed, L2 flushed before each replay: bench_gemm.graph_times).

    python benchmarks/replica_rows_probe.py [--shapes 128x2304x768,...]

Prints one line per shape: us per call of each variant and its ratio to cuBLAS; "rep sN" is the
replica at K split N (the time model's split otherwise).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.abft import gemm  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

WIDTHS = ((2304, 768), (768, 768), (3072, 768), (768, 3072), (1024, 1024), (4096, 4096), (4096, 11008),
          (11008, 4096), (14336, 4096))
SHAPES = [(128, n, k) for n, k in WIDTHS] + [(72, n, k) for n, k in ((2304, 768), (3072, 768), (4096, 4096))]


def with_limit(call, limit):
    """`call` with the 65-128-row replica rule's width limit set to `limit` while it runs (its graph
    is captured with the kernel variant that limit picks)."""
    def run(*args):
        saved = gemm.THIN_REPLICA_FULL_MAX_N
        gemm.THIN_REPLICA_FULL_MAX_N = limit
        try:
            return call(*args)
        finally:
            gemm.THIN_REPLICA_FULL_MAX_N = saved
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=None, help="MxNxK,... (default: 65-128 rows of GPT-2 and Llama widths)")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    if not cuda_gemm._thin_replica_checked(cuda_gemm.lib(), 128, 2):
        sys.exit("this library has no replica variant at 128 rows of padding (thin_gemm.cu FTG_THIN_REPLICA_NX)")
    r = Runner()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    scheme, big = "linear_thread", 1 << 30
    for m, n, k in shapes:
        variants = {"cublas": r.variant("cublas"), "auto": r.variant("on", scheme),
                    "off": r.variant("off", scheme, kernel="thin"),
                    "chk": with_limit(r.variant("on", scheme, kernel="thin"), 0),
                    "rep": with_limit(r.variant("on", scheme, kernel="thin"), big)}
        for split in (1, 2, 3, 4):
            variants[f"rep s{split}"] = with_limit(r.variant("on", scheme, kernel="thin", split=split), big)
        failed = {}
        t = graph_times(variants, make_sets(m, n, k, torch.bfloat16, budget=6 << 30), failed)
        split_chk = with_limit(lambda: cuda_gemm.thin_config(m, n, k, 1, sms)[1], 0)()
        split_rep = with_limit(lambda: cuda_gemm.thin_config(m, n, k, 1, sms)[1], big)()
        base = t["cublas"]
        cells = "  ".join(f"{v} {t[v] * 1e3:.2f} ({t[v] / base:.2f})" if v in t else f"{v} -" for v in variants)
        print(f"{m}x{n}x{k} auto={cuda_gemm.thread_kernel(m, n, k, 1, sms)} split chk/rep={split_chk}/{split_rep}: "
              f"{cells}", flush=True)
        for v, exc in failed.items():
            print(f"  {v}: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()

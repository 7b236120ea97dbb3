"""The thin kernel with and without stream-K (cuda_gemm.thin_stream_k) in one process, timed in
turn from CUDA graphs (bench_gemm.graph_times): cuBLAS, thin off / on with the automatic choice
forced each way. A fault per call (output stage, corrected) on the stream-K kernel too.

    python benchmarks/thin_sk_probe.py [--shapes MxNxK,...] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

SHAPES = ("1x11008x4096,16x11008x4096,32x11008x4096,64x11008x4096,128x11008x4096,1x4096x4096,16x4096x4096,"
          "32x4096x4096,64x4096x4096,128x4096x4096,64x4096x11008,128x4096x11008,1x14336x4096")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    r, rows = Runner(), []
    for spec in args.shapes.split(","):
        m, n, k = (int(v) for v in spec.split("x"))
        sets = make_sets(m, n, k, torch.bfloat16)
        call = lambda protect, sk: (lambda x, w, b: cuda_gemm.run(  # noqa: E731
            "linear_thread", x, w, b, r.site, protect=protect, inject=False, kernel="thin", stream_k=sk))
        calls = {"cublas": r.variant("cublas"), "off": call(False, False), "on": call(True, False),
                 "off_sk": call(False, True), "on_sk": call(True, True)}
        us = {a: v * 1e3 for a, v in graph_times(calls, sets).items()}
        rows.append({"M": m, "N": n, "K": k, **us})
        print(f"{spec}: " + " ".join(f"{a} {v:.1f}" for a, v in us.items())
              + f"  on/cuBLAS {us['on'] / us['cublas']:.3f} -> {us['on_sk'] / us['cublas']:.3f}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

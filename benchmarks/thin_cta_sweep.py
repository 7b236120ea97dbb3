"""How the thin kernel's W stream scales with its CTAs: x [M, 4096] W^T for N = 128 t rows (t tiles,
one CTA each at split 1), cuBLAS and the thin kernel off / on, t from a quarter to all of the SMs.
A per-CTA bound shows as time flat in t (each CTA streams 1 MB of W at its own rate); the memory's
bound as time growing with t (T = F + max(W / t / r, W_total / R), fitted by hand). NOTES.md, session
63: run 71c's rows, and why the stream-K kernel they suggested did not gain (run 71f).

    python benchmarks/thin_cta_sweep.py [--m 1,64] [--tiles 32,48,...] [--out FILE.json]
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="1,64")
    ap.add_argument("--tiles", default="32,48,64,86,100,112,120,128,132")
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    r, rows = Runner(), []
    for m in (int(v) for v in args.m.split(",")):
        for t in (int(v) for v in args.tiles.split(",")):
            n, k = 128 * t, args.k
            sets = make_sets(m, n, k, torch.bfloat16)
            calls = {"cublas": r.variant("cublas"),
                     "off": r.variant("off", "linear_thread", kernel="thin", split=1),
                     "on": r.variant("on", "linear_thread", kernel="thin", split=1)}
            us = {a: v * 1e3 for a, v in graph_times(calls, sets).items()}
            wbytes = n * k * 2
            row = {"M": m, "N": n, "K": k, "tiles": t, **{f"{a}_us": v for a, v in us.items()},
                   **{f"{a}_GBs": wbytes / v / 1e3 for a, v in us.items()}}
            rows.append(row)
            print(f"M={m} tiles={t} N={n}: " + " ".join(f"{a} {v:.1f} us ({wbytes / v / 1e3:.0f} GB/s)"
                                                        for a, v in us.items()), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

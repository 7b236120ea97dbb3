"""Does the thin kernel's early launch help or hurt where its tiles leave SMs idle? The same calls
with programmatic dependent launch on and off (pdl=), protected and not, interleaved from CUDA graphs
in one process (NOTES.md, session 64: at 1x11008x4096 a protected call with the x-side pass between
two calls ran ~0.9 us faster than an unprotected one).

    python benchmarks/thin_pdl_probe.py [--shapes 1x11008x4096,...]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x11008x4096,16x11008x4096,1x14336x4096,1x8192x4096")
    args = ap.parse_args()
    r = Runner()
    for spec in args.shapes.split(","):
        m, n, k = map(int, spec.split("x"))
        sets = make_sets(m, n, k, torch.bfloat16, budget=6 << 30)
        calls = {"cublas": r.variant("cublas")}
        for name in ("off", "on"):
            for pdl in (True, False):
                calls[f"{name}_pdl{int(pdl)}"] = r.variant(name, "linear_thread", kernel="thin", pdl=pdl)
        t = graph_times(calls, sets)
        print(f"{spec}: " + "  ".join(f"{k_} {v * 1e3:.2f}" for k_, v in t.items()), flush=True)


if __name__ == "__main__":
    main()

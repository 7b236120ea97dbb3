"""The global scheme's variants timed in alternating processes on one library, optionally A/B of an
environment knob of the GEMM launcher (read at import, e.g. FTCOMPILE_GEMM_CLUSTER): each child
sets the knob to one value and times cuBLAS and the bench_gemm variants from CUDA graphs; every
value runs in every round, in turn, so drift between processes shows (alternate.py). The kernels
are the package's build (or FTCOMPILE_GEMM_LIB).

    KNOB_AB=FTCOMPILE_GEMM_CLUSTER=1,2 python benchmarks/knob_ab.py
    KNOB_AB_VARIANTS=off,off#128/1,on@tiles,on@rows python benchmarks/knob_ab.py   # no knob
(KNOB_AB_SHAPES: "MxNxK,..."; KNOB_AB_VARIANTS: bench_gemm variants of the global scheme with an
optional "#width" and "/split", default "off#192,on@tiles"; KNOB_AB_ROUNDS: rounds, default 2.)
"""
import os
import re

from alternate import run_alternating, summary

KNOB, _, VALUES = os.environ.get("KNOB_AB", "").partition("=")
SHAPES = [tuple(int(v) for v in s.split("x"))
          for s in os.environ.get("KNOB_AB_SHAPES", "8192x2304x768,4096x3072x768,8192x768x3072").split(",")]
VARIANTS = os.environ.get("KNOB_AB_VARIANTS", "off#192,on@tiles").split(",")

CHILD = r'''
import sys; sys.path.insert(0, "benchmarks")
import torch
from bench_gemm import Runner, graph_times, make_sets
r = Runner()
for m, n, k in %r:
    sets = make_sets(m, n, k, torch.bfloat16, budget=6 << 30)
    t = graph_times({"cublas": r.variant("cublas"), **{v: r.global_variant(v) for v in %r}}, sets)
    print(f"%s {m}x{n}x{k}: " + "  ".join(f"{l} {v * 1e3:.2f}" for l, v in t.items()), flush=True)
'''


def main():
    knob, values = (KNOB, VALUES.split(",")) if KNOB else ("FTCOMPILE_KNOB_AB_NONE", ["-"])
    lines = run_alternating({v: v for v in values}, knob, lambda tag: CHILD % (SHAPES, VARIANTS, tag),
                            rounds=int(os.environ.get("KNOB_AB_ROUNDS", "2")))
    names = ["cublas"] + VARIANTS
    groups = [re.sub(r"\W", "_", n) for n in names]  # named groups: word characters only
    pattern = r"(?P<build>\S+)#\d+ (?P<config>\S+): " + r"\s+".join(
        rf"{re.escape(n)} (?P<{g}>[\d.]+)" for n, g in zip(names, groups))
    print(f"{knob}: " + ", ".join(values))
    print(summary(lines, pattern, groups, values))


if __name__ == "__main__":
    main()

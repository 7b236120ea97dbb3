"""A/B of the global kernel's tail split (cuda_gemm.global_tail: only a part-full last wave's tiles
split K-wise) against whole tiles, in alternating processes of the same library
(FTCOMPILE_GLOBAL_TAIL=0 / 1): cuBLAS, protected and unprotected, from CUDA graphs.

    python benchmarks/tail_ab.py        (TAIL_AB_ROUNDS, default 2; TAIL_AB_SHAPES "MxNxK,...")
"""
import os

from alternate import run_alternating, summary

SHAPES = [(2048, 11008, 4096), (2048, 5120, 5120), (1024, 13824, 5120), (1024, 14336, 4096), (4096, 5632, 2048),
          (2048, 4096, 4096)]  # the last: no tail (control)
if os.environ.get("TAIL_AB_SHAPES"):
    SHAPES = [tuple(map(int, s.split("x"))) for s in os.environ["TAIL_AB_SHAPES"].split(",")]

CHILD = r'''
import sys; sys.path.insert(0, "benchmarks")
import torch
from bench_gemm import Runner, graph_times, make_sets
from ftcompile.ops import cuda_gemm
r = Runner()
sms = torch.cuda.get_device_properties(0).multi_processor_count
for m, n, k in %r:
    sets = make_sets(m, n, k, torch.bfloat16, budget=6 << 30)
    t = graph_times({"cublas": r.variant("cublas"), "on": r.variant("on", "linear_global"),
                     "off": r.variant("off", "linear_global")}, sets)
    print(f"%s {m}x{n}x{k}: " + "  ".join(f"{l} {v * 1e3:.2f}" for l, v in t.items())
          + f"  on/cublas {t['on'] / t['cublas']:.3f}  off/cublas {t['off'] / t['cublas']:.3f}  "
          + cuda_gemm.kernel_note("global", m, n, k, 1, sms), flush=True)
'''


def main():
    order = ["whole", "tail"]
    lines = run_alternating({"whole": "0", "tail": "1"}, "FTCOMPILE_GLOBAL_TAIL", lambda tag: CHILD % (SHAPES, tag),
                            rounds=int(os.environ.get("TAIL_AB_ROUNDS", "2")))
    print(summary(lines, r"(?P<build>\S+)#\d+ (?P<config>\S+): cublas (?P<cublas>[\d.]+) +on (?P<on>[\d.]+) +"
                  r"off (?P<off>[\d.]+)", ["on", "off", "cublas"], order))


if __name__ == "__main__":
    main()

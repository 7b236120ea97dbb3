"""Does a thin-kernel call's time depend on the variants timed beside it? (session 65: the thread
table's six variants put protected calls ~2 us above gemm_ab's three at some shapes.) Times the
same calls in one process in three line-ups: gemm_ab's (cublas, on, off), the table's (cublas, off,
on, fault, global_on) and on twice beside off (cublas, off, on, on2).

    python benchmarks/harness_order_probe.py [MxNxK ...]
"""
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402

SHAPES = ["1x11008x4096", "16x11008x4096", "16x14336x4096", "1x4096x4096"]
LINEUPS = {"ab": ["cublas", "on", "off"], "table": ["cublas", "off", "on", "fault", "global_on"],
           "twice": ["cublas", "off", "on", "on2"]}


def main(shapes):
    r = Runner()
    make = {"cublas": lambda: r.variant("cublas"), "on": lambda: r.variant("on", "linear_thread"),
            "on2": lambda: r.variant("on", "linear_thread"), "off": lambda: r.variant("off", "linear_thread"),
            "fault": lambda: r.variant("fault", "linear_thread"), "global_on": lambda: r.variant("on", "linear_global")}
    for spec in shapes:
        m, n, k = map(int, spec.split("x"))
        sets = make_sets(m, n, k, torch.bfloat16, budget=6 << 30)
        for name, lineup in LINEUPS.items():
            t = graph_times({v: make[v]() for v in lineup}, sets)
            print(f"{spec} {name:6s}: " + "  ".join(f"{v} {t[v] * 1e3:.2f}" for v in lineup)
                  + f"  | on/cublas {t['on'] / t['cublas']:.3f}  on-off {(t['on'] - t['off']) * 1e3:+.2f} us", flush=True)
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:] or SHAPES)

"""The global kernel's tile widths at shapes where the tail split (cuda_gemm.global_tail) would
change the width model's pick: cuBLAS, and each width forced (256, 192, 128; the tail split wherever
global_tail takes it) protected and not, from CUDA graphs; the model's pick and the tail per width.

    python benchmarks/tail_width_probe.py [--shapes MxNxK,...]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1024x5120x5120,1024x5120x13824,512x11008x4096,512x13824x5120,"
                                        "512x5120x13824,2048x9216x3072")
    a = ap.parse_args()
    r = Runner()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for spec in a.shapes.split(","):
        m, n, k = map(int, spec.split("x"))
        sets = make_sets(m, n, k, torch.bfloat16, budget=6 << 30)
        variants = {"cublas": r.variant("cublas")}
        for bn in (256, 192, 128):
            variants[f"off{bn}"] = r.variant("off", "linear_global", bn=bn)
            variants[f"on{bn}"] = r.variant("on", "linear_global", bn=bn)
        t = graph_times(variants, sets)
        pick = cuda_gemm.global_plan(m, n, k, 1, sms, protect=False)[1]
        tails = {bn: cuda_gemm.global_tail(m, n, k, 1, sms, bn) for bn in (256, 192, 128)}
        print(f"{spec}: " + "  ".join(f"{l} {v * 1e3:.1f}" for l, v in t.items())
              + f"  | model's pick {pick}, tails {tails}", flush=True)


if __name__ == "__main__":
    main()

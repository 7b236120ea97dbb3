"""The thin kernel's ring depth (session 65): cuBLAS runs 1-32 x 11008x4096 with 128-row tiles (86
CTAs, as the thin kernel) and 12 stages of 64 k, and reaches ~3.9 TB/s where the thin kernel's 8
stages reach ~3.2: bytes in flight. Times, in one process (L2 flushed before each replay), the
thin kernel at 8 stages and at the deepest ring that fits shared memory, protected and not.

    python benchmarks/thin_depth_probe.py [MxNxK ...]
"""
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

SHAPES = ["1x11008x4096", "16x11008x4096", "32x11008x4096", "64x11008x4096", "1x14336x4096", "16x14336x4096",
          "1x8192x4096"]


def main(shapes):
    r = Runner()
    for spec in shapes:
        m, n, k = map(int, spec.split("x"))
        nx, split, _ = cuda_gemm.thin_config(m, n, k, 1, 132)
        # (protected: the call's own mode, replicas or checksum rows, whose stages differ in size)
        d_off, d_on = cuda_gemm._thin_stages(nx, 0, split), cuda_gemm._thin_stages(nx, cuda_gemm.thin_protect(m, n, True), split)
        calls = {"cublas": r.variant("cublas"),
                 "off8": r.variant("off", "linear_thread", kernel="thin", stages=8),
                 f"off{d_off}": r.variant("off", "linear_thread", kernel="thin", stages=d_off),
                 "on8": r.variant("on", "linear_thread", kernel="thin", stages=8),
                 f"on{d_on}": r.variant("on", "linear_thread", kernel="thin", stages=d_on)}
        t = graph_times(calls, make_sets(m, n, k, torch.bfloat16, budget=6 << 30))
        print(f"{spec} (nx {nx}, split {split}): " + "  ".join(f"{name} {v * 1e3:.2f}" for name, v in t.items())
              + "  | /cublas " + " ".join(f"{name} {v / t['cublas']:.3f}" for name, v in t.items() if name != "cublas"),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or SHAPES)

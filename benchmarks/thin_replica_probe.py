"""Replica checks at x's wider paddings (session 65): the thin kernel checks a call against x's
replica where x's box fits half of its padded rows (thin_gemm.cu); the host pads 17-32 rows to 32
and 33-64 to 64, where checksum rows and the x-side pass run. This times, in one process and
interleaved, cuBLAS, the automatic thin call unprotected and protected, and the protected and
unprotected calls with x padded twice as wide (mtile), where the replica runs: whether doubling the
wgmma's N and x's bytes a stage costs less than the pass.

    python benchmarks/thin_replica_probe.py [MxNxK ...]
"""
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402

SHAPES = ["24x14336x4096", "32x14336x4096", "32x11008x4096", "32x4096x11008", "32x4096x4096",
          "48x14336x4096", "64x14336x4096", "64x11008x4096", "64x4096x11008", "64x4096x4096"]


def main(shapes):
    r = Runner()
    for spec in shapes:
        m, n, k = map(int, spec.split("x"))
        nx = cuda_gemm.thin_config(m, n, k, 1, 132)[0]  # the host's padding of x
        calls = {"cublas": r.variant("cublas"),
                 "off": r.variant("off", "linear_thread", kernel="thin"),
                 "on": r.variant("on", "linear_thread", kernel="thin"),
                 "off_wide": r.variant("off", "linear_thread", kernel="thin", mtile=2 * nx),
                 "rep": r.variant("on", "linear_thread", kernel="thin", mtile=2 * nx)}
        t = graph_times(calls, make_sets(m, n, k, torch.bfloat16, budget=6 << 30))
        c = t["cublas"]
        print(f"{spec} (nx {nx} -> {2 * nx}): " + "  ".join(f"{name} {v * 1e3:.2f}" for name, v in t.items())
              + f"  | on/cublas {t['on'] / c:.3f}  rep/cublas {t['rep'] / c:.3f}  off_wide/off {t['off_wide'] / t['off']:.3f}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or SHAPES)

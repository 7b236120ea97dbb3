"""The global kernel and cuBLAS under bench_gemm's protocol (CUDA graphs over rotated input sets),
with and without bias, at the ping-pong micro's shapes: puts the micro's numbers
(benchmarks/micro/pingpong_gemm.cu, events over 4 sets, no bias) next to the package's kernel
(NOTES_gemm.md session 56). Usage (device): python3 benchmarks/global_calibrate.py"""
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402

SHAPES = [(8192, 2304, 768), (4096, 2304, 768), (4096, 768, 768), (4096, 3072, 768), (8192, 768, 3072)]
VARIANTS = [("cublas", None), ("off", None), ("off#192", 192), ("off#256", 256), ("on", None)]


def main():
    r = Runner()
    print("us per call (bench_gemm protocol); b: with bias, -: without")
    print("%-16s" % "MxNxK" + "".join("%11s%s" % (n, t) for n, _ in VARIANTS for t in "b-"))
    for shape in SHAPES:
        line = "%-16s" % "x".join(map(str, shape))
        times = {}
        for bias in (True, False):
            sets = make_sets(*shape, torch.bfloat16, bias=bias, budget=6 << 30)
            calls = {n: (r.variant("cublas") if n == "cublas" else
                         r.variant(n.split("#")[0], "linear_global", bn=bn)) for n, bn in VARIANTS}
            for n, ms in graph_times(calls, sets).items():
                times[(n, bias)] = ms * 1e3
            del sets
        line += "".join("%12.1f" % times[(n, b)] for n, _ in VARIANTS for b in (True, False))
        print(line, flush=True)


if __name__ == "__main__":
    main()

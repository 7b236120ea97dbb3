"""The global kernel and cuBLAS under bench_gemm's protocol (CUDA graphs over rotated input sets),
with and without bias, at the ping-pong micro's shapes: puts the micro's numbers
(benchmarks/micro/pingpong_gemm.cu, events over 4 sets, no bias) next to the package's kernel
(NOTES_gemm.md session 56). With PINGPONG_LIB (the micro built as a library: see its PINGPONG_LIB
block), the micro's coop192s4 too, bias or not (it adds none). Usage (device):
python3 benchmarks/global_calibrate.py"""
import ctypes
import os
import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402

SHAPES = [(8192, 2304, 768), (4096, 2304, 768), (4096, 768, 768), (4096, 3072, 768), (8192, 768, 3072)]
VARIANTS = ["cublas", "off", "off#192", "off#256", "on"]


def micro_call(lib):
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def call(x, w, b):
        y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        rc = lib.pingpong_coop192(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.data_ptr()),
                                  ctypes.c_void_p(y.data_ptr()), x.shape[0], w.shape[0], x.shape[1], sms,
                                  ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc:
            raise RuntimeError(f"pingpong_coop192: {rc}")
        return y
    return call


def main():
    r = Runner()
    lib = ctypes.CDLL(os.environ["PINGPONG_LIB"]) if os.environ.get("PINGPONG_LIB") else None
    variants = VARIANTS + ["micro"] if lib else VARIANTS
    print("us per call (bench_gemm protocol); b: with bias, -: without")
    print("%-16s" % "MxNxK" + "".join("%11s%s" % (n, t) for n in variants for t in "b-"))
    for shape in SHAPES:
        line = "%-16s" % "x".join(map(str, shape))
        times = {}
        for bias in (True, False):
            sets = make_sets(*shape, torch.bfloat16, bias=bias, budget=6 << 30)
            calls = {n: (r.variant("cublas") if n == "cublas" else micro_call(lib) if n == "micro" else
                         r.global_variant(n)) for n in variants}
            for n, ms in graph_times(calls, sets).items():
                times[(n, bias)] = ms * 1e3
            del sets
        line += "".join("%12.1f" % times[(n, b)] for n in variants for b in (True, False))
        print(line, flush=True)


if __name__ == "__main__":
    main()

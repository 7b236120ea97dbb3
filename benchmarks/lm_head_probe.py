"""GPT-2's LM head (4096 x 50257 x 768: no output row 16-byte aligned) against N = 50264 (every row
aligned): cuBLAS and the global kernel off and on, CUDA-graph timed, in one run.

    python benchmarks/lm_head_probe.py
"""
import torch
import torch.nn.functional as F

import ftcompile
from ftcompile.ops import cuda_gemm
from ftcompile.timing import time_ms


def main() -> None:
    site = ftcompile.telemetry.site(ftcompile.register_site("lmhead", "linear"))
    for n in (50257, 50264):
        x = torch.randn(4096, 768, device="cuda", dtype=torch.half)
        w = torch.randn(n, 768, device="cuda", dtype=torch.half) * 0.03
        cublas = time_ms(lambda: F.linear(x, w), "cuda", 20, graph=True)
        off = time_ms(lambda: cuda_gemm.run("linear_global", x, w, None, site, protect=False), "cuda", 20,
                      graph=True)
        on = time_ms(lambda: cuda_gemm.run("linear_global", x, w, None, site), "cuda", 20, graph=True)
        print(f"4096x{n}x768 fp16: cuBLAS {cublas:.3f} ms, off {off:.3f}, on {on:.3f}, "
              f"on/cuBLAS {on / cublas:.2f}", flush=True)
    print(ftcompile.stats()["lmhead"])  # a clean run: nothing detected


if __name__ == "__main__":
    main()

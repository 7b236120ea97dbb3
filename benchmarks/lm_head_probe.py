"""GPT-2's LM head (4096 x 50257 x 768: no output row 16-byte aligned) against N = 50264 (every row
aligned), and N = 50257 with its rows padded to 50264 (``pad_rows``, what the linear pass asks for
where the logits leave the graph as they are): cuBLAS and the global kernel off and on, CUDA-graph
timed, in one run.

    python benchmarks/lm_head_probe.py
"""
import torch
import torch.nn.functional as F

import ftcompile
from ftcompile.ops import cuda_gemm
from ftcompile.timing import time_ms


def main() -> None:
    site = ftcompile.telemetry.site(ftcompile.register_site("lmhead", "linear"))
    for n, ldy in ((50257, None), (50257, 50264), (50264, None)):
        x = torch.randn(4096, 768, device="cuda", dtype=torch.half)
        w = torch.randn(n, 768, device="cuda", dtype=torch.half) * 0.03
        cublas = time_ms(lambda: F.linear(x, w), "cuda", 20, graph=True)
        off = time_ms(lambda: cuda_gemm.run("linear_global", x, w, None, site, protect=False, ldy=ldy), "cuda", 20,
                      graph=True)
        on = time_ms(lambda: cuda_gemm.run("linear_global", x, w, None, site, ldy=ldy), "cuda", 20, graph=True)
        rows = f"rows {ldy} apart" if ldy else "contiguous"
        print(f"4096x{n}x768 fp16, {rows}: cuBLAS {cublas:.3f} ms, off {off:.3f}, on {on:.3f}, "
              f"on/cuBLAS {on / cublas:.2f}", flush=True)
    print(ftcompile.stats()["lmhead"])  # a clean run: nothing detected


if __name__ == "__main__":
    main()

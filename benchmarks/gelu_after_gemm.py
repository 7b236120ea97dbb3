"""Why GPT-2's GELU takes longer after our c_fc GEMM than after cuBLAS's (NOTES.md, session 27:
21.3 against 15.3 us in the graphs, 16.8 after either alone with cold caches).

    python benchmarks/gelu_after_gemm.py [M N K]      (default GPT-2's c_fc at 8x512: 4096 3072 768)

For each GEMM (cuBLAS through F.linear; ours: the protected global kernel, and unprotected) a CUDA
graph runs 12 rounds of: the GEMM, optionally an L2 flush (a 256 MB write), then an elementwise
kernel on the GEMM's output (in place, like inductor's GELU, or a read-only sum). The profiler's
device events give each kernel's mean time: after-GEMM against after-flush says whether the output
is still in L2 when the next kernel reads it.
"""
import sys

import torch
import torch.nn.functional as F

from ftcompile import telemetry
from ftcompile.ops import cuda_gemm

ROUNDS = 12


def is_gemm(kernel: str) -> bool:
    """A GEMM kernel of either library (ours, cuBLAS's nvjet / CUTLASS ones)."""
    return any(tag in kernel for tag in ("gemm", "nvjet", "cutlass", "sm90"))


def main() -> None:
    m, n, k = (int(v) for v in sys.argv[1:4]) if len(sys.argv) >= 4 else (4096, 3072, 768)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(m, k, device=dev, dtype=torch.float16)
    w = torch.randn(n, k, device=dev, dtype=torch.float16) * k ** -0.5
    b = torch.randn(n, device=dev, dtype=torch.float16)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    sid = telemetry.register("probe.gelu", "linear", "probe", "correct", 2.5, 1.0)
    site = telemetry.site(sid)
    gemms = {
        "cublas": lambda: F.linear(x, w, b),
        "ours": lambda: cuda_gemm.run("linear_global", x, w, b, site),
        "ours_off": lambda: cuda_gemm.run("linear_global", x, w, b, site, protect=False),
    }
    elems = {"gelu_": lambda y: y.copy_(F.gelu(y, approximate="tanh")),  # read, then read + write
             "mul_": lambda y: y.mul_(1.0009765625),                     # in place: read + write
             "sum": lambda y: y.sum(dtype=torch.float32)}                 # read only
    print(f"{torch.cuda.get_device_name()}; y = x W^T + b, {m}x{n}x{k} fp16; mean us per kernel over "
          f"{ROUNDS} rounds in one CUDA graph")
    print(f"{'gemm':>9} {'next':>6} {'flush':>5} | {'gemm us':>8} {'next kernel(s) us':>18}")
    for gname, gemm in gemms.items():
        for ename, elem in elems.items():
            for flushed in (False, True):
                def body():
                    for _ in range(ROUNDS):
                        y = gemm()
                        if flushed:
                            flush.fill_(1)
                        elem(y)
                body()
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    body()
                for _ in range(3):
                    g.replay()
                torch.cuda.synchronize()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(5):
                        g.replay()
                    torch.cuda.synchronize()
                times = {}
                for ev in prof.events():
                    if ev.device_type == torch.autograd.DeviceType.CUDA:
                        times.setdefault(ev.name, []).append(ev.device_time_total)
                gemm_us = [sum(v) / len(v) for name, v in times.items() if is_gemm(name)]
                other = {name: sum(v) / len(v) for name, v in times.items()
                         if not is_gemm(name) and "fill" not in name.lower()}
                print(f"{gname:>9} {ename:>6} {str(flushed):>5} | {max(gemm_us) if gemm_us else 0:8.1f} "
                      + "  ".join(f"{v:7.1f} {name[:40]}" for name, v in other.items()), flush=True)


if __name__ == "__main__":
    main()

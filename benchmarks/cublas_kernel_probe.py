"""Which kernels cuBLAS (F.linear) runs at the thread scheme's decode shapes, by name (tile shape,
split-K) from the torch profiler, with their time; for reading the unprotected thin kernel's gap
at 11008x4096 (session 65).

    python benchmarks/cublas_kernel_probe.py [MxNxK ...]
"""
import sys

import torch
import torch.nn.functional as F

SHAPES = ["1x11008x4096", "16x11008x4096", "32x11008x4096", "1x14336x4096", "16x14336x4096", "1x4096x4096"]


def main(shapes):
    for spec in shapes:
        m, n, k = map(int, spec.split("x"))
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            F.linear(x, w, b)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                F.linear(x, w, b)
            torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                print(f"{spec}: {e.key[:160]}  x{e.count}  {e.device_time:.1f} us", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or SHAPES)

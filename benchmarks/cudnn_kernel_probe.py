"""Which kernels PyTorch's cuDNN SDPA runs on the paper's configurations (names and times, from
the profiler): what the comparator does where ours is weakest (512-1K keys). `--ncu`: a few
launches and no profiler, to run under Nsight Compute for their launch shape and occupancy
(results/run68f_driver.sh).

    python benchmarks/cudnn_kernel_probe.py [--configs 16x64s512,32x128s16384] [--ncu]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def inputs(spec: str):
    hd, s = spec.split("s")
    h, d = map(int, hd.split("x"))
    s = int(s)
    b = max(1, 16384 // s)  # 16K tokens a call, as bench_attention.py
    return [torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="16x64s512,16x64s16384,32x128s512,32x128s16384")
    ap.add_argument("--ncu", action="store_true", help="a few launches only, no profiler")
    a = ap.parse_args()
    for spec in a.configs.split(","):
        q, k, v = inputs(spec)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(3):
                F.scaled_dot_product_attention(q, k, v)
            torch.cuda.synchronize()
            if a.ncu:
                continue
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                F.scaled_dot_product_attention(q, k, v)
                torch.cuda.synchronize()
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                print(f"{spec}: {e.name[:160]} {e.device_time_total:.1f} us", flush=True)


if __name__ == "__main__":
    main()

"""Where a decode call's time goes: each kernel's duration and the call's span inside a CUDA graph
of 10 calls (torch.profiler's kernel records), for our split + combine kernels (protected and not)
and for PyTorch's SDPA on the same call; with --sass, the SASS of the tensor-core split kernel's
instantiations (cuobjdump on the built library) gzipped into that folder, to be read on a machine
without a GPU (NOTES_attention.md, session 50).

    python benchmarks/decode_probe.py [--sass DIR]
"""
import argparse
import collections
import gzip
import os
import re
import shutil
import subprocess

import torch
import torch.nn.functional as F

import ftcompile
from ftcompile.ops import cuda_attention as ca

SHAPES = [(1, 32, 8, 1, 4096, 128), (1, 32, 8, 1, 16384, 128), (8, 32, 8, 1, 4096, 128)]


def graph_of(fn, calls: int = 10) -> torch.cuda.CUDAGraph:
    """A CUDA graph of `calls` calls of fn, replayed once (warm)."""
    graph = torch.cuda.CUDAGraph()
    fn()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def timeline(fn, calls: int = 10):
    """(per kernel name: count per call and mean us, the span of one call in us) of fn replayed
    in a CUDA graph of `calls` calls."""
    graph = graph_of(fn, calls)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    per = collections.defaultdict(list)
    for e in kernels:
        per[e.name[:60]].append(e.time_range.elapsed_us())
    start = min(e.time_range.start for e in kernels)
    end = max(e.time_range.end for e in kernels)
    return {n: (len(v) / calls, sum(v) / len(v)) for n, v in per.items()}, (end - start) / calls


def dump_sass(out_dir: str) -> None:
    lib = ca.library()._name
    tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    text = subprocess.run([tool, "-sass", lib], check=True, capture_output=True, text=True).stdout
    parts = re.split(r"(?=\n\s+Function : )", text)
    keep = [p for p in parts if "decode_tc_split_kernel" in p.split("\n", 2)[1]]
    os.makedirs(out_dir, exist_ok=True)
    with gzip.open(os.path.join(out_dir, "sass_decode_tc.txt.gz"), "wt") as f:
        f.write("".join(keep))
    print(f"sass: {len(keep)} decode_tc_split functions from {lib}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sass")
    args = ap.parse_args()
    if args.sass:
        dump_sass(args.sass)
    sid = ftcompile.register_site("decode_probe", "attention")
    site = ftcompile.telemetry.site(sid)
    for b, hq, hk, sq, sk, d in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(sk + d)
        q = torch.randn(b, hq, sq, d, generator=g, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hk, sk, d, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        runs = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hk),
                "plain": lambda: ca.attention(q, k, v, None, False, None, hq != hk, protect=False),
                "ft": lambda: ca.attention(q, k, v, None, False, None, hq != hk, site)}
        for name, fn in runs.items():
            kernels, span = timeline(fn)
            desc = "; ".join(f"{n} x{c:g} {t:.1f}" for n, (c, t) in kernels.items())
            print(f"B{b} {hq}/{hk}x{d} sq{sq} s{sk} {name}: span {span:.1f} us per call | {desc}", flush=True)


if __name__ == "__main__":
    main()

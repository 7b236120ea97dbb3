"""Does reading W in more, narrower row slabs stream it faster where 128-row tiles leave SMs idle?
The thin kernel gives each CTA one 128-row tile of W and walks it along K (run 71c: 86 tiles of
11008x4096 stream at ~3.3 TB/s, 100-132 tiles at ~3.6-3.8). This times Triton programs that do the
same walk and only read (each program its slab of R rows, a [R, BK] block an iteration along K,
summed), at R = 128 / 64 / 32 and at 132 even slabs (one a SM, rows split evenly), under the
table's method (bench_gemm.graph_times: a CUDA graph over rotated sets, L2 flushed before each
replay), beside torch's sum and cuBLAS's one-row GEMV. (Run 78b: 64-row slabs read 11008's W 2 us
faster than 128-row ones; the 64-row-tile thin kernel built on it gained unprotected only, runs
78d-e, NOTES.md session 70.)

    python benchmarks/slab_read_probe.py [--out DIR]
"""
import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import ceilings, graph_times, make_sets  # noqa: E402

SHAPES = [(11008, 4096), (14336, 4096), (4096, 4096), (8192, 4096)]
# (rows a slab, or 0: the rows split evenly over the SMs; columns a block; warps)
CONFIGS = [(128, 64, 4), (128, 128, 8), (128, 256, 8), (64, 128, 4), (64, 256, 8), (32, 256, 4), (32, 512, 8),
           (0, 128, 8), (0, 256, 8)]


@triton.jit
def slab_sum(w_ptr, out_ptr, n, k, rows, BR: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * rows + tl.arange(0, BR)
    rmask = (tl.arange(0, BR) < rows) & (r < n)
    acc = tl.zeros([BR, BK], tl.float32)
    for k0 in range(0, k, BK):
        c = k0 + tl.arange(0, BK)
        ptr = w_ptr + r[:, None] * k + c[None, :]
        acc += tl.load(ptr, mask=rmask[:, None] & (c[None, :] < k), other=0.0,
                       eviction_policy="evict_first").to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(tl.sum(acc, axis=1), axis=0))


def slab_reader(n: int, k: int, rows: int, bk: int, warps: int, sms: int):
    rows = rows or triton.cdiv(n, sms)
    br = triton.next_power_of_2(rows)
    progs = triton.cdiv(n, rows)
    out = torch.empty(progs, device="cuda", dtype=torch.float32)
    return progs, lambda x, w, b: slab_sum[(progs,)](w, out, n, k, rows, BR=br, BK=bk, num_warps=warps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    copy = ceilings()["copy_GBs"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"copy (1 GB) {copy:.0f} GB/s, {sms} SMs", flush=True)
    rows_out = []
    for n, k in SHAPES:
        sets = make_sets(1, n, k, torch.bfloat16)
        nbytes = n * k * 2
        calls = {"cublas_gemv": lambda x, w, b: F.linear(x, w, b), "torch_sum": lambda x, w, b: w.sum(dtype=torch.float32)}
        progs = {}
        for rows, bk, warps in CONFIGS:
            name = f"slab_r{rows or 'even'}_k{bk}_w{warps}"
            progs[name], calls[name] = slab_reader(n, k, rows, bk, warps, sms)
        ms = graph_times(calls, sets)
        res = {name: {"us": t * 1e3, "pct_copy": 100 * nbytes / t / 1e6 / copy, "programs": progs.get(name)}
               for name, t in ms.items()}
        rows_out.append({"N": n, "K": k, "results": res})
        cells = "  ".join(f"{name.replace('slab_', '')}({v['programs'] or '-'}) {v['us']:.1f} us {v['pct_copy']:.0f}%"
                          for name, v in res.items())
        print(f"{n}x{k}: {cells}", flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "slab_read.json").write_text(json.dumps({"copy_GBs": copy, "rows": rows_out}, indent=1))


if __name__ == "__main__":
    main()

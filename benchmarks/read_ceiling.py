"""How fast can anything read W at the thread table's decode sizes? Issue 5 asks the protected
kernel for >= 85 % of the copy bandwidth at M <= 16 and K, N >= 4096; the table divides by a 1 GB
copy (bench_gemm.ceilings). This times kernels that do nothing but read W (a Triton read-and-sum
over a few block shapes, torch's sum) and cuBLAS's GEMV at one row, under the table's own method
(bench_gemm.graph_times: a CUDA graph over rotated sets, L2 flushed before each replay), so the
ceiling a weight's size allows stands beside what the GEMMs reach.

    python benchmarks/read_ceiling.py [--out DIR]
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

# (N, K) of W: Llama-7B/8B's decode linears, and two smaller ones for the trend.
SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (2048, 4096), (4096, 1024)]
# (elements a block loads per iteration, iterations a program, warps); run 77c: more than 4
# iterations a program were slower everywhere (fewer programs in flight)
CONFIGS = [(4096, 1, 4), (4096, 2, 4), (4096, 4, 4), (8192, 1, 8), (8192, 2, 8), (8192, 4, 8), (16384, 1, 8),
           (16384, 2, 16), (32768, 1, 16)]


@triton.jit
def read_sum(w_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(ITERS):
        offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(w_ptr + offs, mask=offs < n, other=0.0, eviction_policy="evict_first").to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def reader(n: int, block: int, iters: int, warps: int):
    progs = triton.cdiv(n, block * iters)
    out = torch.empty(progs, device="cuda", dtype=torch.float32)
    return lambda x, w, b: read_sum[(progs,)](w, out, n, BLOCK=block, ITERS=iters, num_warps=warps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    copy = ceilings()["copy_GBs"]
    print(f"copy (1 GB) {copy:.0f} GB/s", flush=True)
    rows = []
    for n, k in SHAPES:
        sets = make_sets(1, n, k, torch.bfloat16)
        nbytes = n * k * 2
        dst = torch.empty(n, k, device="cuda", dtype=torch.bfloat16)
        calls = {"cublas_gemv": lambda x, w, b: F.linear(x, w, b),
                 "torch_sum": lambda x, w, b: w.sum(dtype=torch.float32),
                 "copy_W": lambda x, w, b: dst.copy_(w)}
        for block, iters, warps in CONFIGS:
            calls[f"read_b{block}_i{iters}_w{warps}"] = reader(n * k, block, iters, warps)
        ms = graph_times(calls, sets)
        # bytes each call moves: W read (and written again by the copy); the GEMV also x, b and y
        moved = {"copy_W": 2 * nbytes, "cublas_gemv": nbytes + 2 * k + 4 * n}
        res = {}
        for name, t in ms.items():
            gbs = moved.get(name, nbytes) / t / 1e6
            res[name] = {"us": t * 1e3, "GBs": gbs, "pct_copy": 100 * gbs / copy}
        best = min((v for name, v in res.items() if name.startswith("read_")), key=lambda v: v["us"])
        rows.append({"N": n, "K": k, "MB": nbytes / 2 ** 20, "results": res, "best_read": best})
        print(f"{n}x{k} ({nbytes / 2 ** 20:.0f} MB): best read {best['us']:.1f} us {best['pct_copy']:.0f} % of copy; "
              f"torch sum {res['torch_sum']['pct_copy']:.0f} %; cuBLAS GEMV {res['cublas_gemv']['us']:.1f} us "
              f"{res['cublas_gemv']['pct_copy']:.0f} %; copy of W {res['copy_W']['pct_copy']:.0f} %", flush=True)
    lines = ["| W (N x K) | MB | best read us | best read % copy | torch sum % | cuBLAS GEMV us | GEMV % | copy of W % |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        res = r["results"]
        lines.append(f"| {r['N']}x{r['K']} | {r['MB']:.0f} | {r['best_read']['us']:.1f} | {r['best_read']['pct_copy']:.0f} | "
                     f"{res['torch_sum']['pct_copy']:.0f} | {res['cublas_gemv']['us']:.1f} | "
                     f"{res['cublas_gemv']['pct_copy']:.0f} | {res['copy_W']['pct_copy']:.0f} |")
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "read_ceiling.json").write_text(json.dumps({"copy_GBs": copy, "rows": rows}, indent=1))
        (out / "read_ceiling.md").write_text(f"copy (1 GB): {copy:.0f} GB/s\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Where the streaming thread kernel's time goes, per phase of a CTA (NOTES_gemm.md, run 16).

    python benchmarks/stream_phases.py [--out DIR] [--shapes 1x4096x4096,...]

Builds csrc/gemm with -DPHASE_STAMPS (csrc/common/phase_stamps.cuh: thread 0 of every CTA
records the SM clock and the global timer at each phase), replays a CUDA graph of back-to-back
calls over rotated inputs, and reads the records back. Prints, per shape and variant:
* per launch (median over the graph's launches): how spread out the CTAs' starts are, when the
  last CTA's loop ends and when the last CTA ends (from the first CTA's start), and the gap from
  the last CTA's end to the next launch's first start;
* per CTA (median and 90th percentile): the time of each phase (SM clock, converted to ns with the
  clock rate measured against the global timer).
Graph-timed µs per call and cuBLAS's are printed alongside, and the production build's, with and
without programmatic dependent launch, back to back and after a tiny torch kernel. Diagnostic
only: the stamps cost ~0.07 us each, and the first-chunk phase exists at depth 1 only.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ftcompile.ops import cuda, cuda_gemm  # noqa: E402

NPH = 12  # csrc/common/phase_stamps.cuh
PHASES = ["set-up", "1st chunk", "loop", "other warps", "cluster wait", "combine", "pushed wait",
          "cluster combine", "check", "correct", "store+report"]


class Rec(ctypes.Structure):
    _fields_ = [("block", ctypes.c_uint32), ("smid", ctypes.c_uint32),
                ("clk", ctypes.c_uint64 * NPH), ("gt", ctypes.c_uint64 * NPH)]


def stamped_library() -> ctypes.CDLL:
    """The diagnostic build, made cuda_gemm's library (the production one stays loaded: see main)."""
    path = cuda.build_library("gemm", "ftcompile_gemm_sm90a_stamps", extra_cuda_cflags=["-DPHASE_STAMPS"])
    os.environ["FTCOMPILE_GEMM_LIB"] = path  # cuda_gemm.lib() loads this build instead
    cuda_gemm._LIB = None
    handle = cuda_gemm.lib()
    if handle.ft_gemm_stream_stamp_size() != ctypes.sizeof(Rec):
        raise RuntimeError("stamp record size mismatch")
    handle.ft_gemm_stream_stamps.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return handle


def read(handle, cap=1 << 16, kernel="stream", export=None):
    """The records since the last read (and how many CTAs recorded) of the kernel's own stamps
    (export: the library's function that copies them, default the GEMM kernel's)."""
    buf = (Rec * cap)()
    n = getattr(handle, export or f"ft_gemm_{kernel}_stamps")(ctypes.addressof(buf), cap)
    if n < 0:
        raise RuntimeError(f"stamps: CUDA error {-n}")
    return list(buf[:min(n, cap)]), n


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def analyse(recs, ctas):
    """Launch and phase statistics (ns) of records in ticket order, `ctas` per launch."""
    launches = [recs[i:i + ctas] for i in range(0, len(recs) - ctas + 1, ctas)]
    end = lambda r: max(r.gt[i] for i in range(NPH))  # noqa: E731
    ghz = statistics.median((r.clk[p] - r.clk[0]) / (r.gt[p] - r.gt[0]) for r in recs
                            for p in [max(i for i in range(1, NPH) if r.clk[i])] if r.gt[p] - r.gt[0] > 2000)
    per_launch = {"start spread": [], "last loop end": [], "last end": [], "gap to next": []}
    overlap = 0
    for i, L in enumerate(launches):
        t0 = min(r.gt[0] for r in L)
        per_launch["start spread"].append(max(r.gt[0] for r in L) - t0)
        per_launch["last loop end"].append(max(r.gt[4] for r in L) - t0)
        per_launch["last end"].append(max(end(r) for r in L) - t0)
        if i + 1 < len(launches):
            nxt = min(r.gt[0] for r in launches[i + 1])
            per_launch["gap to next"].append(nxt - max(end(r) for r in L))
            overlap += nxt < max(r.gt[0] for r in L)
    phases = {name: [] for name in PHASES}
    life = []
    for r in recs:
        reached = [0] + [i for i in range(1, NPH) if r.clk[i]]
        life.append((r.clk[reached[-1]] - r.clk[0]) / ghz)
        prev = 0
        for i in reached[1:]:
            phases[PHASES[i - 1]].append((r.clk[i] - r.clk[prev]) / ghz)
            prev = i
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    return {"ghz": ghz, "launches": len(launches), "start_overlaps": overlap,
            "launch_ns": {k: med(v) for k, v in per_launch.items()},
            "cta_life_ns": {"p50": med(life), "p90": pct(life, 0.9)},
            "phase_ns": {k: {"p50": med(v), "p90": pct(v, 0.9), "n": len(v)} for k, v in phases.items() if v}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--shapes", default="1x768x768,16x768x3072,1x4096x4096,1x11008x4096,1x14336x4096,1x4096x14336")
    args = ap.parse_args()
    production = cuda_gemm.lib()
    handle = stamped_library()
    from bench_gemm import Runner, capture, graph_time, make_sets

    runner = Runner()
    bf16 = torch.bfloat16
    results = []
    # The floor of graph timing: one tiny kernel per graph node.
    tiny = torch.zeros(1024, device="cuda")
    floor = graph_time(lambda: tiny.add_(1.0), [()] * 24)
    print(f"graph floor (one tiny kernel per node): {floor * 1e3:.2f} us", flush=True)
    for shape in args.shapes.split(","):
        m, n, k = map(int, shape.split("x"))
        sets = make_sets(m, n, k, bf16)
        split, stages, warps = cuda_gemm.stream_config(m, n, k, 1, cuda_gemm._num_sms(torch.device("cuda")))
        ctas = -(-n // cuda_gemm.N_TILE) * split * -(-m // 16)
        cub = graph_time(runner.variant("cublas"), sets)
        cuda_gemm._LIB = production  # the same call without stamps, with and without PDL, back to back
        prod = {}                    # and after a tiny torch kernel (its own graph time subtracted)
        for pdl in (True, False):
            call = runner.variant("on", "linear_thread", split=split, stages=stages, kernel="stream", warps=warps,
                                  pdl=pdl)
            prod[f"b2b_pdl{int(pdl)}"] = graph_time(call, sets) * 1e3
            prod[f"after_tiny_pdl{int(pdl)}"] = (graph_time(lambda *a, call=call: (tiny.add_(1.0), call(*a)), sets)
                                                 - floor) * 1e3
        cublas = runner.variant("cublas")
        prod["cublas_after_tiny"] = (graph_time(lambda *a: (tiny.add_(1.0), cublas(*a)), sets) - floor) * 1e3
        prod_us = prod["b2b_pdl1"]
        print(f"{shape} production, protected: back to back {prod['b2b_pdl1']:.1f} us with PDL, "
              f"{prod['b2b_pdl0']:.1f} without; after a tiny kernel {prod['after_tiny_pdl1']:.1f} / "
              f"{prod['after_tiny_pdl0']:.1f} (cuBLAS {cub * 1e3:.1f}; after a tiny kernel "
              f"{prod['cublas_after_tiny']:.1f})", flush=True)
        cuda_gemm._LIB = handle
        for name, depth in (("on", stages), ("off", stages), ("on", 1)):
            if name == "on" and depth == 1 and stages == 1 and results and results[-1]["shape"] == shape:
                continue  # auto is already depth 1
            # Plain launches: the analysis takes the launches of a stream not to overlap.
            call = runner.variant(name, "linear_thread", split=split, stages=depth, kernel="stream", warps=warps,
                                  pdl=False)
            us = graph_time(call, sets) * 1e3
            g = capture(call, sets)  # then one recorded replay
            read(handle, 0)  # start over
            g.replay()
            torch.cuda.synchronize()
            recs, count = read(handle)
            if count != ctas * len(sets):
                print(f"  {shape} {name}: {count} records, expected {ctas * len(sets)}")
            stats = analyse(recs, ctas)
            row = {"shape": shape, "variant": f"{name} d{depth} w{warps} k{split}", "ctas": ctas,
                   "us": us, "cublas_us": cub * 1e3, "production_on_us": prod, **stats}
            results.append(row)
            L, P = stats["launch_ns"], stats["phase_ns"]
            print(f"{shape} {row['variant']}: {us:.1f} us/call (cuBLAS {cub * 1e3:.1f}, production build "
                  f"protected {prod_us:.1f}), {ctas} CTAs, "
                  f"{stats['ghz']:.2f} GHz; launch: spread {L['start spread'] / 1e3:.2f}, last loop end "
                  f"{L['last loop end'] / 1e3:.2f}, last end {L['last end'] / 1e3:.2f}, gap "
                  f"{L['gap to next'] / 1e3:.2f} us; CTA life p50 {stats['cta_life_ns']['p50'] / 1e3:.2f} us",
                  flush=True)
            print("    " + "; ".join(f"{k} {v['p50'] / 1e3:.2f}/{v['p90'] / 1e3:.2f}" for k, v in P.items()), flush=True)
        del sets
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "graph_floor_us": floor * 1e3}
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "stream_phases.json").write_text(json.dumps({"env": env, "rows": results}, indent=1))


if __name__ == "__main__":
    main()

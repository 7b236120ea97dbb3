"""Where the thin kernel's time goes, per phase of a CTA (the M = 17-128 rows of the thread scheme).

    python benchmarks/thin_phases.py [--out DIR] [--shapes 32x11008x4096,...]

Builds csrc/gemm with -DPHASE_STAMPS (the thin kernel's phases: thin_gemm.cu, "Phase
timestamps"), replays a CUDA graph of calls over rotated inputs, protected and not, and reads the
records back. Prints per shape and variant: graph-timed us per call (the diagnostic build's and the
production build's, and cuBLAS's), per launch the spread of the CTAs' starts and the last CTA's end,
and per CTA the median (90th percentile) time from its entry to each phase, in us. The phases end in
two threads (the producer and the first consumer) of one SM, so they are offsets from the entry on
that SM's clock, not durations. Diagnostic only: each stamp costs ~0.07 us.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ftcompile.ops import cuda_gemm  # noqa: E402
from stream_phases import pct, read, stamped_library  # noqa: E402

PHASES = ["set-up", "pass waited", "loads issued", "1st stage", "loop (C)", "all loops", "partials",
          "rows", "checks", "fixes", "stored"]


def analyse(recs, launches, phases=PHASES):
    """Per launch (records in ticket order) and per phase (offset from each CTA's entry), ns; the
    last of ``phases`` (after entry) is the CTA's end (decode_phases.py passes its own)."""
    ctas = len(recs) // launches
    last = len(phases)
    ghz = statistics.median((r.clk[last] - r.clk[0]) / (r.gt[last] - r.gt[0]) for r in recs if r.gt[last] - r.gt[0] > 2000)
    spread, last_end = [], []
    for i in range(launches):
        L = recs[i * ctas:(i + 1) * ctas]
        t0 = min(r.gt[0] for r in L)
        spread.append(max(r.gt[0] for r in L) - t0)
        last_end.append(max(r.gt[last] for r in L) - t0)
    offsets = {name: [(r.clk[i + 1] - r.clk[0]) / ghz for r in recs if r.clk[i + 1]] for i, name in enumerate(phases)}
    return {"ghz": ghz, "ctas": ctas, "start_spread_ns": statistics.median(spread),
            "last_end_ns": statistics.median(last_end),
            "offset_ns": {k: {"p50": statistics.median(v), "p90": pct(v, 0.9)} for k, v in offsets.items() if v}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--shapes", default="32x11008x4096,72x11008x4096,128x11008x4096,64x4096x4096,32x4096x4096,"
                                        "64x2304x768")
    args = ap.parse_args()
    production = cuda_gemm.lib()
    handle = stamped_library()
    handle.ft_gemm_thin_stamps.argtypes = [ctypes.c_void_p, ctypes.c_int]
    from bench_gemm import Runner, capture, graph_time, make_sets

    runner = Runner()
    rows = []
    for shape in args.shapes.split(","):
        m, n, k = map(int, shape.split("x"))
        sets = make_sets(m, n, k, torch.bfloat16)
        cub = graph_time(runner.variant("cublas"), sets) * 1e3
        for name in ("on", "off"):
            call = runner.variant(name, "linear_thread", kernel="thin")
            cuda_gemm._LIB = production
            prod = graph_time(call, sets) * 1e3
            cuda_gemm._LIB = handle
            us = graph_time(call, sets) * 1e3
            g = capture(call, sets)
            read(handle, 0, "thin")  # start over
            g.replay()
            torch.cuda.synchronize()
            recs, count = read(handle, kernel="thin")
            stats = analyse(recs, len(sets))
            rows.append({"shape": shape, "variant": name, "us": us, "production_us": prod, "cublas_us": cub,
                         "records": count, **stats})
            print(f"{shape} thin {name}: {us:.1f} us/call (production {prod:.1f}, cuBLAS {cub:.1f}), "
                  f"{stats['ctas']} CTAs, {stats['ghz']:.2f} GHz; starts spread {stats['start_spread_ns'] / 1e3:.2f}, "
                  f"last end {stats['last_end_ns'] / 1e3:.2f} us", flush=True)
            print("    from entry, us p50/p90: " + "; ".join(
                f"{k} {v['p50'] / 1e3:.2f}/{v['p90'] / 1e3:.2f}" for k, v in stats["offset_ns"].items()), flush=True)
        del sets
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda}
        (out / "thin_phases.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

"""The thin kernel's K split, measured against its time model (cuda_gemm.thin_time_us): how many
clusters of 1-4 CTAs the device holds at once, then per shape cuBLAS and thin off / on at every
split, with the split the model picks (protected and not) and the thread scheme's kernel choice.

    python benchmarks/thin_split_sweep.py [--m M,...] [--nk NxK,...] [--stages D,...] [--out FILE.json]

Default shapes: thin_probe's (Llama-7B/8B and GPT-2 layers) at M = 32, 64, 128 (run 45b fitted
the model on them; run 45c checked it on others: --nk 1024x4096,4096x14336,6144x4096,...).
--stages: ring depths to time at every split ("auto": the deepest that fits, one CTA per SM, the
default; shallower rings let two CTAs share an SM, counted in the clusters line).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import Runner, graph_times, make_sets  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402
from thin_probe import GPT2, LLAMA  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default=None, help="M,... (default: 32, 64, 128)")
    ap.add_argument("--nk", default=None, help="NxK,... (default: thin_probe's shapes)")
    ap.add_argument("--stages", default="auto", help="D,... ring depths ('auto': the deepest that fits)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    depths = [None if d == "auto" else int(d) for d in args.stages.split(",")]
    lib = cuda_gemm.lib()
    for nx in cuda_gemm.THIN_ROWS:
        for d in depths:
            print(f"clusters held at once, nx = {nx}, protected, depth {d or 'auto'}: " + " ".join(
                f"split {s}: {lib.ft_gemm_thin_max_clusters(nx, 1, d or cuda_gemm.thin_config(nx, 4096, 4096, 1, sms, split=s)[2], s)}"
                for s in range(1, 5)), flush=True)
    nks = [tuple(int(v) for v in s.split("x")) for s in args.nk.split(",")] if args.nk else LLAMA + GPT2
    r = Runner()
    rows = []
    for m in [int(v) for v in args.m.split(",")] if args.m else cuda_gemm.THIN_ROWS:
        for n, k in nks:
            sets = make_sets(m, n, k, torch.bfloat16)
            calls = {"cublas": r.variant("cublas")}
            for sp in range(1, 5):
                for d in depths:
                    tag = f"{sp}" + (f"_st{d}" if d and len(depths) > 1 else "")
                    calls[f"off{tag}"] = r.variant("off", "linear_thread", kernel="thin", split=sp, stages=d)
                    calls[f"on{tag}"] = r.variant("on", "linear_thread", kernel="thin", split=sp, stages=d)
            t = {a: v * 1e3 for a, v in graph_times(calls, sets).items()}
            pick_on = cuda_gemm.thin_config(m, n, k, 1, sms)[1]
            pick_off = cuda_gemm.thin_config(m, n, k, 1, sms, protect=False)[1]
            best = {kind: min((a for a in t if a.startswith(kind)), key=t.get)[len(kind):] for kind in ("on", "off")}
            print(f"{m}x{n}x{k} model on/off: s{pick_on}/s{pick_off} best s{best['on']}/s{best['off']} "
                  f"kernel={cuda_gemm.thread_kernel(m, n, k, 1, sms)} cuBLAS={t['cublas']:.1f} "
                  + " ".join(f"{a}={v:.1f}" for a, v in t.items() if a != "cublas"), flush=True)
            rows.append({"M": m, "N": n, "K": k, "us": t, "pick_on": pick_on, "pick_off": pick_off})
            del sets
            torch.cuda.empty_cache()
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

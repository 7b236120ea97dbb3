"""The thin kernel (csrc/gemm/thin_gemm.cu: W x^T on wgmma, 17-128 rows of x) against cuBLAS and
the kernels the thread scheme and the global scheme pick today, at M = 32-128.

    python benchmarks/thin_probe.py [--quick] [--sweep] [--out FILE]

Per shape, in one run (CUDA graphs over rotated inputs, variants replayed in turn): cuBLAS, thin
off / on / on with one output-stage fault per call, the thread scheme's automatic kernel (on), the
global kernel (on). --sweep also times thin "on" at each K split and ring depth.
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

LLAMA = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096)]  # (N, K)
GPT2 = [(2304, 768), (3072, 768), (768, 3072), (768, 768)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    r = Runner()
    ms_ = (32, 64, 128) if not args.quick else (64,)
    shapes = [(m, n, k) for m in ms_ for n, k in (LLAMA + GPT2 if not args.quick else LLAMA[:2])]
    rows = []
    print("| M x N x K | cuBLAS us | thin off | thin on | thin fault | auto on | global on | off/cuBLAS | on/cuBLAS | "
          "on/off | auto/cuBLAS | global/cuBLAS | cfg |")
    print("|" + "---|" * 13)
    for m, n, k in shapes:
        sets = make_sets(m, n, k, torch.bfloat16)
        calls = {"cublas": r.variant("cublas"),
                 "thin_off": r.variant("off", "linear_thread", kernel="thin"),
                 "thin_on": r.variant("on", "linear_thread", kernel="thin"),
                 "thin_fault": r.variant("fault", "linear_thread", kernel="thin"),
                 "auto_on": r.variant("on", "linear_thread"),
                 "global_on": r.variant("on", "linear_global")}
        if args.sweep:
            for sp in (1, 2, 3, 4):
                for st in (4, 6, 8):
                    if cuda_gemm.lib().ft_gemm_thin_smem(128 if m > 64 else 64, 1, st, sp) <= cuda_gemm.SMEM_MAX:
                        calls[f"on_s{sp}_st{st}"] = r.variant("on", "linear_thread", kernel="thin", split=sp, stages=st)
        failed = {}
        t = {k_: v * 1e3 for k_, v in graph_times(calls, sets, failed).items()}
        for name, exc in failed.items():
            print(f"  {name} failed: {exc}")
        cfg = cuda_gemm.thin_config(m, n, k, 1, 132)
        c = t["cublas"]
        g = lambda name: t.get(name, float("nan"))
        print(f"| {m}x{n}x{k} | {c:.1f} | {g('thin_off'):.1f} | {g('thin_on'):.1f} | {g('thin_fault'):.1f} | "
              f"{g('auto_on'):.1f} | {g('global_on'):.1f} | {g('thin_off') / c:.3f} | {g('thin_on') / c:.3f} | "
              f"{g('thin_on') / g('thin_off'):.3f} | {g('auto_on') / c:.3f} | {g('global_on') / c:.3f} | {cfg} |")
        if args.sweep:
            print("   sweep: " + " ".join(f"{k_[3:]}={v:.1f}" for k_, v in t.items() if k_.startswith("on_s")))
        rows.append({"M": m, "N": n, "K": k, "us": t, "cfg": cfg})
        del sets
        torch.cuda.empty_cache()
    s = r.site
    print("telemetry of the bench site:", {f: int(v) for f, v in zip(
        ("checks", "detected", "corrected", "uncorrectable", "nonfinite"),
        __import__("ftcompile").telemetry.counters(torch.device("cuda"))[s.id].tolist())})
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

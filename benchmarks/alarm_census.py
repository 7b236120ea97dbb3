"""Which protected sites raise alarms on clean inputs? Runs a model through backend="ft" (no
inductor) on random inputs and prints every site with detections, with its scheme and shapes.

    python benchmarks/alarm_census.py gpt2 --dtype fp16 --batch 8 --seq 512
"""
import argparse

import torch

import ftcompile
from bench_models import build


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=["gpt2", "bert", "llama"])
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--calls", type=int, default=2)
    p.add_argument("--inductor", action="store_true", help="compile through inductor")
    args = p.parse_args()
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    model = build(args.model).eval().cuda().to(dtype)
    ids = torch.randint(0, 1000, (args.batch, args.seq), device="cuda")
    report = ftcompile.explain(model, ids)
    ftcompile.reset_stats()
    compiled = torch.compile(model, backend="ft", options={"eager": not args.inductor})
    with torch.no_grad():
        for _ in range(args.calls):
            compiled(ids)
    stats = ftcompile.stats()
    records = {r.name: r for r in report.records}
    noisy = {k: v for k, v in stats.items() if v["detected"]}
    mode = "inductor" if args.inductor else "eager"
    print(f"{args.model} {args.dtype} {args.batch}x{args.seq} ({mode}): {len(noisy)} of "
          f"{len(stats)} sites alarm")
    for name, v in noisy.items():
        r = records.get(name)
        print(f"  {name}: {v} scheme={r.scheme if r else '?'} shapes={r.shapes if r else '?'}")


if __name__ == "__main__":
    main()

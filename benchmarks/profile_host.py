"""Where a model's forward through backend="ft" spends host time (GPT-2 small by default): times the
forward with the GPU synchronised (wall) against the host's own time per forward (no sync), then
profiles the host side of N forwards with cProfile and prints the functions with the most own and
cumulative time. For the whole-model table's ft column (NOTES.md: the small models are host-bound).

    python benchmarks/profile_host.py [--model gpt2|bert|llama] [--iters 30] [--backend ft|inductor]
(--backend inductor: the same for plain inductor, the table's reference column.)
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from bench_models import CONFIGS, build
from ftcompile.timing import median_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--backend", default="ft", choices=("ft", "inductor"))
    args = parser.parse_args()
    import ftcompile  # noqa: F401  (registers the backend)
    name, (kind, dtype, batch, seq) = next((n, c) for n, c in CONFIGS.items() if c[0] == args.model)
    torch.manual_seed(0)
    model = build(kind).eval().cuda().to(dtype)
    ids = torch.randint(0, 1000, (batch, seq), device="cuda")
    with torch.no_grad():
        ft = torch.compile(model, backend=args.backend)
        for _ in range(3):
            ft(ids)
        torch.cuda.synchronize()
        wall = median_ms(lambda: ft(ids))
        # Host time per forward: enqueue N forwards without waiting (the queue is deep enough).
        t0 = time.perf_counter()
        for _ in range(args.iters):
            ft(ids)
        host = (time.perf_counter() - t0) / args.iters * 1e3
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.iters):
            ft(ids)
        prof.disable()
        torch.cuda.synchronize()
    print(f"{name}: {args.backend} forward {wall:.2f} ms (synchronised), host enqueue {host:.2f} ms per forward")
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
        print(f"--- by {key} ({args.iters} forwards)\n" + s.getvalue()[-12000:])


if __name__ == "__main__":
    main()

"""The global scheme's width / split model and check rule (ftcompile/ops/cuda_gemm.py: global_tile,
global_check) against measured times: knob_ab.py output with the variants off#256, off#192,
off#128 (each width at its own automatic split), off#<w>/<split> (other splits: the model takes
each width's largest, global_split; cuda_gemm.global_cost prices any) and, for the check, on@rows /
on@tiles (either with a width).
Prints, per shape, the model's pick and the measured best with the pick's regret (its time over
the best's), then a grid of the model's constants (the margins of 192 and 128, the many-row
split's k-steps) ranked by the total regret over the shapes.

    python benchmarks/fit_global_model.py results/run65a_*.txt [--sms 132]
"""
import argparse
import itertools
import re
import statistics
from collections import defaultdict
from pathlib import Path

from ftcompile.ops import cuda_gemm

LINE = re.compile(r"^\S+#\d+ (?P<shape>\d+x\d+x\d+): (?P<rest>.*)$")


def load(paths):
    """{(m, n, k): {variant: median time (us, as knob_ab.py prints)}} over every round of every file."""
    times = defaultdict(lambda: defaultdict(list))
    for p in paths:
        for ln in Path(p).read_text().splitlines():
            mt = LINE.match(ln)
            if not mt:
                continue
            shape = tuple(int(v) for v in mt["shape"].split("x"))
            toks = mt["rest"].split()
            for name, val in zip(toks[::2], toks[1::2]):
                times[shape][name].append(float(val))
    return {s: {v: statistics.median(t) for v, t in per.items()} for s, per in times.items()}


def candidates(shape, t, sms, prefix="off"):
    """{(width, split): time} of the measured variants "off#W" (W at its automatic split) and
    "off#W/S"."""
    out = {}
    for name, v in t.items():
        mt = re.fullmatch(rf"{prefix}#(\d+)(?:/(\d+))?", name)
        if mt:
            bn = int(mt[1])
            split = int(mt[2]) if mt[2] else cuda_gemm.global_split(*shape, 1, sms, bn)
            out[(bn, split)] = v
    return out


def regrets(data, sms, margins, split_many, prefix="off"):
    """Per shape: (the model's pick among the measured candidates, the fastest, the pick's time over
    the fastest's - 1). Ties keep the wider tile, then the smaller split."""
    out = {}
    for shape, t in data.items():
        cand = candidates(shape, t, sms, prefix)
        if len(cand) < 2:
            continue
        pick = min(cand, key=lambda c: (cuda_gemm.global_cost(*shape, 1, sms, *c, margins, split_many), -c[0], c[1]))
        best = min(cand, key=cand.get)
        out[shape] = (pick, best, cand[pick] / cand[best] - 1)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--sms", type=int, default=132)
    a = ap.parse_args()
    data = load(a.files)
    now = regrets(data, a.sms, cuda_gemm.GLOBAL_MARGINS, cuda_gemm.GLOBAL_SPLIT_KSTEPS_MANY)
    print("shape | pick (width, split) | fastest | regret (current constants)")
    for shape, (pk, best, r) in sorted(now.items()):
        print(f"{'x'.join(map(str, shape))} | {pk} | {best} | {100 * r:.1f} %")
        checks = {c: min((v for name, v in data[shape].items() if name.startswith(f"on@{c}")), default=None)
                  for c in ("rows", "tiles")}
        if None not in checks.values():
            auto = cuda_gemm.global_check(*shape, 1, a.sms)
            fast = min(checks, key=checks.get)
            print(f"    check: auto {auto}, faster {fast} ({100 * (checks[auto] / checks[fast] - 1):.1f} % regret)")
    grid = []
    for m192, m128, s in itertools.product((0.88, 0.92, 0.96, 1.0), (0.8, 0.83, 0.87, 0.9, 0.94), (4, 7, 10, 13)):
        r = regrets(data, a.sms, {256: 1.0, 192: m192, 128: m128}, s)
        grid.append((sum(v[2] for v in r.values()), max(v[2] for v in r.values()), m192, m128, s))
    print(f"\ncurrent constants: total regret {100 * sum(v[2] for v in now.values()):.1f} %, "
          f"worst {100 * max(v[2] for v in now.values()):.1f} %")
    print("total regret | worst | margin 192 | margin 128 | split k-steps (many rows)")
    for tot, worst, m192, m128, s in sorted(grid)[:12]:
        print(f"{100 * tot:.1f} % | {100 * worst:.1f} % | {m192} | {m128} | {s}")


if __name__ == "__main__":
    main()

"""Two or more bench_gemm global tables side by side (ratio to the same run's cuBLAS, per shape and
variant) with their medians: an A/B of two kernel libraries or trees run on one machine.

    python benchmarks/compare_global.py A=out_a/gemm_bench.json B=out_b/gemm_bench.json
"""
import json
import statistics
import sys

VARIANTS = ("off", "on", "on@rows", "on@tiles")
runs = {}
for arg in sys.argv[1:]:
    label, _, path = arg.partition("=")
    rows = json.load(open(path))["rows"]
    runs[label] = {(r["M"], r["N"], r["K"], r["dtype"], r["variant"]): r["ratio_vs_cublas"] for r in rows}
shapes = sorted({k[:4] for run in runs.values() for k in run if k[4] == "on"},
                key=lambda s: (s[3], -s[0], -s[1], -s[2]))
head = ["M×N×K", "dtype"] + [f"{v} {label}" for v in VARIANTS for label in runs]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for s in shapes:
    cells = [f"{s[0]}x{s[1]}x{s[2]}", s[3].replace("bfloat16", "bf16").replace("float16", "fp16")]
    cells += [f"{runs[label].get(s + (v,), float('nan')):.3f}" for v in VARIANTS for label in runs]
    print("| " + " | ".join(cells) + " |")
med = ["median", ""] + [f"{statistics.median(run[s + (v,)] for s in shapes if s + (v,) in run):.3f}"
                        for v in VARIANTS for run in runs.values()]
print("| " + " | ".join(med) + " |")

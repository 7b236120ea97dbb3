"""The crossover figure and table (issue 5; the intensity-guided ABFT paper's Figure 12 shape) from
a bench_gemm.py JSON (`gpu_check.sh gemm`):
    python3 benchmarks/plot_crossover.py RESULTS.json [OUT_DIR]
writes OUT_DIR/gemm_crossover.png and gemm_crossover.md (default: the JSON's folder). The CMR line
is cuBLAS's measured 8192^3 bf16 rate over the measured copy bandwidth (both in the JSON's env)."""
import json
import sys
from pathlib import Path

from ftcompile import plots

src = Path(sys.argv[1])
out = Path(sys.argv[2]) if len(sys.argv) > 2 else src.parent
data = json.loads(src.read_text())
env, cross = data["env"], sorted(data["crossover"], key=lambda c: (c["N"], c["K"], c["M"]))
cmr = env["ceilings"]["mm_bf16_TFLOPs"] * 1e12 / (env["ceilings"]["copy_GBs"] * 1e9)
print(plots.crossover(cross, out / "gemm_crossover.png", cmr,
                      f"Thread vs global ABFT GEMM on the {env['gpu']} (bf16; dashed: measured CMR {cmr:.0f} FLOP/B)"))

layers = {}
for c in cross:
    layers.setdefault(plots.crossover_layer(c), []).append(c)
md = [f"# Thread vs global crossover on the {env['gpu']} (bf16, protected time / cuBLAS)", "",
      f"From `{src.name}` (benchmarks/bench_gemm.py, {env['timing']}); figure: gemm_crossover.png. "
      f"Measured CMR (cuBLAS 8192^3 over the copy bandwidth): {cmr:.0f} FLOP/B.", "",
      "| layer | first M where global is faster (intensity) | thread / cuBLAS there | global / cuBLAS there |",
      "|---|---|---|---|"]
for name, pts in layers.items():
    g = next((c for c in sorted(pts, key=lambda c: c["intensity"]) if c["winner"] == "global"), None)
    md.append(f"| {name} | " + (f"{g['M']} ({g['intensity']:.0f}) | {g['thread_over_cublas']:.2f} | "
                                f"{g['global_over_cublas']:.2f} |" if g else "none measured | - | - |"))
md += ["", "| shape | AI | thread | global | faster |", "|---|---|---|---|---|"]
md += [f"| {c['M']}x{c['N']}x{c['K']} | {c['intensity']:.1f} | {c['thread_over_cublas']:.3f} | "
       f"{c['global_over_cublas']:.3f} | {c['winner']} |" for c in sorted(cross, key=lambda c: c["intensity"])]
(out / "gemm_crossover.md").write_text("\n".join(md) + "\n")
print(out / "gemm_crossover.md")

"""Plots of campaign results (matplotlib, Agg backend: no display needed). One function per figure;
each takes the JSON-able dicts that ftcompile.campaign returns and writes one PNG."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Outcome colours shared by every figure: green good, orange caught, red silent.
COLORS = {"masked": "#9e9e9e", "corrected": "#2e7d32", "detected": "#f9a825",
          "missed": "#c62828", "miscorrected": "#6a1b9a"}
LABELS = {"masked": "masked (no effect)", "corrected": "detected + corrected",
          "detected": "detected, uncorrectable (DUE)", "missed": "missed: silent corruption",
          "miscorrected": "miscorrected (silent)"}
# The V-ABFT paper's reported tightness ranges (Tables 5 and 6).
PAPER_BANDS = {"fp32": (7, 20), "bf16": (48, 158)}


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def detection_by_bit(results: Sequence[Dict], path, title: str = "") -> Path:
    """Detection rate (%) against the flipped bit, one line per (distribution, stage)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for res in results:
        stages = sorted({row["stage"] for row in res["summary"]})
        for stage in stages:
            rows = sorted((r for r in res["summary"] if r["stage"] == stage and r["bit"] is not None),
                          key=lambda r: r["bit"])
            label = res["dist"] if len(stages) == 1 else f"{res['dist']} / {stage}"
            ax.plot([r["bit"] for r in rows], [100 * r["detection_rate"] for r in rows],
                    marker="o", label=label)
    fmt = results[0]["fmt"] if results else "bf16"
    if fmt in ("bf16", "fp16"):
        lo, hi = (7, 14) if fmt == "bf16" else (10, 14)
    else:
        lo, hi = 23, 30
    ax.axvspan(lo - 0.5, hi + 0.5, color="#e3f2fd", zorder=0, label=f"exponent bits ({fmt})")
    ax.set_xlabel(f"flipped bit of the {fmt} value (0 = mantissa LSB)")
    ax.set_ylabel("detected (%)")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or "Detection rate by bit position")
    return _save(fig, path)


def stage_bit_heatmap(result: Dict, path, title: str = "") -> Path:
    """Two panels, stage x bit: detection rate and silent-corruption rate."""
    summary = [r for r in result["summary"] if r["bit"] is not None]
    stages = sorted({r["stage"] for r in summary}, key=lambda s: [r["stage"] for r in summary].index(s))
    bits = sorted({r["bit"] for r in summary})
    grids = {}
    for key in ("detection_rate", "sdc_rate"):
        grid = [[float("nan")] * len(bits) for _ in stages]
        for r in summary:
            grid[stages.index(r["stage"])][bits.index(r["bit"])] = 100 * (r[key] or 0.0)
        grids[key] = grid
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 0.32 * len(bits) + 2), 1.2 * len(stages) + 3))
    for ax, (key, label, cmap) in zip(axes, (("detection_rate", "detected (%)", "Greens"),
                                             ("sdc_rate", "silent corruption (%)", "Reds"))):
        im = ax.imshow(grids[key], aspect="auto", cmap=cmap, vmin=0, vmax=100)
        ax.set_yticks(range(len(stages)), stages)
        ax.set_xticks(range(len(bits)), bits, fontsize=7)
        ax.set_xlabel(f"flipped bit ({result['fmt']})")
        fig.colorbar(im, ax=ax, label=label)
    axes[0].set_title(title or f"{result['op']} {result['dtype']}: detection and silent corruption")
    return _save(fig, path)


def tightness(results: Sequence[Dict], path, title: str = "") -> Path:
    """Threshold / actual verification difference against n (log-log), V-ABFT, A-ABFT, fixed."""
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {"vabft": "-", "aabft": "--", "fixed": ":"}
    names = {"vabft": "V-ABFT", "aabft": "A-ABFT", "fixed": "fixed"}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, res in enumerate(results):
        ns = [r["n"] for r in res["rows"]]
        for key in ("vabft", "aabft", "fixed"):
            ax.plot(ns, [r[f"{key}_tightness"] for r in res["rows"]], styles[key], marker="o",
                    color=palette[i % len(palette)], ms=4,
                    label=f"{names[key]} {res['dtype']} ({res['path']}, {res['dist']})")
    for dtype, (lo, hi) in PAPER_BANDS.items():
        ax.axhspan(lo, hi, alpha=0.12, color="#1565c0" if dtype == "fp32" else "#ef6c00",
                   label=f"paper V-ABFT {dtype}: {lo}-{hi}x")
    ax.axhline(1, color="k", lw=0.8)
    ax.text(0.01, 1.1, "below 1: false alarms", fontsize=8, transform=ax.get_yaxis_transform())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (n x n x n GEMM)")
    ax.set_ylabel("threshold / mean |verification difference|")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title or "Threshold tightness (lower is tighter; must stay above 1)")
    return _save(fig, path)


def model_outcomes(result: Dict, path, title: str = "") -> Path:
    """Stacked outcome fractions, unprotected vs protected, overall and per site kind/stage."""
    s = result["summary"]
    groups: List = [("all", s["overall"])] + [(k, v) for k, v in s["by_stage"].items()]
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(groups) + 2), 5))
    order = ("masked", "corrected", "detected", "miscorrected", "missed")
    width = 0.38
    for gi, (name, rates) in enumerate(groups):
        for side, label in enumerate(("unprotected", "protected")):
            n = rates["trials"]
            bottom = 0.0
            for o in order:
                frac = rates[label][o] / n if n else 0.0
                ax.bar(gi + (side - 0.5) * width, 100 * frac, width * 0.95, bottom=100 * bottom,
                       color=COLORS[o], label=LABELS[o] if gi == 0 and side == 1 else None,
                       edgecolor="white", linewidth=0.5)
                bottom += frac
            sdc = rates[label]["sdc_rate"] or 0.0
            ax.text(gi + (side - 0.5) * width, 101, f"{'U' if side == 0 else 'P'}\n{100 * sdc:.0f}%",
                    ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)), [f"{g} (n={r['trials']})" for g, r in groups], rotation=20,
                  fontsize=8)
    ax.set_ylim(0, 118)
    ax.set_ylabel("trials (%)")
    ax.legend(fontsize=8, loc="lower left", framealpha=0.9)
    ax.set_title(title or (f"{result['model']}: one fault per run, U = unprotected, P = protected "
                           "(label: silent-corruption rate)"), fontsize=10)
    return _save(fig, path)


def false_alarm_margins(results: Sequence[Dict], path, title: str = "") -> Path:
    """Closest call per clean configuration: max |E| / T over every checked row (must be < 1)."""
    rows = [r for r in results if r.get("worst_E_over_T") is not None]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows) + 2), 4.5))
    labels = [f"{r['dtype']} {r['dist']}\n{'x'.join(map(str, r['shape']))}" for r in rows]
    colors = ["#c62828" if r["false_alarm_rows"] else "#1565c0" for r in rows]
    ax.bar(range(len(rows)), [r["worst_E_over_T"] for r in rows], color=colors)
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.text(-0.4, 1.02, "threshold (alarm above)", fontsize=8)
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("max |E| / T over all clean rows")
    ax.set_ylim(0, 1.15)
    ax.set_title(title or "False-alarm margin of clean GEMMs (linear_global)")
    return _save(fig, path)

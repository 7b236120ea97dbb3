"""Plots of campaign and benchmark results (matplotlib, Agg backend: no display needed). One function
per figure; each takes the JSON-able dicts that ftcompile.campaign (or a benchmark script) returns and
writes one PNG."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence

import matplotlib
import matplotlib.ticker

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


def detection_by_bit(results: Sequence[Dict], path, title: str = "",
                     offline: Sequence[Dict] = ()) -> Path:
    """Detection rate (%) against the flipped bit, one line per (distribution, stage).

    Left: the op's own (fused, fp32-accumulator) check, all flips solid and magnitude-growing
    (0 -> 1) flips dotted. Right, if ``offline`` results are given: the paper's setting, the
    check on the rounded output, 0 -> 1 flips, one line style per e_max."""
    panels = 2 if offline else 1
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 4.8), squeeze=False)
    ax = axes[0][0]
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fmt = results[0]["fmt"] if results else "bf16"
    for i, res in enumerate(results):
        stages = sorted({row["stage"] for row in res["summary"]})
        for j, stage in enumerate(stages):
            rows = sorted((r for r in res["summary"] if r["stage"] == stage and r["bit"] is not None),
                          key=lambda r: r["bit"])
            color = palette[(i * len(stages) + j) % len(palette)]
            label = res["dist"] if len(stages) == 1 else f"{res['dist']} / {stage}"
            ax.plot([r["bit"] for r in rows], [100 * r["detection_rate"] for r in rows],
                    marker="o", ms=4, color=color, label=f"{label}: all flips")
            up = [(r["bit"], 100 * r["detection_rate_up"]) for r in rows
                  if r.get("detection_rate_up") is not None]
            if up:
                ax.plot(*zip(*up), ":", marker="^", ms=4, color=color, label=f"{label}: 0->1 only")
    ax.set_title(title or "Detection rate by bit position", fontsize=10)
    _bit_axes(ax, fmt)
    if offline:
        ax2 = axes[0][1]
        es = sorted({o["e_max"] for o in offline})
        dists = list(dict.fromkeys(o["dist"] for o in offline))
        for o in offline:
            pts = [(int(b), 100 * v) for b, v in o["detection_rate_up"].items() if v is not None]
            style = "-" if o["e_max"] == es[0] else "--"
            ax2.plot(*zip(*sorted(pts)), style, marker="o", ms=4,
                     color=palette[dists.index(o["dist"]) % len(palette)],
                     label=f"{o['dist']}, e_max {o['e_max']:.2g}")
        ax2.set_title(f"Offline check of the rounded {fmt} output (the paper's Table 8 setting), "
                      "0->1 flips", fontsize=10)
        _bit_axes(ax2, fmt)
    return _save(fig, path)


def _bit_axes(ax, fmt: str) -> None:
    lo, hi = {"bf16": (7, 14), "fp16": (10, 14)}.get(fmt, (23, 30))
    ax.axvspan(lo - 0.5, hi + 0.5, color="#e3f2fd", zorder=0, label=f"exponent bits ({fmt})")
    ax.set_xlabel(f"flipped bit of the {fmt} value (0 = mantissa LSB)")
    ax.set_ylabel("detected (%)")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


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
    axes[0].set_title(title or f"{result['op']} {result['dtype']} {result['dist']}: detection")
    worst = max((r["max_missed_error"] for r in summary), default=0.0)
    rel = max((r.get("max_missed_rel_error", 0.0) for r in summary), default=0.0)
    axes[1].set_title(f"missed (output beyond rounding, undetected); largest error {worst:.2g}"
                      + (f" = {rel:.1e} of max |output|" if rel else ""), fontsize=10)
    return _save(fig, path)


def tightness(results: Sequence[Dict], path, title: str = "") -> Path:
    """Threshold / actual verification difference against n (log-log): V-ABFT per run (solid),
    A-ABFT (dashed) and the fixed threshold (dotted) once per (dtype, path)."""
    fig, ax = plt.subplots(figsize=(11, 5.5))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = set()
    for i, res in enumerate(results):
        ns = [r["n"] for r in res["rows"]]
        color = palette[i % len(palette)]
        e = next(iter(res["e_max"].values()))
        ax.plot(ns, [r["vabft_tightness"] for r in res["rows"]], "-", marker="o", ms=4,
                color=color, label=f"V-ABFT {res['dtype']} {res['path']}, e_max {e:.2g}")
        if (res["dtype"], res["path"]) in drawn:
            continue
        drawn.add((res["dtype"], res["path"]))
        ax.plot(ns, [r["aabft_tightness"] for r in res["rows"]], "--", marker="s", ms=4,
                color=color, label=f"A-ABFT {res['dtype']} {res['path']}")
        ax.plot(ns, [r["fixed_tightness"] for r in res["rows"]], ":", marker="^", ms=4,
                color=color, label=f"fixed {res['dtype']} {res['path']}")
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
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(title or "Threshold tightness (lower is tighter; must stay above 1)")
    return _save(fig, path)


def model_outcomes(result: Dict, path, title: str = "") -> Path:
    """Left: stacked outcomes, unprotected (U) vs protected (P), overall and per stage.
    Right: silent-corruption rates of U and P under three definitions of "output changed"."""
    s = result["summary"]
    groups: List = [("all", s["overall"])] + [(k, v) for k, v in s["by_stage"].items()]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(max(10, 1.2 * len(groups) + 7), 5.2),
                                  gridspec_kw={"width_ratios": [max(3, len(groups)), 2.2]})
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
            ax.text(gi + (side - 0.5) * width, 101, "U" if side == 0 else "P", ha="center",
                    va="bottom", fontsize=8)
    ax.set_xticks(range(len(groups)), [f"{g}\n(n={r['trials']})" for g, r in groups], fontsize=8)
    ax.set_ylim(0, 108)
    ax.set_ylabel("trials (%)")
    ax.set_title("Outcome of one fault per run, by stage hit", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)

    overall = s["overall"]
    keys = (("sdc_rate", "beyond\nrounding"), ("significant_sdc_rate", "> 0.1% of\nmax logit"),
            ("top1_sdc_rate", "top-1 token\nchanged"))
    for side, (label, color) in enumerate((("unprotected", COLORS["missed"]),
                                           ("protected", COLORS["corrected"]))):
        vals = [100 * (overall[label][k] or 0.0) for k, _ in keys]
        xs = [i + (side - 0.5) * width for i in range(len(keys))]
        ax2.bar(xs, vals, width * 0.95, color=color, label=label)
        for x, v in zip(xs, vals):
            ax2.text(x, v + 0.8, f"{v:.1f}%", ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(range(len(keys)), [k[1] for k in keys], fontsize=8)
    ax2.set_ylabel("silent data corruption (% of trials)")
    ax2.set_ylim(0, max(5.0, 1.15 * max(100 * (overall["unprotected"][k] or 0) for k, _ in keys)))
    ax2.legend(fontsize=8)
    ax2.set_title("Silent corruption of the logits", fontsize=10)
    fig.suptitle(title or f"{result['model']} (random weights), {result['trials']} single "
                 f"{result['fmt']} bit flips: unprotected (U) vs protected (P)", fontsize=11)
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
    total = sum(r["trials"] for r in rows)
    alarms = sum(r["false_alarm_rows"] for r in rows)
    ax.set_title(title or f"Closest call per configuration of clean GEMMs (linear_global): "
                          f"{total} GEMMs, {alarms} false alarms")
    return _save(fig, path)


def crossover_layer(c: Dict) -> str:
    """The panel (and table row group) of a crossover point: its layer N x K, or the squares."""
    return "M = N = K" if c["M"] == c["N"] == c["K"] else f"N x K = {c['N']} x {c['K']}"


def crossover(cross: Sequence[Dict], path, cmr: float = 0.0, title: str = "") -> Path:
    """Thread vs global scheme (the intensity-guided ABFT paper's Figure 12 shape): protected time
    over cuBLAS's against arithmetic intensity, one panel per layer (N x K; squares M = N = K in
    their own), from bench_gemm.py's "crossover" rows. ``cmr``: the device's compute-to-memory
    ratio, drawn as the default selection's boundary."""
    groups: Dict[str, List[Dict]] = {}
    for c in cross:
        groups.setdefault(crossover_layer(c), []).append(c)
    cols = 3
    rows = (len(groups) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, (key, pts) in zip(axes.flat, groups.items()):
        pts = sorted(pts, key=lambda c: c["intensity"])
        ai = [c["intensity"] for c in pts]
        ax.plot(ai, [c["thread_over_cublas"] for c in pts], "o-", color="#1565c0", label="thread (one-sided)")
        ax.plot(ai, [c["global_over_cublas"] for c in pts], "s-", color="#c62828", label="global")
        for c in pts:
            ax.annotate(str(c["M"]), (c["intensity"], min(c["thread_over_cublas"], c["global_over_cublas"])),
                        textcoords="offset points", xytext=(0, -11), ha="center", fontsize=7, color="#555")
        if cmr:
            ax.axvline(cmr, color="k", ls="--", lw=1)
        ax.axhline(1.0, color="#9e9e9e", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.yaxis.set_minor_formatter(matplotlib.ticker.ScalarFormatter())
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_title(key, fontsize=10)
        ax.set_xlabel("arithmetic intensity (FLOP/B); labels: M")
        ax.set_ylabel("protected / cuBLAS time")
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title or "Thread vs global ABFT GEMM by arithmetic intensity" +
                 (f" (dashed: CMR {cmr:.0f} FLOP/B)" if cmr else ""), fontsize=11)
    return _save(fig, path)

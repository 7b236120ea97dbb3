"""Reliability campaigns: ``python -m ftcompile.campaign <kind> ... --out DIR`` (or ftcompile-campaign).

  fpr        clean runs: false alarms of the protected GEMMs per dtype x distribution x shape
  detect     seeded fault trials in one op: outcome per (stage, bit) and distribution
  tightness  V-ABFT / A-ABFT / fixed threshold over the actual verification difference
  model      one fault per run of a compiled model (default: small random GPT-2), unprotected
             vs protected silent-corruption rate
  report     re-render plots and markdown of every result JSON in --out

Each writes <out>/<name>.json (configuration, every trial, summaries), <out>/<name>.md (tables)
and <out>/<name>*.png. The same functions are the Python API:

    from ftcompile.campaign import run_op_campaign, run_model_campaign
    res = run_op_campaign("linear_global", (128, 1024, 256), "bf16", "uniform",
                          stages=["output"], bits=range(7, 15), fmt="bf16", trials=1000)
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from .abft.campaign_data import DISTRIBUTIONS
from .abft.campaign_model import run_model_campaign, small_gpt2
from .abft.campaign_ops import (run_fpr_campaign, run_offline_detection, run_op_campaign,
                                run_tightness)

__all__ = ["run_fpr_campaign", "run_op_campaign", "run_offline_detection", "run_tightness",
           "run_model_campaign",
           "small_gpt2", "write_json", "report", "main"]


def _env() -> Dict:
    from .calibrate import device_name
    return {"command": " ".join(sys.argv), "device": device_name(torch.device("cpu")),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(), "python": platform.python_version(),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def _strip_records(obj):
    """The result without per-trial records (summaries only: small enough to commit)."""
    if isinstance(obj, dict):
        return {k: _strip_records(v) for k, v in obj.items() if k != "records"}
    if isinstance(obj, list):
        return [_strip_records(v) for v in obj]
    return obj


def write_json(result: Dict, out: Path, name: str, kind: str, records: bool = False) -> Path:
    """<out>/<name>.json with the environment; per-trial records only if ``records``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    body = result if records else _strip_records(result)
    path.write_text(json.dumps({"kind": kind, "env": _env(), **body}, indent=1) + "\n")
    return path


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------

def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def fpr_markdown(res: Dict) -> str:
    from tabulate import tabulate
    rows = [[r["op"], r["dtype"], r["dist"], "x".join(map(str, r["shape"])), r["trials"],
             r["rows_checked"], r["false_alarm_rows"],
             "-" if r["worst_E_over_T"] is None else f"{r['worst_E_over_T']:.3f}"]
            for r in res["configs"]]
    total = sum(r["trials"] for r in res["configs"])
    alarms = sum(r["false_alarm_rows"] for r in res["configs"])
    head = ["op", "dtype", "distribution", "M x K x N", "clean GEMMs", "rows checked",
            "false alarms (rows)", "closest call max|E|/T"]
    return (f"# False alarms on clean GEMMs (CPU)\n\n{total} clean GEMMs, {alarms} false alarms. "
            f"e_max from ftcompile/data/emax.json, c_sigma = 2.5, policy detect.\n\n"
            + tabulate(rows, head, tablefmt="github") + "\n")


def detect_markdown(res: Dict) -> str:
    from tabulate import tabulate
    parts = [f"# Fault detection: {res['op']} {res['dtype']} {'x'.join(map(str, res['shape']))}, "
             f"faults in stage(s) {', '.join(res['stages'])} ({res['fmt']} bit flips, count "
             f"{res['count']})\n\n"
             "Detection by the op's own check (verification of the fp32 accumulator, V-ABFT "
             "threshold with the fp32_acc e_max). `0->1`: flips that grow the value (the "
             "direction the V-ABFT paper's Table 8 counts; its `-` entries are bits that are "
             "always 1 in that distribution's outputs); `1->0`: flips that shrink it toward 0, "
             "missed only when the value itself is below the threshold. `missed` counts every "
             "undetected fault whose output error exceeds rounding (2x the fault-free error), "
             "however small: faults below the V-ABFT threshold are undetectable by design, and "
             "the outcome table gives the largest such error.\n"]
    runs = res["runs"]
    stages = sorted({r["stage"] for run in runs for r in run["summary"]})
    bits = sorted({r["bit"] for run in runs for r in run["summary"] if r["bit"] is not None})

    def cell_of(run, stage, bit):
        return next((r for r in run["summary"] if r["stage"] == stage and r["bit"] == bit), None)

    def fmt_rate(v):
        return "-" if v is None else f"{100 * v:.2f}"

    for stage in stages:
        table = []
        for bit in bits:
            row = [bit]
            for run in runs:
                c = cell_of(run, stage, bit)
                row += ["-"] * 3 if c is None else [fmt_rate(c["detection_rate"]),
                                                    fmt_rate(c.get("detection_rate_up")),
                                                    fmt_rate(c.get("detection_rate_down"))]
            table.append(row)
        head = ["bit"] + [f"{r['dist']} {w}" for r in runs for w in ("all", "0->1", "1->0")]
        parts.append(f"\n## Detection rate (%), stage `{stage}`, {res['trials_per_cell']} trials "
                     f"per bit\n\n" + tabulate(table, head, tablefmt="github") + "\n")
    if res.get("offline"):
        offline = res["offline"]
        table = []
        for bit in bits:
            row = [bit]
            for o in offline:
                row += [fmt_rate(o["detection_rate_up"].get(str(bit))),
                        fmt_rate(o["detection_rate"].get(str(bit)))]
            table.append(row)
        head = ["bit"] + [f"{o['dist']} e={o['e_max']:.2g} {w}" for o in offline
                          for w in ("0->1", "all")]
        parts.append(f"\n## For comparison: offline check of the rounded {res['dtype']} output "
                     f"(the paper's setting, path `rounded`), {offline[0]['trials']} GEMMs per "
                     f"bit\n\n" + tabulate(table, head, tablefmt="github") + "\n")
    out_rows = []
    for run in runs:
        tot = {k: sum(r[k] for r in run["summary"]) for k in
               ("trials", "masked", "corrected", "detected", "missed", "miscorrected")}
        worst = max((r["max_missed_error"] for r in run["summary"]), default=0.0)
        rel = max((r.get("max_missed_rel_error", float("nan")) for r in run["summary"]),
                  default=0.0)
        mis = max((r.get("max_miscorrected_error", 0.0) for r in run["summary"]), default=0.0)
        out_rows.append([run["dist"], tot["trials"], tot["masked"], tot["corrected"], tot["detected"],
                         tot["missed"], f"{worst:.3g}" + ("" if rel != rel else f" ({rel:.2g})"),
                         str(tot["miscorrected"]) + (f" (max error {mis:.2g})" if mis else ""),
                         f"{run['clean_runs']['false_alarm']}/{sum(run['clean_runs'].values())}"])
    parts.append("\n## Outcomes (all bits)\n\n" + tabulate(
        out_rows, ["distribution", "trials", "masked", "detected+corrected", "detected only",
                   "missed (silent)", "largest missed error (/ max |out|)", "miscorrected",
                   "false alarms / clean runs"], tablefmt="github") + "\n")
    return "".join(parts)


def tightness_markdown(res: Dict) -> str:
    from tabulate import tabulate
    parts = ["# Threshold tightness: threshold / mean |verification difference| (CPU)\n\n"
             "Paper (V-ABFT Tables 5-6): V-ABFT 7-20x fp32, 48-158x bf16 (rounded output, "
             "e_max 8e-3); A-ABFT 321-633x fp32 (y = 21), 300-4233x bf16. `fixed`: one absolute "
             "threshold for all sizes with no false alarm here (1.2 x the largest |E|); "
             "`fixed@smallest`: tuned on the smallest size only.\n"]
    for r in res["runs"]:
        rows = [[x["n"], x["rows"], f"{x['actual_mean']:.3g}", f"{x['actual_max']:.3g}",
                 f"{x['vabft_mean']:.3g}", f"{x['vabft_tightness']:.1f}",
                 f"{x['aabft_tightness']:.0f}", f"{x['fixed_tightness']:.1f}",
                 x["vabft_false_alarms"], x["fixed_small_false_alarms"], f"{x['worst_E_over_T']:.3f}"]
                for x in r["rows"]]
        e = ", ".join(f"{float(v):.3g}" for v in dict.fromkeys(r["e_max"].values()))
        parts.append(f"\n## {r['dtype']}, path `{r['path']}`, {r['dist']}, {r['trials']} trials per "
                     f"size, e_max {e}\n\n" + tabulate(rows, [
                         "n", "rows", "mean |E|", "max |E|", "V-ABFT T", "V-ABFT x", "A-ABFT x",
                         "fixed x", "V-ABFT false alarms", "fixed@smallest false alarms",
                         "max |E|/T"], tablefmt="github") + "\n")
    return "".join(parts)


def model_markdown(res: Dict) -> str:
    from tabulate import tabulate
    s = res["summary"]

    def line(name, r):
        u, p = r["unprotected"], r["protected"]
        n = r["trials"]
        return [name, n, _pct(u["sdc_rate"]), _pct(u["significant_sdc_rate"]),
                _pct(u["top1_sdc_rate"]), _pct(p["sdc_rate"]), _pct(p["significant_sdc_rate"]),
                _pct(p["top1_sdc_rate"]), _pct(p["corrected"] / n), _pct(p["detected"] / n),
                _pct(p["masked"] / n)]

    rows = [line("all", s["overall"])]
    rows += [line(f"kind {k}", v) for k, v in s["by_kind"].items()]
    rows += [line(f"stage {k}", v) for k, v in s["by_stage"].items()]
    head = ["faults in", "trials", "U: SDC (any)", "U: SDC > 0.1%", "U: SDC top-1",
            "P: SDC (any)", "P: SDC > 0.1%", "P: SDC top-1", "P: corrected",
            "P: detected, uncorrectable", "P: masked"]
    bits = [[b, r["trials"], _pct(r["unprotected"]["sdc_rate"]),
             _pct(r["unprotected"]["top1_sdc_rate"]), _pct(r["protected"]["sdc_rate"]),
             _pct(r["protected"]["detected_rate"])] for b, r in s["by_bit"].items()]
    return (f"# Model campaign: {res['model']} (random weights), inputs {res['inputs']}, "
            f"{res['trials']} single faults ({res['fmt']} bit flips, uniform over bits "
            f"{min(res['bits'])}-{max(res['bits'])}, sites and stages)\n\n"
            f"U = unprotected: the same compiled ops under policy `detect` (faults counted, "
            f"never corrected: what a model without protection computes). P = protected, policy "
            f"`correct`. SDC = the logits differ from the fault-free run and nothing reported a "
            f"detection: `any` = beyond rounding ({res['logit_tolerance']:.3g}), `> 0.1%` = by more "
            f"than {res['significant_logit_error']:.3g} (0.1% of the largest logit), `top-1` = an "
            f"argmax token changed. Clean runs: {res['clean_false_alarms']} false alarms; "
            f"{res.get('not_injected', 0)} drawn faults had nothing to hit and are not counted."
            f"\n\n" + tabulate(rows, head, tablefmt="github") + "\n\n## By bit\n\n"
            + tabulate(bits, ["bit", "trials", "U: SDC (any)", "U: SDC top-1", "P: SDC (any)",
                              "P: detected"], tablefmt="github") + "\n")


# --------------------------------------------------------------------------------------------
# Plots + markdown from result files
# --------------------------------------------------------------------------------------------

def render(path: Path) -> List[Path]:
    """Markdown and plots for one result JSON."""
    from . import plots
    res = json.loads(path.read_text())
    kind, stem = res["kind"], path.with_suffix("")
    made = []
    if kind == "fpr":
        stem.with_suffix(".md").write_text(fpr_markdown(res))
        if any(c.get("worst_E_over_T") is not None for c in res["configs"]):
            made.append(plots.false_alarm_margins(res["configs"], f"{stem}.png"))
    elif kind == "detect":
        stem.with_suffix(".md").write_text(detect_markdown(res))
        title = (f"{res['op']} {res['dtype']} {'x'.join(map(str, res['shape']))}: {res['fmt']} bit "
                 f"flips in stage {', '.join(res['stages'])}"
                 + (f", {res['count']} per check group" if res.get("count", 1) > 1 else ""))
        made.append(plots.detection_by_bit(res["runs"], f"{stem}.png", title,
                                           res.get("offline", ())))
        if len(res["stages"]) > 1:
            for run in res["runs"]:
                made.append(plots.stage_bit_heatmap(run, f"{stem}_{run['dist']}_stages.png"))
    elif kind == "tightness":
        stem.with_suffix(".md").write_text(tightness_markdown(res))
        made.append(plots.tightness(res["runs"], f"{stem}.png"))
    elif kind == "model":
        stem.with_suffix(".md").write_text(model_markdown(res))
        made.append(plots.model_outcomes(res, f"{stem}.png"))
    made.append(stem.with_suffix(".md"))
    return made


def report(out: Path) -> List[Path]:
    made = []
    for path in sorted(Path(out).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        kind = data.get("kind") if isinstance(data, dict) else None  # other tools' files too
        if kind in ("fpr", "detect", "tightness", "model"):
            made += render(path)
    return made


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def _list(s: str) -> List[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _bits(s: str) -> List[int]:
    out = []
    for part in _list(s):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def _shape(s: str) -> List[int]:
    return [int(x) for x in s.lower().split("x")]


def _dists(s: str) -> List[str]:
    return list(DISTRIBUTIONS) if s == "all" else _list(s)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ftcompile.campaign", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="kind", required=True)

    def common(sp, name):
        sp.add_argument("--out", type=Path, required=True, help="folder for JSON, markdown, plots")
        sp.add_argument("--name", default=name, help=f"file stem (default {name})")
        sp.add_argument("--seed", type=int, default=0)
        sp.add_argument("--threads", type=int, default=None,
                        help="torch threads (1 is fastest on a shared, busy CPU)")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")
        sp.add_argument("--records", action="store_true",
                        help="keep every trial's record in the JSON (large)")

    sp = sub.add_parser("fpr", help="false alarms on clean runs")
    common(sp, "fpr")
    sp.add_argument("--ops", default="linear_global", help="linear_global,linear_thread")
    sp.add_argument("--dtypes", default="fp32,fp16,bf16")
    sp.add_argument("--dists", default="all")
    sp.add_argument("--shapes", default="128x1024x256", help="MxKxN list")
    sp.add_argument("--trials", type=int, default=10_000, help="clean GEMMs per configuration")

    sp = sub.add_parser("detect", help="fault trials in one op")
    common(sp, "detect")
    sp.add_argument("--op", default="linear_global", choices=("linear_global", "linear_thread",
                                                               "attention"))
    sp.add_argument("--shape", default="128x1024x256", help="MxKxN, or BxHxSxD for attention")
    sp.add_argument("--dtype", default="bf16")
    sp.add_argument("--dists", default="all")
    sp.add_argument("--stages", default="output")
    sp.add_argument("--fmt", default="bf16", help="format the bit index refers to")
    sp.add_argument("--bits", default="0-15", help="e.g. 7-14 or 0-31 or 23,30")
    sp.add_argument("--count", type=int, default=1, help="faults per check group")
    sp.add_argument("--trials", type=int, default=1000, help="trials per (stage, bit)")
    sp.add_argument("--reuse", type=int, default=8, help="trials per random input")
    sp.add_argument("--policy", default="correct")
    sp.add_argument("--causal", action="store_true")
    sp.add_argument("--offline", type=int, default=0,
                    help="also N GEMMs per bit of the paper's offline check of the rounded "
                         "output (linear ops; calibrated and paper e_max)")

    sp = sub.add_parser("tightness", help="threshold / actual verification difference")
    common(sp, "tightness")
    sp.add_argument("--sizes", default="128,256,512,1024,2048")
    sp.add_argument("--trials", type=int, default=20)
    sp.add_argument("--configs", default="fp32:fp32_acc:uniform,bf16:rounded:uniform01,"
                                          "bf16:fp32_acc:uniform01",
                    help="dtype:path:distribution[:e_max] list (default e_max: the table's)")

    sp = sub.add_parser("model", help="faults in a compiled model, unprotected vs protected")
    common(sp, "model")
    sp.add_argument("--trials", type=int, default=500)
    sp.add_argument("--bits", default=None, help="bit positions (default: all of --fmt)")
    sp.add_argument("--fmt", default="fp32")
    sp.add_argument("--layers", type=int, default=2)
    sp.add_argument("--embd", type=int, default=128)
    sp.add_argument("--seq", type=int, default=128, help="> 64 so that attention has two key "
                    "tiles (the rescale stage)")
    sp.add_argument("--batch", type=int, default=1)

    sp = sub.add_parser("report", help="re-render markdown and plots of --out")
    sp.add_argument("--out", type=Path, required=True)

    args = p.parse_args(argv)
    if args.kind == "report":
        for path in report(args.out):
            print(path)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    progress = not args.quiet
    if args.kind == "fpr":
        configs = []
        for op in _list(args.ops):
            for shape in _list(args.shapes):
                for dtype in _list(args.dtypes):
                    for dist in _dists(args.dists):
                        configs.append(run_fpr_campaign(op, _shape(shape), dtype, dist,
                                                        args.trials, args.seed, progress=progress))
                        c = configs[-1]
                        print(f"{op} {shape} {dtype} {dist}: {c['false_alarm_rows']} false alarms"
                              f" in {c['trials']} GEMMs", flush=True)
        result = {"configs": configs}
    elif args.kind == "detect":
        runs = [run_op_campaign(args.op, _shape(args.shape), args.dtype, dist, _list(args.stages),
                                _bits(args.bits), fmt=args.fmt, count=args.count,
                                trials=args.trials, seed=args.seed, policy=args.policy,
                                reuse=args.reuse, causal=args.causal, progress=progress)
                for dist in _dists(args.dists)]
        result = {"op": args.op, "shape": _shape(args.shape), "dtype": args.dtype,
                  "stages": _list(args.stages), "fmt": args.fmt, "count": args.count,
                  "trials_per_cell": args.trials, "runs": runs}
        if args.offline and args.op != "attention":
            paper = {"bf16": 8e-3, "fp16": 1e-3, "fp32": 4e-7}[args.dtype]
            result["offline"] = [
                run_offline_detection(_shape(args.shape), args.dtype, dist, _bits(args.bits),
                                      args.offline, args.seed, e, progress)
                for e in (None, paper) for dist in _dists(args.dists)]
    elif args.kind == "tightness":
        runs = []
        for cfg in _list(args.configs):
            dtype, path, dist, *e = cfg.split(":")
            runs.append(run_tightness(dtype, path, dist, [int(n) for n in _list(args.sizes)],
                                      args.trials, args.seed, progress,
                                      float(e[0]) if e else None))
        result = {"runs": runs}
    else:
        model = small_gpt2(args.seed, n_layer=args.layers, n_embd=args.embd,
                           n_positions=max(64, args.seq))
        g = torch.Generator().manual_seed(args.seed)
        inputs = torch.randint(0, model.config.vocab_size, (args.batch, args.seq), generator=g)
        result = run_model_campaign(model, inputs, args.trials, args.seed,
                                    _bits(args.bits) if args.bits else None, args.fmt,
                                    progress=progress)
    path = write_json(result, args.out, args.name, args.kind, args.records)
    for made in [path] + render(path):
        print(made)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

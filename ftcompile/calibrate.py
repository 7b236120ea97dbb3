"""Measure e_max on this device: ``python -m ftcompile.calibrate`` (or ``ftcompile-calibrate``).

The V-ABFT paper's protocol (section 3.6): positive |N(1,1)| square matrices (no cancellation in
the denominator), the relative verification error |E| / |checksum| of every row, its maximum over
rows and trials at each size n, a 20% safety margin, and e_max(n) = a sqrt(n) + b fitted over the
sizes so that it covers every measured point.

E is measured the way the protected ops verify (``ftcompile.abft.gemm.linear_global``): the fp32
row sum of the output minus x times the weight checksum (summed in fp64 offline, stored in fp32),
the product taken in fp32. Two accumulation paths per dtype:

  fp32_acc  the row sum of the fp32 accumulator, before rounding to the output dtype (what the
            reference ops and the fused kernels check);
  rounded   the row sum of the output after rounding to the dtype (offline verification).

Results go to ``thresholds.user_table_path()`` under "<device name>/<dtype>/<path>" and
"<device class>/<dtype>/<path>", where the ops find them; ``--write-defaults`` also updates the
shipped table (ftcompile/data/emax.json) for this device class.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from .abft import gemm, thresholds
from .abft.campaign_data import DTYPES
from .abft.thresholds import device_class

DEFAULT_SIZES = (64, 128, 256, 512, 1024, 2048)
MARGIN = 1.2  # the paper's 20% safety margin
MAX_BATCH_ELEMENTS = 1 << 22  # per operand of one batched GEMM (16 MiB in fp32)


def device_name(device: torch.device) -> str:
    """A stable name for this device: the GPU's name, or the CPU model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def positive_matrices(batch: int, rows: int, cols: int, dtype: torch.dtype,
                      g: torch.Generator, device) -> torch.Tensor:
    """|N(1,1)| entries, rounded to dtype (the paper's calibration data)."""
    x = torch.randn(batch, rows, cols, generator=g, device=device).add_(1.0).abs_()
    return x.to(dtype)


def relative_errors(x: torch.Tensor, w: torch.Tensor) -> Dict[str, torch.Tensor]:
    """|E| / |checksum| per row of y = x w^T for both paths, exactly as linear_global forms them.

    x: [B, M, K], w: [B, N, K] in the dtype under test."""
    residuals, check, _ = gemm.row_residuals(x, w, thresholds.PATHS)
    return {path: d.abs() / check.abs() for path, d in residuals.items()}


def trials_for(n: int, rows: int) -> int:
    """Trials at size n so that about ``rows`` rows are checked (at least 2 matrices)."""
    return max(2, math.ceil(rows / n))


def measure(dtype: torch.dtype, sizes: Sequence[int], rows: int, seed: int = 0,
            device: Optional[torch.device] = None, progress=None) -> Dict[str, Dict[int, float]]:
    """{path: {n: max relative verification error}} over ``trials_for(n, rows)`` n x n GEMMs."""
    device = torch.device(device or "cpu")
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    worst: Dict[str, Dict[int, float]] = {p: {} for p in thresholds.PATHS}
    for n in sizes:
        left = trials_for(n, rows)
        batch = max(1, min(left, MAX_BATCH_ELEMENTS // (n * n)))
        while left > 0:
            b = min(batch, left)
            x = positive_matrices(b, n, n, dtype, g, device)
            w = positive_matrices(b, n, n, dtype, g, device)
            for path, rel in relative_errors(x, w).items():
                worst[path][n] = max(worst[path].get(n, 0.0), float(rel.max()))
            left -= b
            if progress is not None:
                progress.update(b * n ** 3)
    return worst


def fit(points: Dict[int, float], margin: float = MARGIN) -> Tuple[float, float]:
    """(a, b) of e_max(n) = a sqrt(n) + b: least squares on margin * measured, a >= 0, then b
    raised until the curve covers every point (a bound, not a mean)."""
    ns = sorted(points)
    xs = [math.sqrt(n) for n in ns]
    ys = [margin * points[n] for n in ns]
    a = 0.0
    if len(ns) > 1:
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        a = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx) if sxx else 0.0
    b = max(y - a * x for x, y in zip(xs, ys))
    return a, b


def calibrate(dtypes: Iterable[str] = tuple(DTYPES), sizes: Sequence[int] = DEFAULT_SIZES,
              rows: int = 100_000, seed: int = 0, device: Optional[str] = None,
              show_progress: bool = True, pool: bool = True) -> Dict:
    """Measure and fit every (dtype, path); returns the calibration record (nothing written).

    ``pool``: fit the fp32_acc path of every dtype to the maxima over all dtypes measured."""
    from tqdm.auto import tqdm

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtypes = list(dtypes)
    total = sum(trials_for(n, rows) * n ** 3 for n in sizes) * len(dtypes)
    measured = {}
    with tqdm(total=total, desc="calibrating e_max", unit="MAC", unit_scale=True,
              disable=not show_progress) as bar:
        for name in dtypes:
            bar.set_postfix_str(name)
            measured[name] = measure(DTYPES[name], sizes, rows, seed, dev, bar)
    # fp32_acc is the same fp32 accumulation whatever the input dtype (paper section 3.6: what
    # matters is the accumulation and output precision): pool its maxima across dtypes.
    pooled = {n: max(measured[d]["fp32_acc"][n] for d in dtypes) for n in sizes}
    entries = {}
    for name in dtypes:
        for path, points in measured[name].items():
            a, b = fit(pooled if path == "fp32_acc" and pool else points)
            entries[f"{name}/{path}"] = {
                "a": a, "b": b,
                "measured_max": {str(n): v for n, v in sorted(points.items())},
                "trials": {str(n): trials_for(n, rows) for n in sizes},
                "pooled": bool(path == "fp32_acc" and pool)}
    return {"device": device_name(dev), "device_class": device_class(dev),
            "torch": torch.__version__, "date": datetime.date.today().isoformat(),
            "protocol": f"|N(1,1)| square matrices, max |E|/|checksum| over rows and trials, "
                        f"x{MARGIN} margin, e_max(n) = a*sqrt(n) + b covering every size",
            "seed": seed, "entries": entries}


def _read(path: Path) -> Dict:
    return json.loads(path.read_text()) if path.exists() else {}


def store(record: Dict, path: Optional[Path] = None) -> Path:
    """Merge a calibration record into the user table (device-name and class keys)."""
    path = Path(path or thresholds.user_table_path())
    table = _read(path)
    emax = table.setdefault("emax", {})
    for key, entry in record["entries"].items():
        value = {k: entry[k] for k in ("a", "b", "measured_max", "trials", "pooled") if k in entry}
        value.update(device=record["device"], date=record["date"], torch=record["torch"])
        emax[f"{record['device']}/{key}"] = value
        emax[f"{record['device_class']}/{key}"] = value
    table.setdefault("comment", "written by python -m ftcompile.calibrate")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=2) + "\n")
    thresholds.reload_tables()
    return path


def _round_up(v: float, digits: int = 2) -> float:
    """v rounded up to ``digits`` significant digits (a tidy number that still bounds v)."""
    if v <= 0:
        return 0.0
    scale = 10 ** (math.floor(math.log10(v)) - digits + 1)
    return float(f"{math.ceil(v / scale - 1e-9) * scale:.{digits}g}")


def write_defaults(record: Dict, path: Path = thresholds.PACKAGE_TABLE) -> Path:
    """Replace the shipped defaults of this device class with the record's fits."""
    table = json.loads(path.read_text())
    for key, entry in record["entries"].items():
        table["emax"][f"{record['device_class']}/{key}"] = {
            "a": _round_up(entry["a"]), "b": _round_up(entry["b"])}
    lines = ['{', f'  "comment": {json.dumps(table["comment"])},', '  "emax": {']
    items = [f'    {json.dumps(k)}: {json.dumps(v)}' for k, v in table["emax"].items()]
    lines += [",\n".join(items), "  }", "}"]
    path.write_text("\n".join(lines) + "\n")
    thresholds.reload_tables()
    return path


def summary(record: Dict) -> str:
    from tabulate import tabulate

    u = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
    rows = []
    for key, e in record["entries"].items():
        dtype, path = key.split("/")
        ref = 2.0 ** -24 if path == "fp32_acc" else u[dtype]
        worst = max(e["measured_max"].values())
        rows.append([dtype, path, f"{worst:.3g}", f"{worst / ref:.1f}", f"{e['a']:.3g}",
                     f"{e['b']:.3g}"])
    head = ["dtype", "path", "max |E|/|chk|", "in units of u(acc)", "a", "b"]
    return (f"e_max on {record['device']} ({record['device_class']}): e_max(n) = a*sqrt(n) + b\n"
            + tabulate(rows, head, tablefmt="github"))


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ftcompile.calibrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", default=",".join(DTYPES), help="comma list of fp32,fp16,bf16")
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                   help="comma list of square sizes n")
    p.add_argument("--rows", type=int, default=100_000,
                   help="rows checked per size (trials = rows / n); the paper uses 1e5")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cpu or cuda[:i] (default: cuda if present)")
    p.add_argument("--table", type=Path, default=None,
                   help=f"user table to update (default {thresholds.user_table_path()})")
    p.add_argument("--write-defaults", action="store_true",
                   help="also update the shipped defaults (ftcompile/data/emax.json)")
    p.add_argument("--json", type=Path, default=None, help="also write the full record here")
    p.add_argument("--no-pool", action="store_true",
                   help="fit fp32_acc per dtype instead of pooling the dtypes' maxima")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)

    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = sorted(set(dtypes) - set(DTYPES))
    if unknown:
        p.error(f"unknown dtype(s) {unknown}; choose from {list(DTYPES)}")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    record = calibrate(dtypes, sizes, args.rows, args.seed, args.device, not args.quiet,
                       pool=not args.no_pool)
    print(summary(record))
    print(f"stored in {store(record, args.table)}")
    if args.write_defaults:
        print(f"shipped defaults updated: {write_defaults(record)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

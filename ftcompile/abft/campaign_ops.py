"""Op-level reliability campaigns: clean runs (false alarms), fault trials, threshold tightness.

Every trial calls the public ops (``torch.ops.ftcompile.*``) with a registered site, so what is
measured is what a compiled model gets (on a GPU, the CUDA kernels where they are registered);
the per-call outcome is the difference of the site's telemetry counters around the call.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from .. import telemetry
from . import campaign_data as cd
from . import gemm, injection
from .checksum import exceeds
from .injection import FaultSpec
from .thresholds import (aabft_threshold, aabft_mantissa_bits, device_class, e_max,
                         extrema_variance, vabft_from_stats)

OPS = ("linear_global", "linear_thread", "attention")
MAX_BATCH_MACS = 1 << 30  # multiply-adds per batched call of a clean campaign (~0.1-1 s on 2 cores)


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)


def site_for(op: str, policy: str) -> Tuple[str, int]:
    """(name, id) of the campaign's own site for ``op`` under ``policy``."""
    kind = "attention" if op == "attention" else "linear"
    scheme = {"linear_global": "global", "linear_thread": "thread", "attention": "efta"}[op]
    name = f"campaign.{op}.{policy}"
    return name, telemetry.register(name, kind, scheme, policy, 2.5, 1.0)


def _counts(site_id: int, device) -> torch.Tensor:
    return telemetry.counters(device)[site_id].clone()


def call(op: str, inputs: Tuple[torch.Tensor, ...], site_id: int, causal: bool = False):
    """Run the op; returns (output, {field: count} of this call)."""
    dev = inputs[0].device
    before = _counts(site_id, dev)
    if op == "attention":
        q, k, v = inputs
        y = torch.ops.ftcompile.attention(q, k, v, None, causal, None, False, site_id)
    else:
        x, w = inputs
        y = getattr(torch.ops.ftcompile, op)(x, w, None, site_id)
    delta = (_counts(site_id, dev) - before).tolist()
    return y, dict(zip(telemetry.FIELDS, delta))


def make_inputs(op: str, shape: Sequence[int], dtype: torch.dtype, dist: str, g: torch.Generator,
                batch: Optional[int] = None) -> Tuple[torch.Tensor, ...]:
    """Linear: shape (M, K, N) -> x [M, K], w [N, K] (with batch: x [B, M, K], w [B, N, K]).
    Attention: shape (B, H, S, D) -> q, k, v [B, H, S, D]."""
    if op == "attention":
        return tuple(cd.draw(dist, shape, g, dtype) for _ in range(3))
    m, k, n = shape
    lead = (batch,) if batch else ()
    return cd.draw(dist, lead + (m, k), g, dtype), cd.draw(dist, lead + (n, k), g, dtype)


def reference(op: str, inputs, causal: bool = False) -> torch.Tensor:
    """The fault-free result in fp64."""
    if op == "attention":
        q, k, v = (t.double() for t in inputs)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    x, w = inputs
    return x.double() @ w.double().transpose(-1, -2)


# --------------------------------------------------------------------------------------------
# Clean runs: false-alarm rate
# --------------------------------------------------------------------------------------------

def gemm_verification(x: torch.Tensor, w: torch.Tensor, e: Optional[float] = None,
                      c_sigma: float = 2.5, path: str = "fp32_acc"
                      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(E, T, checksum) per row of y = x w^T, formed exactly as gemm.linear_global forms them
    (E: fp32 row sum of the accumulator, or of the rounded output for path "rounded", minus
    x times the fp64-summed weight checksum; T: its V-ABFT threshold). x [B, M, K], w [B, N, K]."""
    n, k = w.shape[-2], w.shape[-1]
    residuals, check, enc = gemm.row_residuals(x, w, (path,))
    e = e_max(device_class(x.device), x.dtype, path, n=max(n, k)) if e is None else e
    mu_a, var_a = extrema_variance(x, -1)
    t = vabft_from_stats(mu_a, var_a, n, enc.stats, e, c_sigma)
    return residuals[path], t, check


def run_fpr_campaign(op: str = "linear_global", shape: Sequence[int] = (128, 1024, 256),
                     dtype="fp32", dist: str = "normal_1e-6", trials: int = 10_000, seed: int = 0,
                     progress: bool = True, margins: bool = True) -> Dict:
    """``trials`` clean GEMMs (or attention calls), batched; counts false alarms.

    GEMMs run as one batched call of the op per batch (weight [B, N, K]). ``margins`` also
    records the closest call max |E| / T over all rows (linear_global's verification)."""
    dt = cd.dtype_of(dtype)
    name, sid = site_for(op, "detect")
    g = torch.Generator().manual_seed(seed)
    macs = math.prod(shape) if op != "attention" else math.prod(shape) * shape[-2]
    batch = max(1, min(trials, MAX_BATCH_MACS // macs)) if op != "attention" else 1
    done = alarms = alarm_calls = 0
    worst = 0.0
    bar = _progress(trials, f"clean {op} {cd.DTYPE_NAMES[dt]} {dist} {tuple(shape)}", progress)
    while done < trials:
        b = min(batch, trials - done)
        inputs = make_inputs(op, shape, dt, dist, g, batch=b if op != "attention" else None)
        _, counts = call(op, inputs, sid)
        alarms += counts["detected"]
        alarm_calls += bool(counts["detected"])
        if margins and op == "linear_global":
            d, t, _ = gemm_verification(*inputs)
            worst = max(worst, float((d.abs() / t).max()))
        done += b
        bar.update(b)
    bar.close()
    rows = trials * (shape[0] if op != "attention" else shape[0] * shape[1] * shape[2])
    return {"op": op, "shape": list(shape), "dtype": cd.DTYPE_NAMES[dt], "dist": dist,
            "trials": trials, "rows_checked": rows, "false_alarm_rows": alarms,
            "false_alarm_batches": alarm_calls, "batch": batch,
            "worst_E_over_T": worst if margins and op == "linear_global" else None}


# --------------------------------------------------------------------------------------------
# Fault trials
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    """One (stage, fault) combination of a fault campaign."""
    stage: str
    bit: Optional[int] = None
    value: Optional[float] = None


def cells(stages: Iterable[str], bits: Optional[Iterable[int]] = None,
          values: Optional[Iterable[float]] = None) -> List[Cell]:
    stages = list(stages)
    if bits is not None:
        return [Cell(s, bit=b) for s in stages for b in bits]
    return [Cell(s, value=v) for s in stages for v in (values or [10.0])]


def run_op_campaign(op: str = "linear_global", shape: Sequence[int] = (128, 1024, 256),
                    dtype="bf16", dist: str = "normal_1e-6", stages: Sequence[str] = ("output",),
                    bits: Optional[Iterable[int]] = range(7, 15), values=None, fmt: str = "bf16",
                    count: int = 1, trials: int = 100, seed: int = 0, policy: str = "correct",
                    reuse: int = 8, causal: bool = False, progress: bool = True) -> Dict:
    """Seeded single-fault trials: ``trials`` per (stage, bit or value) cell.

    Each input set (fresh every ``reuse`` trials) gets a clean run (a false-alarm sample and the
    fault-free output) and an fp64 reference. Element and k-step of each fault are drawn from
    the trial's seed. Returns the configuration, one record per trial and a summary by cell."""
    dt = cd.dtype_of(dtype)
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    name, sid = site_for(op, policy)
    plan = cells(stages, None if values is not None else bits, values)
    records, clean_records = [], []
    state: Dict = {}
    total = len(plan) * trials
    bar = _progress(total, f"faults {op} {cd.DTYPE_NAMES[dt]} {dist}", progress)
    for t in range(total):
        cell = plan[t % len(plan)]  # interleave cells so that every cell sees every input set
        input_id = t // reuse
        if state.get("id") != input_id:
            g = torch.Generator().manual_seed(seed * 1_000_003 + input_id)
            inputs = make_inputs(op, shape, dt, dist, g)
            clean, counts = call(op, inputs, sid, causal)
            ref = reference(op, inputs, causal)
            state = {"id": input_id, "inputs": inputs, "clean": clean, "ref": ref,
                     "tol": cd.tolerance(clean, ref), "scale": float(ref.abs().max())}
            clean_records.append(cd.classify(False, counts["detected"], 0, 0, True))
        spec = FaultSpec(site=name, stage=cell.stage, bit=cell.bit, value=cell.value,
                         fmt=fmt, count=count, seed=seed * 7919 + t, calls=1)
        with injection.inject(spec) as inj:
            y, counts = call(op, state["inputs"], sid, causal)
        err = cd.max_error(y, state["ref"])
        ok = err <= state["tol"]
        outcome = cd.classify(bool(inj.events), counts["detected"], counts["corrected"],
                              counts["uncorrectable"], ok)
        ev = inj.events[0] if inj.events else None
        records.append({
            "trial": t, "input": input_id, "stage": cell.stage, "bit": cell.bit,
            "value": cell.value, "index": list(ev.index) if ev else None,
            "before": ev.before if ev else None, "after": ev.after if ev else None,
            "detected": counts["detected"], "corrected": counts["corrected"],
            "uncorrectable": counts["uncorrectable"], "error": err, "tolerance": state["tol"],
            "rel_error": err / state["scale"] if state["scale"] else err, "outcome": outcome})
        bar.update(1)
    bar.close()
    return {"op": op, "shape": list(shape), "dtype": cd.DTYPE_NAMES[dt], "dist": dist,
            "fmt": fmt, "count": count, "policy": policy, "seed": seed,
            "trials_per_cell": trials, "clean_runs": cd.tally(clean_records),
            "summary": summarize(records), "records": records}


def summarize(records: List[Dict]) -> List[Dict]:
    """Per (stage, bit/value) cell: outcome counts, detection and silent-corruption rates."""
    groups: Dict[Tuple, List[Dict]] = {}
    for r in records:
        groups.setdefault((r["stage"], r["bit"], r["value"]), []).append(r)
    out = []
    for (stage, bit, value), rs in groups.items():
        c = cd.tally(r["outcome"] for r in rs)
        n = len(rs)
        up = [r for r in rs if _grew(r)]
        down = [r for r in rs if not _grew(r)]
        out.append({"stage": stage, "bit": bit, "value": value, "trials": n, **c,
                    "detection_rate": cd.rate(sum(1 for r in rs if r["detected"]), n),
                    "flips_up": len(up),
                    "detection_rate_up": cd.rate(sum(1 for r in up if r["detected"]), len(up)),
                    "detection_rate_down": cd.rate(sum(1 for r in down if r["detected"]),
                                                   len(down)),
                    "sdc_rate": cd.rate(c["missed"] + c["miscorrected"], n),
                    "max_missed_error": max((r["error"] for r in rs
                                             if r["outcome"] == "missed"), default=0.0),
                    "max_missed_rel_error": max((r.get("rel_error", 0.0) for r in rs
                                                 if r["outcome"] == "missed"), default=0.0),
                    "max_miscorrected_error": max((r["error"] for r in rs
                                                   if r["outcome"] == "miscorrected"), default=0.0)})
    return out


def _grew(r: Dict) -> bool:
    """Did the fault make the value larger in magnitude (a 0 -> 1 exponent flip), or NaN?"""
    if r["before"] is None:
        return False
    return not abs(r["after"]) <= abs(r["before"])


# --------------------------------------------------------------------------------------------
# Threshold tightness
# --------------------------------------------------------------------------------------------

def run_tightness(dtype="fp32", path: str = "fp32_acc", dist: str = "uniform",
                  sizes: Sequence[int] = (128, 256, 512, 1024, 2048), trials: int = 20,
                  seed: int = 0, progress: bool = True, e: Optional[float] = None) -> Dict:
    """Threshold / actual verification difference for n x n x n GEMMs, per size.

    "actual" is the mean |E| over rows and trials, E formed as the ops form it (path
    "fp32_acc") or on the rounded output ("rounded": offline ABFT, the paper's BF16 setting).
    V-ABFT uses ``e`` or else the shipped/calibrated e_max; A-ABFT the paper's reproduction (computed y,
    t = aabft_mantissa_bits(dtype)); "fixed" is one absolute threshold for every size, the
    smallest that has no false alarm at any size measured here (1.2 x the largest |E|)."""
    dt = cd.dtype_of(dtype)
    g = torch.Generator().manual_seed(seed)
    rows, errors = [], []
    # A-ABFT's 2^-t is the precision of the checked sums: fp32 accumulators, or the output dtype.
    t_bits = aabft_mantissa_bits(torch.float32 if path == "fp32_acc" else dt)
    bar = _progress(len(sizes) * trials, f"tightness {cd.DTYPE_NAMES[dt]} {path}", progress)
    e_used = {}
    for n in sizes:
        batch = max(1, min(trials, MAX_BATCH_MACS // n ** 3))
        # The inputs are CPU tensors of dtype dt: what gemm_verification would look up per batch.
        e_used[n] = e if e is not None else e_max("cpu", dt, path, n=n)
        es, vts, ats = [], [], []
        left = trials
        while left > 0:
            b = min(batch, left)
            x, w = make_inputs("linear_global", (n, n, n), dt, dist, g, batch=b)
            d, t, _ = gemm_verification(x, w, e=e_used[n], path=path)
            es.append(d.abs().flatten())
            vts.append(t.flatten())
            ats.append(torch.cat([aabft_threshold(x[i], w[i].transpose(0, 1), t_bits)
                                  for i in range(b)]))
            left -= b
            bar.update(b)
        err, vt, at = torch.cat(es).double(), torch.cat(vts).double(), torch.cat(ats).double()
        errors.append(err)
        rows.append({"n": n, "rows": err.numel(), "actual_mean": float(err.mean()),
                     "actual_max": float(err.max()), "vabft_mean": float(vt.mean()),
                     "aabft_mean": float(at.mean()),
                     "vabft_tightness": float(vt.mean() / err.mean()),
                     "aabft_tightness": float(at.mean() / err.mean()),
                     "vabft_false_alarms": int((err > vt).sum()),
                     "aabft_false_alarms": int((err > at).sum()),
                     "worst_E_over_T": float((err / vt).max())})
    bar.close()
    # Fixed thresholds: one for all sizes with no false alarm anywhere here, and one tuned on
    # the smallest size only (what a fixed threshold calibrated on a small problem does later).
    fixed = 1.2 * max(r["actual_max"] for r in rows)
    small = 1.2 * rows[0]["actual_max"]
    for r, err in zip(rows, errors):
        r["fixed"] = fixed
        r["fixed_tightness"] = fixed / r["actual_mean"]
        r["fixed_small"] = small
        r["fixed_small_false_alarms"] = int((err > small).sum())
    return {"dtype": cd.DTYPE_NAMES[dt], "path": path, "dist": dist, "trials": trials,
            "e_max": {str(r["n"]): e_used[r["n"]] for r in rows},
            "rows": rows}


# --------------------------------------------------------------------------------------------
# Offline verification of the rounded output (the V-ABFT paper's detection experiment)
# --------------------------------------------------------------------------------------------

def run_offline_detection(shape: Sequence[int] = (128, 1024, 256), dtype="bf16",
                          dist: str = "normal_1e-6", bits: Iterable[int] = range(16),
                          trials: int = 1000, seed: int = 0, e: Optional[float] = None,
                          progress: bool = True) -> Dict:
    """Detection rate of one bit flip in the rounded output when the check runs on that rounded
    output (path "rounded", the paper's Table 8 setting), not on the fp32 accumulator as the
    ops do. Each GEMM of a batch gets one flip per bit at a random element; detected iff
    |E_row + delta| > T_row. ``e`` defaults to the calibrated rounded e_max."""
    dt = cd.dtype_of(dtype)
    fmt = cd.DTYPE_NAMES[dt]
    bits = list(bits)
    g = torch.Generator().manual_seed(seed)
    m, k, n = shape
    batch = max(1, min(trials, MAX_BATCH_MACS // (m * k * n)))
    e_used = e if e is not None else e_max("cpu", dt, "rounded", n=max(n, k))
    hits = {(bit, way): 0 for bit in bits for way in ("up", "down")}
    seen = dict.fromkeys(hits, 0)
    done = 0
    bar = _progress(trials, f"offline {fmt} {dist}", progress)
    while done < trials:
        b = min(batch, trials - done)
        x, w = make_inputs("linear_global", shape, dt, dist, g, batch=b)
        d, t, _ = gemm_verification(x, w, e=e_used, path="rounded")
        y = (x.float() @ w.float().transpose(-1, -2)).to(dt)
        for bit in bits:
            rows = torch.randint(0, m, (b,), generator=g)
            cols = torch.randint(0, n, (b,), generator=g)
            ar = torch.arange(b)
            v = y[ar, rows, cols].float()
            flipped = injection.corrupt(v, FaultSpec(site="offline", bit=bit, fmt=fmt))
            delta = flipped - v
            found = exceeds(d[ar, rows] + delta, t[ar, rows])  # NaN/Inf count as detected
            up = ~(flipped.abs() <= v.abs())  # 0 -> 1 in the exponent: the value grows (or NaN)
            for way, sel in (("up", up), ("down", ~up)):
                seen[bit, way] += int(sel.sum())
                hits[bit, way] += int((found & sel).sum())
        done += b
        bar.update(b)
    bar.close()
    return {"shape": list(shape), "dtype": fmt, "dist": dist, "trials": trials, "e_max": e_used,
            "detection_rate": {str(b): sum(hits[b, w] for w in ("up", "down")) / trials
                               for b in bits},
            "detection_rate_up": {str(b): cd.rate(hits[b, "up"], seen[b, "up"]) for b in bits},
            "detection_rate_down": {str(b): cd.rate(hits[b, "down"], seen[b, "down"])
                                    for b in bits},
            "flips_up": {str(b): seen[b, "up"] for b in bits}}

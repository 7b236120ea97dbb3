"""Shared vocabulary of the reliability campaigns: input distributions, trial outcomes, tolerances.

Distributions are the V-ABFT paper's (section 6.1). Outcomes of one trial:

  masked        a fault was injected, nothing was detected, and the output equals the fault-free
                output within rounding (the fault vanished or stayed below rounding noise)
  corrected     detected, reported corrected, and the output equals the fault-free output
  detected      detected but not corrected (uncorrectable, or policy "detect"): a DUE, not silent
  missed        injected, not detected, and the output is wrong: silent data corruption (SDC)
  miscorrected  reported corrected (nothing uncorrectable) but the output is still wrong
  false_alarm   a clean run (no fault) that reported a detection
  clean         a clean run with no detection

"Within rounding" follows the flash-attention rule of DESIGN.md: the error against an fp64
reference is at most twice the fault-free run's own error (plus one unit of the output format
relative to the output's scale, so that exact fault-free runs do not give a zero tolerance).
"""
from __future__ import annotations

from typing import Dict, Iterable, Optional, Sequence

import torch

DISTRIBUTIONS = ("normal_1e-6", "normal_1", "uniform", "truncnormal")
OUTCOMES = ("masked", "corrected", "detected", "missed", "miscorrected")
CLEAN_OUTCOMES = ("clean", "false_alarm")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def draw(dist: str, shape: Sequence[int], g: torch.Generator, dtype: torch.dtype = torch.float32
         ) -> torch.Tensor:
    """Random tensor of ``shape`` from one of DISTRIBUTIONS, rounded to ``dtype``.

    normal_1e-6  N(1e-6, 1): near-zero mean (normalised activations)
    normal_1     N(1, 1): non-zero mean
    uniform      U(-1, 1)
    truncnormal  N(0, 1) truncated to [-1, 1] (inverse-CDF sampling: exact, no rejection loop)
    positive     |N(1, 1)|: the calibration data
    """
    shape = tuple(shape)
    if dist == "normal_1e-6":
        x = torch.randn(shape, generator=g).add_(1e-6)
    elif dist == "normal_1":
        x = torch.randn(shape, generator=g).add_(1.0)
    elif dist == "uniform":
        x = torch.rand(shape, generator=g).mul_(2).sub_(1)
    elif dist == "truncnormal":
        lo = torch.special.ndtr(torch.tensor(-1.0))
        p = lo + torch.rand(shape, generator=g) * (1 - 2 * lo)
        x = torch.special.ndtri(p).clamp_(-1.0, 1.0)
    elif dist == "positive":
        x = torch.randn(shape, generator=g).add_(1.0).abs_()
    elif dist == "uniform01":
        x = torch.rand(shape, generator=g)
    else:
        raise ValueError(f"unknown distribution {dist!r}; choose from {DISTRIBUTIONS} "
                         "(or 'positive', 'uniform01')")
    return x.to(dtype)


def dtype_of(name_or_dtype) -> torch.dtype:
    if isinstance(name_or_dtype, torch.dtype):
        return name_or_dtype
    if name_or_dtype not in DTYPES:
        raise ValueError(f"unknown dtype {name_or_dtype!r}; choose from {list(DTYPES)}")
    return DTYPES[name_or_dtype]


def output_ok(y: torch.Tensor, clean: torch.Tensor, ref: torch.Tensor) -> bool:
    """Is y the fault-free result within rounding (see the module docstring)?"""
    return bool(max_error(y, ref) <= tolerance(clean, ref))


def tolerance(clean: torch.Tensor, ref: torch.Tensor) -> float:
    eps = torch.finfo(clean.dtype).eps
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    return 2.0 * max_error(clean, ref) + eps * scale


def max_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    """max |y - ref|, with any NaN/Inf in y counting as an infinite error."""
    d = (y.double() - ref.double()).abs()
    if not bool(torch.isfinite(d).all()):
        return float("inf")
    return float(d.max()) if d.numel() else 0.0


def classify(injected: bool, detected: int, corrected: int, uncorrectable: int, ok: bool) -> str:
    """The outcome of one trial from the op's counters and the output check."""
    if not injected:
        return "false_alarm" if detected else "clean"
    if not detected:
        return "masked" if ok else "missed"
    if corrected and not uncorrectable:
        return "corrected" if ok else "miscorrected"
    return "detected"


def tally(outcomes: Iterable[str]) -> Dict[str, int]:
    counts = dict.fromkeys(OUTCOMES + CLEAN_OUTCOMES, 0)
    for o in outcomes:
        counts[o] += 1
    return counts


def rate(num: int, den: int) -> Optional[float]:
    return num / den if den else None

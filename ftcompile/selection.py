"""Scheme selection: a pure, table-driven function from (site, cost, device, config) to a Decision.

  attention                    -> efta
  linear, intensity <  CMR     -> thread  (bandwidth-bound: checksum MMAs ride on loaded registers)
     but > 128 rows on a GPU   -> global  (the thread scheme's GPU kernels are slower there)
  linear, intensity >= CMR     -> global  (compute-bound: offline weight checksums, fused summation)
  FLOPs below config.min_flops -> none    (protection would cost more than the op)
  a user override wins; a site the ops cannot run (dtype, training dropout, ...) -> none + reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .config import FTConfig
from .cost import Cost
from .hardware import DeviceSpec

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# On a GPU the thread scheme's kernels cover this many rows of x at speed (the streaming kernel up
# to 16, the thin kernel to 128); past it only the ring kernel is left, 3.9-5.7x cuBLAS at Llama-7B
# layers against the global kernel's 1.3-2.1x, at intensities still below an H200's CMR
# (M = 160-224, benchmarks/NOTES_gemm.md run 45i).
THREAD_MAX_ROWS_GPU = 128
SCHEMES_FOR_KIND = {"attention": ("efta", "none"), "linear": ("global", "thread", "none")}


@dataclass(frozen=True)
class Decision:
    scheme: str
    reason: str


def unsupported_dtype_reason(dtype: torch.dtype) -> Optional[str]:
    if dtype in SUPPORTED_DTYPES:
        return None
    return (f"dtype {dtype} is not supported by the fault-tolerant kernels "
            f"(supported: fp32, fp16, bf16); left unprotected")


def select(kind: str, qualname: str, dtype: torch.dtype, cost: Cost, spec: DeviceSpec,
           config: FTConfig, blocker: Optional[str] = None) -> Decision:
    """blocker: why the ops cannot run this site at all (it then stays as it was)."""
    if kind not in SCHEMES_FOR_KIND:
        raise ValueError(f"unknown site kind {kind!r}")
    if blocker is None:
        blocker = unsupported_dtype_reason(dtype)
    if blocker is not None:
        return Decision("none", blocker)

    forced = config.override_for(qualname)
    if forced is not None:
        if forced not in SCHEMES_FOR_KIND[kind]:
            raise ValueError(f"ft option 'schemes' forces {forced!r} on {qualname!r}, a {kind} "
                             f"site; valid there: {SCHEMES_FOR_KIND[kind]}")
        return Decision(forced, f"forced by options['schemes'] for {qualname!r}")

    if cost.flops < config.min_flops:
        return Decision("none", f"{cost.flops:.0f} FLOPs < min_flops {config.min_flops:.0f}: "
                                "protection would cost more than the op")
    if kind == "attention":
        return Decision("efta", "attention: fused end-to-end fault-tolerant flash attention")
    cmr = spec.cmr(dtype)
    if cost.intensity < cmr and spec.device_class == "gpu" and cost.rows > THREAD_MAX_ROWS_GPU:
        return Decision("global", f"intensity {cost.intensity:.1f} < CMR {cmr:.0f} ({spec.name}), but "
                                  f"{cost.rows} rows of x > {THREAD_MAX_ROWS_GPU}: the thread scheme's GPU "
                                  "kernels run slower than global past that")
    if cost.intensity < cmr:
        return Decision("thread", f"intensity {cost.intensity:.1f} < CMR {cmr:.0f} ({spec.name}): "
                                  "bandwidth-bound, thread-level ABFT adds no memory traffic")
    return Decision("global", f"intensity {cost.intensity:.1f} >= CMR {cmr:.0f} ({spec.name}): "
                              "compute-bound, global ABFT with offline weight checksums")

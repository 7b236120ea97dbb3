"""What runs a protected site on the compile's target, said at compile time from the graph's fake
tensors: a CUDA kernel, or the reference op (correct, protected, slower, and refused under CUDA-graph
capture). ``explain`` shows it per site (``SiteRecord.runs``), with the reason where it is the
reference. The checks are the kernels' own support checks less what needs a device or the data
(cuda_attention.call_reason, cuda_gemm.call_reason)."""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ..hardware import DeviceSpec
from ..report import RUNS_KERNEL as KERNEL, RUNS_REFERENCE as REFERENCE, RUNS_UNKNOWN as UNKNOWN
from . import cuda_attention, cuda_gemm
from .cuda import KERNEL_CAPABILITY


def _target_reason(spec: DeviceSpec) -> Optional[str]:
    if spec.device_class == "cpu":
        return "on the CPU"
    cc = spec.capability
    if cc is not None and tuple(cc) != KERNEL_CAPABILITY:
        return f"{spec.name} is sm_{cc[0]}{cc[1]}: the CUDA kernels are built for sm_90a"
    return None


def _verdict(spec: DeviceSpec, check) -> Tuple[str, Optional[str]]:
    why = _target_reason(spec)
    if why is None:
        try:
            why = check()
        except Exception as exc:  # e.g. a symbolic size the check cannot decide: say so, not a guess
            return UNKNOWN, f"the kernels' support check could not run on the graph's shapes ({exc})"
    return (REFERENCE, why) if why is not None else (KERNEL, None)


def attention(spec: DeviceSpec, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              attn_mask: Optional[torch.Tensor], scale, enable_gqa: bool) -> Tuple[str, Optional[str]]:
    """(runs, note): KERNEL with the notes of a decode shape (the split-KV kernel) and of zero-padded
    heads, if any, or REFERENCE and why."""
    scale = scale if isinstance(scale, (int, float)) else None  # a graph value: checked per call
    runs, why = _verdict(spec, lambda: cuda_attention.call_reason(q, k, v, attn_mask, scale, enable_gqa))
    if runs != KERNEL:
        return runs, why
    notes = []
    if all(isinstance(n, int) for n in (*q.shape, *k.shape)):  # (a symbolic size: decided per call)
        shape = cuda_attention.decode_shape(q, k)
        rows = shape[3] * (shape[1] // shape[2])
        if cuda_attention.decode_preferred(*shape[1:]):
            notes.append(f"{rows} query row(s) per KV head: the split-KV decode kernel")
    if all(isinstance(t.shape[-1], int) for t in (q, v)):
        notes.append(cuda_attention.padding_note(q.shape[-1], v.shape[-1]))
    return runs, "; ".join(n for n in notes if n) or None


def linear(spec: DeviceSpec, x: torch.Tensor, weight_nk: torch.Tensor,
           bias: Optional[torch.Tensor]) -> Tuple[str, Optional[str]]:
    """(runs, why) of a linear site: its weight as [N, K] (or [B, N, K])."""
    return _verdict(spec, lambda: cuda_gemm.call_reason(x, weight_nk, bias))


def gemm_note(spec: DeviceSpec, scheme: str, x: torch.Tensor, n: int, k: int, wb: int = 1,
              allowed: Tuple[int, ...] = cuda_gemm.GLOBAL_BNS) -> Optional[str]:
    """The GEMM kernel's configuration for a call of x on a [wb,] n x k weight on the target
    (cuda_gemm.kernel_note), where the target's SM count is known and the shapes are concrete."""
    if not spec.sms or not all(isinstance(d, int) for d in (*x.shape, n, k, wb)) or x.numel() == 0:
        return None  # (a symbolic size: the launcher decides per call)
    return cuda_gemm.kernel_note(scheme, x.numel() // (wb * k), n, k, wb, spec.sms, allowed)

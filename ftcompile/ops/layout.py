"""Output rows padded to 16 bytes: the layout ``linear_global(..., pad_rows=True)`` returns.

Where N x itemsize is not a multiple of 16 (GPT-2's LM head: N = 50257), no row of a contiguous
output starts on a 16-byte boundary and the GEMM's epilogue cannot store whole 16-byte chunks:
the global kernel took 0.96 ms for GPT-2's logits against 0.60 ms with every row aligned
(benchmarks/NOTES.md, run 28c). Inductor pads such outputs the same way ("comprehensive
padding"); the linear pass asks for it only where nothing in the graph depends on the output's
strides (passes/linear.py).
"""
from __future__ import annotations

import math
from typing import Sequence, Tuple

import torch


def padded_row_stride(n: int, dtype: torch.dtype) -> int:
    """N rounded up to whole 16-byte chunks of ``dtype``."""
    per_chunk = max(1, 16 // dtype.itemsize)
    return -(-n // per_chunk) * per_chunk


def needs_padding(n: int, dtype: torch.dtype) -> bool:
    return padded_row_stride(n, dtype) != n


def row_strides(shape: Sequence[int], ld: int) -> Tuple[int, ...]:
    """Strides of ``shape`` whose rows (the last dimension) lie ``ld`` elements apart."""
    strides = [1] * len(shape)
    if len(shape) > 1:
        strides[-2] = ld
        for d in range(len(shape) - 3, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


def empty_rows(shape: Sequence[int], ld: int, dtype: torch.dtype, device) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` with rows ``ld`` apart, storage for every row's padding
    included (the kernel stores whole 16-byte chunks, the last row's too). Not a view: it owns
    its storage, as a custom op's output must."""
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    storage = torch.empty(rows * ld, dtype=dtype, device=device).untyped_storage()
    return torch.empty(0, dtype=dtype, device=device).set_(storage, 0, tuple(shape), row_strides(shape, ld))


def with_row_stride(y: torch.Tensor, ld) -> torch.Tensor:
    """y itself where ld is None, else a copy of y with rows ``ld`` apart (a path whose kernel
    writes only contiguous rows: the reference ops, the thread-scheme kernels)."""
    return y if ld is None else empty_rows(y.shape, ld, y.dtype, y.device).copy_(y)


def fake_rows(like: torch.Tensor, shape: Sequence[int], ld: int) -> torch.Tensor:
    """The fake impl's counterpart of :func:`empty_rows` (sizes and strides; no storage)."""
    return like.new_empty_strided(tuple(shape), row_strides(shape, ld))


def heads_last_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    """Strides of an attention output [B, H, S, D] laid out as [B, S, H, D] in memory (as cuDNN's
    SDPA returns it), so that the model's transpose(1, 2) back to [B, S, H, D] is contiguous and
    its reshape to [B, S, H * D] needs no copy."""
    b, h, s, d = shape
    return (s * h * d, d, h * d, 1)


def empty_heads_last(shape: Sequence[int], dtype: torch.dtype, device) -> torch.Tensor:
    return torch.empty_strided(tuple(shape), heads_last_strides(shape), dtype=dtype, device=device)

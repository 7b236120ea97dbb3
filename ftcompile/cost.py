"""FLOPs, bytes and arithmetic intensity of a matched site, from the graph's fake tensors.

Sizes may be SymInts under dynamic shapes: the formulas stay symbolic and only the final numbers
are read with ``optimization_hint`` (a hint, not a guard), so costing never specialises a graph.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Tuple

import torch
try:
    from torch.fx.experimental.symbolic_shapes import optimization_hint
except ImportError:  # torch < 2.13
    optimization_hint = None


def hint(x) -> int:
    """A concrete value for a size that may be symbolic, without adding a guard."""
    if isinstance(x, int):
        return x
    if optimization_hint is not None:
        return int(optimization_hint(x, fallback=8192))
    node = x.node  # older torch: the SymNode's example value, read without guarding
    return int(node.hint) if node.hint is not None else 8192


def numel(shape: Sequence) -> int:
    return math.prod(hint(s) for s in shape)


@dataclass(frozen=True)
class Cost:
    flops: float
    bytes: float
    dynamic: bool = False  # some size was symbolic: numbers are for the hinted sizes
    rows: int = 0  # a linear's rows of x per weight (M; 0 for other sites)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


def _is_symbolic(*shapes) -> bool:
    return any(not isinstance(s, int) for shape in shapes for s in shape)


def linear_dims(x_shape: Sequence, w_shape: Sequence) -> Tuple[int, int, int, int]:
    """(M, N, K, weight batch) of y = x @ W^T with x [..., K] and W [N, K] (or a batch of such
    W): M rows of x per weight, sizes hinted."""
    k = hint(x_shape[-1])
    n = hint(w_shape[-2])
    wbatch = numel(w_shape[:-2])
    m = numel(x_shape[:-1]) // max(wbatch, 1)
    return m, n, k, wbatch


def linear_cost(x_shape: Sequence, w_shape: Sequence, dtype: torch.dtype) -> Cost:
    """y = x @ W^T with x [..., K] and W [N, K] (or a batch of such W): 2MNK FLOPs and
    elsize * (MK + KN + MN) bytes, each operand read once and the output written once."""
    m, n, k, wbatch = linear_dims(x_shape, w_shape)
    es = torch.empty((), dtype=dtype).element_size()
    flops = 2.0 * wbatch * m * n * k
    nbytes = es * wbatch * (m * k + k * n + m * n)
    return Cost(flops, float(nbytes), _is_symbolic(x_shape, w_shape), rows=m)


def attention_cost(q_shape: Sequence, k_shape: Sequence, v_shape: Sequence, dtype: torch.dtype,
                   mask_numel: int = 0, mask_elsize: int = 0) -> Cost:
    """4·B·H·Sq·Sk·D FLOPs (QK^T and PV); bytes: q, k, v read once, o written once, plus a mask."""
    *batch, sq, d = (hint(s) for s in q_shape)
    sk = hint(k_shape[-2])
    dv = hint(v_shape[-1])
    bh = math.prod(batch)
    flops = 2.0 * bh * sq * sk * d + 2.0 * bh * sq * sk * dv
    es = torch.empty((), dtype=dtype).element_size()
    nbytes = es * (numel(q_shape) + numel(k_shape) + numel(v_shape) + bh * sq * dv)
    nbytes += mask_numel * mask_elsize
    return Cost(flops, float(nbytes), _is_symbolic(q_shape, k_shape, v_shape))

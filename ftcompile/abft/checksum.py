"""Checksum algebra shared by every protected op: residuals, detection, single-fault location.

A *group* is the set of L output elements one check covers: a whole output row (global ABFT),
or the elements j, j+s, j+2s, ... of a tile row (strided tensor checksums, stride s = 8). Each
group has two checksums computed along the GEMM path: c1 = sum_l y_l and c2 = sum_l (l+1) y_l.
Residuals D = (sums of the computed y) - (checksums). A single fault of size delta at position
l gives D1 ~ delta and D2 ~ (l+1) delta, so l = D2/D1 - 1.
"""
from __future__ import annotations

from typing import Tuple

import torch

STRIDE = 8  # elements of a tile row that one thread holds in an m16n8k16 MMA layout


def position_weights(length: int, device=None) -> torch.Tensor:
    return torch.arange(1, length + 1, dtype=torch.float32, device=device)


def encode(b_groups: torch.Tensor) -> torch.Tensor:
    """Checksums of operand groups: b_groups [..., L, K] -> [..., 2, K] (plain, weighted)."""
    w = position_weights(b_groups.shape[-2], b_groups.device)
    b = b_groups.float()
    return torch.stack([b.sum(-2), (b * w[:, None]).sum(-2)], -2)


def residuals(groups: torch.Tensor, checks: torch.Tensor) -> torch.Tensor:
    """groups [..., G, L] (fp32), checks [..., G, 2] -> D [..., G, 2]."""
    w = position_weights(groups.shape[-1], groups.device)
    sums = torch.stack([groups.sum(-1), (groups * w).sum(-1)], -1)
    return sums - checks


def exceeds(d1: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """|d1| > threshold, with NaN counted as exceeding (NaN > T is False: never use it)."""
    return ~(d1.abs() <= threshold)


def locate(groups: torch.Tensor, d: torch.Tensor, threshold: torch.Tensor
           ) -> Tuple[torch.Tensor, torch.Tensor]:
    """(detected [..., G] bool, position [..., G] long, -1 where no single fault explains D).

    A group holding exactly one non-finite element is located at that element (the weighted
    ratio is NaN there). Otherwise the ratio D2/D1 must be close to an integer in [1, L]; a
    wrong guess is caught by the caller's recheck after correction."""
    detected = exceeds(d[..., 0], threshold)
    length = groups.shape[-1]
    ratio = d[..., 1] / d[..., 0]
    nearest = ratio.round()
    ok = torch.isfinite(ratio) & ((ratio - nearest).abs() < 0.3) & (nearest >= 1) & (nearest <= length)
    pos = torch.where(ok, nearest - 1, torch.full_like(nearest, -1)).long()

    bad = ~torch.isfinite(groups)
    single_bad = bad.sum(-1) == 1
    pos = torch.where(single_bad, bad.float().argmax(-1), pos)
    pos = torch.where(bad.sum(-1) > 1, torch.full_like(pos, -1), pos)
    return detected, torch.where(detected, pos, torch.full_like(pos, -1))

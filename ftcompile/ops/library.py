"""The protected ops (namespace ``ftcompile``), their fake impls and the reference dispatch.

  ftcompile::linear_global(x, weight, bias, site) -> y     global ABFT, offline W checksums
  ftcompile::linear_thread(x, weight, bias, site) -> y     one-sided thread-level strided ABFT
    (both also take transposed=False and pad_rows=False: y's rows 16 bytes aligned, ops/layout.py)
  ftcompile::linear_group(x, weights, biases, site) -> y   sibling linears over one x as one
                                                            global-ABFT GEMM: their outputs side by side
  ftcompile::attention(q, k, v, attn_mask, is_causal, scale, enable_gqa, site) -> o   EFTA
    (also heads_last=False: o [B, H, S, D] in [B, S, H, D] memory)

``weight`` is [N, K] (or a batch [B, N, K] for bmm-style products) with any strides: y = x W^T + b.
``site`` is an id from :func:`ftcompile.telemetry.register`; it selects the policy, the threshold
parameters and the counter row. Outputs are fresh tensors in the input dtype, contiguous except
with ``pad_rows=True``, where a row whose byte length is not a multiple of 16 is followed by
padding up to the next 16 bytes (:func:`ftcompile.ops.layout.padded_row_stride`), and with
``heads_last=True`` (:func:`ftcompile.ops.layout.heads_last_strides`). The passes ask for these
layouts only where nothing in the graph depends on the output's strides.

Every device runs the reference algorithm (ftcompile.abft) unless a CUDA kernel is registered
for the op in :mod:`ftcompile.ops.cuda` and accepts the call. A kernel's call may leave a launch
plan that later calls with the same signature replay (:mod:`ftcompile.ops.replay`).
"""
from __future__ import annotations

from typing import List, Optional

import torch
from torch import Tensor

from .. import cudagraphs, telemetry
from ..abft import efta, gemm
from ..selection import SUPPORTED_DTYPES
from . import cuda, layout

NEEDS_CONTIGUOUS = (torch.Tag.needs_contiguous_strides,)
_NO_KERNEL = "no CUDA kernel takes this call; ftcompile.explain says why"


def _record(site_id: int, device: torch.device, outcome: gemm.Outcome, site: telemetry.Site) -> None:
    telemetry.bump(site_id, device, checks=1, detected=outcome.detected,
                   corrected=outcome.corrected, uncorrectable=outcome.uncorrectable,
                   nonfinite_inputs=outcome.nonfinite_inputs)
    if site.policy == "raise" and bool(outcome.detected):
        raise telemetry.FaultDetected(site.name)


def _site_kwargs(site: telemetry.Site) -> dict:
    return dict(site_name=site.name, site_id=site.id, policy=site.policy, c_sigma=site.c_sigma,
                e_max_safety=site.e_max_safety)


def _weight_nk(weight: Tensor, transposed: bool) -> Tensor:
    """W as [N, K]: a graph hands a Conv1D / x @ W parameter over as it is ([K, N]) so that the
    op's caches key on the parameter itself, never on a copy inductor may recycle."""
    return weight.transpose(-2, -1) if transposed else weight


def _check_linear_args(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> None:
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"ftcompile linear: unsupported dtype {x.dtype} (fp32, fp16, bf16)")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise TypeError(f"ftcompile linear: x, weight and bias must share a dtype, got "
                        f"{x.dtype}, {weight.dtype}, {None if bias is None else bias.dtype}")
    if weight.dim() not in (2, 3):
        raise ValueError(f"ftcompile linear: weight must be [N, K] or [B, N, K], got {tuple(weight.shape)}")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[-2]):
        raise ValueError(f"ftcompile linear: bias must be [N={weight.shape[-2]}], got {tuple(bias.shape)}")


def _row_stride(x: Tensor, weight: Tensor, pad_rows: bool) -> Optional[int]:
    """y's padded row stride where pad_rows asks for one and N's rows are not 16-byte aligned."""
    n = weight.shape[-2]
    ld = layout.padded_row_stride(n, x.dtype)
    return ld if pad_rows and ld != n else None


def _linear(scheme: str, x: Tensor, weight: Tensor, bias: Optional[Tensor], site_id: int,
            transposed: bool, pad_rows: bool) -> Tensor:
    weight = _weight_nk(weight, transposed)
    _check_linear_args(x, weight, bias)
    ldy = _row_stride(x, weight, pad_rows)
    y = cuda.replay(scheme, x, weight, bias, site_id, ldy)  # a launch plan of an earlier call
    if y is not None:
        return y
    site = telemetry.site(site_id)
    kernel = cuda.kernel_for(scheme, x, weight, bias, static_weight=site.static_weight)
    cudagraphs.check_site(site_id, site.name, site.policy, None if kernel is not None else _NO_KERNEL)
    if kernel is not None:
        return kernel(x, weight, bias, site, ldy=ldy)
    reference = gemm.linear_global if scheme == "linear_global" else gemm.linear_thread
    with torch.no_grad():
        y, outcome = reference(x, weight, bias, static_weight=site.static_weight,
                               **_site_kwargs(site))
    _record(site_id, x.device, outcome, site)
    return layout.with_row_stride(y, ldy)


def _linear_global(x: Tensor, weight: Tensor, bias: Optional[Tensor], site: int,
                   transposed: bool = False, pad_rows: bool = False) -> Tensor:
    return _linear("linear_global", x, weight, bias, site, transposed, pad_rows)


def _linear_thread(x: Tensor, weight: Tensor, bias: Optional[Tensor], site: int,
                   transposed: bool = False, pad_rows: bool = False) -> Tensor:
    return _linear("linear_thread", x, weight, bias, site, transposed, pad_rows)


linear_global = torch.library.custom_op("ftcompile::linear_global", _linear_global, mutates_args=(),
                                        tags=NEEDS_CONTIGUOUS)
linear_thread = torch.library.custom_op("ftcompile::linear_thread", _linear_thread, mutates_args=(),
                                        tags=NEEDS_CONTIGUOUS)


def _linear_fake(x, weight, bias, site, transposed=False, pad_rows=False):
    weight = _weight_nk(weight, transposed)
    shape = (*x.shape[:-1], weight.shape[-2])
    ldy = _row_stride(x, weight, pad_rows)
    return x.new_empty(shape) if ldy is None else layout.fake_rows(x, shape, ldy)


linear_global.register_fake(_linear_fake)
linear_thread.register_fake(_linear_fake)


def _linear_group(x: Tensor, weights: List[Tensor], biases: List[Tensor], site: int) -> Tensor:
    """y = x [W_0; W_1; ...]^T (+ [b_0; b_1; ...]): sibling linears over one x (a layer's q/k/v,
    an MLP's gate/up) as one global-ABFT GEMM, checked per output row over all members; weights
    [N_j, K], biases one per weight or none. The CUDA kernel reads each weight where it is; the
    reference joins them per call (passes/linear_group.py says which layers form groups)."""
    y = cuda.replay("linear_group", x, weights, biases, site)  # a launch plan of an earlier call
    if y is not None:
        return y
    if len(weights) < 2 or (biases and len(biases) != len(weights)):
        raise ValueError(f"ftcompile linear_group: 2 or more weights and a bias for each or none, got "
                         f"{len(weights)} weights and {len(biases)} biases")
    for i, w in enumerate(weights):
        _check_linear_args(x, w, biases[i] if biases else None)
        if w.dim() != 2 or w.shape[-1] != weights[0].shape[-1]:
            raise ValueError(f"ftcompile linear_group: weights must be [N, K] with one K, got "
                             f"{[tuple(w.shape) for w in weights]}")
    site_ = telemetry.site(site)
    kernel = cuda.kernel_for("linear_group", x, weights, biases, static_weight=site_.static_weight)
    cudagraphs.check_site(site, site_.name, site_.policy, None if kernel is not None else _NO_KERNEL)
    if kernel is not None:
        return kernel(x, weights, biases, site_)
    with torch.no_grad():  # the joined copy is the call's own: nothing to cache on it
        y, outcome = gemm.linear_global(x, torch.cat(weights), torch.cat(biases) if biases else None,
                                        static_weight=False, **_site_kwargs(site_))
    _record(site, x.device, outcome, site_)
    return y


linear_group = torch.library.custom_op("ftcompile::linear_group", _linear_group, mutates_args=(),
                                       tags=NEEDS_CONTIGUOUS)


@linear_group.register_fake
def _linear_group_fake(x, weights, biases, site):
    return x.new_empty(*x.shape[:-1], sum(w.shape[-2] for w in weights))


# No stride tag: the kernels take q, k, v as strided views (a head-split projection's transpose, as
# HF models hand them over; the CUDA launcher copies only a layout TMA cannot describe), so inductor
# need not copy them first (GPT-2: 36 copies per forward).
def _attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor], is_causal: bool,
              scale: Optional[float], enable_gqa: bool, site: int, heads_last: bool = False) -> Tensor:
    """EFTA. ``heads_last`` (4-D q): the output [B, H, S, Dv] lies in memory as [B, S, H, Dv]
    (ops/layout.py), for a model that transposes it back (the attention passes ask for it)."""
    out = cuda.replay("attention", q, k, v, attn_mask, is_causal, scale, enable_gqa, site, heads_last)
    if out is not None:  # a launch plan of an earlier call
        return out
    if q.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"ftcompile attention: unsupported dtype {q.dtype} (fp32, fp16, bf16)")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError("ftcompile attention: q, k and v must share a dtype")
    if q.dim() < 2 or k.shape[-1] != q.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"ftcompile attention: incompatible shapes q{tuple(q.shape)} "
                         f"k{tuple(k.shape)} v{tuple(v.shape)}")
    if heads_last and q.dim() != 4:
        raise ValueError(f"ftcompile attention: heads_last needs q as [B, H, S, D], got {tuple(q.shape)}")
    s = telemetry.site(site)
    kernel = cuda.kernel_for("attention", q, k, v, attn_mask=attn_mask, scale=scale, enable_gqa=enable_gqa)
    cudagraphs.check_site(site, s.name, s.policy, None if kernel is not None else _NO_KERNEL)
    if kernel is not None:
        return kernel(q, k, v, attn_mask, is_causal, scale, enable_gqa, s, heads_last=heads_last)
    with torch.no_grad():
        out, outcome = efta.attention(q, k, v, attn_mask, is_causal, scale, enable_gqa,
                                      **_site_kwargs(s))
    _record(site, q.device, outcome, s)
    return layout.empty_heads_last(out.shape, out.dtype, out.device).copy_(out) if heads_last else out


attention = torch.library.custom_op("ftcompile::attention", _attention, mutates_args=())


@attention.register_fake
def _attention_fake(q, k, v, attn_mask, is_causal, scale, enable_gqa, site, heads_last=False):
    shape = (*q.shape[:-1], v.shape[-1])
    return q.new_empty_strided(shape, layout.heads_last_strides(shape)) if heads_last else q.new_empty(shape)


# Each op's body and fake, for the inference-only twins (ops/inference.py).
BODIES = {"linear_global": (_linear_global, _linear_fake), "linear_thread": (_linear_thread, _linear_fake),
          "linear_group": (_linear_group, _linear_group_fake), "attention": (_attention, _attention_fake)}


# Autograd: the forward is protected; the backward is the plain (unprotected) derivative, so a
# model compiled in training mode still trains. Inference is what the ABFT schemes target.
def _linear_setup(ctx, inputs, output):
    x, weight, bias, _, transposed, _ = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias, ctx.transposed = bias is not None, transposed


def _linear_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    weight = _weight_nk(weight, ctx.transposed)
    if weight.dim() == 2:
        gx = grad @ weight
        gw = grad.reshape(-1, grad.shape[-1]).transpose(0, 1) @ x.reshape(-1, x.shape[-1])
    else:
        gx = (grad.reshape(weight.shape[0], -1, grad.shape[-1]) @ weight).reshape(x.shape)
        gw = grad.reshape(weight.shape[0], -1, grad.shape[-1]).transpose(1, 2) @ x.reshape(
            weight.shape[0], -1, x.shape[-1])
    gb = grad.reshape(-1, grad.shape[-1]).sum(0) if ctx.has_bias else None
    return gx, _weight_nk(gw, ctx.transposed), gb, None, None, None


for _op in (linear_global, linear_thread):
    _op.register_autograd(_linear_backward, setup_context=_linear_setup)


def _group_setup(ctx, inputs, output):
    x, weights, biases, _ = inputs
    ctx.save_for_backward(x, *weights)
    ctx.has_bias = bool(biases)


def _group_backward(ctx, grad):
    x, *weights = ctx.saved_tensors
    grads = grad.split([w.shape[0] for w in weights], -1)
    x2 = x.reshape(-1, x.shape[-1])
    gx = sum(g @ w for g, w in zip(grads, weights))
    gws = [g.reshape(-1, g.shape[-1]).transpose(0, 1) @ x2 for g in grads]
    gbs = [g.reshape(-1, g.shape[-1]).sum(0) for g in grads] if ctx.has_bias else []
    return gx, gws, gbs, None


linear_group.register_autograd(_group_backward, setup_context=_group_setup)


def _attention_setup(ctx, inputs, output):
    q, k, v, attn_mask, is_causal, scale, enable_gqa, _, _ = inputs
    ctx.save_for_backward(q, k, v, attn_mask)  # a None mask is saved (and given back) as None
    ctx.is_causal, ctx.scale, ctx.enable_gqa = is_causal, scale, enable_gqa


def _attention_backward(ctx, grad):
    q, k, v, mask = ctx.saved_tensors
    causal = ctx.is_causal
    if causal and mask is not None:  # the op takes both (keys kept by both); SDPA takes one
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        mask = mask & keep if mask.dtype == torch.bool else mask.masked_fill(~keep, float("-inf"))
        causal = False
    with torch.enable_grad():
        qd, kd, vd = (t.detach().requires_grad_() for t in (q, k, v))
        out = torch.nn.functional.scaled_dot_product_attention(
            qd, kd, vd, attn_mask=mask, is_causal=causal,
            scale=ctx.scale, enable_gqa=ctx.enable_gqa)
        gq, gk, gv = torch.autograd.grad(out, (qd, kd, vd), grad)
    return gq, gk, gv, None, None, None, None, None, None


attention.register_autograd(_attention_backward, setup_context=_attention_setup)

"""Linear layers -> ftcompile.linear_global / linear_thread (chosen by intensity vs CMR).

Matched: torch._C._nn.linear / F.linear (nn.Linear), torch.addmm(b, x, W) (HF Conv1D),
matmul / mm / bmm / @ with a weight parameter on the right (x @ W, x @ W[b]). The op takes the
weight as [N, K] (or [B, N, K]); for x @ W it takes W as it is with ``transposed=True``, so the
op sees the parameter itself (caches key on it; inductor never copies it into a scratch buffer).
Global-scheme nn.Linear layers reading the same x become one GEMM (passes/linear_group.py; the
``group_linears`` option). A global-scheme linear whose output only leaves the graph (an LM
head's logits) and whose rows are not 16-byte aligned gets them padded (``pad_rows``,
ftcompile/ops/layout.py): nothing in the graph reads its strides.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch.fx import GraphModule, Node

from ftcompile.cost import hint, linear_cost
from ftcompile.ops import layout, support

from . import linear_group
from .common import (LINEARS, MATMUL_METHODS, MATMULS, PassContext, arg, counters, decide, fake,
                     is_call, is_parameter, mark, module_path, note_gemm_kernel, note_runs, parameter_path,
                     register_site, replace, restride, scalar, shape_str)

OPS = {"global": torch.ops.ftcompile.linear_global.default,
       "thread": torch.ops.ftcompile.linear_thread.default}


def _site_name(ctx: PassContext, node: Node, weight: Node, layer_call: bool) -> str:
    """The calling module for nn.Linear / Conv1D (a tied lm_head is "lm_head", not the
    embedding it shares a weight with); the parameter's name for a bare x @ W."""
    if layer_call and module_path(node):
        return ctx.unique(module_path(node))
    path = parameter_path(weight)
    if path and path.split(".")[-1] == "weight":  # name the layer, not its parameter
        path = path[: -len("weight")].rstrip(".") or module_path(node) or "<root>"
    return ctx.unique(path or module_path(node) or node.name)


def _blocker(fx: torch.Tensor, fw_nk: torch.Tensor, fb: Optional[torch.Tensor]) -> Optional[str]:
    if fx.dtype != fw_nk.dtype or (fb is not None and fb.dtype != fx.dtype):
        return f"mixed dtypes (x {fx.dtype}, weight {fw_nk.dtype})"
    if fw_nk.dim() == 3 and (fx.dim() != 3 or fx.shape[0] != fw_nk.shape[0]):
        return "a batched weight needs x as [B, M, K] with the same batch"
    if fw_nk.dim() not in (2, 3):
        return f"weight of rank {fw_nk.dim()} is not supported"
    if fb is not None and (fb.dim() != 1 or fb.shape[0] != fw_nk.shape[-2]):
        return "the added term is not a bias vector of length N"
    return None


def _pad_rows(node: Node, n, dtype: torch.dtype) -> bool:
    """Pad y's rows to 16 bytes where N leaves them unaligned and only the graph's output reads y
    (an op in the graph could depend on y's strides, e.g. a view that merges rows)."""
    return (isinstance(n, int) and layout.needs_padding(n, dtype) and bool(node.users)
            and all(u.op == "output" for u in node.users))


def _replace_global(gm: GraphModule, node: Node, args: tuple, n, dtype: torch.dtype, record) -> None:
    """linear_global in node's place, with padded rows where _pad_rows allows (meta to match)."""
    pad = _pad_rows(node, n, dtype)
    if pad:
        ld = layout.padded_row_stride(n, dtype)
        record.reason += f"; output rows padded to {ld} columns (16-byte aligned stores)"
    new = replace(gm, node, OPS["global"], (*args, pad) if pad else args, dead=())
    if pad:
        restride(new, lambda shape: layout.row_strides(shape, ld))
        counters["linear_padded_rows"] += 1


def _profile(record, fx, fw_nk, has_bias: bool, ctx: PassContext) -> None:
    """selection="profile": time both schemes on this site's shapes and keep the faster."""
    from ftcompile import profiling

    scheme, times = profiling.choose(tuple(hint(s) for s in fx.shape),
                                     tuple(hint(s) for s in fw_nk.shape), has_bias, fx.dtype,
                                     ctx.device)
    base = times["unprotected"]
    record.measured = dict(times)  # a copy: profiling caches ``times``
    record.scheme = scheme
    record.reason = (f"profiled on {ctx.device}: global {100 * (times['global'] / base - 1):+.0f}%, "
                     f"thread {100 * (times['thread'] / base - 1):+.0f}% over unprotected "
                     f"({base:.3f} ms) -> {scheme}")


def run(gm: GraphModule, ctx: PassContext) -> GraphModule:
    candidates = []  # global-scheme nn.Linear layers over parameters: they may form groups
    for node in list(gm.graph.nodes):
        if node.meta.get("ft_seen"):
            continue
        if is_call(node, LINEARS):
            x, w, b = node.args[0], node.args[1], arg(node, 2, "bias")
            op, transposed = "linear", False
        elif is_call(node, (torch.addmm,)):
            b, x, w = node.args[:3]
            if scalar(arg(node, 3, "beta", 1)) != 1 or scalar(arg(node, 4, "alpha", 1)) != 1:
                continue  # a scaled addmm is not a linear layer; the leftover report lists it
            op, transposed = "addmm", True
        elif is_call(node, MATMULS, MATMUL_METHODS) and is_parameter(node.args[1], ctx):
            x, w, b = node.args[0], node.args[1], None
            op, transposed = getattr(node.target, "__name__", str(node.target)), True
        else:
            continue
        mark(node)
        fx, fw, fb = fake(x), fake(w), fake(b)
        if fx is None or fw is None:
            continue
        fw_nk = fw.transpose(-2, -1) if transposed else fw
        name = _site_name(ctx, node, w, layer_call=op in ("linear", "addmm"))
        cost = linear_cost(fx.shape, fw_nk.shape, fx.dtype)
        record = decide(ctx, "linear", op, name, fx.dtype, cost, shape_str(fx, fw_nk),
                        _blocker(fx, fw_nk, fb))
        if record.scheme not in OPS:
            continue
        note_runs(ctx, record, support.linear(ctx.spec, fx, fw_nk, fb))
        if ctx.config.selection == "profile" and ctx.config.override_for(name) is None:
            _profile(record, fx, fw_nk, fb is not None, ctx)
        static = is_parameter(w, ctx) and (b is None or is_parameter(b, ctx))
        if (ctx.config.group_linears and record.scheme == "global" and op == "linear" and static
                and fw_nk.dim() == 2):
            candidates.append(linear_group.Candidate(node, x, w, b, record, int(fw_nk.shape[0])))
            continue
        wb = fw_nk.shape[0] if fw_nk.dim() == 3 else 1
        note_gemm_kernel(ctx, record, fx, fw_nk.shape[-2], fw_nk.shape[-1], wb)
        site = register_site(ctx, record, static_weight=is_parameter(w, ctx))
        if record.scheme == "global":
            _replace_global(gm, node, (x, w, b, site, transposed), fw_nk.shape[-2], fx.dtype, record)
        else:
            replace(gm, node, OPS[record.scheme], (x, w, b, site, transposed), dead=())
        counters[f"linear_{record.scheme}"] += 1
    grouped = set()
    for members in linear_group.plan(candidates):
        linear_group.rewrite(gm, ctx, members)
        grouped.update(c.node for c in members)
        counters["linear_group"] += 1
        counters["linear_global"] += len(members)
    for c in candidates:
        if c.node not in grouped:
            fx = fake(c.x)
            note_gemm_kernel(ctx, c.record, fx, c.n, fx.shape[-1])
            site = register_site(ctx, c.record, static_weight=True)
            _replace_global(gm, c.node, (c.x, c.w, c.b, site, False), c.n, fx.dtype, c.record)
            counters["linear_global"] += 1
    return gm

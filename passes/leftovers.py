"""Report every matrix product the other passes did not protect, so explain hides nothing."""
from __future__ import annotations

import torch
from torch.fx import GraphModule

from ftcompile.cost import Cost, hint
from ftcompile.report import SiteRecord

from .common import (LINEARS, MATMUL_METHODS, MATMULS, SDPA, PassContext, fake, is_call,
                     module_path, shape_str)

PRODUCTS = MATMULS | LINEARS | SDPA | {torch.addmm, torch.baddbmm, torch.einsum, torch.addbmm}
METHODS = MATMUL_METHODS | {"addmm", "baddbmm"}


def run(gm: GraphModule, ctx: PassContext) -> GraphModule:
    for node in gm.graph.nodes:
        if node.meta.get("ft_seen") or not is_call(node, PRODUCTS, METHODS):
            continue
        operands = [fake(a) for a in node.args if fake(a) is not None]
        out = fake(node)
        if out is None or not operands:
            continue
        a = operands[0]
        k = hint(a.shape[-1]) if a.dim() else 1
        flops = 2.0 * k * hint(out.numel())
        nbytes = float(sum(hint(t.numel()) * t.element_size() for t in operands)
                       + hint(out.numel()) * out.element_size())
        name = ctx.unique(module_path(node) or node.name)
        if k == 1:
            reason = ("an outer product (K = 1, e.g. rotary position frequencies): one multiply "
                      "per output, no accumulation for a checksum to protect")
        elif flops < ctx.config.min_flops:
            reason = (f"{flops:.0f} FLOPs < min_flops {ctx.config.min_flops:.0f}: a product this "
                      "small is not worth protecting")
        else:
            reason = ("not protected: a product of two activations outside a recognised attention "
                      "pattern (no weight to checksum offline)")
        ctx.records.append(SiteRecord(
            name=name, kind="matmul", op=getattr(node.target, "__name__", str(node.target)),
            shapes=shape_str(*operands), dtype=str(a.dtype).replace("torch.", ""), flops=flops,
            bytes=nbytes, intensity=Cost(flops, nbytes).intensity, cmr=None, scheme="none",
            reason=reason, graph=ctx.graph_index))
    return gm

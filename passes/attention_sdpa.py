"""F.scaled_dot_product_attention -> ftcompile.attention (EFTA).

K and V that a model expanded with HF's repeat_kv (grouped-query attention with a mask: HF's SDPA
path then repeats them) are handed to the op unrepeated with enable_gqa: no copy of each kv head
per query head, and the kernel's checksum prepass reads a quarter (Llama 32/8) of the keys.
"""
from __future__ import annotations

import torch
from torch.fx import GraphModule

from ftcompile.cost import attention_cost, numel

from .causal_mask import read_causal
from .common import PassContext, SDPA, arg, counters, decide, fake, is_call, mark, module_path
from .common import replace_attention, scalar, shape_str, unrepeat_kv


def run(gm: GraphModule, ctx: PassContext) -> GraphModule:
    for node in list(gm.graph.nodes):
        if not is_call(node, SDPA):
            continue
        mark(node)
        q, k, v = node.args[:3]
        mask = arg(node, 3, "attn_mask")
        dropout_p = arg(node, 4, "dropout_p", 0.0)
        is_causal = bool(arg(node, 5, "is_causal", False))
        scale = arg(node, 6, "scale")
        enable_gqa = bool(arg(node, 7, "enable_gqa", False))
        k, v, enable_gqa, unrepeated = unrepeat_kv(q, k, v, enable_gqa)
        fq, fk, fv, fm = fake(q), fake(k), fake(v), fake(mask)

        blocker = None
        if scalar(dropout_p) is None or scalar(dropout_p) != 0.0:
            blocker = f"dropout_p={dropout_p} (training-mode dropout) cannot be protected"
        elif scale is not None and scalar(scale) is None and not isinstance(scale, torch.fx.Node):
            blocker = f"softmax scale {scale!r} is not a number"
        elif not (fq.dtype == fk.dtype == fv.dtype):
            blocker = "q, k, v dtypes differ"
        elif mask is not None and fm is None:
            blocker = "attn_mask is not a tensor"

        # HF's causal mask, built from constants in the graph (alone or and-ed with a padding mask):
        # read as is_causal by our op
        causal = None if blocker is not None or is_causal else read_causal(mask, fq, fk)
        name = ctx.unique(module_path(node) or node.name)
        read = fm if causal is None else fake(causal.rest)
        cost = attention_cost(fq.shape, fk.shape, fv.shape, fq.dtype,
                              numel(read.shape) if read is not None else 0, read.element_size() if read is not None else 0)
        record = decide(ctx, "attention", "sdpa", name, fq.dtype, cost,
                        shape_str(fq, fk, fv) + (f" mask{shape_str(fm)}" if fm is not None else "")
                        + (" causal" if is_causal else ""), blocker)
        if record.scheme != "efta":
            continue
        replace_attention(gm, ctx, node, record, q, k, v, mask, is_causal, scale, enable_gqa, (), unrepeated,
                          causal=causal)
        counters["attention_sdpa"] += 1
    return gm

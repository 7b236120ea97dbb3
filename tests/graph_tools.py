"""Helpers for tests that look at the rewritten graph."""
import operator

import torch
import torch.nn.functional as F

from ftcompile.backend import ft_backend

UNPROTECTED = {torch.matmul, operator.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm,
               torch._C._nn.linear, F.linear, torch._C._nn.scaled_dot_product_attention,
               F.scaled_dot_product_attention, torch.einsum}
FT_OPS = {torch.ops.ftcompile.attention.default, torch.ops.ftcompile.linear_global.default,
          torch.ops.ftcompile.linear_thread.default, torch.ops.ftcompile.linear_group.default}


def compile_capture(model, *args, dynamic=None, **options):
    """Run model through backend="ft" (no inductor); return (output, rewritten graph modules)."""
    graphs = []

    def backend(gm, example_inputs):
        fn = ft_backend(gm, example_inputs, options={"eager": True, **options})
        graphs.append(gm)
        return fn

    with torch.no_grad():
        out = torch.compile(model, backend=backend, dynamic=dynamic)(*args)
    return out, graphs


def unprotected_products(graphs):
    return [n for gm in graphs for n in gm.graph.nodes
            if (n.op == "call_function" and n.target in UNPROTECTED)
            or (n.op == "call_method" and n.target in ("matmul", "mm", "bmm", "__matmul__"))]


def ft_ops(graphs):
    return [n.target for gm in graphs for n in gm.graph.nodes if n.target in FT_OPS]

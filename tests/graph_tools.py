"""Helpers for tests that look at the rewritten graph."""
import operator

import torch
import torch.nn.functional as F

from ftcompile.backend import ft_backend
from ftcompile.ops.inference import public

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


def ft_nodes(graphs, op=None):
    """The protected ops' nodes (of ``op`` only, if given); a graph compiled with grad disabled
    calls their inference-only twins (ftcompile/ops/inference.py), named here by the public op."""
    return [n for gm in graphs for n in gm.graph.nodes
            if public(n.target) in FT_OPS and (op is None or public(n.target) is op)]


def ft_ops(graphs):
    return [public(n.target) for n in ft_nodes(graphs)]

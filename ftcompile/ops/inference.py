"""Inference-only twins of the protected ops, for graphs compiled with grad disabled.

An op declared through ``torch.library.custom_op`` with an autograd formula runs a Python autograd
kernel on every call, grad mode or not (it saves nothing under no_grad, but it is still called and
redispatches): ~22 us of host time per call on a 2-core host against ~6 us for the same body
behind a ``Library``-defined op without an autograd kernel, whose C++ fallback only looks at the
grad mode (benchmarks/NOTES.md, "Session 43"). Replayed from a launch plan, a protected call's own
work is ~25 us, so that dispatch was a third of it.

The twins (namespace ``ftcompile_infer``) have the public ops' schemas, tags, bodies and fakes, and
no autograd kernel. The backend swaps them in when it compiles with grad disabled; Dynamo guards a
graph on the grad mode, so a call with grad enabled compiles again, with the public ops. ``explain``,
the passes and the telemetry see only the public ops.
"""
from __future__ import annotations

from typing import Dict

import torch
from torch._ops import OpOverload
from torch.fx import GraphModule

from . import library

NAMESPACE = "ftcompile_infer"
_lib = torch.library.Library(NAMESPACE, "DEF")


def _define(name: str, body, fake) -> OpOverload:
    public = getattr(torch.ops.ftcompile, name).default
    signature = str(public._schema).split("(", 1)[1]
    _lib.define(f"{name}({signature}", tags=tuple(public.tags))
    _lib.impl(name, body, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_lib)
    return getattr(getattr(torch.ops, NAMESPACE), name).default


# public op -> its twin, and back
TWINS: Dict[OpOverload, OpOverload] = {
    getattr(torch.ops.ftcompile, name).default: _define(name, body, fake)
    for name, (body, fake) in library.BODIES.items()}
PUBLIC: Dict[OpOverload, OpOverload] = {twin: op for op, twin in TWINS.items()}


def public(target):
    """The public op a graph node's target stands for (the target itself if it is no twin)."""
    return PUBLIC.get(target, target)


def swap_in(gm: GraphModule) -> int:
    """Point every protected op of the graph at its twin; returns how many. Only for a graph that
    runs with grad disabled: the twins have no autograd formula."""
    swapped = 0
    for node in gm.graph.nodes:
        twin = TWINS.get(node.target) if node.op == "call_function" else None
        if twin is not None:
            node.target = twin
            swapped += 1
    if swapped:
        gm.recompile()
    return swapped

"""The ``ft`` Dynamo backend: options -> passes -> inductor (or eager).

Registered through the ``torch_dynamo_backends`` entry point, so ``torch.compile(model,
backend="ft", options={...})`` works after ``pip install`` without importing ftcompile.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, List, Optional

import torch
from torch.fx import GraphModule

from . import hardware, ops, telemetry  # noqa: F401  (ops registers torch.ops.ftcompile.*)
from .abft import gemm
from .ops import inference
from .config import FTConfig
from .report import SiteRecord

# explain() listens here: every compile appends its records to each active collector.
_collectors: List[List[SiteRecord]] = []
_graph_counter = [0]


@contextlib.contextmanager
def collect():
    records: List[SiteRecord] = []
    _collectors.append(records)
    try:
        yield records
    finally:
        _collectors.remove(records)


def _device_of(example_inputs) -> Optional[torch.device]:
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            return value.device
    return None


def rewrite(gm: GraphModule, example_inputs, config: FTConfig) -> GraphModule:
    """Run every pass over the graph; returns the rewritten graph module."""
    from ftcompile.passes import PASSES, PassContext

    device = _device_of(example_inputs)
    spec = hardware.resolve(config.device, device)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = {n.name: v for n, v in zip(placeholders, example_inputs)}
    _graph_counter[0] += 1
    ctx = PassContext(config=config, spec=spec, graph_index=_graph_counter[0], values=values,
                      device=device or torch.device("cpu"))
    for _, run in PASSES:
        gm = run(gm, ctx)
        gm.graph.lint()
    gm.graph.eliminate_dead_code()
    gm.recompile()
    _prepare_weights(gm, values)
    for records in _collectors:
        records.extend(ctx.records)
    return gm


def _prepare_weights(gm: GraphModule, values) -> None:
    """Offline encoding: checksum every global-ABFT parameter now, at compile time (weights
    computed in the graph are encoded per call and never cached). Every linear site's parameters
    are registered as the owners of their storage (see gemm.register_owner)."""
    ft = torch.ops.ftcompile
    for node in gm.graph.nodes:
        if node.target is ft.linear_group.default:  # (its group's encoding is made at its first call)
            params = [*node.args[1], *node.args[2]]
        elif node.target in (ft.linear_global.default, ft.linear_thread.default):
            params = node.args[1:3]
        else:
            continue
        if not telemetry.site(node.args[3]).static_weight:
            continue
        for param in (_real_input(a, values) for a in params):
            if param is not None:
                gemm.register_owner(param)
        w = _real_input(node.args[1], values)
        if node.target is ft.linear_global.default and w is not None:
            gemm.weight_checksums(w.transpose(-2, -1) if node.args[4] else w)


def _real_input(node, values) -> Optional[torch.Tensor]:
    """The real tensor a graph input (placeholder) holds at compile time, else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "placeholder":
        return None
    value = values.get(node.name)
    real = isinstance(value, torch.Tensor) and not isinstance(value, torch._subclasses.FakeTensor)
    return value if real else None


def ft_backend(gm: GraphModule, example_inputs, options: Any = None, mode: Optional[str] = None
               ) -> Callable:
    config = FTConfig.from_options(options)
    gm = rewrite(gm, example_inputs, config)
    if not torch.is_grad_enabled():  # Dynamo compiles again if the grad mode changes
        inference.swap_in(gm)
    if config.eager:
        return gm.forward
    from torch._inductor import list_mode_options
    from torch._inductor.compile_fx import compile_fx
    patches = dict(list_mode_options(mode)) if mode else {}  # torch.compile(mode=...) still applies
    patches.update(config.inductor)
    return compile_fx(gm, example_inputs, config_patches=patches)

"""``ftcompile.explain(model, *args, device=None, **options)``: what ft does to each layer, and why.

Compiles a private copy of the call with the ft passes (no inductor: the report only needs the
rewritten graph), runs it once on the given inputs and returns an FTReport. Like
``torch._dynamo.explain`` it calls ``torch._dynamo.reset()`` before and after, so models compiled
earlier in the process recompile on their next call.
"""
from __future__ import annotations

from typing import Any

import torch

from . import hardware
from .backend import collect, ft_backend
from .config import FTConfig
from .report import FTReport


def explain(model: Any, *args: Any, device: Any = None, **options: Any) -> FTReport:
    opts = dict(options)
    if device is not None:
        opts["device"] = device
    opts["eager"] = True
    config = FTConfig.from_options(opts)
    tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
    spec = hardware.resolve(config.device, tensor.device if tensor is not None else None)

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return ft_backend(gm, example_inputs, options=config)

    from torch._dynamo.utils import counters as dynamo_counters
    breaks_before = dict(dynamo_counters["graph_break"])
    torch._dynamo.reset()
    try:
        with collect() as records, torch.no_grad():
            torch.compile(model, backend=backend)(*args)
    finally:
        torch._dynamo.reset()
    reasons = [f"{reason.strip().splitlines()[0]} (x{count - breaks_before.get(reason, 0)})"
               for reason, count in dynamo_counters["graph_break"].items()
               if count > breaks_before.get(reason, 0)]
    return FTReport(records=list(records), device=spec.name, graph_count=len(graphs),
                    graph_breaks=max(len(graphs) - 1, 0), break_reasons=reasons)

"""Timing of a callable on its device: CUDA events on a GPU (optionally replaying a CUDA graph,
so small ops are not launch-bound), a host clock elsewhere. Mean ms per call after warm-up."""
from __future__ import annotations

import time
from typing import Callable

import torch


def time_ms(fn: Callable[[], object], device: torch.device, reps: int, warmup: int = 3,
            graph: bool = False) -> float:
    for _ in range(warmup):
        fn()
    if torch.device(device).type != "cuda":
        begin = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - begin) * 1e3 / reps
    call = fn
    if graph:
        # Ops that synchronise (the reference ops correct on the host) cannot be captured.
        try:
            cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cuda_graph):
                fn()
            call = cuda_graph.replay
        except RuntimeError:
            torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps

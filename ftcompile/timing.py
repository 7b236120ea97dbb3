"""Timing of a callable on its device: CUDA events on a GPU (optionally replaying a CUDA graph,
so small ops are not launch-bound), a host clock elsewhere. ``time_ms``: mean ms per call after
warm-up (profile selection); ``median_ms``: median of single timed calls (benchmark tables);
``interleaved_median_ms``: the same for several callables timed in turn, round by round, so that
clock and power drift does not fall between them."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, Optional

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


def median_ms(fn: Callable[[], object], reps: int = 20, warmup: int = 3) -> float:
    """Median of ``reps`` single CUDA-event-timed calls of fn (a GPU callable)."""
    return interleaved_median_ms({"fn": fn}, reps, warmup)["fn"]


def interleaved_median_ms(fns: Dict[str, Callable[[], object]], reps: int = 20, warmup: int = 3,
                          before: Optional[Callable[[], object]] = None) -> Dict[str, float]:
    """Median ms of each GPU callable, timed one call each per round over ``reps`` rounds. Timed
    one variant after another, the clock and power state moved between them (a warm GPU made
    cuBLAS 15 % slower at 8192^3 than the cool one it had met first: NOTES_gemm.md, run 21a).
    ``before``: queued ahead of each timed call, outside the timing (e.g. an L2 flush, so that no
    callable inherits the lines the previous one left)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    times: Dict[str, list] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if before is not None:
                before()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    return {name: statistics.median(t) for name, t in times.items()}

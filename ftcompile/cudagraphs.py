"""What CUDA graphs (``torch.compile(model, backend="ft", mode="reduce-overhead")``) ask of the ops.

Inductor's CUDA graphs run a compiled function's first calls with every allocation of the calling
thread routed to the graph's private memory pool, and take that pool's blocks back between
replays. So device state that outlives a call (workspaces, telemetry counters, offline
checksums) is allocated on a helper thread, outside any pool (:func:`persistent`), and a buffer
whose address a captured graph may hold is never freed (:func:`retire`). A replay runs no
Python: what an op decides on the host per call (policy "raise", fault injection, a fallback to
the reference op, which synchronises) is refused at capture with a clear error instead of being
silently frozen into the graph (:func:`check_site`), and ``inject()`` refuses sites that run
inside a captured graph.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Set, Tuple, TypeVar

import torch


class GraphCaptureError(RuntimeError):
    """An ftcompile op cannot do what it was asked inside a CUDA graph."""


T = TypeVar("T")
_HELPER = "ftcompile-persistent"
_helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_HELPER)  # see persistent()
_side: Dict[int, "torch.cuda.Stream"] = {}
_retired: List[object] = []     # values a captured graph may still address: kept alive
_captured: Set[Tuple[int, str]] = set()  # (id, name) of sites whose op ran under capture
_lock = threading.Lock()

_ADVICE = "compile without CUDA graphs (the default mode) for this"


def capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (False without CUDA)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def persistent(device: torch.device, what: str, make: Callable[[], T], per_graph: bool = False
               ) -> Tuple[T, bool]:
    """(make(), in_graph): state of ``device`` that outlives the call (what ``make`` allocates and
    initialises), made where no CUDA-graph pool takes it. Inductor's CUDA graphs route every
    allocation of the calling thread to the graph's pool while they warm up and record, so
    ``make`` runs on a helper thread, on its own stream ordered after the caller's (the state may
    be derived from tensors the caller's stream writes) and before the caller's next work.

    During capture the state should exist from the warm-up calls, which run the same shapes on
    the same stream; else, with ``per_graph`` (a self-cleaning workspace), ``make`` runs in the
    graph and in_graph is True: the caller must not keep the value beyond this call (the graph
    owns it and initialises it at every replay). Without ``per_graph`` that raises."""
    if device.type != "cuda" or threading.current_thread().name.startswith(_HELPER):
        return make(), False
    if torch.cuda.is_current_stream_capturing():
        if per_graph:
            return make(), True
        raise GraphCaptureError(
            f"ftcompile: {what} would be created while a CUDA graph is being captured; a warm-up "
            f"call on the capturing stream should have created it - {_ADVICE}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    caller = torch.cuda.current_stream(index)
    ready = torch.cuda.Event()
    ready.record(caller)

    def run():
        with torch.cuda.device(index):
            side = _side.get(index)  # only the helper thread touches _side
            if side is None:
                side = _side[index] = torch.cuda.Stream(index)
            side.wait_event(ready)
            with torch.cuda.stream(side), torch.no_grad():  # grad mode is per thread: state needs none
                value = make()
            done = torch.cuda.Event()
            done.record(side)
            return value, done

    value, done = _helper.submit(run).result()
    caller.wait_event(done)
    return value, False


def retire(value: object) -> None:
    """Keep ``value`` (a replaced workspace or cache entry) alive for good: a captured graph may
    hold its address. Bounded: workspaces grow by doubling, and cache entries are retired only
    when a capture read them."""
    with _lock:
        _retired.append(value)


def check_site(site_id: int, name: str, policy: str, reason: Optional[str] = None) -> None:
    """Under capture: refuse what cannot be replayed, and remember the site (see inject()).
    ``reason``: why the call falls back to the reference op (None: the CUDA kernel runs)."""
    if not capturing():
        return
    if policy == "raise":
        raise GraphCaptureError(
            f"ftcompile: site {name} has policy 'raise', which reads its detection count on the host "
            f"after every call; a CUDA-graph replay runs no host code. Use policy 'correct' or "
            f"'detect' and read ftcompile.stats(), or {_ADVICE}")
    if reason is not None:
        raise GraphCaptureError(
            f"ftcompile: site {name} runs the reference op ({reason}), which synchronises with the "
            f"host; it cannot run inside a CUDA graph - {_ADVICE}")
    with _lock:
        _captured.add((site_id, name))


def captured_sites() -> Set[Tuple[int, str]]:
    with _lock:
        return set(_captured)

"""Launch plans: a CUDA op call's host work done once per call signature, then replayed.

Graph-free, the small models are host-bound: a protected op's Python side (kernel choice, its
configuration, the workspaces, the cached weight encodings, the argument block) took 85-135 us of
host time per call on the H200's host against ~20 us for F.linear or SDPA (benchmarks/NOTES.md,
"Session 42"). The first call with a given signature (shapes, strides, dtypes, device, stream,
16-byte alignment of the inputs, the weight's storage, the site, the module's knobs) takes the full
path and leaves a plan: its argument block, with what it points at held alive. A later call with
that signature copies the block, sets what is its own (input and output pointers, per-call
buffers) and launches.

A plan is made only where the full path decided nothing per call on the host (no policy "raise",
no weight computed in the graph, no input copied to suit the kernel, no injection), and replayed
only while
  * no fault injection is armed and no CUDA graph is being captured (both need the full path:
    per-call injection records, workspaces the graph owns, the capture's site records);
  * every weight and bias it was made from is the same storage, unchanged in place: the same
    test as the weight-encoding caches (gemm.DerivedCache: the storage alive, its registered
    owner's version counter), whose entries the plan's block points at.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from ..abft import gemm, injection

MAX_PLANS = 4096  # signatures kept; past it the store starts over (a model has a few hundred)
SWEEP_EVERY = 256  # plans made between two sweeps for dead weights' plans (shapes that change every
# call, e.g. a growing KV cache, make a plan per call: a sweep each time would cost O(plans))

Guard = Tuple[StorageWeakRef, int, int]  # (the storage, its id, its owner's version)


class Plans:
    """Plans by signature. A plan is a callable of the call's tensors returning the op's output,
    with the guards of the weights it was made from."""

    def __init__(self):
        self._plans: Dict[tuple, Tuple[Callable, Tuple[Guard, ...]]] = {}
        self._lock = threading.Lock()
        self.hits = 0  # plans handed out (tests, benchmarks)
        self._made = 0

    def put(self, key: tuple, launch: Callable, persistent: Sequence[torch.Tensor] = ()) -> None:
        guards = tuple(guard(t) for t in persistent)
        with self._lock:
            self._made += 1
            if self._made % SWEEP_EVERY == 0:  # plans of weights that died go (they hold derived
                # tensors, e.g. a padded copy of W)
                for k in [k for k, (_, gs) in self._plans.items() if any(g[0].expired() for g in gs)]:
                    del self._plans[k]
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            self._plans[key] = (launch, guards)

    def get(self, key: tuple, persistent: Sequence[torch.Tensor] = ()) -> Optional[Callable]:
        """The plan for key, if its weights are still what it was made from."""
        entry = self._plans.get(key)
        if entry is None:
            return None
        launch, guards = entry
        if len(guards) != len(persistent) or not all(map(fresh, persistent, guards)):
            with self._lock:
                self._plans.pop(key, None)
            return None
        self.hits += 1
        return launch

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)


def guard(t: torch.Tensor) -> Guard:
    s = t.untyped_storage()
    return StorageWeakRef(s), s._cdata, gemm.owner_version(t, s)


def fresh(t: torch.Tensor, g: Guard) -> bool:
    """t lies in the storage the guard was taken of (alive, so its id was not reused), unchanged."""
    s = t.untyped_storage()
    return s._cdata == g[1] and not g[0].expired() and gemm.owner_version(t, s) == g[2]


def replayable() -> bool:
    """Plans may be replayed now: no fault injection is armed, no CUDA graph is being captured."""
    return not injection.armed() and not torch._C._cuda_isCurrentStreamCapturing()


def layout_key(t: Optional[torch.Tensor]) -> tuple:
    """What a plan depends on of an input it reads per call: its geometry and 16-byte alignment."""
    if t is None:
        return ()
    return t.shape, t.stride(), t.dtype, t.data_ptr() & 15

"""Fault injection: one FaultSpec understood by the CPU reference ops and the CUDA kernels alike.

    with ftcompile.inject(FaultSpec(site="transformer.h.0.mlp.c_fc", stage="accumulator", bit=27)):
        model(x)

Zero cost when off: ops test one module-level list. Sites are matched by qualified name, glob or
site id; what was injected is logged on the context (``ctx.events``) for campaigns.
"""
from __future__ import annotations

import contextlib
import fnmatch
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Tuple, Union

import torch

from .. import cudagraphs

GEMM_STAGES = ("accumulator", "output")
ATTENTION_STAGES = ("score", "exp", "rowmax", "rowsum", "pv", "rescale", "rowsum_mma", "p_mma")
STAGES = GEMM_STAGES + ATTENTION_STAGES
FORMATS = {"fp32": (torch.float32, torch.int32, 32), "bf16": (torch.bfloat16, torch.int16, 16),
           "fp16": (torch.float16, torch.int16, 16)}


@dataclass(frozen=True)
class FaultSpec:
    """What to corrupt, where and how.

    site     qualified module name, a glob over names, or a site id.
    stage    GEMM: "accumulator" (fp32 accumulator element after k-step ``k_step``) or "output"
             (final fp32 accumulator, before verification and rounding). Attention: "score"
             (QK^T element), "exp" (softmax numerator), "rowmax", "rowsum", "pv" (output
             accumulator after a tile's PV), "rescale" (output element after the online rescale),
             "rowsum_mma" (the row sum the PV MMA keeps in its checksum columns, one of its three
             copies, after a tile's PV), "p_mma" (a softmax numerator as the PV MMA consumes it:
             after the tile's check, in the kernels packed to 16 bits).
    index    element index in the stage's tensor (GEMM: (row, col) of the 2-D output; attention:
             (b, h, i, j) for score/exp/p_mma with j a global key position (it fixes the key tile),
             (b, h, i) for rowmax/rowsum/rowsum_mma, (b, h, i, d) for pv/rescale); None: drawn
             from ``seed``.
    k_step   k-tile (GEMM) or key tile (attention) at which to inject; None: drawn from ``seed``.
    bit      flip this bit of the value's encoding in format ``fmt``; or
    value    add this number (NaN/Inf allowed). Neither: add 10.0.
    fmt      "fp32" (accumulator encoding) or "bf16"/"fp16": the value is rounded to that format
             and the bit flipped there (a flip in the rounded output value).
    count    faults in one check group: the same row (global checks), the same lane of the same
             64-wide tile (thread-level), the same strided group (attention). More than one is
             beyond the single-event-upset model and is reported uncorrectable where the op
             corrects by checksum; a count larger than the group raises ValueError.
    calls    inject into at most this many calls of the site (None: every call).
    """

    site: Union[str, int]
    stage: str = "accumulator"
    index: Optional[Tuple[int, ...]] = None
    k_step: Optional[int] = None
    bit: Optional[int] = None
    value: Optional[float] = None
    fmt: str = "fp32"
    count: int = 1
    seed: int = 0
    calls: Optional[int] = None

    def __post_init__(self):
        if self.stage not in STAGES:
            raise ValueError(f"FaultSpec.stage must be one of {STAGES}, got {self.stage!r}")
        if self.fmt not in FORMATS:
            raise ValueError(f"FaultSpec.fmt must be one of {tuple(FORMATS)}, got {self.fmt!r}")
        if self.bit is not None and not 0 <= self.bit < FORMATS[self.fmt][2]:
            raise ValueError(f"bit {self.bit} out of range for {self.fmt}")
        if self.bit is not None and self.value is not None:
            raise ValueError("give a FaultSpec either bit or value, not both")
        if self.count < 1:
            raise ValueError("FaultSpec.count must be >= 1")

    def matches(self, site_id: int, site_name: str) -> bool:
        if isinstance(self.site, int):
            return self.site == site_id
        return self.site == site_name or fnmatch.fnmatchcase(site_name, self.site)


@dataclass
class Event:
    site: str
    stage: str
    index: Tuple[int, ...]
    before: float
    after: float


@dataclass
class Injection:
    spec: FaultSpec
    calls_seen: int = 0
    events: List[Event] = field(default_factory=list)

    def generator(self) -> torch.Generator:
        g = torch.Generator()
        g.manual_seed(self.spec.seed * 1_000_003 + self.calls_seen)
        return g


_ACTIVE: List[Injection] = []
_lock = threading.Lock()


def armed() -> bool:
    """Whether any fault spec is active (the ops' launch plans are not replayed then)."""
    return bool(_ACTIVE)


_ON_CHANGE: List[Callable[[bool], None]] = []


def on_change(hook: Callable[[bool], None]) -> None:
    """Call hook(armed()) whenever injections are armed or disarmed (ops/fastpath.py's C++ replay,
    which cannot ask)."""
    _ON_CHANGE.append(hook)


def _changed() -> None:
    for hook in _ON_CHANGE:
        hook(bool(_ACTIVE))


@contextlib.contextmanager
def inject(*specs: FaultSpec) -> Iterator[Injection]:
    """Activate fault specs for the block; yields the (first) Injection with its event log."""
    if not specs:
        raise ValueError("inject() needs at least one FaultSpec")
    for spec in specs:  # a replay runs no host code: an injection there would silently not happen
        hit = sorted(name for sid, name in cudagraphs.captured_sites() if spec.matches(sid, name))
        if hit:
            raise cudagraphs.GraphCaptureError(
                f"ftcompile: cannot inject into {hit[0]}: it runs inside a captured CUDA graph "
                f"(mode='reduce-overhead'); compile without CUDA graphs to inject faults")
    injections = [Injection(s) for s in specs]
    with _lock:
        _ACTIVE.extend(injections)
        _changed()
    try:
        yield injections[0] if len(injections) == 1 else injections
    finally:
        with _lock:
            for inj in injections:
                _ACTIVE.remove(inj)
            _changed()


def pending(site_id: int, site_name: str, stages: Tuple[str, ...]) -> List[Injection]:
    """Injections that apply to this call of a site (and count the call against ``calls``).

    Each op calls this once per invocation; returns [] at the cost of one list test when off."""
    if not _ACTIVE:
        return []
    out = []
    for inj in list(_ACTIVE):
        spec = inj.spec
        if spec.stage in stages and spec.matches(site_id, site_name):
            if spec.calls is None or inj.calls_seen < spec.calls:
                out.append(inj)
                inj.calls_seen += 1
    if out and cudagraphs.capturing():
        raise cudagraphs.GraphCaptureError(
            f"ftcompile: a fault is to be injected into {site_name} while a CUDA graph is being "
            f"captured; its replays would not inject it - compile without CUDA graphs to inject faults")
    return out


def corrupt(value: torch.Tensor, spec: FaultSpec) -> torch.Tensor:
    """The faulty version of fp32 scalar tensor(s) ``value`` under ``spec``."""
    if spec.bit is None:
        return value + (10.0 if spec.value is None else spec.value)
    dtype, itype, width = FORMATS[spec.fmt]
    bits = value.to(dtype).view(itype)
    # The sign bit as a signed integer of the format's width.
    mask = -(1 << (width - 1)) if spec.bit == width - 1 else 1 << spec.bit
    return (bits ^ mask).view(dtype).float()


def draw_index(shape: Tuple[int, ...], g: torch.Generator) -> Tuple[int, ...]:
    return tuple(int(torch.randint(0, max(int(s), 1), (1,), generator=g)) for s in shape)


def group_positions(size: int, i0: int, step: int = 1, span: Optional[int] = None) -> List[int]:
    """Positions along a dimension of ``size`` that share a check group with position i0.

    A group is every ``step``-th element of an aligned block of ``span`` elements (default: the
    whole dimension): the row of a global check (step 1), the lane of a strided tensor checksum
    (step 8 within a 64-wide tile)."""
    span = span or size
    base = (i0 // span) * span
    return list(range(base + (i0 - base) % step, min(base + span, size), step))


def spread_positions(size: int, i0: int, count: int, step: int = 1, span: Optional[int] = None,
                     where: str = "") -> List[int]:
    """Where the ``count`` faults of one spec land: position i0 and the next count - 1 positions
    of its check group (``group_positions``), wrapping around the group."""
    slots = group_positions(size, i0, step, span) if count > 1 else [i0]
    if count > len(slots):
        raise ValueError(f"FaultSpec.count={count} exceeds the {len(slots)} elements of the "
                         f"check group at {where}")
    p0 = slots.index(i0)
    return [slots[(p0 + c) % len(slots)] for c in range(count)]


def apply(t: torch.Tensor, inj: Injection, site_name: str, index: Tuple[int, ...],
          extra: int = 0, spread_dim: int = -1, spread_step: int = 1,
          spread_span: Optional[int] = None) -> None:
    """Corrupt t[index] in place, and for ``count`` > 1 the next ``count - 1`` elements of the
    same check group (``group_positions`` along ``spread_dim``), logging each event."""
    spec = inj.spec
    size = t.shape[spread_dim]
    index = tuple(int(i) for i in index)
    i0 = index[spread_dim] % size
    for pos in spread_positions(size, i0, spec.count, spread_step, spread_span,
                                f"{index} in {site_name} ({spec.stage})"):
        idx = list(index)
        idx[spread_dim] = pos
        idx = tuple(idx)
        before = t[idx].float().clone()
        after = corrupt(before, spec)
        t[idx] = after.to(t.dtype)
        inj.events.append(Event(site_name, spec.stage, idx, float(before), float(after)))

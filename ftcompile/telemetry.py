"""Protected sites and their fault counters.

Every protected op carries an integer ``site`` id. The counters live in one int64 tensor per
device, shape [MAX_SITES, len(FIELDS)], allocated once (its address never changes, so CUDA graphs
replay the kernels' counter updates). Ops add to their row with tensor ops or device atomics:
no host synchronisation per call. ``stats()`` is the only place that reads them back.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch

from . import cudagraphs

FIELDS = ("checks", "detected", "corrected", "uncorrectable", "nonfinite_inputs")
CHECKS, DETECTED, CORRECTED, UNCORRECTABLE, NONFINITE_INPUTS = range(len(FIELDS))
MAX_SITES = 4096


class FaultDetected(RuntimeError):
    """Raised under policy "raise" when a protected op detects a fault."""

    def __init__(self, site: str, what: str = "a fault"):
        super().__init__(f"ftcompile: {what} detected in {site}")
        self.site = site


@dataclass
class Site:
    id: int
    name: str  # qualified module name (e.g. "transformer.h.0.attn")
    kind: str  # "attention" | "linear"
    scheme: str
    policy: str = "correct"
    c_sigma: float = 2.5
    e_max_safety: float = 1.0
    # The weight is a parameter or buffer (outlives the call), so checksums derived from it may
    # be cached; False for weights computed in the graph.
    static_weight: bool = True


_lock = threading.Lock()
_sites: List[Site] = []
_by_key: Dict[tuple, int] = {}
_counters: Dict[torch.device, torch.Tensor] = {}


def register(name: str, kind: str, scheme: str, policy: str, c_sigma: float,
             e_max_safety: float, static_weight: bool = True) -> int:
    """The id of a site; the same (name, kind, scheme, policy, thresholds) reuses its id, so
    recompiling a model (Dynamo may call a backend twice, or per new shape) keeps one row."""
    key = (name, kind, scheme, policy, c_sigma, e_max_safety, static_weight)
    with _lock:
        if key in _by_key:
            return _by_key[key]
        if len(_sites) >= MAX_SITES:
            raise RuntimeError(f"more than {MAX_SITES} protected sites in one process")
        site = Site(len(_sites), name, kind, scheme, policy, c_sigma, e_max_safety, static_weight)
        _sites.append(site)
        _by_key[key] = site.id
        return site.id


def site(site_id: int) -> Site:
    if not 0 <= site_id < len(_sites):
        # An op called directly (not through the backend) with an unregistered id.
        raise ValueError(f"ftcompile: site id {site_id} is not registered; use "
                         "ftcompile.register_site(name, kind) to get one")
    return _sites[site_id]


def sites() -> List[Site]:
    return list(_sites)


def counters(device: torch.device) -> torch.Tensor:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    buf = _counters.get(device)
    if buf is None:
        with _lock:
            buf = _counters.get(device)
            if buf is None:
                buf, _ = cudagraphs.persistent(device, "the telemetry counters", lambda: torch.zeros(
                    MAX_SITES, len(FIELDS), dtype=torch.int64, device=device))
                _counters[device] = buf
    return buf


def bump(site_id: int, device: torch.device, **counts) -> None:
    """Add to a site's counters. Values may be 0-d device tensors (no sync) or ints.

    Ints are scalar adds; tensors on the counters' device whose fields are adjacent (an op's
    outcome: detected .. nonfinite_inputs) go in as one add of their stack."""
    row = counters(device)[site_id]
    stacked = {}
    for name, value in counts.items():
        if isinstance(value, torch.Tensor) and value.device == row.device:
            stacked[FIELDS.index(name)] = value
        else:
            row[FIELDS.index(name)] += value
    if not stacked:
        return
    first, last = min(stacked), max(stacked)
    if last - first + 1 == len(stacked):
        row[first:last + 1] += torch.stack([stacked[i] for i in range(first, last + 1)])
    else:
        for i, value in stacked.items():
            row[i] += value


def stats(name: Optional[str] = None) -> Dict[str, Dict[str, int]]:
    """{site name: {field: count}} summed over devices (and over sites sharing a name)."""
    out: Dict[str, Dict[str, int]] = {}
    totals = sum((buf.cpu() for buf in list(_counters.values())),
                 torch.zeros(MAX_SITES, len(FIELDS), dtype=torch.int64))
    for s in _sites:
        row = out.setdefault(s.name, dict.fromkeys(FIELDS, 0))
        for i, field in enumerate(FIELDS):
            row[field] += int(totals[s.id, i])
    if name is not None:
        return {name: out.get(name, dict.fromkeys(FIELDS, 0))}
    return out


def reset_stats() -> None:
    for buf in _counters.values():
        buf.zero_()

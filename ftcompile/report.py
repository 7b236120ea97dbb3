"""Decision records and the FTReport that ``explain`` returns."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from tabulate import tabulate


# What runs a protected site on the target (SiteRecord.runs; ftcompile/ops/support.py decides).
RUNS_KERNEL, RUNS_REFERENCE, RUNS_UNKNOWN = "kernel", "reference", "unknown"


@dataclass
class SiteRecord:
    name: str
    kind: str  # attention | linear | matmul
    op: str  # what was matched: sdpa, softmax-chain, linear, addmm, matmul, bmm
    shapes: str
    dtype: str
    flops: Optional[float]
    bytes: Optional[float]
    intensity: Optional[float]
    cmr: Optional[float]
    scheme: str  # efta | global | thread | none
    reason: str
    graph: int = 0
    dynamic: bool = False
    site_id: Optional[int] = None
    measured: Dict[str, float] = field(default_factory=dict)  # profile mode: scheme -> ms
    group: Optional[str] = None  # the group site whose one GEMM computes this layer (linear_group)
    runs: str = "-"  # a protected site on the target: kernel | reference | unknown (ops/support.py)

    @property
    def protected(self) -> bool:
        return self.scheme != "none"


def _num(x: Optional[float], fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _si(x: Optional[float]) -> str:
    """65536 -> "65.5k": FLOPs and bytes span 1e3..1e15 in one table."""
    if x is None:
        return "-"
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g}{suffix}"
    return f"{x:.3g}"


@dataclass
class FTReport:
    records: List[SiteRecord]
    device: str
    graph_count: int = 0
    graph_breaks: int = 0
    break_reasons: List[str] = field(default_factory=list)

    @property
    def protected(self) -> List[SiteRecord]:
        return [r for r in self.records if r.protected]

    @property
    def unprotected(self) -> List[SiteRecord]:
        return [r for r in self.records if not r.protected]

    @property
    def on_reference(self) -> List[SiteRecord]:
        return [r for r in self.records if r.protected and r.runs == RUNS_REFERENCE]

    @property
    def aggregate_intensity(self) -> float:
        flops = sum(r.flops or 0 for r in self.records)
        nbytes = sum(r.bytes or 0 for r in self.records)
        return flops / nbytes if nbytes else 0.0

    def by_name(self, name: str) -> SiteRecord:
        for r in self.records:
            if r.name == name:
                return r
        raise KeyError(f"no site named {name!r}; sites: {[r.name for r in self.records]}")

    def __str__(self) -> str:
        rows = []
        for r in self.records:
            reason = r.reason
            rows.append([r.name, r.kind, r.op, r.shapes, r.dtype, _si(r.flops),
                         _si(r.bytes), _num(r.intensity, ".1f"), _num(r.cmr, ".0f"),
                         r.scheme, r.runs, reason])
        table = tabulate(rows, headers=["site", "kind", "op", "shapes", "dtype", "FLOPs", "bytes",
                                        "intensity", "CMR", "scheme", "runs", "reason"], tablefmt="simple")
        lines = [
            f"ftcompile.explain on {self.device}",
            table,
            "",
            f"sites: {len(self.records)}  protected: {len(self.protected)}  left unprotected: "
            f"{len(self.unprotected)}",
            *([f"protected sites the target runs on the reference op (no CUDA kernel takes the call): "
               f"{len(self.on_reference)}"] if self.on_reference and self.device != "cpu" else []),
            f"aggregate intensity (sum FLOPs / sum bytes): {self.aggregate_intensity:.1f} FLOP/B",
            f"graphs: {self.graph_count}  graph breaks: {self.graph_breaks}",
        ]
        lines += [f"  break: {reason}" for reason in self.break_reasons]
        if any(r.dynamic for r in self.records):
            lines.append("(dynamic shapes: FLOPs/bytes use the size hints of the first call)")
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "device": self.device,
            "graph_count": self.graph_count,
            "graph_breaks": self.graph_breaks,
            "break_reasons": self.break_reasons,
            "aggregate_intensity": self.aggregate_intensity,
            "sites": [asdict(r) for r in self.records],
        }

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)

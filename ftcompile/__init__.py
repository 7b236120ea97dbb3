"""ftcompile: fault-tolerant attention and linear layers behind ``torch.compile(backend="ft")``."""
from .abft.injection import FaultSpec, inject
from .config import FTConfig
from .cudagraphs import GraphCaptureError
from .hardware import DeviceSpec
from .telemetry import FaultDetected, reset_stats, stats
from . import ops  # noqa: F401  (registers torch.ops.ftcompile.*)
from .explain import explain
from .report import FTReport


def register_site(name: str, kind: str, scheme: str = "auto", policy: str = "correct",
                  c_sigma: float = 2.5, e_max_safety: float = 1.0,
                  static_weight: bool = True) -> int:
    """A site id for calling the ops directly (the backend registers its own sites).

    static_weight=False: the weight is recomputed between calls (not a parameter), so nothing
    derived from it may be cached."""
    from .telemetry import register
    return register(name, kind, scheme, policy, c_sigma, e_max_safety, static_weight)


__all__ = ["explain", "FTReport", "FTConfig", "DeviceSpec", "FaultSpec", "FaultDetected", "GraphCaptureError",
           "inject", "stats", "reset_stats", "register_site"]

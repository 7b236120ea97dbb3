"""FTConfig: every knob of the ft backend, frozen so a compiled graph's behaviour cannot drift."""
from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

POLICIES = ("correct", "detect", "raise", "recompute")
SCHEMES = ("auto", "efta", "global", "thread", "none")
SELECTIONS = ("table", "profile")


@dataclass(frozen=True)
class FTConfig:
    """Options of ``torch.compile(model, backend="ft", options={...})``.

    policy     what a protected op does on detection: ``correct`` (locate and correct a single
               fault, count the rest as uncorrectable), ``detect`` (count only), ``raise`` (raise
               :class:`ftcompile.FaultDetected` naming the layer), ``recompute`` (correct, and
               recompute what cannot be corrected).
    schemes    per-site overrides: {qualified name or glob: scheme}, scheme one of
               auto/efta/global/thread/none. The first matching pattern wins.
    device     target device for the cost model: a name from the DeviceSpec table ("H100",
               "T4", ...), a DeviceSpec, "measure" (probe the live GPU), or None (the inputs'
               device).
    c_sigma    V-ABFT confidence multiplier (paper: 2.5).
    e_max_safety  factor applied on top of the calibrated e_max.
    min_flops  sites with fewer FLOPs than this are left unprotected ("none", with the reason).
    eager      run the rewritten graph without inductor (fast tests, debugging).
    inductor   config patches forwarded to inductor's compile_fx.
    selection  "table" (intensity vs CMR) or "profile" (time both GEMM schemes per site; GPU).
    group_linears  run global-scheme nn.Linear layers that read the same input (q/k/v, gate/up)
               as one GEMM over their weights side by side, checked as one site (its name
               lists the members; explain says so on each).
    """

    policy: str = "correct"
    schemes: Mapping[str, str] = field(default_factory=dict)
    device: Any = None
    c_sigma: float = 2.5
    e_max_safety: float = 1.0
    min_flops: float = 4096.0
    eager: bool = False
    inductor: Mapping[str, Any] = field(default_factory=dict)
    selection: str = "table"
    group_linears: bool = True

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"ft option 'policy' must be one of {POLICIES}, got {self.policy!r}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"ft option 'selection' must be one of {SELECTIONS}, got {self.selection!r}")
        for pattern, scheme in dict(self.schemes).items():
            if scheme not in SCHEMES:
                raise ValueError(
                    f"ft option 'schemes': {pattern!r} -> {scheme!r}; a scheme is one of {SCHEMES}")
        if not self.c_sigma > 0 or not self.e_max_safety > 0:
            raise ValueError("ft options 'c_sigma' and 'e_max_safety' must be positive")
        if not isinstance(self.inductor, Mapping):
            raise ValueError("ft option 'inductor' must be a dict of inductor config patches")
        # Freeze the mappings too (a dict inside a frozen dataclass could still be mutated).
        object.__setattr__(self, "schemes", dict(self.schemes))
        object.__setattr__(self, "inductor", dict(self.inductor))

    @classmethod
    def from_options(cls, options: Optional[Union[Mapping[str, Any], "FTConfig"]]) -> "FTConfig":
        if options is None:
            return cls()
        if isinstance(options, FTConfig):
            return options
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(
                f"unknown ft option(s) {unknown}; valid options are {valid}")
        return cls(**dict(options))

    def override_for(self, qualname: str) -> Optional[str]:
        """The scheme forced on the site ``qualname`` by the user, or None."""
        for pattern, scheme in self.schemes.items():
            if scheme != "auto" and (pattern == qualname or fnmatch.fnmatchcase(qualname, pattern)):
                return scheme
        return None

    def __hash__(self) -> int:  # dict fields are not hashable; identity is enough for caching
        return id(self)

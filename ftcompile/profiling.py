"""``selection="profile"``: time both GEMM schemes for a linear site, the way the intensity-guided
ABFT paper's profiler does, and keep the cheaper one.

Each (scheme, shape, dtype, device) is timed once per process on random inputs (never zeros) of
the site's shapes, with the unprotected F.linear as the baseline, so explain can show the measured
overhead of each scheme. On CUDA the ops run the CUDA kernels when they are built; elsewhere the
reference algorithm is what gets timed.
"""
from __future__ import annotations

import functools
from typing import Dict, Tuple

import torch
import torch.nn.functional as F

from . import telemetry
from .cost import linear_dims
from .timing import time_ms

_PROFILE_SITE = "<profile>"


@functools.lru_cache(maxsize=None)
def time_linear_schemes(m: int, n: int, k: int, wbatch: int, bias: bool, dtype: torch.dtype,
                        device: str) -> Dict[str, float]:
    """Warmed mean ms per call of: plain F.linear ("unprotected"), global, thread."""
    dev = torch.device(device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(wbatch, m, k, generator=gen).to(dev, dtype)
    w = (torch.randn(wbatch, n, k, generator=gen) / k ** 0.5).to(dev, dtype)
    b = torch.randn(n, generator=gen).to(dev, dtype) if bias else None
    if wbatch == 1:
        x, w = x[0], w[0]
    site = telemetry.register(_PROFILE_SITE, "linear", "profile", "detect", 2.5, 1.0)
    candidates = {
        "unprotected": lambda: (x @ w.transpose(-2, -1) + (b if b is not None else 0))
        if wbatch > 1 else F.linear(x, w, b),
        "global": lambda: torch.ops.ftcompile.linear_global(x, w, b, site),
        "thread": lambda: torch.ops.ftcompile.linear_thread(x, w, b, site),
    }
    out = {}
    for name, fn in candidates.items():
        with torch.no_grad():
            once = max(time_ms(fn, dev, 1), 1e-3)  # its warm-up builds kernels, caches checksums
            reps = int(min(max(20.0 / once, 3), 200))  # about 20 ms of work per measurement
            out[name] = time_ms(fn, dev, reps, graph=True)
    return out


def choose(x_shape: Tuple[int, ...], w_shape: Tuple[int, ...], bias: bool, dtype: torch.dtype,
           device: torch.device) -> Tuple[str, Dict[str, float]]:
    """The faster protected scheme for this site, and every measured time (ms)."""
    m, n, k, wbatch = linear_dims(x_shape, w_shape)
    times = time_linear_schemes(m, n, k, wbatch, bias, dtype, str(device))
    scheme = min(("global", "thread"), key=times.__getitem__)
    return scheme, times

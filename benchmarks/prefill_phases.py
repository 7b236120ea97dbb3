"""Where a prefill CTA's time goes, per phase (the wgmma kernel, fp16, the paper's configurations).

    python benchmarks/prefill_phases.py [--out FILE.json] [--build-only]

Builds the attention library with -DPHASE_STAMPS (csrc/common/phase_stamps.cuh; the phases are
listed at the stamps in efta_sm90.cuh), replays a CUDA graph of a few calls per configuration,
protected and not, and reads the wgmma kernel's records back. Prints per configuration and variant:
us per call of this diagnostic build, per launch the spread of the CTAs' starts and the last CTA's
end, and per phase the median (90th percentile) offset from each CTA's entry and the step of the
median, in us (the SM clock: phases 1-4 are the producer thread's, 5-10 the first consumer
thread's). The protected call's checksum prepass is a kernel of its own, unstamped: what it costs
shows in the call's time and in the first wave's wait (phase 3). PREFILL_PHASES_FLAGS: more nvcc
flags (a variant's build of its own name). Diagnostic only: each stamp costs ~0.07 us.
"""
from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_phases import phase_row, run_probe  # noqa: E402

PHASES = ["set-up", "Q issued", "prepass waited", "loads issued", "Q landed", "ready", "loop done",
          "finished", "voted", "end"]
# (heads, head dim, keys; batch = 16K tokens / keys): bench_attention.py's paper configurations, in part
CONFIGS = [(16, 64, 512), (16, 64, 4096), (16, 64, 16384), (32, 128, 512), (32, 128, 4096), (32, 128, 16384)]
CALLS = 3


def stamped_library():
    """The diagnostic build, loaded as cuda_attention's library for this process."""
    from ftcompile.ops import cuda_attention as ca
    flags = os.environ.get("PREFILL_PHASES_FLAGS", "").split()
    name = "ftcompile_efta_prefill_stamps" + "".join("_" + f.lstrip("-D").replace("=", "") for f in flags)
    os.environ["FTCOMPILE_ATTN_LIB"] = ca.build(name, ["-DPHASE_STAMPS", *flags])
    ca.library.cache_clear()
    handle = ca.library()
    for d in (64, 128):
        getattr(handle, f"efta_sm90_fp16_d{d}_stamps").argtypes = [ctypes.c_void_p, ctypes.c_int]
    return handle


def measure(handle):
    import ftcompile
    from ftcompile.ops import cuda_attention as ca
    from attention_shapes import _us

    site = ftcompile.telemetry.site(ftcompile.register_site("prefill_phases", "attention"))
    rows = []
    for h, d, s in CONFIGS:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(16384 // s, h, s, d, generator=g, device="cuda").half() for _ in range(3))
        for name, kw in (("ft", {"site": site}), ("plain", {"protect": False})):
            call = lambda: ca.attention(q, k, v, None, False, None, False, **kw)  # noqa: E731
            rows.append(phase_row(f"{h}x{d} s{s}", name, call, _us(call, 3, calls=CALLS), handle,
                                  f"efta_sm90_fp16_d{d}_stamps", CALLS, PHASES))
    return rows


if __name__ == "__main__":
    run_probe(stamped_library, measure)

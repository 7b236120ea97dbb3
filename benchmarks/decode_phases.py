"""Where a decode split CTA's time goes, per phase (the tensor-core split kernel, bf16).

    python benchmarks/decode_phases.py [--out FILE.json] [--build-only]

Builds the decode kernel with -DPHASE_STAMPS (csrc/common/phase_stamps.cuh; the phases are listed
at the stamps in efta_decode.cuh) and -DEFTA_DECODE_ONLY (without the tile kernels), replays a CUDA
graph of 10 decode calls per shape, protected and not, and reads the records back. Prints per shape
and variant: us per call of this diagnostic build, per launch the spread of the CTAs' starts and the
last CTA's end, and per phase the median (90th percentile) offset from each CTA's entry, in us
(thread 0's SM clock: offsets within a CTA, not durations of other warps' work). Diagnostic only:
each stamp costs ~0.07 us.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from stream_phases import Rec, read  # noqa: E402  (the record layout of phase_stamps.cuh)
from thin_phases import analyse  # noqa: E402

PHASES = ["Q stored", "q^c, norms", "tile 0 landed", "tile 0 pass", "tile 0 issued", "tile 1 landed",
          "tile 1 issued", "loop done", "O summed", "end checks", "partial written"]
# (batch, query heads, kv heads, query rows, keys, head dim): attention_ab.py's decode shapes, in part
SHAPES = [(1, 32, 8, 1, 4096, 128), (1, 32, 8, 1, 16384, 128), (8, 32, 8, 1, 4096, 128), (1, 32, 8, 1, 1024, 128)]
CALLS = 10


def stamped_library():
    """The diagnostic build, loaded as cuda_attention's library for this process."""
    from ftcompile.ops import cuda_attention as ca
    os.environ["FTCOMPILE_ATTN_LIB"] = ca.build("ftcompile_efta_stamps", ["-DPHASE_STAMPS", "-DEFTA_DECODE_ONLY"])
    ca.library.cache_clear()
    handle = ca.library()
    if handle.efta_decode_stamp_size() != ctypes.sizeof(Rec):
        raise RuntimeError("stamp record size mismatch")
    handle.efta_decode_stamps.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return handle


def phase_row(shape, name, call, us, handle, export, calls, phases):
    """One shape's records: a CUDA graph of `calls` calls replayed once, its CTAs' stamps read back
    through the library's `export`, analysed and printed; returns the shape's JSON row."""
    from decode_probe import graph_of
    graph = graph_of(call, calls)
    read(handle, 0, export=export)  # start over
    graph.replay()
    torch.cuda.synchronize()
    recs, count = read(handle, export=export)
    stats = analyse(recs, calls, phases)
    print(f"{shape} {name}: {us:.1f} us/call (stamped build), {stats['ctas']} CTAs, {stats['ghz']:.2f} GHz; "
          f"starts spread {stats['start_spread_ns'] / 1e3:.2f}, last end {stats['last_end_ns'] / 1e3:.2f} us",
          flush=True)
    prev, parts = 0.0, []
    for k, v in stats["offset_ns"].items():
        parts.append(f"{k} {v['p50'] / 1e3:.2f}/{v['p90'] / 1e3:.2f} (+{(v['p50'] - prev) / 1e3:.2f})")
        prev = v["p50"]
    print("    from entry, us p50/p90 (+ step of the p50): " + "; ".join(parts), flush=True)
    return {"shape": shape, "variant": name, "us": us, "records": count, **stats}


def run_probe(stamped_library, measure):
    """A phase probe's frame: --build-only stops after the diagnostic build; otherwise measure(handle)
    gives the rows (phase_row's), no call may have detected anything, and --out gets them as JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    handle = stamped_library()
    if args.build_only:
        return
    import ftcompile
    rows = measure(handle)
    assert all(s["detected"] == 0 for s in ftcompile.stats().values()), ftcompile.stats()
    if args.out:
        env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda}
        Path(args.out).write_text(json.dumps({"env": env, "rows": rows}, indent=1))


def measure(handle):
    import ftcompile
    from ftcompile.ops import cuda_attention as ca
    from attention_shapes import _us

    ca.DECODE_IMPL = "tc"
    site = ftcompile.telemetry.site(ftcompile.register_site("decode_phases", "attention"))
    rows = []
    for b, hq, hk, sq, sk, d in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(sk + d)
        q = torch.randn(b, hq, sq, d, generator=g, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hk, sk, d, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for name, kw in (("ft", {"site": site}), ("plain", {"protect": False})):
            call = lambda: ca.attention(q, k, v, None, False, None, hq != hk, kernel="decode", **kw)  # noqa: E731
            rows.append(phase_row(f"B{b} {hq}/{hk}x{d} sq{sq} s{sk}", name, call, _us(call, 3), handle,
                                  "efta_decode_stamps", CALLS, PHASES))
    return rows


if __name__ == "__main__":
    run_probe(stamped_library, measure)

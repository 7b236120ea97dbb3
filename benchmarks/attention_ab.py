"""A/B of two builds of the EFTA attention library in alternating processes (each loaded through
FTCOMPILE_ATTN_LIB): the working tree's sources (and variants of them by compile flags, ATTN_AB_FLAGS)
against a snapshot of reference sources. Prints ms per call (unprotected / protected) and a digest
of each output, so a change meant to keep the arithmetic shows whether it did (NOTES_attention.md B19).

    git archive HEAD csrc/attention csrc/common | tar -x -C /tmp/base   # the reference, before editing
    ATTN_AB_BASE=/tmp/base/csrc python benchmarks/attention_ab.py
(ATTN_AB_FLAGS: "name=-DX=1 -DY=0;name2=..." for flag variants of the tree; default: the tree as is.
ATTN_AB_BASE: one snapshot, or several as "name=path;name2=path2", each timed as its own build;
ATTN_AB_ROUNDS: rounds, default 2. ATTN_AB_SET=decode: decode shapes on the decode kernel instead,
us per call in CUDA graphs of 10 calls, the split kernel ATTN_AB_IMPL (default tc), every build
without the tile kernels (-DEFTA_DECODE_ONLY), whose sources a snapshot must then know the flag of.)
"""

import os
import re

from alternate import flag_builds, run_alternating, snapshot_bases, summary

BUILDS = flag_builds("ATTN_AB_FLAGS")
CONFIGS = [(16, 64, s, False) for s in (512, 1024, 2048, 4096, 16384)]
CONFIGS += [(32, 128, s, False) for s in (512, 1024, 2048, 4096, 16384)]
CONFIGS += [(16, 64, 4096, True), (32, 128, 4096, True)]

def digest(out) -> int:
    """A position-weighted sum of an output's 16-bit patterns (mod 10^8): equal outputs, equal digests."""
    import torch
    o = out.view(torch.int16).to(torch.int64).flatten()
    return int((o * (torch.arange(o.numel(), device=o.device) % 1021 + 1)).sum()) % 10**8


# (batch, query heads, kv heads, query rows, keys, head dim): attention_shapes.py's decode set, bf16
DECODE_CONFIGS = [(1, 32, 8, 1, 1024, 128), (1, 32, 8, 1, 4096, 128), (1, 32, 8, 1, 16384, 128),
                  (1, 32, 8, 2, 16384, 128), (8, 32, 8, 1, 4096, 128), (8, 32, 8, 1, 16384, 128),
                  (8, 32, 8, 2, 4096, 128), (8, 12, 12, 4, 4096, 64), (8, 12, 12, 1, 16384, 64)]

DECODE_CHILD = r'''
import sys; sys.path.insert(0, "benchmarks")
import torch, ftcompile
from ftcompile.ops import cuda_attention as ca
from attention_shapes import _us
from attention_ab import digest
ca.DECODE_IMPL = %r
sid = ftcompile.register_site("probe.attention_ab", "attention")
site = ftcompile.telemetry.site(sid)
for b, hq, hk, sq, sk, d in %r:
    g = torch.Generator(device="cuda").manual_seed(sk + d)
    q = torch.randn(b, hq, sq, d, generator=g, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, sk, d, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    plain = lambda: ca.attention(q, k, v, None, False, None, hq != hk, protect=False, kernel="decode")
    ft = lambda: ca.attention(q, k, v, None, False, None, hq != hk, site, kernel="decode")
    dig = [digest(f()) for f in (plain, ft)]
    tp, tf = _us(plain, 3), _us(ft, 3)
    print(f"%s B{b} {hq}/{hk}x{d} sq{sq} s{sk}: plain {tp:.2f} ft {tf:.2f} overhead {100 * (tf / tp - 1):.1f}%% "
          f"digest {dig[0]} {dig[1]}", flush=True)
assert all(v["detected"] == 0 for v in ftcompile.stats().values()), ftcompile.stats()
'''

CHILD = r'''
import sys; sys.path.insert(0, "benchmarks")
import torch, ftcompile
from ftcompile.ops import cuda_attention as ca
from bench_attention import timed
from attention_ab import digest
sid = ftcompile.register_site("probe.attention_ab", "attention")
site = ftcompile.telemetry.site(sid)
for h, d, s, causal in %r:
    g = torch.Generator(device="cuda").manual_seed(0)
    shp = (16384 // s, h, s, d)
    q, k, v = (torch.randn(shp, generator=g, device="cuda").half() for _ in range(3))
    plain = lambda: ca.attention(q, k, v, None, causal, None, False, protect=False)
    ft = lambda: ca.attention(q, k, v, None, causal, None, False, site)
    dig = [digest(f()) for f in (plain, ft)]
    tp, tf = timed(plain, 0.15, 5)[0], timed(ft, 0.15, 5)[0]
    print(f"%s {h}x{d} s{s}{' causal' if causal else ''}: plain {tp:.4f} ft {tf:.4f} overhead {100 * (tf / tp - 1):.1f}%% "
          f"digest {dig[0]} {dig[1]}", flush=True)
'''


def main():
    from concurrent.futures import ThreadPoolExecutor
    from ftcompile.ops.cuda_attention import build
    bases = snapshot_bases("ATTN_AB_BASE")
    decode = os.environ.get("ATTN_AB_SET") == "decode"
    only = ["-DEFTA_DECODE_ONLY"] if decode else []  # (the decode kernel alone: a build in a fraction of the time)
    with ThreadPoolExecutor(4) as ex:
        futs = {name: ex.submit(build, "ftcompile_efta_ab_" + name, [*only, *flags]) for name, flags in BUILDS.items()}
        for name, path in bases.items():
            futs[name] = ex.submit(build, "ftcompile_efta_ab_" + name, only, path)
        libs = {name: f.result() for name, f in futs.items()}
    if os.environ.get("ATTN_AB_BUILD_ONLY") == "1":  # (gpu_check.sh builds them beside the production build)
        print("attention_ab builds:", libs)
        return
    order = list(bases) + list(BUILDS)
    if decode:
        impl = os.environ.get("ATTN_AB_IMPL", "tc")
        child = lambda tag: DECODE_CHILD % (impl, DECODE_CONFIGS, tag)
    else:
        child = lambda tag: CHILD % (CONFIGS, tag)
    lines = run_alternating({name: libs[name] for name in order}, "FTCOMPILE_ATTN_LIB", child,
                            rounds=int(os.environ.get("ATTN_AB_ROUNDS", "2")))
    print(summary(lines, r"(?P<build>\S+)#\d+ (?P<config>[^:]+): plain (?P<plain>[\d.]+) ft (?P<ft>[\d.]+)",
                  ["ft", "plain"], order))
    digests = {}  # outputs must not depend on the build where only the schedule changed
    for m in filter(None, (re.search(r"#\d+ (?P<config>[^:]+): .* digest (?P<d>.+)$", ln) for ln in lines)):
        digests.setdefault(m["config"], set()).add(m["d"])
    for config, ds in digests.items():
        if len(ds) > 1:
            print(f"DIGESTS DIFFER at {config}: {sorted(ds)}")


if __name__ == "__main__":
    main()

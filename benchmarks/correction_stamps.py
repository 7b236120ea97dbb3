"""Where a global-scheme correction's time goes (diagnostics, H200).

    python benchmarks/correction_stamps.py [MxNxK ...]

Builds csrc/gemm with -DFTG_FIX_STAMPS (global_gemm.cu's fix_stamp: per CTA, global-timer stamps
of the start, the end of the consumers' tiles and of the verifiers (row check), the last
correction's start, its location and its recomputed dot, the end of the corrections), runs the
injecting build with one output fault (+10) per call after a warm-up, with the check and tile
width the rule picks (row or tile-local check: the stamps follow that check's diagnostics), and
prints per shape: the grid's span, when the CTAs' roles end (median and last), and for the
correcting CTA each step of its correction, in us from the grid's first start.
FTG_STAMPS_FAULTS=n: n faults in consecutive rows, corrected in turn by one CTA (the stamps are
the last one's: its code warm); FTG_STAMPS_FLAGS: more nvcc flags (a variant build of its own
name).
"""
from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ftcompile import FaultSpec, telemetry  # noqa: E402
from ftcompile.abft import injection  # noqa: E402
from ftcompile.ops import cuda  # noqa: E402

NST = 8  # stamps per CTA (global_gemm.cu, fix_stamp)


def main() -> None:
    # FTG_STAMPS_FLAGS: more nvcc flags for a variant build (its own library name).
    extra = os.environ.get("FTG_STAMPS_FLAGS", "").split()
    name = "ftcompile_gemm_sm90a_fixstamps" + "".join(f.strip("-").replace("=", "").replace("_", "")
                                                       for f in extra)
    path = cuda.build_library("gemm", name, extra_cuda_cflags=["-DFTG_FIX_STAMPS", *extra])
    os.environ["FTCOMPILE_GEMM_LIB"] = path  # cuda_gemm loads this build instead
    from ftcompile.ops import cuda_gemm

    sid = telemetry.register("bench.fixstamps", "linear", "bench", "correct", 2.5, 1.0)
    site = telemetry.site(sid)
    # FTG_STAMPS_FAULTS=n: n faults per call in consecutive rows of one M-tile (one CTA corrects
    # them in turn: the stamps are the last one's, i.e. a correction whose code ran before).
    nfaults = int(os.environ.get("FTG_STAMPS_FAULTS", "1"))
    shapes = [tuple(int(v) for v in a.split("x")) for a in sys.argv[1:]] or [
        (4096, 768, 768), (4096, 768, 3072), (2048, 4096, 4096), (2048, 4096, 11008)]
    g = torch.Generator().manual_seed(0)
    for m, n, k in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        log = torch.zeros(cuda_gemm.MAX_INJ, 2, device="cuda")
        ctas = torch.cuda.get_device_properties(0).multi_processor_count
        check = cuda_gemm.global_check(m, n, k, 1, ctas)  # as run() picks them
        bn = cuda_gemm.global_tile(m, n, k, 1, ctas, cuda_gemm.TILE_CHECK_BNS if check == "tiles"
                                   else cuda_gemm.GLOBAL_BNS)[0]
        diag = 3 * m * (-(-n // bn) if check == "tiles" else 1)  # doubles before the stamps
        for value, label in ((0.0, "noop"), (10.0, "fault")):
            inj = injection.Injection(FaultSpec(site="bench.fixstamps", stage="output", value=value))
            spans = []
            for rep in range(6):
                mt = int(torch.randint(0, m // 128, (1,), generator=g))
                r = 128 * mt + int(torch.randint(0, 128 - nfaults, (1,), generator=g))
                c = int(torch.randint(0, n, (1,), generator=g))
                dbg = torch.full((diag + NST * ctas,), -1.0, dtype=torch.float64, device="cuda")
                cuda_gemm.run("linear_global", x, w, b, site, protect=True, inject=False,
                              plan=[(inj, "output", r + i, c, -1) for i in range(nfaults)], log=log, dbg=dbg,
                              check=check, bn=bn)
                torch.cuda.synchronize()
                st = dbg[diag:].view(ctas, NST).cpu()
                used = st[:, 0] >= 0
                st = st[used]
                t0 = st[:, 0].min().item()
                rel = lambda v: (v - t0) / 1e3 if v > 0 else float("nan")  # noqa: E731  (nan: a stamp this check never writes)
                ends = torch.maximum(st[:, 2], st[:, 4])
                fixer = int(torch.argmax(st[:, 3]).item()) if st[:, 3].max() > 0 else -1
                line = (f"{m}x{n}x{k} {check}@{bn} {label} rep{rep}: span {rel(ends.max().item()):7.2f} us; consumers end "
                        f"med {rel(st[:, 4].median().item()):7.2f} last {rel(st[:, 4].max().item()):7.2f}; "
                        f"verifiers end med {rel(st[:, 5].median().item()):7.2f} last {rel(st[:, 5].max().item()):7.2f}")
                if fixer >= 0:
                    f = st[fixer]
                    line += (f"; fixer CTA: consumers {rel(f[4].item()):7.2f} verifiers {rel(f[5].item()):7.2f} "
                             f"fix start {rel(f[1].item()):7.2f} located {rel(f[6].item()):7.2f} "
                             f"dot {rel(f[7].item()):7.2f} "
                             f"done {rel(f[2].item()):7.2f}")
                if rep > 0:  # the first call warms the build
                    spans.append(rel(ends.max().item()))
                print(line, flush=True)
            print(f"{m}x{n}x{k} {label}: median span {statistics.median(spans):.2f} us", flush=True)


if __name__ == "__main__":
    main()

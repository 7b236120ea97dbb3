"""SM clock and board power while a kernel runs back to back (is the card at its power cap, and at
which clock does each variant run?). nvidia-smi samples every 20 ms in the background; each variant
runs 2 s back to back after a warm-up and a 0.5 s pause, and its window's mean clock, power and
throttle reasons are printed beside its time per call (NOTES_attention.md run 39b).

    python3 benchmarks/power_probe.py attention [--ablate 0 1 3]   # one process per build
    python3 benchmarks/power_probe.py gemm                        # cuBLAS, global off, global on
Prints as it goes (no pipe filter needed); --out FILE also writes the table there.
"""
import argparse
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

SMI_FIELDS = "timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active"


def sampled(variants, seconds=2.0):
    """[(name, fn)] -> [(name, us per call, mean SM MHz, mean W, throttle reasons)]."""
    log = "/tmp/power_probe_smi.csv"
    with open(log, "w") as fh:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits",
                                "-lms", "20"], stdout=fh)
        time.sleep(1.0)
        windows = []
        for name, fn in variants:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            time.sleep(0.5)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            torch.cuda.synchronize()
            n = max(1, int(seconds / (e0.elapsed_time(e1) * 1e-3)))
            t0 = time.time()
            e0.record()
            for _ in range(n):
                fn()
            e1.record()
            torch.cuda.synchronize()
            windows.append((name, e0.elapsed_time(e1) / n * 1e3, t0 + 0.5, time.time()))
        time.sleep(0.2)
        smi.terminate()
        smi.wait()
    samples = []
    for line in open(log):
        f = [x.strip() for x in line.split(",")]
        try:
            stamp, frac = f[0].split(".")
            ts = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + float("0." + frac)
            samples.append((ts, float(f[1]), float(f[2]), f[3]))
        except (ValueError, IndexError):
            continue
    out = []
    for name, us, a, b in windows:
        sel = [s for s in samples if a <= s[0] <= b] or [(0, float("nan"), float("nan"), "?")]
        out.append((name, us, sum(s[1] for s in sel) / len(sel), sum(s[2] for s in sel) / len(sel),
                    sorted({s[3] for s in sel})))
    return out


def attention_variants(ablate):
    import ftcompile
    from ftcompile.ops import cuda_attention as ca
    site = ftcompile.telemetry.site(ftcompile.register_site("probe.power.attention", "attention"))
    out = []
    for h, d, s in [(32, 128, 4096), (16, 64, 4096)]:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn((16384 // s, h, s, d), generator=g, device="cuda").half() for _ in range(3))
        out.append((f"{h}x{d} s{s} plain", lambda q=q, k=k, v=v: ca.attention(q, k, v, protect=False)))
        out.append((f"{h}x{d} s{s} protected abl{ablate}",
                    lambda q=q, k=k, v=v: ca.attention(q, k, v, site=site, ablate=ablate)))
    return out


def gemm_variants():
    from ftcompile import telemetry
    from ftcompile.ops import cuda_gemm
    site = telemetry.site(telemetry.register("probe.power.gemm", "linear", "bench", "correct", 2.5, 1.0))
    out = []
    for m, n, k in [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 768, 3072), (4096, 2304, 768), (4096, 768, 768)]:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(m, k, device="cuda", generator=g).bfloat16()
        w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).bfloat16()
        out.append((f"{m}x{n}x{k} cuBLAS", lambda x=x, w=w: F.linear(x, w)))
        for protect in (False, True):
            out.append((f"{m}x{n}x{k} global {'on' if protect else 'off'}",
                        lambda x=x, w=w, p=protect: cuda_gemm.run("linear_global", x, w, None, site, protect=p,
                                                                  inject=False)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=["attention", "gemm"])
    ap.add_argument("--ablate", type=int, nargs="*", default=[0], help="attention builds (EFTA_ABLATE levels)")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.family == "attention" and args.child is None:
        for level in args.ablate:  # one process per build: each loads its own library
            subprocess.run([sys.executable, __file__, "attention", "--child", str(level), "--out", args.out],
                           check=False)
        return
    variants = attention_variants(args.child) if args.family == "attention" else gemm_variants()
    lines = [f"{name:34s} {us:10.1f} us  SM {mhz:5.0f} MHz  {watts:4.0f} W  throttle {reasons}"
             for name, us, mhz, watts, reasons in sampled(variants)]
    print("\n".join(lines), flush=True)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

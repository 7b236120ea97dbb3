"""Hang probe for the EFTA kernel: each case runs in its own process under a timeout, so a ring or
barrier deadlock costs seconds, not the device call. Prints one line per case: OK with the error
against fp64 SDPA (and the 2x-rule bound), HANG, or FAIL.
    python3 benchmarks/attention_probe.py [--timeout S]"""
import argparse
import subprocess
import sys

# (batch, heads, Sq, Sk, d, causal, protect): few and many key tiles, odd tile counts (an odd last
# step at d=128), ring reuse, causal, the benchmark's first d=128 configuration.
CASES = [(1, 2, 130, 260, 64, False, False), (1, 2, 130, 260, 64, False, True),
         (1, 2, 130, 260, 128, False, False), (1, 2, 130, 260, 128, False, True),
         (2, 4, 320, 448, 128, False, True), (2, 4, 576, 576, 128, False, False),
         (2, 4, 1000, 1000, 128, True, True), (32, 32, 512, 512, 128, False, False),
         (32, 32, 512, 512, 128, False, True), (4, 16, 4096, 4096, 64, False, True),
         (1, 32, 4096, 4096, 128, True, True)]

CHILD = r"""
import sys, torch, torch.nn.functional as F, ftcompile
from ftcompile import telemetry
from ftcompile.ops import cuda_attention as ca
b, h, sq, sk, d, causal, protect = eval(sys.argv[1])
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16, generator=g) for s in (sq, sk, sk))
site = telemetry.site(telemetry.register("probe", "attention", "probe", "correct", 2.5, 1.0)) if protect else None
y = ca.attention(q, k, v, is_causal=causal, site=site, protect=protect)
torch.cuda.synchronize()
ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
tor = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
err, bound = (y.double() - ref).abs().max().item(), 2 * (tor.double() - ref).abs().max().item() + 1e-6
print(f"OK err {err:.2e} bound {bound:.2e} {'pass' if err <= bound else 'OVER'} kernel {ca.last_kernel()}")
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=40)
    ap.add_argument("--d", type=int, default=0, help="only the cases of this head dim")
    args = ap.parse_args()
    for case in CASES:
        if args.d and case[4] != args.d:
            continue
        try:
            r = subprocess.run([sys.executable, "-c", CHILD, repr(case)], capture_output=True, text=True,
                               timeout=args.timeout)
            out = (r.stdout.strip().splitlines() or [""])[-1] if r.returncode == 0 else \
                "FAIL " + (r.stderr.strip().splitlines() or ["?"])[-1]
        except subprocess.TimeoutExpired:
            out = "HANG"
        print(f"{case}: {out}", flush=True)


if __name__ == "__main__":
    main()

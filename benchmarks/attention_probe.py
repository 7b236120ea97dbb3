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
# Unprotected d=64 calls that end or start a pass over the key tiles unevenly (session 69's 128-key
# steps took tiles in pairs): odd and even tile counts, a partial last tile, causal with Sq != Sk,
# and, as an eighth field, a mask ("pad": left-padded rows of a [B, 1, 1, Sk] boolean mask, the kPad
# build; "bool": a [B, H, Sq, Sk] boolean mask; "add": an additive [1, 1, Sq, Sk] mask with -inf
# entries) or "gqa" (4 query heads a KV head).
CASES += [(2, 4, 200, 320, 64, False, False), (2, 4, 257, 257, 64, True, False), (2, 4, 300, 700, 64, True, False),
          (1, 4, 4096, 4096, 64, True, False), (2, 4, 320, 576, 64, False, False, "pad"),
          (2, 4, 256, 448, 64, False, False, "bool"), (2, 4, 256, 330, 64, False, False, "add"),
          (2, 8, 512, 1000, 64, False, False, "gqa")]

CHILD = r"""
import sys, torch, torch.nn.functional as F, ftcompile
from ftcompile import telemetry
from ftcompile.ops import cuda_attention as ca
b, h, sq, sk, d, causal, protect, *extra = eval(sys.argv[1])
kind = extra[0] if extra else None
g = torch.Generator(device="cuda").manual_seed(0)
hk = h // 4 if kind == "gqa" else h
q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.float16, generator=g)
k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(2))
mask = None
if kind == "pad":  # batch i: its first 70 i + 5 keys padded (batch 1 starts at tile 1)
    mask = torch.ones(b, 1, 1, sk, dtype=torch.bool, device="cuda")
    for i in range(b):
        mask[i, ..., : 70 * i + 5] = False
elif kind == "bool":
    mask = torch.rand(b, h, sq, sk, device="cuda", generator=g) > 0.3
    mask[..., 0] = True  # no row masked whole
elif kind == "add":
    mask = torch.randn(1, 1, sq, sk, device="cuda", generator=g)
    mask[mask > 1.5] = float("-inf")
    mask[..., 0] = 0.0
site = telemetry.site(telemetry.register("probe", "attention", "probe", "correct", 2.5, 1.0)) if protect else None
y = ca.attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=kind == "gqa", site=site, protect=protect)
torch.cuda.synchronize()
# (an additive mask in the inputs' dtype; a boolean one as it is)
in_dtype = lambda dt: mask if mask is None or mask.dtype == torch.bool else mask.to(dt)
kw = dict(is_causal=causal, enable_gqa=kind == "gqa")
ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=in_dtype(torch.float64), **kw)
tor = F.scaled_dot_product_attention(q, k, v, attn_mask=in_dtype(q.dtype), **kw)
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

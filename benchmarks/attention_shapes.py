"""The protected attention op on shapes the paper's benchmark leaves out (graph-timed, us per call):

  --set headdims  head dims the kernels run zero-padded (32, 80, 96: Phi-2/Phi-3-like prefill):
                  PyTorch SDPA, ours protected, ours on the same call at the kernel's own head dim
                  (the padding's floor), and the reference op these calls ran before (eager timing:
                  it cannot be captured)
  --set decode    one query row (two, four: speculative decoding) against a long KV cache, as
                  model.generate runs it: SDPA, ours protected / unprotected (the decode kernel
                  where a KV head's group has at most 8 query rows, else the tile kernel), the
                  tile kernel protected on the same call (what ran before the decode kernel), and
                  the bytes of K and V over the protected time (GB/s)

    python benchmarks/attention_shapes.py --set headdims|decode [--out results/....txt]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

import ftcompile
from ftcompile.abft import efta
from ftcompile.ops import cuda_attention as ca
from ftcompile.timing import time_ms

# (batch, query heads, kv heads, query rows, keys, head dim, dtype)
HEADDIMS = [(1, 32, 32, 2048, 2048, 96, torch.bfloat16), (4, 32, 32, 1024, 1024, 96, torch.bfloat16),
            (1, 32, 32, 2048, 2048, 80, torch.float16), (8, 16, 16, 512, 512, 32, torch.float16)]
DECODE = [(b, hq, hk, sq, sk, d, torch.bfloat16) for b in (1, 8) for (hq, hk, d) in ((32, 8, 128), (12, 12, 64))
          for sk in (1024, 4096, 16384) for sq in (1, 2, 4)]


def _us(fn, rounds: int, graph: bool = True, calls: int = 10) -> float:
    return statistics.median(
        time_ms(lambda: [fn() for _ in range(calls)], "cuda", reps=3, graph=graph) * 1e3 / calls
        for _ in range(rounds))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=("headdims", "decode"), required=True)
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sid = ftcompile.register_site(f"attention_shapes.{args.set}", "attention")
    site = ftcompile.telemetry.site(sid)
    lines = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, set {args.set}: us per call "
             f"(CUDA graphs of 10 calls, median of {args.rounds} rounds)"]
    for b, hq, hk, sq, sk, d, dtype in HEADDIMS if args.set == "headdims" else DECODE:
        gen = torch.Generator(device="cuda").manual_seed(sk + d)
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(b, hk, sk, d, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(b, hk, sk, d, device="cuda", dtype=dtype, generator=gen)
        gqa, causal = hq != hk, args.set == "headdims"
        row = {"sdpa": _us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa), args.rounds),
               "ours": _us(lambda: torch.ops.ftcompile.attention(q, k, v, None, causal, None, gqa, sid), args.rounds)}
        if args.set == "headdims":
            kd = ca.kernel_head_dim(d, d)
            qp, kp, vp = (F.pad(t, (0, kd - d)) for t in (q, k, v))
            row[f"ours_d{kd}"] = _us(lambda: torch.ops.ftcompile.attention(qp, kp, vp, None, causal, d ** -0.5, gqa, sid),
                                     args.rounds)
            kw = dict(site_name=site.name, site_id=sid, policy=site.policy, c_sigma=site.c_sigma,
                      e_max_safety=site.e_max_safety)
            row["reference_op"] = _us(lambda: efta.attention(q, k, v, None, causal, None, gqa, **kw), 1, False, 2)
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True, enable_gqa=gqa)
            err = (torch.ops.ftcompile.attention(q, k, v, None, causal, None, gqa, sid).double() - ref).abs().max()
            sdpa_err = (F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa).double() - ref).abs().max()
            tail = f"  ours/sdpa {row['ours'] / row['sdpa']:.2f}  padded/own-dim {row['ours'] / row[f'ours_d{kd}']:.3f}" \
                   f"  err {err:.2e} (sdpa {sdpa_err:.2e})"
        else:
            ran = ca.last_kernel()
            row["ours_plain"] = _us(lambda: ca.attention(q, k, v, None, False, None, gqa, protect=False), args.rounds)
            if ran == "decode":  # both split kernels on the same call ("ours" is auto's choice)
                chosen = ca.DECODE_IMPL
                for impl in ("tc", "fma"):
                    ca.DECODE_IMPL = impl
                    row[impl] = _us(lambda: torch.ops.ftcompile.attention(q, k, v, None, False, None, gqa, sid),
                                    args.rounds)
                    row[f"{impl}_plain"] = _us(lambda: ca.attention(q, k, v, None, False, None, gqa, protect=False),
                                               args.rounds)
                ca.DECODE_IMPL = chosen
            row["tile_kernel"] = _us(lambda: ca.attention(q, k, v, None, False, None, gqa, site, kernel="wgmma"),
                                     args.rounds)
            if ran != "decode" and sq * hq // hk <= ca.DECODE_MAX_ROWS:  # what "auto" leaves out
                row["decode"] = _us(lambda: ca.attention(q, k, v, None, False, None, gqa, site, kernel="decode"),
                                    args.rounds)
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=gqa)
            err = (torch.ops.ftcompile.attention(q, k, v, None, False, None, gqa, sid).double() - ref).abs().max()
            sdpa_err = (F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa).double() - ref).abs().max()
            gbs = 2 * k.numel() * k.element_size() / (row["ours"] * 1e-6) / 1e9
            tail = f"  [{ran}] ours/sdpa {row['ours'] / row['sdpa']:.2f}  plain/sdpa {row['ours_plain'] / row['sdpa']:.2f}" \
                   f"  protection {row['ours'] / row['ours_plain'] - 1:+.1%}  tile/ours {row['tile_kernel'] / row['ours']:.2f}" \
                   f"  KV {gbs:.0f} GB/s  err {err:.2e} (sdpa {sdpa_err:.2e})"
        lines.append(f"B{b} H{hq}/{hk} Sq{sq} Sk{sk} D{d} {str(dtype)[6:]}: "
                     + "  ".join(f"{name} {t:.1f}" for name, t in row.items()) + tail)
        print(lines[-1], flush=True)
    assert all(v["detected"] == 0 for v in ftcompile.stats().values()), ftcompile.stats()
    lines.append("false alarms: 0")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

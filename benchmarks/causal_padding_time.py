"""A padded batch of a causal model, three ways through the protected attention op (graph-timed):
HF's mask as it comes ((kv <= q) & padding[b, kv], a [B, 1, S, S] bool tensor, is_causal False),
the pass's reading of it (is_causal with the [B, 1, 1, S] padding factor: passes/causal_mask.py),
and is_causal alone on the same q, k, v (no padding: the floor); PyTorch SDPA with HF's mask for
scale. The first two agree bit for bit where the same tiles take the masked path, and to 1-2 ulp
with left padding, where the split's tiles after the first live one take the unmasked path (which
rounds its exponentials differently). NOTES.md, session 46.

    python benchmarks/causal_padding_time.py [--out results/causal_padding_runXX.txt]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

import ftcompile
from ftcompile.timing import time_ms

# (batch, query heads, kv heads, length, head dim, dtype): GPT-2 small, Llama-3.2-1B, a d=128 model
SHAPES = [(8, 12, 12, 512, 64, torch.float16), (4, 32, 8, 1024, 64, torch.bfloat16),
          (4, 16, 16, 1024, 128, torch.float16), (2, 32, 8, 2048, 64, torch.bfloat16)]


def padding(b: int, s: int, side: str) -> torch.Tensor:
    """[B, S] bool: sequence i keeps S - i * S / (2 B) tokens (from 100 % down to ~50 %)."""
    keep = torch.ones(b, s, dtype=torch.bool, device="cuda")
    for i in range(b):
        n = s - i * s // (2 * b)
        if side == "right":
            keep[i, n:] = False
        else:
            keep[i, : s - n] = False
    return keep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sid = ftcompile.register_site("causal_padding", "attention")
    lines = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: protected attention op, us per call "
             f"(20 calls per CUDA graph, median of {args.rounds} interleaved rounds)"]
    for b, hq, hk, s, d, dtype in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(s + d)
        q = torch.randn(b, hq, s, d, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(b, hk, s, d, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(b, hk, s, d, device="cuda", dtype=dtype, generator=gen)
        gqa = hq != hk
        for side in ("right", "left"):
            pad = padding(b, s, side)[:, None, None, :]
            idx = torch.arange(s, device="cuda")
            hf = (idx[None, None, None, :] <= idx[None, None, :, None]) & pad  # [B, 1, S, S], as HF builds it
            calls = {
                "hf_mask": lambda: torch.ops.ftcompile.attention(q, k, v, hf, False, None, gqa, sid),
                "split": lambda: torch.ops.ftcompile.attention(q, k, v, pad, True, None, gqa, sid),
                "causal_only": lambda: torch.ops.ftcompile.attention(q, k, v, None, True, None, gqa, sid),
                "sdpa_hf_mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=hf, enable_gqa=gqa),
            }
            diff = (calls["hf_mask"]() - calls["split"]()).abs().max().item()
            times = {name: [] for name in calls}
            for _ in range(args.rounds):
                for name, fn in calls.items():
                    times[name].append(time_ms(lambda: [fn() for _ in range(20)], "cuda", reps=3, graph=True) * 1e3 / 20)
            med = {name: statistics.median(t) for name, t in times.items()}
            lines.append(f"B{b} H{hq}/{hk} S{s} D{d} {str(dtype)[6:]} {side:5s}: "
                         + "  ".join(f"{name} {t:.1f}" for name, t in med.items())
                         + f"  split/hf {med['split'] / med['hf_mask']:.3f}  maxdiff {diff}")
            print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""``python -m ftcompile.demo``: compile a small GPT with backend="ft", check it, explain it, and
show a soft error being caught and corrected.

The model is a self-contained GPT-2-style decoder (random weights, nothing downloaded) whose
attention is written by hand (matmul -> scale -> causal mask -> softmax -> matmul), like HF's
"eager" attention; ``--sdpa`` uses F.scaled_dot_product_attention instead.
"""
from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, sdpa: bool):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d // self.heads))
            causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
            scores = scores + torch.zeros(s, s, device=x.device, dtype=x.dtype).masked_fill(
                ~causal, torch.finfo(x.dtype).min)
            y = scores.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 512, dim: int = 128, heads: int = 4, layers: int = 2,
                 seq: int = 64, sdpa: bool = False):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, sdpa) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eager", action="store_true", help="skip inductor (fast)")
    parser.add_argument("--sdpa", action="store_true", help="attention through F.sdpa")
    parser.add_argument("--device", default=None, help="cost-model target, e.g. H100 or T4")
    args = parser.parse_args(argv)

    import ftcompile

    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyGPT(sdpa=args.sdpa).to(dev).eval()
    ids = torch.randint(0, 512, (4, 64), device=dev)
    options = {"eager": args.eager}
    if args.device:
        options["device"] = args.device

    with torch.no_grad():
        expected = model(ids)
        compiled = torch.compile(model, backend="ft", options=options)
        start = time.time()
        got = compiled(ids)
        took = time.time() - start
    err = (got - expected).abs().max().item()
    print(f"compiled with backend='ft' ({'eager' if args.eager else 'inductor'}) in {took:.1f} s; "
          f"max |ft - eager| = {err:.2e}")
    if not err < 1e-3:
        print("MISMATCH against eager")
        return 1

    print()
    print(ftcompile.explain(model, ids, device=args.device))

    site = "blocks.1.fc"
    print(f"\ninjecting a bit flip (fp32 accumulator, exponent bit 27) into {site} ...")
    ftcompile.reset_stats()
    compiled = torch.compile(model, backend="ft", options=options)
    with torch.no_grad():
        clean = compiled(ids)
        with ftcompile.inject(ftcompile.FaultSpec(site=site, stage="accumulator", bit=27,
                                                  index=(5, 17))) as injection:
            faulty = compiled(ids)
    event = injection.events[0]
    print(f"  corrupted {event.index}: {event.before:.4g} -> {event.after:.4g}")
    # The located element is recomputed by one dot product: equal to rounding, not bit for bit.
    diff = (faulty - clean).abs().max().item()
    print(f"  max |output - fault-free output| = {diff:.2e} (the fault itself was "
          f"{abs(event.after - event.before):.3g})")
    for name, row in ftcompile.stats().items():
        if row["detected"] or name == site:
            print(f"  {name}: {row}")
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main())

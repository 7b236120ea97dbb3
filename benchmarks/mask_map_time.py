"""Device time of each kernel of one masked EFTA call (Llama-1B shape, 32/8 heads, d = 64, 2048 tokens)
with a causal mask given as a bool and as an fp16 tensor: the mask map kernel against the attention
kernel (NOTES_attention.md, "Masks given as tensors"; graph_profile.kernels_per_forward).

    python benchmarks/mask_map_time.py
"""
import sys
from pathlib import Path

import torch

import ftcompile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graph_profile import kernels_per_forward  # noqa: E402

sid = ftcompile.register_site("mm", "attention")
q = torch.randn(1, 32, 2048, 64, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 8, 2048, 64, device="cuda", dtype=torch.bfloat16)
v = torch.randn_like(k)
causal = torch.ones(2048, 2048, dtype=torch.bool, device="cuda").tril()[None, None]
for name, mask in [("bool 2048x2048 causal", causal),
                   ("fp16 2048x2048 causal", torch.zeros(causal.shape, device="cuda").masked_fill(
                       ~causal, float("-inf")).half())]:
    call = lambda: torch.ops.ftcompile.attention(q, k, v, mask, False, None, True, sid)  # noqa: E731
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    per = kernels_per_forward(call, calls=10)  # {kernel: (launches, ms)} per call
    print(name, {kern[:60]: round(ms * 1e3 / n, 1) for kern, (n, ms) in per.items()})

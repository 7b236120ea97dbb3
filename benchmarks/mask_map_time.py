"""Device time of each kernel of one masked EFTA call (Llama-1B shape, 32/8 heads, d = 64, 2048 tokens)
with a causal mask given as a bool and as an fp16 tensor: the mask map kernel against the attention
kernel (NOTES_attention.md, "Masks given as tensors").

    python benchmarks/mask_map_time.py
"""
import torch, ftcompile
from torch.profiler import profile, ProfilerActivity
sid = ftcompile.register_site("mm", "attention")
q = torch.randn(1, 32, 2048, 64, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 8, 2048, 64, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
for name, mask in [("bool 2048x2048 causal", torch.ones(2048, 2048, dtype=torch.bool, device="cuda").tril()[None, None]),
                   ("fp16 2048x2048 causal", torch.zeros(2048, 2048, device="cuda").masked_fill(
                       ~torch.ones(2048, 2048, dtype=torch.bool, device="cuda").tril(), float("-inf")).half()[None, None])]:
    for _ in range(3):
        torch.ops.ftcompile.attention(q, k, v, mask, False, None, True, sid)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            torch.ops.ftcompile.attention(q, k, v, mask, False, None, True, sid)
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    per = {}
    for e in ev:
        per.setdefault(e.name[:60], []).append(e.device_time_total)
    print(name, {n: round(sum(t) / len(t), 1) for n, t in per.items()})

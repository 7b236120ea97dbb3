"""Reproducer of an intermittent wrong result in the thread scheme's ring kernel (found in session
23, not fixed: benchmarks/NOTES_gemm.md "An intermittent race in the ring kernel"): 60 calls per
shape and build, each compared with the fp64 product (2x rule); prints the bad calls (call, max
error, first and last bad element, count) and the site's counters.

    python benchmarks/ring_race_probe.py
"""
import torch, torch.nn.functional as F, ftcompile
from ftcompile.ops import cuda_gemm
sid = ftcompile.register_site("probe", "linear")
s = ftcompile.telemetry.site(sid)
print(cuda_gemm.thread_config(256, 50264, 768, 1, 132))
for (m, n, k) in [(256, 50264, 768), (256, 50257, 768), (256, 11008, 4096)]:
    for dtype in (torch.float16, torch.bfloat16):
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda", dtype=dtype); w = (torch.randn(n, k, device="cuda", dtype=dtype) * k ** -0.5); b = torch.randn(n, device="cuda", dtype=dtype)
        ref = F.linear(x.double(), w.double(), b.double()); tol = 2 * (F.linear(x, w, b).double() - ref).abs().max() + 1e-6
        for protect in (False, True):
            ftcompile.reset_stats()
            bad = []
            for i in range(60):
                y = cuda_gemm.run("linear_thread", x, w, b, s, protect=protect, kernel="ring")
                err = (y.double() - ref).abs()
                if err.max() > tol:
                    nz = (err > tol).nonzero()
                    bad.append((i, round(float(err.max()), 3), nz[0].tolist(), nz[-1].tolist(), int((err > tol).sum())))
            print(m, n, k, dtype, "protect", protect, "bad calls", len(bad), bad[:4], ftcompile.stats("probe")["probe"], flush=True)

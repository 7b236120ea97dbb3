"""The ring kernel's slot release (NOTES_gemm.md "An intermittent race in the ring kernel", fixed in
session 24): count the calls whose output differs from the fp64 product (2x rule) at the shapes
where the race showed, protected and plain, and time the ring kernel against cuBLAS at a few
shapes, in one run. FTCOMPILE_GEMM_LIB (optional) names a kernel library built elsewhere, e.g. a
variant for an A/B (run 30a built three with nvcc on the CPU machine and carried them in).

    python benchmarks/ring_release_probe.py --calls 200 --tag fenced --json out.json
"""
import argparse, json, os, sys
from pathlib import Path
import torch, torch.nn.functional as F, ftcompile
from ftcompile.ops import cuda_gemm
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gemm  # noqa: E402  (graph_times: device time, rotated inputs)

ap = argparse.ArgumentParser()
ap.add_argument("--calls", type=int, default=200)
ap.add_argument("--tag", default=os.environ.get("FTCOMPILE_GEMM_LIB", "built"))
ap.add_argument("--json", default=None)
args = ap.parse_args()
sid = ftcompile.register_site("probe", "linear")
site = ftcompile.telemetry.site(sid)
out = {"tag": args.tag, "race": [], "time": []}

for (m, n, k) in [(256, 50257, 768), (256, 11008, 4096)]:
    for dtype in (torch.float16, torch.bfloat16):
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda", dtype=dtype)
        w = torch.randn(n, k, device="cuda", dtype=dtype) * k ** -0.5
        b = torch.randn(n, device="cuda", dtype=dtype)
        ref = F.linear(x.double(), w.double(), b.double())
        tol = 2 * (F.linear(x, w, b).double() - ref).abs().max() + 1e-6
        for protect in (False, True):
            ftcompile.reset_stats()
            bad = 0
            for _ in range(args.calls):
                y = cuda_gemm.run("linear_thread", x, w, b, site, protect=protect, kernel="ring")
                bad += int(((y.double() - ref).abs() > tol).any())
            st = ftcompile.stats("probe")["probe"]
            out["race"].append(dict(shape=[m, n, k], dtype=str(dtype), protect=protect, calls=args.calls, bad=bad,
                                    detected=st["detected"]))
            print(args.tag, "race", m, n, k, dtype, "protect", protect, "bad", bad, "/", args.calls,
                  "detected", st["detected"], flush=True)


for (m, n, k) in [(32, 4096, 4096), (64, 11008, 4096), (128, 4096, 4096), (256, 4096, 4096), (256, 11008, 4096),
                  (256, 50257, 768)]:
    sets = bench_gemm.make_sets(m, n, k, torch.bfloat16, bias=False)
    row = dict(shape=[m, n, k], cfg=list(cuda_gemm.thread_config(m, n, k, 1, 132)))
    calls = {"cublas_us": lambda x, w, b: F.linear(x, w)}
    for protect in (False, True):
        calls[f"ring_{'on' if protect else 'off'}_us"] = (
            lambda x, w, b, protect=protect: cuda_gemm.run("linear_thread", x, w, None, site, protect=protect,
                                                           kernel="ring"))
    row.update({key: ms * 1e3 for key, ms in bench_gemm.graph_times(calls, sets).items()})  # device time
    out["time"].append(row)
    print(args.tag, "time", m, n, k, row["cfg"], " ".join(f"{key} {v:.1f}" for key, v in row.items()
                                                          if key.endswith("_us")), flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)

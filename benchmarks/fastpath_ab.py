"""The C++ replay of launch plans (ops/fastpath.py) against the Python replay, in separate processes
(FTCOMPILE_FASTPATH=1 / 0, alternating): host us per twin call, and GPT-2 small 8x512 graph-free
(wall and host ms per forward) against inductor in the same process.

    python benchmarks/fastpath_ab.py [--rounds 2]       (prints one line per process)
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import torch


def child() -> str:
    import torch.nn.functional as F

    import ftcompile  # noqa: F401  (registers the ops and the backend)
    from bench_models import build
    from ftcompile import telemetry
    from ftcompile.ops import fastpath
    from host_overhead import forward_ms, host_us

    dev = torch.device("cuda")
    reg = lambda name, kind, scheme: telemetry.site(telemetry.register(name, kind, scheme, "correct", 2.5, 1.0))
    g, a = reg("ab.linear", "linear", "linear_global"), reg("ab.attention", "attention", "efta")
    h = dict(device=dev, dtype=torch.float16)
    x, xt = torch.randn(64, 768, **h), torch.randn(8, 768, **h)
    w, b = torch.randn(768, 768, **h) / 30, torch.randn(768, **h)
    q, k, v = (torch.randn(1, 12, 128, 64, **h) for _ in range(3))
    twin = torch.ops.ftcompile_infer
    out = []
    with torch.no_grad():
        for name, f in (("F.linear", lambda: F.linear(x, w, b)),
                        ("twin linear_global", lambda: twin.linear_global.default(x, w, b, g.id)),
                        ("twin linear_thread", lambda: twin.linear_thread.default(xt, w, b, g.id)),
                        ("SDPA", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                        ("twin attention", lambda: twin.attention.default(q, k, v, None, True, None, False, a.id))):
            out.append(f"{name} {host_us(f, 300):.1f} us")
        model = build("gpt2").eval().cuda().half()
        ids = torch.randint(0, 1000, (8, 512), device="cuda")
        for backend in ("inductor", "ft"):
            torch._dynamo.reset()
            wall, host = forward_ms(torch.compile(model, backend=backend), ids, rounds=3, warmup=5)
            out.append(f"gpt2 {backend} wall {wall:.2f} ms host {host:.2f} ms")
    return f"FASTPATH={os.environ.get('FTCOMPILE_FASTPATH', '1')} {fastpath.stats()}: " + "; ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(child(), flush=True)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(args.rounds):
        for flag in ("0", "1"):
            env = dict(os.environ, FTCOMPILE_FASTPATH=flag)
            res = subprocess.run([sys.executable, os.path.join(here, "fastpath_ab.py"), "--child"], env=env,
                                 cwd=here, capture_output=True, text=True, timeout=300)
            print(res.stdout.strip() or res.stderr[-2000:], flush=True)


if __name__ == "__main__":
    main()

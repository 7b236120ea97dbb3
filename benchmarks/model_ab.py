"""Source trees of ftcompile timed against each other on whole models: each child process imports
ftcompile and its passes from one tree (PYTHONPATH), compiles bench_models.py's models with
backend="ft", graph-free and with CUDA graphs, and prints ms per forward; the trees alternate
(alternate.py), so drift between processes shows. For changes to the Python side (passes, ops);
the kernel libraries are the same in every tree (their build cache is shared).

    MODEL_AB_BASE=<tree> python benchmarks/model_ab.py [--only gpt2,1x2048] [--rounds 2]

<tree>: a path ("base"), or "name=path;name2=path2", holding ftcompile/ and passes/ (e.g. `git archive
HEAD ftcompile passes | tar -x -C <tree>`); the working tree runs as "tree". A tree without csrc/
gets the working tree's ops/cuda.py (a link), so that it builds and finds the working tree's kernels, and
ftcompile/passes as a link to its passes/ (the editable install maps ftcompile.passes to the cwd's).
"""
from __future__ import annotations

import argparse
import os

from alternate import run_alternating, snapshot_bases, summary


def child(tag: str, only: str) -> str:
    return f"""
import os, sys, torch
sys.path[:0] = [os.environ["PYTHONPATH"], os.path.join(os.getcwd(), "benchmarks")]  # the tree before the cwd
import ftcompile, ftcompile.passes as passes
from bench_models import CONFIGS, build
from ftcompile.timing import median_ms
print("# {tag}", ftcompile.__file__, passes.__file__, flush=True)
for name, (kind, dtype, batch, seq) in CONFIGS.items():
    if not any(o in name for o in {only.split(",")!r}):
        continue
    torch.manual_seed(0)
    model = build(kind).eval().cuda().to(dtype)
    ids = torch.randint(0, 1000, (batch, seq), device="cuda")
    with torch.no_grad():
        torch._dynamo.reset()
        ft = torch.compile(model, backend="ft")
        ft(ids)
        free = median_ms(lambda: ft(ids))
        torch._dynamo.reset()
        ftg = torch.compile(model, backend="ft", mode="reduce-overhead")
        ftg(ids)
        graphs = median_ms(lambda: ftg(ids))
    print(f"{tag} {{name}}: free {{free:.4f}} graphs {{graphs:.4f}}", flush=True)
    del model, ft, ftg
    torch.cuda.empty_cache()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="gpt2,1x2048", help="comma-separated substrings of config names")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    trees = {**snapshot_bases("MODEL_AB_BASE"), "tree": os.getcwd()}
    for path in trees.values():
        cuda_py = os.path.join(path, "ftcompile", "ops", "cuda.py")
        if not os.path.isdir(os.path.join(path, "csrc")) and not os.path.islink(cuda_py):
            os.replace(cuda_py, cuda_py + ".orig")  # the kernels are the working tree's (one build cache)
            os.symlink(os.path.join(os.getcwd(), "ftcompile", "ops", "cuda.py"), cuda_py)
        inner = os.path.join(path, "ftcompile", "passes")
        if not os.path.exists(inner):  # else ftcompile.passes resolves, through the editable install, to the cwd's
            os.symlink(os.path.join("..", "passes"), inner)
    lines = run_alternating(trees, "PYTHONPATH", lambda tag: child(tag, args.only), rounds=args.rounds)
    print(summary(lines, r"(?P<build>\S+)#\d+ (?P<config>[^:]+): free (?P<free>[\d.]+) graphs (?P<graphs>[\d.]+)",
                  ["free", "graphs"], list(trees)))


if __name__ == "__main__":
    main()

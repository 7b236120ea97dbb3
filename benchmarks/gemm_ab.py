"""A/B of builds of the GEMM kernel library in alternating processes (each loaded through
FTCOMPILE_GEMM_LIB): the working tree's sources (and flag variants, GEMM_AB_FLAGS) against snapshots
of reference sources (GEMM_AB_BASE), on the thread scheme's decode and few-row shapes: cuBLAS and
the auto thread kernel protected and not, variants timed in turn from CUDA graphs.

    git archive HEAD csrc/gemm csrc/common | tar -x -C /tmp/base   # the reference, before editing
    GEMM_AB_BASE=/tmp/base/csrc python benchmarks/gemm_ab.py
(GEMM_AB_FLAGS: "name=-DX=1;name2=..." for flag variants of the tree; GEMM_AB_BASE: one snapshot, or
several as "name=path;name2=path2"; GEMM_AB_ROUNDS: rounds, default 2: the first process of a
run can be slower in every variant, cuBLAS included, so a third round helps; GEMM_AB_SHAPES:
"MxNxK,MxNxK:thin,..." instead of the default shapes, ":kernel" forcing the thread kernel;
GEMM_AB_SCHEME: linear_global to time the global scheme instead of the thread scheme;
GEMM_AB_BUILD_ONLY=1: build the variants and print their paths, nothing timed.)
"""
import os

from alternate import flag_builds, run_alternating, snapshot_bases, summary

BUILDS = flag_builds("GEMM_AB_FLAGS")
SCHEME = os.environ.get("GEMM_AB_SCHEME", "linear_thread")
SHAPES = [(m, n, k) for m in (1, 16, 32) for n, k in ((4096, 4096), (11008, 4096), (14336, 4096))]
SHAPES += [(1, 2304, 768), (1, 768, 3072), (64, 4096, 4096)]
SHAPES = [(m, n, k, None) for m, n, k in SHAPES]


def _shape(spec: str):
    """"MxNxK" or "MxNxK:kernel" -> (M, N, K, kernel or None)."""
    dims, _, kernel = spec.partition(":")
    return (*map(int, dims.split("x")), kernel or None)


if os.environ.get("GEMM_AB_SHAPES"):
    SHAPES = [_shape(s) for s in os.environ["GEMM_AB_SHAPES"].split(",")]

CHILD = r'''
import sys; sys.path.insert(0, "benchmarks")
import torch
from bench_gemm import Runner, graph_times, make_sets
r = Runner()
for m, n, k, kern in %r:
    sets = make_sets(m, n, k, torch.bfloat16, budget=6 << 30)
    t = graph_times({"cublas": r.variant("cublas"), "on": r.variant("on", %r, kernel=kern),
                     "off": r.variant("off", %r, kernel=kern)}, sets)
    nbytes = (m * k + n * k + m * n + n) * 2
    print(f"%s {m}x{n}x{k}{':' + kern if kern else ''}: " + "  ".join(f"{l} {v * 1e3:.2f} ({nbytes / v / 1e9:.2f} TB/s)" for l, v in t.items())
          + f"  on/cublas {t['on'] / t['cublas']:.3f}  off/cublas {t['off'] / t['cublas']:.3f}", flush=True)
'''


def main():
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    from ftcompile.ops import cuda
    bases = snapshot_bases("GEMM_AB_BASE")
    with ThreadPoolExecutor(4) as ex:
        futs = {name: ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_" + name, flags)
                for name, flags in BUILDS.items()}
        for name, path in bases.items():
            futs[name] = ex.submit(cuda.build_library, "gemm", "ftcompile_gemm_ab_" + name, (), (), False, Path(path))
        libs = {name: f.result() for name, f in futs.items()}
    if os.environ.get("GEMM_AB_BUILD_ONLY"):  # the libraries alone (e.g. before a test run on one of them)
        print("\n".join(f"{name} {path}" for name, path in libs.items()))
        return
    order = list(bases) + list(BUILDS)
    lines = run_alternating({name: libs[name] for name in order}, "FTCOMPILE_GEMM_LIB",
                            lambda tag: CHILD % (SHAPES, SCHEME, SCHEME, tag), rounds=int(os.environ.get("GEMM_AB_ROUNDS", "2")))
    print(summary(lines, r"(?P<build>\S+)#\d+ (?P<config>\S+): cublas (?P<cublas>[\d.]+) .*? on (?P<on>[\d.]+) .*? "
                  r"off (?P<off>[\d.]+)", ["on", "off", "cublas"], order))


if __name__ == "__main__":
    main()

"""The streaming thread kernel's L2 policy for W (evict-first where one CTA row reads W once,
stream_gemm.cu w_policy) against the normal policy everywhere (-DFTG_STREAM_DEFAULT_L2), at decode
and few-row shapes: cuBLAS and the auto kernel protected and not, each build twice in alternating
processes, variants timed in turn from CUDA graphs (NOTES_gemm.md session 28).

    python benchmarks/evict_probe.py
"""
from alternate import run_alternating

BUILDS = {"default_l2": ["-DFTG_STREAM_DEFAULT_L2"], "production": []}
SHAPES = [(m, n, k) for m in (1, 16, 32) for n, k in ((11008, 4096), (14336, 4096), (8192, 4096), (4096, 4096))]
SHAPES += [(1, 2304, 768), (1, 768, 3072), (64, 4096, 4096), (64, 2304, 768)]

CHILD = r'''
import sys; sys.path.insert(0, "benchmarks")
import torch
from bench_gemm import Runner, graph_times, make_sets
r = Runner()
for m, n, k in %r:
    sets = make_sets(m, n, k, torch.bfloat16, budget=6 << 30)
    t = graph_times({"cublas": r.variant("cublas"), "on": r.variant("on", "linear_thread"),
                     "off": r.variant("off", "linear_thread")}, sets)
    nbytes = (m * k + n * k + m * n + n) * 2
    print(f"%s {m}x{n}x{k}: " + "  ".join(f"{l} {v * 1e3:.1f} ({nbytes / v / 1e9:.2f} TB/s)" for l, v in t.items())
          + f"  on/cublas {t['on'] / t['cublas']:.3f}", flush=True)
'''


def main():
    from ftcompile.ops import cuda
    libs = {name: cuda.build_library("gemm", "ftcompile_gemm_l2probe_" + name, extra_cuda_cflags=flags)
            for name, flags in BUILDS.items()}
    run_alternating(libs, "FTCOMPILE_GEMM_LIB", lambda tag: CHILD % (SHAPES, tag))


if __name__ == "__main__":
    main()

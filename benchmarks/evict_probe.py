"""The streaming thread kernel's L2 policy for W (evict-first where one CTA row reads W once,
stream_gemm.cu w_policy) against the normal policy everywhere (-DFTG_STREAM_DEFAULT_L2), at decode
and few-row shapes: cuBLAS and the auto kernel protected and not, each build twice in alternating
processes, variants timed in turn from CUDA graphs (NOTES_gemm.md session 28).

    python benchmarks/evict_probe.py
"""
from alternate import run_alternating
from gemm_ab import CHILD  # the same timing child (cuBLAS, thread kernel on and off)

BUILDS = {"default_l2": ["-DFTG_STREAM_DEFAULT_L2"], "production": []}
SHAPES = [(m, n, k) for m in (1, 16, 32) for n, k in ((11008, 4096), (14336, 4096), (8192, 4096), (4096, 4096))]
SHAPES += [(1, 2304, 768), (1, 768, 3072), (64, 4096, 4096), (64, 2304, 768)]


def main():
    from ftcompile.ops import cuda
    libs = {name: cuda.build_library("gemm", "ftcompile_gemm_l2probe_" + name, extra_cuda_cflags=flags)
            for name, flags in BUILDS.items()}
    run_alternating(libs, "FTCOMPILE_GEMM_LIB", lambda tag: CHILD % (SHAPES, tag))


if __name__ == "__main__":
    main()

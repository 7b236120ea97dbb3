"""Compile a bench_models model with one backend and print inductor's generated code (run with
TORCH_LOGS=output_code; the code goes to stderr): compare the Triton kernels around the protected
ops with inductor's own (NOTES.md, session 27: GPT-2's GELU after our GEMM).

    TORCH_LOGS=output_code python benchmarks/inductor_code_probe.py ft|inductor [gpt2|bert|llama] 2> code.log
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import build  # noqa: E402


def main() -> None:
    backend, kind = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "gpt2")
    torch.manual_seed(0)
    model = build(kind).eval().cuda().to(torch.float16)
    ids = torch.randint(0, 1000, (8, 512), device="cuda")
    with torch.no_grad():
        compiled = torch.compile(model, backend=backend)
        compiled(ids)
        torch.cuda.synchronize()
    print("compiled", kind, "with", backend)


if __name__ == "__main__":
    main()

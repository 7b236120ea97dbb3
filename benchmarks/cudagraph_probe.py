"""Diagnostics: which tensor stays alive in a CUDA-graph pool (inductor's cudagraph trees record
where each pool allocation came from). Compiles a small GPT-2 with mode="reduce-overhead" under
inductor and under backend="ft" and prints each failure's allocation history.

    python benchmarks/cudagraph_probe.py
"""
import traceback

import torch
import transformers

import ftcompile  # noqa: F401

torch._inductor.config.triton.cudagraph_trees_history_recording = True
torch._inductor.config.triton.slow_path_cudagraph_asserts = True


def model(use_cache):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=512, attn_implementation="sdpa",
                                  bos_token_id=0, eos_token_id=0, use_cache=use_cache)
    return transformers.GPT2LMHeadModel(cfg).eval().cuda().half()


ids = torch.randint(0, 512, (4, 128), device="cuda")
for backend in ("ft", "inductor"):
    for use_cache in (True, False):
        torch._dynamo.reset()
        m = model(use_cache)
        f = torch.compile(m, backend=backend, mode="reduce-overhead")
        try:
            with torch.no_grad():
                for _ in range(4):
                    f(ids)
            print(f"{backend} use_cache={use_cache}: OK", flush=True)
        except Exception as exc:  # noqa: BLE001
            msg = str(exc)
            print(f"{backend} use_cache={use_cache}: {type(exc).__name__}: {msg[:3000]}", flush=True)
            traceback.print_exc(limit=3)

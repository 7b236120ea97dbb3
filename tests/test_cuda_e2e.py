"""End to end on a GPU: HF models compiled with backend="ft" run their protected ops on CUDA."""
import pytest
import torch

import ftcompile
from ftcompile import FaultSpec, inject

# (captured_sites_kept: each test builds its own model, so a later test's injection into a site of
# the same name as a captured one is not a replay)
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.usefixtures("captured_sites_kept")]
transformers = pytest.importorskip("transformers")


def _model(name, impl, dtype, head_dim=64):
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=4 * head_dim, n_head=4, vocab_size=512,
                                      attn_implementation=impl, bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=4 * head_dim, num_attention_heads=4,
                                       num_key_value_heads=2, intermediate_size=512,
                                       vocab_size=512, attn_implementation=impl)
        model = transformers.LlamaForCausalLM(cfg)
    return model.eval().cuda().to(dtype)


CASES = [(name, impl, dtype, False) for name in ("gpt2", "llama") for impl in ("sdpa", "eager")
         for dtype in (torch.float16, torch.bfloat16)]
CASES += [("gpt2", "sdpa", torch.float16, True), ("llama", "eager", torch.bfloat16, True)]


@pytest.mark.parametrize("name,impl,dtype,inductor", CASES)
def test_model_on_gpu(name, impl, dtype, inductor):
    model = _model(name, impl, dtype)
    ids = torch.randint(0, 512, (4, 128), device="cuda")
    with torch.no_grad():
        ref32 = _model(name, impl, torch.float32)(ids).logits.double()
        eager = model(ids).logits.double()
        out = torch.compile(model, backend="ft", options={"eager": not inductor})(ids).logits.double()
    # flash-attention's rule against an fp32 model: at most 2x eager's own low-precision error
    assert (out - ref32).abs().max() <= 2 * (eager - ref32).abs().max() + 1e-3
    stats = ftcompile.stats()
    assert stats and all(v["detected"] == 0 for v in stats.values())
    report = ftcompile.explain(model, ids)
    assert report.device == "H200" or report.device.startswith(("H100", "A100", "L4", "L40S"))
    # HF Llama builds its rotary frequencies on the GPU with a K = 1 outer product: reported, and
    # the only product allowed to stay as it was.
    assert all(r.kind == "matmul" and "K = 1" in r.reason for r in report.unprotected)
    assert not [r for r in report.records if r.kind in ("attention", "linear") and not r.protected]


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_padded_batch_on_gpu(name, side):
    """A padded batch of a causal model: EFTA takes is_causal and the [B, 1, 1, S] padding mask
    (passes/causal_mask.py); the kept tokens' logits follow the 2x rule against an fp32 model."""
    from ftcompile.passes import counters
    model = _model(name, "sdpa", torch.bfloat16)
    ids = torch.randint(0, 512, (4, 200), device="cuda")
    mask = torch.ones(4, 200, dtype=torch.long, device="cuda")
    if side == "right":
        mask[1, 150:], mask[3, 70:] = 0, 0
    else:
        mask[1, :50], mask[3, :130] = 0, 0

    def run(m):
        return m(input_ids=ids, attention_mask=mask).logits.double()
    counters.clear()
    with torch.no_grad():
        ref32, eager = run(_model(name, "sdpa", torch.float32)), run(model)
        out = run(torch.compile(model, backend="ft", options={"eager": True}))
    kept = mask.bool()  # a padded query's logits are not defined by any model contract
    err = (out - ref32).abs()[kept].max()
    assert err <= 2 * (eager - ref32).abs()[kept].max() + 1e-3
    assert counters["attention_causal_padding"] == 2
    assert all(v["detected"] == 0 and v["nonfinite_inputs"] == 0 for v in ftcompile.stats().values())


@pytest.mark.parametrize("name,head_dim", [("gpt2", 80), ("llama", 96)])
def test_head_dims_below_128_run_the_kernel_and_replay_in_graphs(name, head_dim):
    """Head dims 80 (Phi-2-like) and 96 (Phi-3-like) run a kernel on zero-padded heads, not the
    reference op: the 2x rule against an fp32 model, and a CUDA-graph capture (which refuses a site
    left to the reference op) replays every attention site."""
    model = _model(name, "sdpa", torch.bfloat16, head_dim)
    ids = torch.randint(0, 512, (2, 160), device="cuda")
    with torch.no_grad():
        ref32 = _model(name, "sdpa", torch.float32, head_dim)(ids).logits.double()
        eager = model(ids).logits.double()
        out = torch.compile(model, backend="ft", options={"eager": True})(ids).logits.double()
        assert (out - ref32).abs().max() <= 2 * (eager - ref32).abs().max() + 1e-3
        torch._dynamo.reset()
        graphs = torch.compile(model, backend="ft", mode="reduce-overhead")
        for _ in range(3):  # warm-up, capture, replay
            graphs(ids)
        ftcompile.reset_stats()
        replayed = graphs(ids).logits.double()
    torch.testing.assert_close(replayed, out, rtol=5e-2, atol=5e-2)  # inductor's fusions against eager
    names = [f"transformer.h.{i}.attn" if name == "gpt2" else f"model.layers.{i}.self_attn" for i in range(2)]
    stats = ftcompile.stats()
    assert all(stats[n]["checks"] == 1 and stats[n]["detected"] == 0 for n in names), stats
    assert set(names) <= {n for _, n in ftcompile.cudagraphs.captured_sites()}


def test_decode_steps_with_a_kv_cache_run_the_decode_kernel():
    """model.generate's steps (one token against a DynamicCache, GQA 4/2: two query rows per KV
    head) run the decode kernel: the 2x rule against an fp32 model's steps, nothing counted."""
    from transformers import DynamicCache
    from ftcompile.ops import cuda_attention as ca
    model, ref = _model("llama", "sdpa", torch.bfloat16), _model("llama", "sdpa", torch.float32)
    ids = torch.randint(0, 512, (2, 300), device="cuda")
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    caches = DynamicCache(), DynamicCache(), DynamicCache()
    with torch.no_grad():
        for m, c in zip((ref, model, model), caches):
            m(ids, past_key_values=c, use_cache=True)
        token = ids[:, -1:]
        ftcompile.reset_stats()
        for _ in range(3):
            want = ref(token, past_key_values=caches[0], use_cache=True).logits.double()
            eager = model(token, past_key_values=caches[1], use_cache=True).logits.double()
            got = compiled(token, past_key_values=caches[2], use_cache=True).logits.double()
            assert ca.last_kernel() == "decode"
            assert (got - want).abs().max() <= 2 * (eager - want).abs().max() + 1e-3
            token = want.argmax(-1)
    stats = ftcompile.stats()
    assert all(stats[f"model.layers.{i}.self_attn"]["checks"] == 3 for i in range(2)), stats
    assert all(v["detected"] == 0 for v in stats.values())


def test_fault_corrected_on_gpu():
    model = _model("llama", "sdpa", torch.bfloat16)
    ids = torch.randint(0, 512, (2, 64), device="cuda")
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    with torch.no_grad():
        clean = compiled(ids).logits
        ftcompile.reset_stats()
        site = "model.layers.1.mlp.down_proj"
        with inject(FaultSpec(site=site, stage="accumulator", bit=28, index=(7, 11))):
            faulty = compiled(ids).logits
    torch.testing.assert_close(faulty, clean, rtol=2e-2, atol=2e-2)
    stats = ftcompile.stats()
    assert stats[site]["detected"] == 1 and stats[site]["corrected"] == 1
    others = {k: v for k, v in stats.items() if k != site and v["checks"]}
    assert others and all(v["detected"] == 0 for v in others.values())


@pytest.mark.parametrize("name,dtype,site", [("llama", torch.bfloat16, "model.layers.1.mlp.down_proj"),
                                             ("gpt2", torch.float16, "transformer.h.1.mlp.c_fc")])
def test_cuda_graphs_replay_protected_ops(name, dtype, site):
    """mode="reduce-overhead": inductor captures the protected ops in CUDA graphs and replays them
    (the device counters count every replay's checks), with the output of the graph-free run;
    what a replay cannot do (inject, raise) is refused with a clear error. GPT-2: its Conv1D
    weights reach the ops as aliases with their own version counters (gemm.register_owner)."""
    model = _model(name, "sdpa", dtype)
    ids = torch.randint(0, 512, (4, 128), device="cuda")
    with torch.no_grad():
        plain = torch.compile(model, backend="ft", options={"eager": True})(ids).logits.float()
        torch._dynamo.reset()
        graphs = torch.compile(model, backend="ft", mode="reduce-overhead")
        for _ in range(3):  # warm-up, capture, replay
            graphs(ids)
        ftcompile.reset_stats()
        for _ in range(5):
            out = graphs(ids).logits.float()
    assert site in {n for _, n in ftcompile.cudagraphs.captured_sites()}
    torch.testing.assert_close(out, plain, rtol=5e-2, atol=5e-2)  # inductor's fusions against eager
    stats = ftcompile.stats()
    protected = {k: v for k, v in stats.items() if v["checks"]}
    assert len(protected) >= 10 and all(v["checks"] == 5 and v["detected"] == 0 for v in protected.values())
    with pytest.raises(ftcompile.GraphCaptureError, match="captured CUDA graph"):
        with inject(FaultSpec(site=site, stage="accumulator", bit=28)):
            pass
    torch._dynamo.reset()
    raising = torch.compile(model, backend="ft",
                            options={"policy": "raise", "inductor": {"triton.cudagraphs": True}})
    with torch.no_grad(), pytest.raises(ftcompile.GraphCaptureError, match="policy 'raise'"):
        for _ in range(3):
            raising(ids)

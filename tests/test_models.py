"""HF transformers models built from small configs (random weights, nothing downloaded)."""
import subprocess
import sys

import pytest
import torch

import ftcompile
from ftcompile import FaultDetected, FaultSpec, inject
from ftcompile.passes import counters
from ftcompile.passes.common import fake
from graph_tools import compile_capture, ft_nodes, ft_ops, unprotected_products

transformers = pytest.importorskip("transformers")
VOCAB = 128
# fp32 end-to-end: the ops compute in fp32 like eager; tiling only reorders sums.
TOL = 2e-4


def build(name: str, impl: str, layers: int = 2):
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=VOCAB,
                                      n_positions=128, attn_implementation=impl,
                                      bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(cfg)
    elif name == "bert":
        cfg = transformers.BertConfig(num_hidden_layers=layers, hidden_size=64, num_attention_heads=4,
                                      intermediate_size=128, vocab_size=VOCAB, attn_implementation=impl)
        model = transformers.BertModel(cfg)
    else:
        cfg = transformers.LlamaConfig(num_hidden_layers=layers, hidden_size=64, num_attention_heads=4,
                                       num_key_value_heads=2, intermediate_size=128, vocab_size=VOCAB,
                                       attn_implementation=impl)
        model = transformers.LlamaForCausalLM(cfg)
    return model.eval()


def inputs(name: str, batch: int = 2, seq: int = 24):
    ids = torch.randint(0, VOCAB, (batch, seq))
    if name == "bert":  # padding in the second sequence: a real additive mask
        mask = torch.ones(batch, seq, dtype=torch.long)
        mask[1, seq // 2:] = 0
        return ids, mask
    return (ids,)


def first(out):
    return out[0] if isinstance(out, tuple) else (out.logits if hasattr(out, "logits") else out.last_hidden_state)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_model_is_fully_protected_and_matches_eager(name, impl):
    model, args = build(name, impl), inputs(name)
    counters.clear()
    with torch.no_grad():
        expected = first(model(*args))
    out, graphs = compile_capture(model, *args)
    torch.testing.assert_close(first(out), expected, rtol=TOL, atol=TOL)
    assert not unprotected_products(graphs), "an unprotected matmul/SDPA is left in the graph"
    n_linear = {"gpt2": 4 * 2 + 1, "bert": 6 * 2 + 1, "llama": 7 * 2 + 1}[name]
    ops = ft_ops(graphs)
    assert ops.count(torch.ops.ftcompile.attention.default) == 2
    assert counters["attention_heads_last"] == 2  # each model transposes the output back
    assert len(ops) == 2 + n_linear

    report = ftcompile.explain(model, *args)
    assert not report.unprotected and len(report.records) == 2 + n_linear
    assert {r.scheme for r in report.records if r.kind == "attention"} == {"efta"}
    assert report.graph_breaks == 0


def _site(model_name: str) -> str:
    return {"gpt2": "transformer.h.1.mlp.c_fc", "bert": "encoder.layer.0.intermediate.dense",
            "llama": "model.layers.1.mlp.gate_proj"}[model_name]


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_injected_fault_is_corrected_and_counted_at_its_site_only(name):
    model, args = build(name, "sdpa"), inputs(name)
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    with torch.no_grad():
        clean = first(compiled(*args))
        ftcompile.reset_stats()
        with inject(FaultSpec(site=_site(name), stage="accumulator", bit=29, index=(5, 7))) as inj:
            faulty = first(compiled(*args))
    assert inj.events and inj.events[0].after != inj.events[0].before
    torch.testing.assert_close(faulty, clean, rtol=1e-4, atol=1e-4)
    stats = ftcompile.stats()
    assert stats[_site(name)]["detected"] == 1 and stats[_site(name)]["corrected"] == 1
    others = {k: v for k, v in stats.items() if k != _site(name) and v["checks"]}
    assert others and all(v["detected"] == 0 for v in others.values())


def test_weights_updated_in_place_after_compile_are_followed():
    """The backend registers each protected linear's parameters as their storage's owners, so
    tensors inductor rebuilds over them (own version counters) still see in-place updates."""
    from torch._C._dynamo.guards import _reinterpret_tensor
    model, args = build("gpt2", "sdpa"), inputs("gpt2")
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    with torch.no_grad():
        compiled(*args)
        conv = model.transformer.h[0].attn.c_attn  # Conv1D: x @ W, the weight taken transposed
        rebuilt = _reinterpret_tensor(conv.weight, conv.weight.shape, conv.weight.stride(), 0)
        assert ftcompile.abft.gemm.owner_version(rebuilt) == conv.weight._version != rebuilt._version
        conv.weight.mul_(0.5)
        ftcompile.reset_stats()
        torch.testing.assert_close(first(compiled(*args)), first(model(*args)), rtol=TOL, atol=TOL)
    assert sum(v["detected"] for v in ftcompile.stats().values()) == 0


def test_a_model_built_under_inference_mode_runs_and_its_stale_checksums_are_seen():
    """Parameters made under torch.inference_mode are inference tensors, without version counters:
    they are taken as unchanged, and an untracked change in place then fails the checks (counted)
    instead of passing them or giving a wrong output."""
    with torch.inference_mode():
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
        x = torch.randn(8, 64)
        compiled = torch.compile(model, backend="ft", options={"eager": True, "schemes": {"*": "global"}})
        ftcompile.reset_stats()
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
        assert sum(v["detected"] for v in ftcompile.stats().values()) == 0
        model[0].weight.mul_(2)  # untracked
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    assert sum(v["detected"] for v in ftcompile.stats().values()) > 0


def test_attention_fault_in_compiled_model_is_corrected():
    model, args = build("llama", "eager"), inputs("llama")
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    with torch.no_grad():
        clean = first(compiled(*args))
        ftcompile.reset_stats()
        with inject(FaultSpec(site="model.layers.0.self_attn", stage="score", bit=30, fmt="fp32")):
            faulty = first(compiled(*args))
    torch.testing.assert_close(faulty, clean, rtol=1e-4, atol=1e-4)
    s = ftcompile.stats("model.layers.0.self_attn")["model.layers.0.self_attn"]
    assert s["detected"] == 1 and s["corrected"] == 1


def test_policy_raise_names_the_layer():
    model, args = build("gpt2", "eager"), inputs("gpt2")
    compiled = torch.compile(model, backend="ft", options={"eager": True, "policy": "raise"})
    with torch.no_grad(), inject(FaultSpec(site="transformer.h.0.attn", stage="pv", value=3.0)):
        with pytest.raises(FaultDetected, match=r"transformer\.h\.0\.attn"):
            compiled(*args)


def test_clean_runs_raise_no_alarm():
    model = build("gpt2", "sdpa")
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    with torch.no_grad():
        for seed in range(8):
            torch.manual_seed(seed)
            compiled(torch.randint(0, VOCAB, (2, 24)))
    stats = ftcompile.stats()
    assert sum(v["checks"] for v in stats.values()) == 8 * 11  # 8 calls x (9 linears + 2 attentions)
    assert all(v["detected"] == 0 for v in stats.values())


def test_dynamic_shapes_compile_once_for_three_lengths():
    model = build("gpt2", "sdpa")
    calls = []

    def backend(gm, example_inputs):
        from ftcompile.backend import ft_backend
        calls.append(gm)
        return ft_backend(gm, example_inputs, options={"eager": True})

    compiled = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        for seq in (9, 17, 33):
            ids = torch.randint(0, VOCAB, (2, seq))
            torch.testing.assert_close(first(compiled(ids)), first(model(ids)), rtol=TOL, atol=TOL)
    assert len(calls) == 1, f"recompiled: {len(calls)} graphs for 3 lengths"
    assert ft_ops(calls).count(torch.ops.ftcompile.attention.default) == 2


def test_decode_steps_with_a_kv_cache_are_protected_and_match_eager():
    """model.generate's step: one new token against a DynamicCache. Every attention site of the
    step runs the protected op (on a GPU: the decode kernel, tests/test_cuda_e2e.py)."""
    from transformers import DynamicCache
    model = build("llama", "sdpa")
    ids = torch.randint(0, VOCAB, (2, 20))
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    with torch.no_grad():
        ref_cache, cache = DynamicCache(), DynamicCache()
        model(ids, past_key_values=ref_cache, use_cache=True)
        model(ids, past_key_values=cache, use_cache=True)
        token = ids[:, -1:]
        ftcompile.reset_stats()
        for _ in range(2):
            want = model(token, past_key_values=ref_cache, use_cache=True).logits
            got = compiled(token, past_key_values=cache, use_cache=True).logits
            torch.testing.assert_close(got, want, rtol=TOL, atol=TOL)
            token = want.argmax(-1)
    stats = ftcompile.stats()
    assert all(stats[f"model.layers.{i}.self_attn"]["checks"] == 2 for i in range(2)), stats
    assert all(v["detected"] == 0 for v in stats.values())


def test_unknown_option_key_fails_at_compile():
    model, args = build("gpt2", "sdpa", layers=1), inputs("gpt2")
    with pytest.raises(Exception, match="unknown ft option"):
        torch.compile(model, backend="ft", options={"eagr": True})(*args)


def test_non_finite_model_input_is_reported_as_input():
    model = build("llama", "sdpa", layers=1)
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    emb = model.model.embed_tokens
    with torch.no_grad():
        emb.weight[3, 0] = float("nan")  # a corrupted embedding feeds NaN into the layers
        ids = torch.full((1, 8), 3)
        compiled(ids)
    stats = ftcompile.stats()
    assert any(v["nonfinite_inputs"] for v in stats.values())
    assert all(v["detected"] == 0 for v in stats.values())


def test_backend_entry_point_works_without_importing_ftcompile():
    code = ("import torch\n"
            "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
            "x = torch.randn(4, 64)\n"
            "out = torch.compile(m, backend='ft', options={'eager': True})(x)\n"
            "assert torch.allclose(out, m(x), atol=1e-5)\n"
            "import sys; assert 'ftcompile' in sys.modules\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_t5_encoder_decoder_and_cross_attention():
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                num_decoder_layers=2, num_heads=4, decoder_start_token_id=0)
    t5 = transformers.T5ForConditionalGeneration(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.t5 = t5

        def forward(self, ids, dec):
            return self.t5(input_ids=ids, decoder_input_ids=dec).logits

    args = torch.randint(0, VOCAB, (2, 12)), torch.randint(0, VOCAB, (2, 7))
    with torch.no_grad():
        expected = Logits()(*args)
    out, graphs = compile_capture(Logits(), *args)
    torch.testing.assert_close(out, expected, rtol=TOL, atol=TOL)
    assert not unprotected_products(graphs)
    # encoder self, decoder self and cross attention in each layer (scale 1.0, position bias)
    assert ft_ops(graphs).count(torch.ops.ftcompile.attention.default) == 2 + 2 * 2


def test_unknown_device_without_override_is_a_clear_error():
    model, args = build("gpt2", "sdpa", layers=1), inputs("gpt2")
    with pytest.raises(Exception, match=r"unknown device 'B9000'.*options=\{'device'"):
        torch.compile(model, backend="ft", options={"device": "B9000", "eager": True})(*args)


def test_mlp_on_t4_thread_at_batch_1_global_at_4096():
    mlp = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                              torch.nn.Linear(4096, 1024)).half()
    for batch, scheme in ((1, "thread"), (4096, "global")):
        report = ftcompile.explain(mlp, torch.randn(batch, 1024).half(), device="T4")
        assert {r.scheme for r in report.records} == {scheme}, str(report)
        assert all(r.cmr == pytest.approx(203, abs=1) for r in report.records)


@pytest.mark.inductor
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_through_inductor(name, impl):
    # two layers: inductor then recycles buffers between same-shaped layers (a stale-cache trap)
    model, args = build(name, impl, layers=2), inputs(name)
    site = _site(name).replace(".1.", ".0.")
    with torch.no_grad():
        expected = first(model(*args))
        compiled = torch.compile(model, backend="ft")
        out = first(compiled(*args))
        ftcompile.reset_stats()
        with inject(FaultSpec(site=site, stage="output", value=7.0)):
            faulty = first(compiled(*args))
    torch.testing.assert_close(out, expected, rtol=TOL, atol=TOL)
    torch.testing.assert_close(faulty, out, rtol=1e-4, atol=1e-4)
    assert ftcompile.stats()[site]["corrected"] == 1
    assert all(v["detected"] == 0 for k, v in ftcompile.stats().items() if k != site)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_llama_with_a_padding_mask_reads_kv_before_repeat_kv(impl):
    """With a mask HF repeats K and V per query head (repeat_kv) before attention, on both paths;
    the passes hand EFTA the grouped K and V with enable_gqa instead."""
    model = build("llama", impl)
    ids, mask = torch.randint(0, VOCAB, (2, 24)), torch.ones(2, 24, dtype=torch.long)
    mask[1, 12:] = 0
    counters.clear()
    with torch.no_grad():
        expected = first(model(ids, attention_mask=mask))
    out, graphs = compile_capture(model, ids, mask)
    torch.testing.assert_close(first(out), expected, rtol=TOL, atol=TOL)
    assert counters["attention_gqa_unrepeated"] == 2
    atts = ft_nodes(graphs, torch.ops.ftcompile.attention.default)
    assert [n.args[6] for n in atts] == [True, True]  # enable_gqa


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_padded_batch_of_a_causal_model_runs_is_causal_with_the_padding_mask(name, side):
    """HF builds a padded batch's mask as (kv <= q) & padding[b, kv] ([B, 1, S, S]); the pass hands
    EFTA is_causal and the [B, 1, 1, S] padding factor instead (passes/causal_mask.py), and the
    output equals eager's, also where left padding leaves a query row no key."""
    model = build(name, "sdpa")
    ids, mask = torch.randint(0, VOCAB, (2, 24)), torch.ones(2, 24, dtype=torch.long)
    mask[1, 16:] = 0 if side == "right" else 1
    mask[1, :8] = 0 if side == "left" else 1
    counters.clear()

    def run(ids, mask):
        return first(model(input_ids=ids, attention_mask=mask))
    with torch.no_grad():
        expected = run(ids, mask)
    out, graphs = compile_capture(run, ids, mask)
    torch.testing.assert_close(out, expected, rtol=TOL, atol=TOL)
    assert counters["attention_causal_padding"] == 2
    atts = ft_nodes(graphs, torch.ops.ftcompile.attention.default)
    assert [(tuple(fake(n.args[3]).shape), n.args[4]) for n in atts] == [((2, 1, 1, 24), True)] * 2

"""Pattern matching on small hand-written modules (no inductor)."""
import math
import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ftcompile
from ftcompile import hardware
from ftcompile.ops import cuda_gemm, support
from ftcompile.passes import counters
from ftcompile.passes.common import fake
from graph_tools import compile_capture, ft_nodes, ft_ops, unprotected_products

ATT = torch.ops.ftcompile.attention.default


class HandAttention(nn.Module):
    """Variants of hand-written attention as real model code writes it."""

    def __init__(self, variant):
        super().__init__()
        self.variant = variant

    def forward(self, q, k, v, mask):
        d = q.shape[-1]
        if self.variant == "scale-then-mask":  # GPT-2 / BERT / Llama eager
            s = torch.matmul(q, k.transpose(-1, -2)) * (d ** -0.5) + mask
            p = F.softmax(s, dim=-1)
        elif self.variant == "div-then-mask":  # older BERT
            s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d)
            p = nn.functional.softmax(s + mask, dim=-1)
        elif self.variant == "mask-then-scale":
            p = ((q @ k.transpose(-2, -1) + mask) * 0.125).softmax(dim=-1)
        elif self.variant == "t5":  # no scale, position bias added in place, fp32 softmax
            s = torch.matmul(q, k.transpose(3, 2))
            s += mask
            p = F.softmax(s.float(), dim=-1).type_as(s)
        elif self.variant == "llama":  # softmax in fp32 then cast, eval dropout
            s = torch.matmul(q, k.transpose(2, 3)) * 0.125 + mask
            p = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
            p = F.dropout(p, p=0.1, training=False)
        return torch.matmul(p, v)


@pytest.mark.parametrize("variant", ["scale-then-mask", "div-then-mask", "mask-then-scale", "t5", "llama"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_hand_written_attention_is_replaced(variant, dtype):
    q, k, v = (torch.randn(2, 4, 24, 64, dtype=dtype) for _ in range(3))
    mask = torch.randn(2, 1, 24, 24, dtype=dtype)
    model = HandAttention(variant)
    counters.clear()
    out, graphs = compile_capture(model, q, k, v, mask)
    exact = model(*(t.double() for t in (q, k, v, mask)))
    eager_err = (model(q, k, v, mask).double() - exact).abs().max()
    assert (out.double() - exact).abs().max() <= 2 * eager_err + 1e-6  # flash-attention's rule
    assert counters["attention_softmax"] == 1
    assert ft_ops(graphs) == [ATT] and not unprotected_products(graphs)


def test_training_dropout_is_left_with_reason():
    class M(nn.Module):
        def forward(self, q, k, v):
            return F.dropout((q @ k.transpose(-1, -2)).softmax(-1), p=0.1, training=True) @ v

    q = torch.randn(1, 2, 8, 16)
    report = ftcompile.explain(M(), q, q, q)
    attn = [r for r in report.records if r.kind == "attention"]
    assert len(attn) == 1 and attn[0].scheme == "none" and "dropout" in attn[0].reason
    # its two matmuls are reported as unprotected activation products, not hidden
    assert sum(r.kind == "matmul" for r in report.records) == 2


def test_probabilities_used_elsewhere_are_left_with_reason():
    class M(nn.Module):
        def forward(self, q, k, v):
            p = (q @ k.transpose(-1, -2)).softmax(-1)
            return p @ v, p

    q = torch.randn(1, 2, 8, 16)
    record = [r for r in ftcompile.explain(M(), q, q, q).records if r.kind == "attention"][0]
    assert record.scheme == "none" and "output_attentions" in record.reason


@pytest.mark.parametrize("kwargs", [dict(), dict(is_causal=True), dict(scale=0.3),
                                    dict(enable_gqa=True), dict(mask="bool"), dict(mask="float")])
def test_sdpa_is_replaced(kwargs):
    hk = 2 if kwargs.get("enable_gqa") else 4
    q, k, v = torch.randn(2, 4, 20, 32), torch.randn(2, hk, 20, 32), torch.randn(2, hk, 20, 32)
    kind = kwargs.pop("mask", None)
    mask = None if kind is None else (torch.rand(20, 20) > 0.3 if kind == "bool" else torch.randn(20, 20))

    class M(nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)

    out, graphs = compile_capture(M(), q, k, v, mask)
    torch.testing.assert_close(out, M()(q, k, v, mask), rtol=1e-5, atol=1e-5)
    assert ft_ops(graphs) == [ATT] and not unprotected_products(graphs)


def test_sdpa_with_dropout_is_left_with_reason():
    class M(nn.Module):
        def forward(self, q):
            return F.scaled_dot_product_attention(q, q, q, dropout_p=0.2)

    record = ftcompile.explain(M(), torch.randn(1, 2, 8, 16)).records[0]
    assert record.scheme == "none" and "dropout" in record.reason


class Linears(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 96)
        self.conv1d_w = nn.Parameter(torch.randn(96, 80) * 0.1)  # HF Conv1D: x @ W + b via addmm
        self.conv1d_b = nn.Parameter(torch.randn(80))
        self.w = nn.Parameter(torch.randn(80, 48) * 0.1)
        self.bw = nn.Parameter(torch.randn(3, 48, 40) * 0.1)

    def forward(self, x):
        h = self.fc(x)  # [3, 10, 96]
        h = torch.addmm(self.conv1d_b, h.view(-1, 96), self.conv1d_w).view(3, 10, 80)
        h = h @ self.w  # matmul with a parameter
        h = torch.bmm(h, self.bw)  # bmm with a batched parameter
        return h @ h.transpose(-1, -2)  # activation x activation: reported, not protected


def test_linear_patterns_and_leftover_report():
    model, x = Linears(), torch.randn(3, 10, 64)
    counters.clear()
    out, graphs = compile_capture(model, x)
    torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)
    assert sum(counters[k] for k in ("linear_global", "linear_thread")) == 4
    left = unprotected_products(graphs)
    assert len(left) == 1  # only the activation product
    report = ftcompile.explain(model, x)
    names = {r.name: r for r in report.records}
    assert {"fc", "conv1d_w", "w", "bw"} <= set(names)
    assert names["conv1d_w"].op == "addmm" and names["bw"].op == "bmm"
    leftover = [r for r in report.records if r.kind == "matmul"]
    assert len(leftover) == 1 and "two activations" in leftover[0].reason
    assert "left unprotected: 1" in str(report)


def test_scheme_overrides_and_min_flops():
    mlp = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.Linear(512, 2))
    x = torch.randn(1, 512)
    report = ftcompile.explain(mlp, x, device="T4", schemes={"2": "global"}, min_flops=5000)
    schemes = {r.name: r.scheme for r in report.records}
    assert schemes == {"0": "thread", "2": "global", "3": "none"}
    assert "forced" in report.by_name("2").reason and "min_flops" in report.by_name("3").reason


def test_float64_model_is_explained_fallback():
    mlp = nn.Sequential(nn.Linear(64, 64)).double()
    x = torch.randn(8, 64, dtype=torch.float64)
    out, graphs = compile_capture(mlp, x)
    torch.testing.assert_close(out, mlp(x))
    record = ftcompile.explain(mlp, x).records[0]
    assert record.scheme == "none" and "float64" in record.reason


def test_explain_report_json_and_text():
    mlp = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8)).half()
    report = ftcompile.explain(mlp, torch.randn(32, 32).half(), device="T4")
    data = __import__("json").loads(report.to_json())
    assert data["device"] == "T4" and len(data["sites"]) == 2 and data["graph_breaks"] == 0
    assert data["sites"][0]["intensity"] == pytest.approx(10.67, abs=0.01)
    text = str(report)
    assert "thread" in text and "aggregate intensity" in text and "graph breaks: 0" in text


@pytest.mark.parametrize("d,dtype,device,runs,proj_runs,note", [
    (64, torch.bfloat16, "H200", "kernel", "kernel", None),
    (96, torch.bfloat16, "H100", "kernel", "kernel", "head dim 96 runs the d=128 kernel on zero-padded heads"),
    (32, torch.float16, "H200", "kernel", "kernel", "head dim 32 runs the d=64 kernel on zero-padded heads"),
    (256, torch.bfloat16, "H200", "reference", "kernel", "on H200 it runs the reference op: head dims q256"),
    (64, torch.float32, "H200", "reference", "reference", "the kernel is fp16/bf16"),
    (64, torch.bfloat16, "A100", "reference", "reference", "A100-80GB is sm_80: the CUDA kernels are built for sm_90a"),
    (64, torch.bfloat16, None, "reference", "reference", None)])
def test_explain_says_what_runs_each_site_on_the_target(d, dtype, device, runs, proj_runs, note):
    """The `runs` column: the CUDA kernel, or the reference op and why (head dims past 128, fp32,
    a GPU other than sm_90), from the graph's fake tensors; zero-padded head dims say so."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4 * d, 4 * d)

        def forward(self, x):
            q = self.proj(x).view(2, 40, 4, d).transpose(1, 2)
            return F.scaled_dot_product_attention(q, q, q, is_causal=True)

    report = ftcompile.explain(M().to(dtype), torch.randn(2, 40, 4 * d, dtype=dtype), device=device)
    att = [r for r in report.records if r.kind == "attention"][0]
    proj = report.by_name("proj")
    assert att.runs == runs and proj.runs == proj_runs
    if note is None:
        assert "reference op" not in att.reason and "zero-padded" not in att.reason
    else:
        assert note in att.reason
    assert ("on the reference op" in str(report)) == (device is not None and runs == "reference")


@pytest.mark.parametrize("sq,hq,hk,note", [
    (1, 32, 8, "4 query row(s) per KV head: the split-KV decode kernel"),
    (2, 32, 8, "8 query row(s) per KV head: the split-KV decode kernel"),
    (1, 12, 12, "1 query row(s) per KV head: the split-KV decode kernel"),
    (3, 32, 8, None)])
def test_explain_names_the_decode_kernel_at_decode_shapes(sq, hq, hk, note):
    """A decode step (few query rows per KV head against a cache) runs the split-KV kernel: said
    from the shapes; past 8 rows the tile kernels run, and nothing is said."""
    spec = hardware.lookup("H200")
    q = torch.empty(2, hq, sq, 128, dtype=torch.bfloat16, device="meta")
    kv = torch.empty(2, hk, 300, 128, dtype=torch.bfloat16, device="meta")
    runs, why = support.attention(spec, q, kv, kv, None, None, True)
    assert runs == "kernel"
    assert (why is None) if note is None else (note in why)


def test_explain_names_the_gemm_kernel_configuration():
    """On an sm_90 target whose SM count the device table knows, a linear site that runs a GEMM
    kernel says which configuration the launcher takes for its shapes (the global kernel's tile,
    K split and check, a group's for the group's columns; the thread scheme's kernel); nothing is
    said on the CPU, where no kernel runs."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(768, 768), nn.Linear(768, 768), nn.Linear(768, 768)
            self.fc = nn.Linear(768, 3072)

        def forward(self, x):
            return self.fc(self.q(x) + self.k(x) * self.v(x))

    model, x = M().to(torch.bfloat16), torch.randn(8, 512, 768, dtype=torch.bfloat16)  # 4096 rows
    reasons = {r.name: r.reason for r in ftcompile.explain(model, x, device="H200").records}
    plan = cuda_gemm.kernel_note("global", 4096, 3072, 768, 1, 132)
    assert plan == "kernel: 128x192 tiles, tile-local check" and reasons["fc"].endswith(plan)
    assert reasons["k"].endswith(cuda_gemm.kernel_note("global", 4096, 2304, 768, 1, 132))  # {q,k,v}
    assert cuda_gemm.kernel_note("global", 2048, 4096, 4096, 1, 132) == "kernel: 128x256 tiles, row check"
    split = cuda_gemm.kernel_note("global", 512, 768, 3072, 1, 132)
    assert split == "kernel: 128x128 tiles, K split 4, tile-local check"
    few = ftcompile.explain(model.fc, x[:1, :4], device="H200").records[0]
    assert few.scheme == "thread" and few.reason.endswith("kernel: the streaming kernel, each element checked against a replica")
    assert cuda_gemm.kernel_note("thread", 64, 11008, 4096, 1, 132) == "kernel: the thin kernel (W x^T on wgmma)"
    assert "kernel:" not in str(ftcompile.explain(model, x[:, :16]))


def test_explain_counts_graph_breaks():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

        def forward(self, x):
            x = self.a(x)
            torch._dynamo.graph_break()
            return self.b(x)

    report = ftcompile.explain(M(), torch.randn(4, 64))
    assert report.graph_count == 2 and report.graph_breaks == 1
    assert {r.name for r in report.protected} == {"a", "b"}
    assert "graph_break()" in report.break_reasons[0]


def test_profile_selection_times_both_schemes_and_keeps_the_faster():
    mlp = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    report = ftcompile.explain(mlp, torch.randn(8, 64), selection="profile")
    for record in report.records:
        m = record.measured
        assert set(m) == {"unprotected", "global", "thread"} and all(v > 0 for v in m.values())
        assert record.scheme == min(("global", "thread"), key=m.__getitem__)
        assert "profiled" in record.reason and "over unprotected" in record.reason


class Block(nn.Module):
    """A Llama-like block: q/k/v read one x (k and v narrower) with an extra head whose width is not
    a whole number of 128-column tiles, gate/up read another; o and down read their own."""

    def __init__(self, d=256, bias=False):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d, bias), nn.Linear(d, 128, bias), nn.Linear(d, 128, bias)
        self.extra, self.o = nn.Linear(d, 200, bias), nn.Linear(d, d, bias)
        self.gate, self.up, self.down = nn.Linear(d, 384, bias), nn.Linear(d, 384, bias), nn.Linear(384, d, bias)

    def forward(self, x):
        e = self.extra(x)
        q, k, v = self.q(x), self.k(x), self.v(x)
        h = self.o(q + torch.cat([k, v], -1) * e.mean(-1, keepdim=True))
        return self.down(F.silu(self.gate(h)) * self.up(h))


GROUP = torch.ops.ftcompile.linear_group.default


@pytest.mark.parametrize("bias", [False, True])
def test_sibling_linears_run_as_one_gemm(bias):
    """Global-scheme linears reading one x become one linear_group (the ragged member last), each
    member's output a narrow view of it; explain names the group on every member and the group
    is one telemetry site."""
    torch.manual_seed(0)
    model, x = Block(bias=bias).eval(), torch.randn(2, 64, 256)
    counters.clear()
    out, graphs = compile_capture(model, x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    groups = ft_nodes(graphs, GROUP)
    assert len(groups) == 2 and counters["linear_group"] == 2
    assert [w.name.split("_modules_")[1].split("_")[0] for w in groups[0].args[1]] == ["q", "k", "v", "extra"]
    assert ft_ops(graphs).count(torch.ops.ftcompile.linear_global.default) == 2  # o, down
    report = ftcompile.explain(model, x)
    names = {r.name: r for r in report.records}
    assert names["k"].group == names["extra"].group == "{q,k,v,extra}" and names["o"].group is None
    assert "one GEMM with q, v, extra" in names["k"].reason and names["gate"].group == "{gate,up}"
    assert names["k"].site_id == names["q"].site_id != names["o"].site_id
    assert set(ftcompile.stats()) >= {"{q,k,v,extra}", "{gate,up}", "o", "down"}
    assert "k" not in ftcompile.stats() and ftcompile.stats("{gate,up}")["{gate,up}"]["detected"] == 0


def test_groups_only_where_they_can_form():
    """No group with group_linears off; members differ in bias presence: no group; two ragged
    widths: one joins the whole members, the other stays alone."""
    model, x = Block(), torch.randn(2, 16, 256)
    _, graphs = compile_capture(model, x, group_linears=False)
    assert GROUP not in ft_ops(graphs)

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(256, 128, bias=True), nn.Linear(256, 128, bias=False)
            self.c, self.d = nn.Linear(256, 72), nn.Linear(256, 40)

        def forward(self, x):
            return torch.cat([self.a(x), self.b(x), self.c(x), self.d(x)], -1)

    model, x = Mixed().eval(), torch.randn(4, 64, 256)  # enough rows for the global scheme
    out, graphs = compile_capture(model, x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    groups = ft_nodes(graphs, GROUP)
    assert len(groups) == 1 and len(groups[0].args[1]) == 2  # a with c (both biased); b and d alone
    report = ftcompile.explain(model, x)
    assert report.by_name("a").group == "{a,c}" and report.by_name("b").group is None


def test_group_trains():
    """A group in training mode: the backward is the plain derivative of every member."""
    torch.manual_seed(0)
    model, x = Block(bias=True), torch.randn(2, 8, 256)
    ref = Block(bias=True)
    ref.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    compiled(x).square().mean().backward()
    ref(x).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("source, name", [
    ("L['self']._modules['h']._modules['0'].attn", "h.0.attn"),
    ("L['self'].model.layers[1].mlp.gate_proj", "model.layers.1.mlp.gate_proj"),
    # transformers >= 5 decorates forward so that dynamo sees the model as a positional argument
    ("L['args'][0].model.layers.1.mlp.gate_proj", "model.layers.1.mlp.gate_proj"),
    ("L['args'][0]._modules['lm_head']._parameters['weight']", "lm_head.weight"),
])
def test_site_names_drop_the_root_source(source, name):
    from ftcompile.passes.common import clean_path
    assert clean_path(source) == name


class Head(nn.Module):
    """A body and an N-wide head whose output leaves the graph as it is (an LM head's logits), or
    through a view that merges its rows."""

    def __init__(self, n, flatten=False):
        super().__init__()
        self.body, self.head, self.flatten = nn.Linear(64, 64), nn.Linear(64, n), flatten

    def forward(self, x):
        y = self.head(torch.relu(self.body(x)))
        return y.view(-1) if self.flatten else y


@pytest.mark.parametrize("flatten", [False, True])
def test_unaligned_output_rows_are_padded_only_where_nothing_reads_their_strides(flatten):
    model, x = Head(37, flatten).eval(), torch.randn(2, 5, 64)
    counters.clear()
    with torch.no_grad():
        expected = model(x)
    out, graphs = compile_capture(model, x, schemes={"*": "global"})
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    pads = [n.args[5] if len(n.args) > 5 else False
            for n in ft_nodes(graphs, torch.ops.ftcompile.linear_global.default)]
    assert pads == [False, not flatten]  # the body's 64 columns are aligned: never padded
    assert counters["linear_padded_rows"] == (0 if flatten else 1)
    if not flatten:
        assert out.stride() == (5 * 40, 40, 1)  # fp32: 37 -> 40 columns, 16 bytes
        report = ftcompile.explain(model, x, schemes={"*": "global"})
        head = next(r for r in report.records if r.name == "head")
        assert "padded to 40 columns" in head.reason


class Heads(nn.Module):
    """SDPA whose output is transposed back to [B, S, H, D] (as HF models do), or also kept as is."""

    def __init__(self, keep):
        super().__init__()
        self.keep = keep

    def forward(self, q, k, v):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        merged = o.reshape(*o.shape).transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)
        return (merged, o) if self.keep else merged


@pytest.mark.parametrize("keep", [False, True])
def test_attention_output_in_heads_last_memory_only_where_the_model_transposes_it_back(keep):
    q, k, v = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)
    model = Heads(keep)
    counters.clear()
    with torch.no_grad():
        expected = model(q, k, v)
    out, graphs = compile_capture(model, q, k, v)
    for got, want in zip(out if keep else (out,), expected if keep else (expected,)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert counters["attention_sdpa"] == 1 and counters["attention_heads_last"] == (0 if keep else 1)
    if not keep:
        node = ft_nodes(graphs, ATT)[0]
        assert node.args[-1] is True and node.meta["val"].stride() == (9 * 4 * 16, 16, 4 * 16, 1)


def compiled_attention(model, *args, **compile_kw):
    """Compile model through backend="ft" (counters cleared first), check its output against eager's,
    and return the attention op's node and the graphs."""
    counters.clear()
    with torch.no_grad():
        expected = model(*args)
    out, graphs = compile_capture(model, *args, **compile_kw)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    return ft_nodes(graphs, ATT)[0], graphs


def repeat_kv(kv, n):
    """HF's repeat_kv, as transformers writes it."""
    b, h, s, d = kv.shape
    return kv[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


class GroupedHeads(nn.Module):
    """Grouped-query attention with K and V repeated per query head before the attention."""

    def __init__(self, sdpa):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v, mask):
        k, v = repeat_kv(k, 4), repeat_kv(v, 4)
        if self.sdpa:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            o = torch.matmul(F.softmax(torch.matmul(q, k.transpose(2, 3)) * 0.25 + mask, dim=-1), v)
        return o.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


@pytest.mark.parametrize("sdpa", [True, False])
def test_repeated_kv_reach_the_op_unrepeated_with_enable_gqa(sdpa):
    q, k, v = torch.randn(2, 8, 9, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16)
    mask = torch.randn(9, 11)
    model = GroupedHeads(sdpa)
    node, graphs = compiled_attention(model, q, k, v, mask)
    assert node.args[6] is True and tuple(node.args[1].meta["example_value"].shape) == (2, 2, 11, 16)
    assert counters["attention_gqa_unrepeated"] == 1
    assert not [n for gm in graphs for n in gm.graph.nodes if n.op == "call_method" and n.target == "expand"]
    report = ftcompile.explain(model, q, k, v, mask)
    assert "read before repeat_kv" in report.records[0].reason


class BuiltMask(nn.Module):
    """SDPA with a mask the forward builds, as HF transformers 5.x do under torch.compile."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, q, k, v, pad):
        sq, sk = q.shape[-2], k.shape[-2]
        qi = torch.arange(sq)[None, None, :, None]
        ki = torch.arange(sk)[None, None, None, :]
        if self.kind == "hf-bool":  # transformers' sdpa_mask: kv_idx <= q_idx, expanded over the batch
            mask = (ki <= qi).expand(q.shape[0], -1, sq, sk)
        elif self.kind == "float-min":  # the additive form with the dtype's lowest value
            mask = torch.where(ki <= qi, 0.0, torch.finfo(q.dtype).min)
        elif self.kind == "float-inf":
            mask = torch.zeros(sq, sk).masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
        elif self.kind == "offset":  # a cache's offset: bottom-right, not is_causal's top-left
            mask = ki <= qi + (sk - sq)
        elif self.kind == "window":  # a sliding window: constant, but not causal
            mask = (ki <= qi) & (ki > qi - 4)
        elif self.kind == "padding":  # a padded batch: causal and a [B, 1, 1, Sk] factor from an input
            mask = (ki <= qi) & pad[:, None, None, :]
        elif self.kind == "hf-padding":  # transformers' sdpa_mask with a padding mask, as 5.17 traces it
            b = torch.arange(q.shape[0])[:, None, None, None]
            mask = (qi.new_ones((), dtype=torch.bool) & (ki <= qi).to(q.device) & pad[b, ki].to(q.device))
            mask = mask.expand(q.shape[0], -1, sq, sk)
        elif self.kind == "window-padding":  # constant factors that are not causal: kept
            mask = (ki <= qi) & (ki > qi - 4) & pad[:, None, None, :]
        elif self.kind == "two-inputs":  # two factors from inputs: kept
            mask = (ki <= qi) & pad[:, None, None, :] & pad[:, None, :sq, None]
        elif self.kind == "offset-padding":  # bottom-right causal and padding: kept
            mask = (ki <= qi + (sk - sq)) & pad[:, None, None, :]
        elif self.kind == "random":  # causal, through an op the pass does not evaluate
            mask = (ki <= qi) | (torch.rand(sq, sk) > 2.0)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("kind,reading", [
    ("hf-bool", "causal"), ("float-min", "causal"), ("float-inf", "causal"), ("offset", None), ("window", None),
    ("random", None), ("padding", "split"), ("hf-padding", "split"), ("window-padding", None),
    ("two-inputs", None), ("offset-padding", None)])
@pytest.mark.parametrize("padded", ["right", "left"])
def test_constant_causal_mask_runs_as_is_causal(kind, reading, padded):
    """A mask computed from constants alone that keeps exactly is_causal's keys reaches the op as
    is_causal (no mask); a padded batch's mask, such constants and-ed with one factor from an input,
    as is_causal with that factor alone as the mask; any other mask (another pattern, two inputs, an
    op the pass does not evaluate) as it is. The output equals eager's either way, also where left
    padding leaves a query row no key."""
    sk = 14 if kind in ("offset", "offset-padding") else 10
    q, k, v = torch.randn(2, 4, 10, 16), torch.randn(2, 4, sk, 16), torch.randn(2, 4, sk, 16)
    pad = torch.ones(2, sk, dtype=torch.bool)
    pad[1, -3:] = False if padded == "right" else True
    pad[1, :3] = False if padded == "left" else True
    model = BuiltMask(kind)
    node, graphs = compiled_attention(model, q, k, v, pad)
    mask = node.args[3]
    assert node.args[4] == (reading is not None)
    assert counters["attention_causal_mask"] == int(reading == "causal")
    assert counters["attention_causal_padding"] == int(reading == "split")
    if reading == "causal":  # the mask's nodes are gone with it
        assert mask is None
        assert not [n for gm in graphs for n in gm.graph.nodes if n.target in (torch.arange, torch.where)]
        assert "constant equal to is_causal" in ftcompile.explain(model, q, k, v, pad).records[0].reason
    elif reading == "split":  # the op's mask is the padding factor: [B, 1, 1, Sk], no comparison left
        assert tuple(fake(mask).shape) == (2, 1, 1, sk)
        assert not [n for gm in graphs for n in gm.graph.nodes if n.target in (torch.le, operator.le)]
        assert "and-ed with a padding mask" in ftcompile.explain(model, q, k, v, pad).records[0].reason
    else:
        assert mask is not None


@pytest.mark.parametrize("offset", [0, 3])
def test_constant_causal_mask_of_hand_written_attention_runs_as_is_causal(offset):
    """The eager form (scores * scale + mask, softmax, @ v) with HF's float causal mask: the same
    rewrite where the mask is is_causal's (offset 0), none where its diagonal is shifted."""

    class M(nn.Module):
        def forward(self, q, k, v):
            qi = torch.arange(q.shape[-2])[:, None]
            ki = torch.arange(k.shape[-2])[None, :]
            mask = torch.where(ki <= qi + offset, torch.tensor(0.0), torch.finfo(q.dtype).min)
            p = F.softmax(torch.matmul(q, k.transpose(-1, -2)) * 0.25 + mask, dim=-1)
            return torch.matmul(p, v)

    q, k, v = torch.randn(2, 4, 12, 16), torch.randn(2, 4, 12, 16), torch.randn(2, 4, 12, 16)
    node, _ = compiled_attention(M(), q, k, v)
    assert (node.args[3] is None, node.args[4]) == ((True, True) if offset == 0 else (False, False))
    assert counters["attention_softmax"] == 1 and counters["attention_causal_mask"] == int(offset == 0)


def test_causal_mask_of_a_dynamic_length_is_kept():
    """Symbolic lengths: the mask is not a constant the pass can evaluate, so it stays a mask."""
    q, k, v = torch.randn(2, 4, 10, 16), torch.randn(2, 4, 10, 16), torch.randn(2, 4, 10, 16)
    node, _ = compiled_attention(BuiltMask("hf-bool"), q, k, v, torch.ones(2, 10, dtype=torch.bool), dynamic=True)
    assert counters["attention_causal_mask"] == 0 and node.args[3] is not None

"""The inference-only twins (ftcompile/ops/inference.py): the public ops' schemas, bodies and fakes
without an autograd kernel, swapped in where the backend compiles with grad disabled."""
import pytest
import torch

import ftcompile
from ftcompile import FaultSpec, inject
from ftcompile.backend import ft_backend
from ftcompile.ops.inference import PUBLIC, TWINS
from conftest import site

FT = torch.ops.ftcompile


def test_every_public_op_has_a_twin_with_its_schema_and_tags():
    assert set(TWINS) == {FT.linear_global.default, FT.linear_thread.default,
                          FT.linear_group.default, FT.attention.default}
    for op, twin in TWINS.items():
        assert str(twin._schema).replace("ftcompile_infer::", "ftcompile::") == str(op._schema)
        assert set(twin.tags) == set(op.tags) and PUBLIC[twin] is op


def _calls(sid_lin, sid_att):
    x, w, b = torch.randn(3, 5, 16), torch.randn(37, 16), torch.randn(37)
    q, k, v = torch.randn(2, 3, 9, 16), torch.randn(2, 3, 11, 16), torch.randn(2, 3, 11, 8)
    return [
        ("linear_global", (x, w, b, sid_lin)),
        ("linear_global", (x, w.t(), None, sid_lin, True, True)),  # transposed, padded rows
        ("linear_thread", (x, w, b, sid_lin)),
        ("linear_group", (x, [w, w[:5]], [b, b[:5]], sid_lin)),
        ("attention", (q, k, v, None, True, None, False, sid_att, True)),  # heads last
        ("attention", (q, k, v, torch.randn(9, 11) > 0, False, 0.3, False, sid_att)),
    ]


@pytest.mark.parametrize("case", range(6))
def test_twin_gives_the_public_ops_output_layout_and_counts(case):
    name, args = _calls(site("twin-lin"), site("twin-att", "attention"))[case]
    op, twin = getattr(FT, name).default, getattr(torch.ops.ftcompile_infer, name).default
    ftcompile.reset_stats()
    expected = op(*args)
    counts = dict(ftcompile.stats())
    ftcompile.reset_stats()
    out = twin(*args)
    assert out.shape == expected.shape and out.stride() == expected.stride()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert dict(ftcompile.stats()) == counts and sum(v["checks"] for v in counts.values()) == 1
    torch.library.opcheck(twin, args)  # schema, fake (its strides too), no aliasing


def test_twin_corrects_an_injected_fault():
    sid = site("twin-inject")
    x, w = torch.randn(8, 64), torch.randn(48, 64)
    clean = FT.linear_global(x, w, None, sid)
    ftcompile.reset_stats()
    with inject(FaultSpec(site="twin-inject", stage="accumulator", bit=27, index=(3, 5))):
        fixed = torch.ops.ftcompile_infer.linear_global(x, w, None, sid)
    torch.testing.assert_close(fixed, clean, rtol=1e-5, atol=1e-5)
    assert ftcompile.stats("twin-inject")["twin-inject"]["corrected"] == 1


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(32, 96), torch.nn.Linear(32, 32)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 7, 3, 2, 16).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(o.transpose(1, 2).reshape(2, 7, 32))


def test_no_grad_compiles_with_the_twins_and_grad_mode_with_the_public_ops():
    """Dynamo guards the graph on the grad mode: a call with grad enabled compiles again, with the
    ops that carry the backward, and trains as eager does."""
    torch.manual_seed(0)
    model, x = Block(), torch.randn(2, 7, 32)
    graphs = []

    def backend(gm, example_inputs):
        fn = ft_backend(gm, example_inputs, options={"eager": True})
        graphs.append((torch.is_grad_enabled(), gm))
        return fn

    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        expected = model(x)
        out = compiled(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    out = compiled(x)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for g, ref in zip(grads, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(g, ref, rtol=1e-4, atol=1e-5)
    targets = {grad: [n.target for n in gm.graph.nodes if n.op == "call_function"
                      and n.target in {**TWINS, **PUBLIC}] for grad, gm in graphs}
    assert len(graphs) == 2 and len(targets[False]) == 3 and len(targets[True]) == 3
    assert all(t in PUBLIC for t in targets[False]) and all(t in TWINS for t in targets[True])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", ["linear_global", "linear_thread", "attention"])
def test_twin_runs_the_cuda_kernel_as_the_public_op_does(name):
    """On the GPU the twin reaches the same kernel (and its launch plans) as the public op: equal
    outputs bit for bit, equal counts, and an injected fault corrected through either."""
    sid = site(f"twin-cuda-{name}", "attention" if name == "attention" else "linear")
    h = dict(device="cuda", dtype=torch.float16)
    if name == "attention":
        q, k, v = (torch.randn(2, 4, 256, 64, **h) for _ in range(3))
        args = (q, k, v, None, True, None, False, sid)
    else:
        args = (torch.randn(16 if name == "linear_thread" else 256, 512, **h),
                torch.randn(768, 512, **h) / 20, torch.randn(768, **h), sid)
    op, twin = getattr(FT, name).default, getattr(torch.ops.ftcompile_infer, name).default
    outs = [f(*args) for f in (op, op, twin, twin)]  # the second call of each replays a plan
    for out in outs[1:]:
        assert torch.equal(out, outs[0])
    stats = ftcompile.stats(f"twin-cuda-{name}")[f"twin-cuda-{name}"]
    assert stats["checks"] == 4 and stats["detected"] == 0
    ftcompile.reset_stats()
    spec = FaultSpec(site=f"twin-cuda-{name}", stage="score", index=(1, 2, 5, 7), value=2.5, k_step=0) \
        if name == "attention" else FaultSpec(site=f"twin-cuda-{name}", stage="output", seed=1, value=1e3)
    with inject(spec):
        fixed = twin(*args)
    diff = (fixed.float() - outs[0].float()).abs()
    assert float(diff.max()) <= 2.0 ** -6 * float(outs[0].float().abs().max())
    stats = ftcompile.stats(f"twin-cuda-{name}")[f"twin-cuda-{name}"]
    assert stats["detected"] == 1 and stats["corrected"] == 1

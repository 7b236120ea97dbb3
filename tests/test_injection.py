"""FaultSpec / inject(): targeting, encodings, zero cost when off, and what the protected ops do
with the faults (single: detected and corrected; two in one check group: never corrected)."""
import pytest
import torch

import ftcompile
from ftcompile import FaultSpec, inject
from ftcompile.abft import injection
from conftest import site

ATTN = ["score", "exp", "rowmax", "rowsum", "pv", "rescale", "rowsum_mma", "p_mma"]


def _stats(name):
    return ftcompile.stats(name)[name]


def _linear(op, name, x, w, b=None):
    return getattr(torch.ops.ftcompile, op)(x, w, b, site(name))


def _attn(name, q, k, v, causal=False):
    return torch.ops.ftcompile.attention(q, k, v, None, causal, None, False, site(name, "attention"))


# --------------------------------------------------------------------------- the spec itself

@pytest.mark.parametrize("kwargs, match", [
    (dict(stage="softmax"), "stage"), (dict(fmt="fp8"), "fmt"), (dict(bit=16, fmt="bf16"), "bit"),
    (dict(bit=3, value=1.0), "either"), (dict(count=0), "count")])
def test_spec_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FaultSpec(site="x", **kwargs)


def test_corrupt_encodings():
    v = torch.tensor([1.5])
    assert injection.corrupt(v, FaultSpec("s", bit=31)).item() == -1.5  # fp32 sign
    assert injection.corrupt(v, FaultSpec("s", bit=23)).item() == 0.75  # fp32 exponent LSB
    assert injection.corrupt(v, FaultSpec("s", bit=15, fmt="bf16")).item() == -1.5  # bf16 sign
    assert injection.corrupt(v, FaultSpec("s", bit=7, fmt="bf16")).item() == 0.75  # bf16 exp LSB
    one = torch.tensor([1.0])  # exponent 127 -> 255 with a zero mantissa: inf (1.5 gives NaN)
    assert injection.corrupt(one, FaultSpec("s", bit=14, fmt="bf16")).item() == float("inf")
    assert injection.corrupt(v, FaultSpec("s", bit=14, fmt="bf16")).isnan().all()
    assert injection.corrupt(v, FaultSpec("s", bit=10, fmt="fp16")).item() == 0.75
    assert injection.corrupt(v, FaultSpec("s", value=-2.0)).item() == -0.5
    assert injection.corrupt(v, FaultSpec("s")).item() == 11.5  # default: add 10


def test_group_positions():
    assert injection.group_positions(10, 3) == list(range(10))  # a whole row
    assert injection.group_positions(128, 60, 8, 64) == list(range(4, 64, 8))  # lane 4, tile 0
    assert injection.group_positions(100, 97, 8, 64) == [65, 73, 81, 89, 97]  # partial tile


def test_matching_calls_and_seeds():
    spec = FaultSpec(site="inj.m*", stage="output", calls=2, seed=3)
    assert spec.matches(0, "inj.match") and not spec.matches(0, "other")
    assert FaultSpec(site=7).matches(7, "any") and not FaultSpec(site=7).matches(8, "any")
    x, w = torch.randn(8, 32), torch.randn(16, 32)
    with inject(spec) as inj:
        for _ in range(4):
            _linear("linear_global", "inj.match", x, w)
    assert len(inj.events) == 2 and inj.calls_seen == 2
    with inject(spec) as again:
        _linear("linear_global", "inj.match", x, w)
    assert again.events[0].index == inj.events[0].index  # same seed, same element
    with inject(FaultSpec(site="inj.m*", stage="output", seed=4)) as other:
        _linear("linear_global", "inj.match", x, w)
    assert other.events[0].index != inj.events[0].index


def test_zero_cost_when_off():
    x, w = torch.randn(8, 64), torch.randn(32, 64)
    clean = _linear("linear_global", "inj.off", x, w)
    assert injection._ACTIVE == [] and injection.pending(0, "inj.off", injection.GEMM_STAGES) == []
    # A spec for another site leaves this op on its unmodified path: bitwise identical output.
    with inject(FaultSpec(site="elsewhere", stage="accumulator", bit=30)) as inj:
        y = _linear("linear_global", "inj.off", x, w)
        assert injection._ACTIVE == [inj]
    assert torch.equal(y, clean) and inj.events == [] and injection._ACTIVE == []


# --------------------------------------------------------------------------- single faults

@pytest.mark.parametrize("op", ["linear_global", "linear_thread"])
@pytest.mark.parametrize("stage", ["accumulator", "output"])
@pytest.mark.parametrize("fault", [dict(bit=30), dict(bit=27), dict(bit=24), dict(value=3.0)])
def test_single_gemm_fault_corrected(op, stage, fault):
    name = f"inj.{op}.{stage}"
    x, w, b = torch.randn(12, 200), torch.randn(100, 200), torch.randn(100)
    clean = _linear(op, name, x, w, b)
    assert _stats(name)["detected"] == 0  # no false alarm on the clean run
    ftcompile.reset_stats()
    for seed in range(3):
        with inject(FaultSpec(site=name, stage=stage, seed=seed, **fault)) as inj:
            y = _linear(op, name, x, w, b)
        assert len(inj.events) == 1
        torch.testing.assert_close(y, clean, rtol=0, atol=1e-4)
    s = _stats(name)
    assert s["detected"] == s["corrected"] == 3 and s["uncorrectable"] == 0


@pytest.mark.parametrize("stage", ATTN)
@pytest.mark.parametrize("fault", [dict(bit=30), dict(bit=26), dict(value=5.0)])
def test_single_attention_fault_corrected(stage, fault):
    name = f"inj.attn.{stage}"
    q, k, v = (torch.randn(1, 1, 100, 40) for _ in range(3))  # a partial last key tile
    clean = _attn(name, q, k, v, causal=True)
    assert _stats(name)["detected"] == 0  # no false alarm on the clean run
    ftcompile.reset_stats()
    for seed in range(2):
        with inject(FaultSpec(site=name, stage=stage, seed=seed, **fault)) as inj:
            y = _attn(name, q, k, v, causal=True)
        assert len(inj.events) == 1
        torch.testing.assert_close(y, clean, rtol=0, atol=1e-5)
    s = _stats(name)
    # A fault that lands on a masked key or padding is harmless: corrected or never seen.
    assert s["corrected"] == s["detected"] >= 1 and s["uncorrectable"] == 0


def test_attention_index_is_a_global_key_position():
    q, k, v = torch.randn(1, 2, 8, 32), torch.randn(1, 2, 200, 32), torch.randn(1, 2, 200, 32)
    with inject(FaultSpec(site="inj.attn.idx", stage="score", index=(0, 1, 5, 150), value=50.0)) as inj:
        _attn("inj.attn.idx", q, k, v)
    assert inj.events[0].index == (0, 1, 5, 150 - 128)  # logged within key tile 2
    assert _stats("inj.attn.idx")["corrected"] == 1
    with pytest.raises(ValueError, match="key tile"):
        with inject(FaultSpec(site="inj.attn.idx", stage="score", index=(0, 1, 5, 150), k_step=0)):
            _attn("inj.attn.idx", q, k, v)


# --------------------------------------------------------------------------- two faults, one group

@pytest.mark.parametrize("op", ["linear_global", "linear_thread"])
@pytest.mark.parametrize("stage", ["accumulator", "output"])
def test_two_faults_in_one_group_are_uncorrectable(op, stage):
    name = f"inj2.{op}.{stage}"
    x, w = torch.randn(6, 128), torch.randn(100, 128)
    clean = _linear(op, name, x, w)
    assert _stats(name)["detected"] == 0
    for seed, fault in enumerate([dict(value=40.0), dict(value=-7.0), dict(bit=30), dict(bit=29)]):
        ftcompile.reset_stats()
        with inject(FaultSpec(site=name, stage=stage, count=2, seed=seed, **fault)) as inj:
            y = _linear(op, name, x, w)
        s = _stats(name)
        assert len(inj.events) == 2 and s["detected"] == 1
        assert s["uncorrectable"] == 1 and s["corrected"] == 0
        assert not torch.allclose(y, clean, atol=1e-3)  # policy "correct" leaves it, reported


def test_two_faults_in_a_strided_group_stay_in_its_tile():
    x, w = torch.randn(6, 128), torch.randn(100, 128)
    with inject(FaultSpec(site="inj2.tile", stage="output", index=(3, 60), value=9.0,
                          count=2)) as inj:
        _linear("linear_thread", "inj2.tile", x, w)
    cols = [e.index[1] for e in inj.events]
    assert cols == [60, 4]  # lane 4 of tile 0, not column 68 of the next tile
    assert _stats("inj2.tile")["uncorrectable"] == 1
    with pytest.raises(ValueError, match="exceeds"):
        with inject(FaultSpec(site="inj2.tile", stage="output", index=(3, 97), count=6)):
            _linear("linear_thread", "inj2.tile", x, w)


@pytest.mark.parametrize("stage", ["score", "pv", "rescale"])
def test_two_attention_faults_in_one_group_are_uncorrectable(stage):
    name = f"inj2.attn.{stage}"
    q, k, v = (torch.randn(1, 1, 128, 64) for _ in range(3))  # full tiles: 8-element groups
    clean = _attn(name, q, k, v)
    assert _stats(name)["detected"] == 0
    for seed, fault in enumerate([dict(value=20.0), dict(value=-3.0), dict(bit=30)]):
        ftcompile.reset_stats()
        with inject(FaultSpec(site=name, stage=stage, count=2, seed=seed, **fault)) as inj:
            y = _attn(name, q, k, v)
        s = _stats(name)
        assert len(inj.events) == 2 and s["detected"] == 1
        assert s["corrected"] == 0 and s["uncorrectable"] == 1
        assert not torch.allclose(y, clean, atol=1e-4)


def test_two_faults_recomputed_under_policy_recompute():
    sid = ftcompile.register_site("inj2.recompute", "linear", "global", policy="recompute")
    x, w = torch.randn(6, 128), torch.randn(100, 128)
    clean = x @ w.T
    with inject(FaultSpec(site="inj2.recompute", stage="output", count=2, value=40.0)):
        y = torch.ops.ftcompile.linear_global(x, w, None, sid)
    torch.testing.assert_close(y, clean, rtol=0, atol=1e-4)
    assert _stats("inj2.recompute")["uncorrectable"] == 1


# --------------------------------------------------------------------------- non-finite values

@pytest.mark.parametrize("op", ["linear_global", "linear_thread", "attention"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nonfinite_produced_inside_is_a_fault(op, bad):
    name = f"inj.nf.{op}"
    if op == "attention":
        args = tuple(torch.randn(1, 2, 70, 32) for _ in range(3))
        run = lambda: _attn(name, *args)
        stages = ATTN
    else:
        x, w = torch.randn(8, 64), torch.randn(40, 64)
        run = lambda: _linear(op, name, x, w)
        stages = ["accumulator", "output"]
    clean = run()
    assert _stats(name)["detected"] == 0
    for stage in stages:
        ftcompile.reset_stats()
        with inject(FaultSpec(site=name, stage=stage, value=bad, seed=2)):
            y = run()
        s = _stats(name)
        assert s["detected"] >= 1 and s["corrected"] >= 1 and s["nonfinite_inputs"] == 0, stage
        assert torch.isfinite(y).all() and torch.allclose(y, clean, atol=1e-4), stage


@pytest.mark.parametrize("op", ["linear_global", "linear_thread", "attention"])
def test_nonfinite_inputs_are_reported_as_inputs(op):
    name = f"inj.nfin.{op}"
    if op == "attention":
        q, k, v = (torch.randn(1, 2, 20, 16) for _ in range(3))
        v[0, 1, 3, 2] = float("inf")
        _attn(name, q, k, v)
    else:
        x, w = torch.randn(8, 64), torch.randn(40, 64)
        x[2, 5] = float("nan")
        _linear(op, name, x, w)
    s = _stats(name)
    assert s["nonfinite_inputs"] == 1 and s["detected"] == 0


# --------------------------------------------------------------------------- compiled models

class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(64, 192)
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 40, 3, 4, 16).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(2, 40, 64))


@pytest.mark.parametrize("target, stage", [("qkv", "accumulator"), ("proj", "output"),
                                           ("", "exp"), ("", "pv")])
def test_inject_through_a_compiled_model(target, stage):
    import ftcompile.backend  # noqa: F401  (the ft backend)
    model = _Block().eval()
    x = torch.randn(2, 40, 64)
    compiled = torch.compile(model, backend="ft", options={"eager": True})
    with torch.no_grad():
        clean = compiled(x)
        assert all(s["detected"] == 0 for s in ftcompile.stats().values())
        ftcompile.reset_stats()
        pattern = f"*{target}" if target else "*"
        with inject(FaultSpec(site=pattern, stage=stage, bit=30, seed=1, calls=1)) as inj:
            y = compiled(x)
    assert len(inj.events) == 1
    hit, stats = inj.events[0].site, ftcompile.stats()
    assert stats[hit]["detected"] == 1 and stats[hit]["corrected"] == 1
    assert all(s["detected"] == 0 and s["corrected"] == 0 for k, s in stats.items() if k != hit)
    torch.testing.assert_close(y, clean, rtol=0, atol=1e-5)

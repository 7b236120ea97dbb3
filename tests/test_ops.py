"""The protected ops on CPU: numerics, opcheck, fault detection/correction, policies."""
import pytest
import torch
import torch.nn.functional as F
from torch._C._dynamo.guards import _reinterpret_tensor

import ftcompile
from ftcompile import FaultDetected, FaultSpec, inject
from conftest import site

LINEAR_OPS = [torch.ops.ftcompile.linear_global, torch.ops.ftcompile.linear_thread]
ATTN_STAGES = ["score", "exp", "rowmax", "rowsum", "pv", "rescale", "rowsum_mma", "p_mma"]


def _stats(name):
    return ftcompile.stats(name)[name]


@pytest.mark.parametrize("op", LINEAR_OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_linear_matches_fp32_reference(op, dtype):
    sid = site(f"lin-{dtype}")
    x, w, b = torch.randn(3, 17, 96), torch.randn(200, 96), torch.randn(200)
    xl, wl, bl = x.to(dtype), w.to(dtype), b.to(dtype)
    y = op(xl, wl, bl, sid)
    ref = F.linear(xl.double(), wl.double(), bl.double())
    torch_err = (F.linear(xl, wl, bl).double() - ref).abs().max()
    assert y.dtype == dtype and y.shape == (3, 17, 200) and y.is_contiguous()
    # flash-attention's rule: at most 2x the error of PyTorch's own kernel in that dtype
    assert (y.double() - ref).abs().max() <= 2 * torch_err + 1e-6
    assert _stats(f"lin-{dtype}")["detected"] == 0


def test_batched_weight_and_strided_inputs():
    sid = site("bmm")
    x, w = torch.randn(4, 9, 32), torch.randn(4, 32, 48)  # x @ W with W [B, K, N]
    y = torch.ops.ftcompile.linear_global(x, w.transpose(-1, -2), None, sid)
    torch.testing.assert_close(y, x @ w)
    xt = torch.randn(32, 20).t()  # non-contiguous x
    wt = torch.randn(32, 24)  # a transposed view as weight
    torch.testing.assert_close(torch.ops.ftcompile.linear_thread(xt, wt.t(), None, sid), xt @ wt)


@pytest.mark.parametrize("op", LINEAR_OPS)
def test_opcheck_linear(op):
    sid = site("opcheck")
    for args in [(torch.randn(5, 16), torch.randn(24, 16), torch.randn(24), sid),
                 (torch.randn(16, 5).t(), torch.randn(16, 24).t(), None, sid),
                 (torch.randn(2, 3, 16, requires_grad=True), torch.randn(24, 16, requires_grad=True),
                  torch.randn(24, requires_grad=True), sid)]:
        torch.library.opcheck(op, args)


def test_attention_heads_last_layout():
    """heads_last: the output [B, H, S, Dv] lies in memory as [B, S, H, Dv] (transposing it back
    is free), with the contiguous call's values."""
    sid = site("heads-last", "attention")
    q, k, v = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 11, 16), torch.randn(2, 4, 11, 8)
    out = torch.ops.ftcompile.attention(q, k, v, None, True, None, False, sid, True)
    assert out.shape == (2, 4, 9, 8) and out.stride() == (9 * 4 * 8, 8, 4 * 8, 1)
    assert out.transpose(1, 2).is_contiguous()
    torch.testing.assert_close(out, torch.ops.ftcompile.attention(q, k, v, None, True, None, False, sid),
                               rtol=0, atol=0)
    torch.library.opcheck(torch.ops.ftcompile.attention,
                          (q.requires_grad_(), k, v, None, True, None, False, sid, True))
    with pytest.raises(ValueError, match="heads_last"):
        torch.ops.ftcompile.attention(q[0], k[0], v[0], None, False, None, False, sid, True)


def test_opcheck_attention():
    sid = site("opcheck-attn", "attention")
    q, k, v = torch.randn(2, 4, 9, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 8)
    mask = torch.randn(9, 11)
    torch.library.opcheck(torch.ops.ftcompile.attention, (q, k, v, mask, False, None, True, sid))
    qt = torch.randn(2, 9, 4, 16).transpose(1, 2)  # non-contiguous
    torch.library.opcheck(torch.ops.ftcompile.attention,
                          (qt, k.repeat(1, 2, 1, 1), torch.randn(2, 4, 11, 16), None, True, 0.3, False, sid))


ATTN_CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "bool-mask": dict(attn_mask=torch.rand(1, 1, 70, 150) > 0.3),
    "float-mask": dict(attn_mask=torch.randn(70, 150)),
    "scale": dict(scale=0.05),
    "gqa": dict(enable_gqa=True),
}


@pytest.mark.parametrize("case", list(ATTN_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_matches_sdpa(case, dtype):
    sid = site("attn", "attention")
    kw = ATTN_CASES[case]
    hk = 2 if case == "gqa" else 4
    q = torch.randn(2, 4, 70, 32, dtype=dtype)
    k, v = torch.randn(2, hk, 150, 32, dtype=dtype), torch.randn(2, hk, 150, 24, dtype=dtype)
    if case == "causal":
        k, v = k[:, :, :70], v[:, :, :70]
    out = torch.ops.ftcompile.attention(q, k, v, kw.get("attn_mask"), kw.get("is_causal", False),
                                        kw.get("scale"), kw.get("enable_gqa", False), sid)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), **{
        key: (val.double() if isinstance(val, torch.Tensor) and val.is_floating_point() else val)
        for key, val in kw.items()})
    torch_err = (F.scaled_dot_product_attention(q, k, v, **kw).double() - ref).abs().max()
    assert (out.double() - ref).abs().max() <= 2 * torch_err + 2e-6
    assert _stats("attn")["detected"] == 0


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_attention_with_mask_and_is_causal_keeps_the_keys_both_keep(kind):
    """The op takes a mask and is_causal together (a padding mask beside a causal model's
    diagonal; SDPA's backends differ there, some refuse it): forward and gradients are SDPA's with
    the mask and the diagonal joined into one mask."""
    sid = site("attn-mask-causal", "attention")
    q, k, v = (torch.randn(2, 4, 12, 16, requires_grad=True) for _ in range(3))
    pad = torch.ones(2, 1, 1, 12, dtype=torch.bool)
    pad[1, ..., 9:] = False
    mask = pad if kind == "bool" else torch.zeros(2, 1, 1, 12).masked_fill(~pad, float("-inf"))
    tril = torch.ones(12, 12, dtype=torch.bool).tril()
    joined = pad & tril if kind == "bool" else mask.masked_fill(~tril, float("-inf"))
    out = torch.ops.ftcompile.attention(q, k, v, mask, True, None, False, sid)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=joined)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    for got, want in zip(grads, torch.autograd.grad(ref.sum(), (q, k, v))):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert _stats("attn-mask-causal")["detected"] == 0


def test_fully_masked_rows_give_zero_like_sdpa():
    sid = site("attn-masked", "attention")
    q, k, v = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 7, 16), torch.randn(1, 2, 7, 16)
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[2] = False
    out = torch.ops.ftcompile.attention(q, k, v, mask, False, None, False, sid)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert _stats("attn-masked")["detected"] == 0


@pytest.mark.parametrize("op", LINEAR_OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fault", [dict(stage="accumulator", value=0.5, k_step=1),
                                   dict(stage="accumulator", bit=30, fmt="fp32"),
                                   dict(stage="output", bit=14, fmt="bf16"),
                                   dict(stage="output", bit=31, fmt="fp32")])
def test_linear_single_fault_detected_and_corrected(op, dtype, fault):
    name = f"fault-{op.__name__}-{dtype}"
    sid = site(name)
    x, w, b = torch.randn(48, 256, dtype=dtype), torch.randn(160, 256, dtype=dtype), torch.randn(160, dtype=dtype)
    clean = op(x, w, b, sid)
    with inject(FaultSpec(site=name, index=(7, 70), **fault)) as inj:
        y = op(x, w, b, sid)
    assert inj.events[0].after != inj.events[0].before
    if dtype == torch.float32:
        torch.testing.assert_close(y, clean, rtol=1e-5, atol=1e-5)
    else:  # the corrected element is recomputed in fp32 in another order than the GEMM: it may
        # round to the neighbouring bf16 value (one ulp, 2^-7 relative); every other one is exact
        assert int((y != clean).sum()) <= 1
        torch.testing.assert_close(y.float(), clean.float(), rtol=2 ** -7, atol=0)
    assert _stats(name) == {"checks": 2, "detected": 1, "corrected": 1, "uncorrectable": 0,
                            "nonfinite_inputs": 0}


@pytest.mark.parametrize("op", LINEAR_OPS)
def test_two_faults_in_one_check_are_uncorrectable_and_recompute_repairs(op):
    sid = site("multi")
    x, w = torch.randn(16, 128), torch.randn(128, 128)
    clean = op(x, w, None, sid)
    spec = FaultSpec(site="multi", stage="output", index=(3, 5), value=4.0, count=2)
    with inject(spec):
        y = op(x, w, None, sid)
    s = _stats("multi")
    assert s["detected"] == 1 and s["uncorrectable"] == 1 and s["corrected"] == 0
    assert not torch.allclose(y, clean)  # never "corrected" into a (different) wrong value silently
    rid = site("multi-re", policy="recompute")
    with inject(FaultSpec(site="multi-re", stage="output", index=(3, 5), value=4.0, count=2)):
        y = op(x, w, None, rid)
    torch.testing.assert_close(y, clean, rtol=1e-5, atol=1e-5)
    assert _stats("multi-re")["uncorrectable"] == 1


def test_symmetric_double_fault_is_not_miscorrected():
    """Equal faults at j-1, j, j+1 point the weighted checksum at j: the recheck catches it."""
    sid = site("sym")
    x, w = torch.randn(4, 64), torch.randn(64, 64)
    clean = torch.ops.ftcompile.linear_global(x, w, None, sid)
    spec = FaultSpec(site="sym", stage="output", index=(1, 10), value=3.0, count=3)
    with inject(spec) as inj:  # +3 at 10, 11, 12: ratio points at 11
        y = torch.ops.ftcompile.linear_global(x, w, None, sid)
    assert [e.index for e in inj.events] == [(1, 10), (1, 11), (1, 12)]
    assert _stats("sym")["uncorrectable"] == 1 and _stats("sym")["corrected"] == 0
    assert (y - clean).abs().max() > 1


def test_policies_detect_and_raise():
    x, w = torch.randn(8, 64), torch.randn(32, 64)
    sid = site("pol-detect", policy="detect")
    clean = torch.ops.ftcompile.linear_global(x, w, None, sid)
    with inject(FaultSpec(site="pol-detect", stage="output", index=(2, 3), value=8.0)):
        y = torch.ops.ftcompile.linear_global(x, w, None, sid)
    assert _stats("pol-detect")["detected"] == 1 and _stats("pol-detect")["corrected"] == 0
    assert (y - clean)[2, 3] == pytest.approx(8.0, abs=1e-4)
    rid = site("model.layers.3.mlp", policy="raise")
    with inject(FaultSpec(site="model.layers.*", stage="output", value=8.0)):
        with pytest.raises(FaultDetected, match="model.layers.3.mlp"):
            torch.ops.ftcompile.linear_thread(x, w, None, rid)


@pytest.mark.parametrize("stage", ATTN_STAGES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_fault_each_stage_detected_and_corrected(stage, dtype):
    name = f"attn-{stage}-{dtype}"
    sid = site(name, "attention")
    q, k, v = (torch.randn(2, 3, 40, 32, dtype=dtype), torch.randn(2, 3, 150, 32, dtype=dtype),
               torch.randn(2, 3, 150, 32, dtype=dtype))
    clean = torch.ops.ftcompile.attention(q, k, v, None, True, None, False, sid)
    index = {"score": (1, 2, 30, 20), "exp": (1, 2, 30, 20), "rowmax": (1, 2, 30),
             "rowsum": (1, 2, 30), "pv": (1, 2, 30, 9), "rescale": (1, 2, 30, 9),
             "rowsum_mma": (1, 2, 30), "p_mma": (1, 2, 30, 20)}[stage]
    with inject(FaultSpec(site=name, stage=stage, index=index, k_step=0 if stage != "rescale" else 1,
                          value=2.5)) as inj:
        out = torch.ops.ftcompile.attention(q, k, v, None, True, None, False, sid)
    assert len(inj.events) == 1
    torch.testing.assert_close(out, clean, rtol=2e-3 if dtype == torch.bfloat16 else 1e-5, atol=1e-5)
    s = _stats(name)
    assert s["detected"] == 1 and s["corrected"] == 1 and s["uncorrectable"] == 0


def test_attention_raise_names_site():
    sid = site("enc.layer.0.attention", "attention", policy="raise")
    q = torch.randn(1, 2, 16, 32)
    with inject(FaultSpec(site=sid, stage="pv", value=5.0)):
        with pytest.raises(FaultDetected, match="enc.layer.0.attention"):
            torch.ops.ftcompile.attention(q, q, q, None, False, None, False, sid)


def test_no_false_positives_over_many_random_inputs():
    sl, sa = site("clean-lin"), site("clean-attn", "attention")
    for trial in range(60):
        g = torch.Generator().manual_seed(trial)
        dtype = [torch.float32, torch.bfloat16, torch.float16][trial % 3]
        shift, spread = [(0.0, 1.0), (1.0, 1.0), (0.0, 30.0)][trial % 3]
        x = (torch.randn(24, 192, generator=g) * spread + shift).to(dtype)
        w = (torch.randn(96, 192, generator=g) * 0.1).to(dtype)
        for op in LINEAR_OPS:
            op(x, w, None, sl)
        # peaked (large logits) and flat rows, and masked keys
        q = (torch.randn(1, 2, 33, 64, generator=g) * (4.0 if trial % 2 else 0.1)).to(dtype)
        kv = torch.randn(1, 2, 97, 64, generator=g).to(dtype)
        mask = torch.rand(33, 97, generator=g) > 0.5
        torch.ops.ftcompile.attention(q, kv, kv, mask if trial % 4 == 0 else None, trial % 4 == 1,
                                      None, False, sa)
    assert _stats("clean-lin")["detected"] == 0 and _stats("clean-lin")["checks"] == 120
    assert _stats("clean-attn")["detected"] == 0 and _stats("clean-attn")["checks"] == 60


def test_nonfinite_inputs_are_reported_as_inputs_not_faults():
    sid, said = site("nonfinite"), site("nonfinite-attn", "attention")
    x = torch.randn(4, 32)
    x[1, 3] = float("nan")
    y = torch.ops.ftcompile.linear_global(x, torch.randn(16, 32), None, sid)
    assert torch.isnan(y[1]).all() and torch.isfinite(y[0]).all()
    s = _stats("nonfinite")
    assert s["nonfinite_inputs"] == 1 and s["detected"] == 0
    q = torch.randn(1, 1, 8, 16)
    q[0, 0, 0, 0] = float("inf")
    torch.ops.ftcompile.attention(q, q.abs().clamp_max(1), q.abs().clamp_max(1), None, False, None,
                                  False, said)
    assert _stats("nonfinite-attn")["nonfinite_inputs"] == 1 and _stats("nonfinite-attn")["detected"] == 0


def test_nan_produced_inside_is_a_detected_fault():
    sid = site("nan-inside")
    x, w = torch.randn(8, 64), torch.randn(32, 64)
    clean = torch.ops.ftcompile.linear_global(x, w, None, sid)
    with inject(FaultSpec(site="nan-inside", stage="output", index=(0, 0), value=float("nan"))):
        y = torch.ops.ftcompile.linear_global(x, w, None, sid)
    torch.testing.assert_close(y, clean, rtol=1e-5, atol=1e-5)
    assert _stats("nan-inside")["detected"] == 1 and _stats("nan-inside")["corrected"] == 1


def test_weight_checksums_follow_in_place_updates():
    sid = site("update")
    x, lin = torch.randn(4, 32), torch.nn.Linear(32, 16)
    torch.ops.ftcompile.linear_global(x, lin.weight.detach(), None, sid)
    with torch.no_grad():
        lin.weight.mul_(3.0)
    y = torch.ops.ftcompile.linear_global(x, lin.weight.detach(), None, sid)
    torch.testing.assert_close(y, x @ lin.weight.detach().t())
    assert _stats("update")["detected"] == 0


def test_weights_rewritten_without_a_version_bump_are_not_served_stale():
    """Inductor writes scratch buffers from its own kernels (no _version bump) and reuses them
    for the next layer's weight: a cached checksum of such a weight would be stale."""
    w = torch.randn(32, 64)
    alias = torch.empty(0).set_(w.untyped_storage(), 0, w.shape, w.stride())  # own version counter
    x = torch.randn(8, 64)
    for static in (False, True):
        name = f"scratch-{static}"
        sid = ftcompile.register_site(name, "linear", static_weight=static)
        torch.ops.ftcompile.linear_global(x, w, None, sid)
        alias.copy_(torch.randn(32, 64))
        assert w._version == 0
        y = torch.ops.ftcompile.linear_global(x, w, None, sid)
        torch.testing.assert_close(y, x @ w.t(), rtol=1e-5, atol=1e-5)
        alias.copy_(torch.randn(32, 64))
    assert _stats("scratch-False")["detected"] == 0
    assert _stats("scratch-True")["detected"] > 0  # why the backend never caches such weights


def test_registered_parameter_updates_seen_through_rebuilt_aliases():
    """Inductor hands ops tensors rebuilt over a parameter's storage (reinterpret_tensor: own
    version counter, always 0); the backend registers the parameter as its storage's owner, so an
    in-place update of the parameter still renews the cached checksums."""
    lin = torch.nn.Linear(64, 32, bias=False)
    ftcompile.abft.gemm.register_owner(lin.weight)
    sid = site("rebuilt")
    x = torch.randn(8, 64)
    rebuilt = lambda p: _reinterpret_tensor(p, p.shape, p.stride(), 0)  # what inductor's code calls
    torch.ops.ftcompile.linear_global(x, rebuilt(lin.weight), None, sid)
    before = lin.weight._version
    with torch.no_grad():
        lin.weight.mul_(3.0)
    alias = rebuilt(lin.weight)
    assert alias._version == 0 and lin.weight._version == before + 1  # the alias did not see it
    y = torch.ops.ftcompile.linear_global(x, alias, None, sid)
    torch.testing.assert_close(y, x @ lin.weight.detach().t(), rtol=1e-5, atol=1e-5)
    assert _stats("rebuilt")["detected"] == 0


def test_transposed_weight_argument():
    sid = site("transposed")
    x, w_kn, b = torch.randn(6, 48), torch.randn(48, 20), torch.randn(20)
    for op in LINEAR_OPS:
        torch.testing.assert_close(op(x, w_kn, b, sid, True), torch.addmm(b, x, w_kn))
    torch.library.opcheck(torch.ops.ftcompile.linear_global, (x.requires_grad_(), w_kn.requires_grad_(),
                                                              b, sid, True))


@pytest.mark.parametrize("op", LINEAR_OPS)
@pytest.mark.parametrize("dtype, n, ld", [(torch.float16, 37, 40), (torch.bfloat16, 50257, 50264),
                                          (torch.float32, 21, 24), (torch.float16, 48, 48)])
def test_padded_rows_hold_the_same_values(op, dtype, n, ld):
    """pad_rows: rows 16 bytes apart (N rounded up), the values of the contiguous output; where
    N's rows are aligned already the output stays contiguous."""
    sid = site(f"pad-{dtype}-{n}")
    x, w, b = torch.randn(2, 3, 64).to(dtype), (torch.randn(n, 64) * 0.1).to(dtype), torch.randn(n).to(dtype)
    y = op(x, w, b, sid, False, True)
    assert y.shape == (2, 3, n) and y.stride() == (3 * ld, ld, 1) and (ld == n or y._base is None)
    assert y.untyped_storage().nbytes() >= 6 * ld * y.element_size()  # the last row's padding too
    torch.testing.assert_close(y, op(x, w, b, sid), rtol=0, atol=0)
    if n < 1000:
        torch.library.opcheck(op, (x.float().requires_grad_(), w.float().requires_grad_(), None, sid,
                                   False, True))
    assert _stats(f"pad-{dtype}-{n}")["detected"] == 0


def test_bad_arguments_raise_clearly():
    sid = site("bad")
    with pytest.raises(TypeError, match="unsupported dtype"):
        torch.ops.ftcompile.linear_global(torch.randn(2, 4).double(), torch.randn(3, 4).double(), None, sid)
    with pytest.raises(ValueError, match="features"):
        torch.ops.ftcompile.linear_global(torch.randn(2, 5), torch.randn(3, 4), None, sid)
    with pytest.raises(ValueError, match="not registered"):
        torch.ops.ftcompile.linear_global(torch.randn(2, 4), torch.randn(3, 4), None, 10 ** 6)


def test_tile_checks_correct_one_fault_per_tile_of_a_row():
    """The global scheme with one check per row and 64-wide column tile (the CUDA kernel's
    tile-local check): no false alarm on clean calls; two faults in one row but different
    tiles are both corrected; two in one tile are uncorrectable, as with whole-row checks."""
    from ftcompile.abft import gemm
    sid = site("tiles")
    x, w, b = torch.randn(24, 256), torch.randn(200, 256) * 0.1, torch.randn(200)
    run = lambda: gemm.linear_global(x, w, b, site_name="tiles", site_id=sid, policy="correct",
                                     c_sigma=2.5, e_max_safety=2.0, tile_width=64)
    clean, out = run()
    assert int(out.detected) == 0
    torch.testing.assert_close(clean, torch.nn.functional.linear(x, w, b), rtol=1e-5, atol=1e-4)
    with inject(FaultSpec(site="tiles", stage="output", index=(5, 10), value=3.0),
                FaultSpec(site="tiles", stage="output", index=(5, 80), value=-3.0)):
        y, out = run()
    assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == (2, 2, 0)
    torch.testing.assert_close(y, clean, rtol=1e-5, atol=1e-5)
    with inject(FaultSpec(site="tiles", stage="output", index=(5, 10), value=3.0, count=2)):
        y, out = run()
    assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == (1, 0, 1)


def test_opcheck_and_errors_of_linear_group():
    """The group op: registered fake, autograd (gradients of every member), and clear errors."""
    sid = site("opcheck-group")
    x = torch.randn(2, 3, 16, requires_grad=True)
    ws = [torch.randn(24, 16, requires_grad=True), torch.randn(8, 16, requires_grad=True)]
    bs = [torch.randn(24, requires_grad=True), torch.randn(8, requires_grad=True)]
    torch.library.opcheck(torch.ops.ftcompile.linear_group, (x, ws, bs, sid))
    torch.library.opcheck(torch.ops.ftcompile.linear_group, (x, ws, [], sid))
    y = torch.ops.ftcompile.linear_group(x, ws, bs, sid)
    torch.testing.assert_close(y, torch.cat([F.linear(x, w, b) for w, b in zip(ws, bs)], -1))
    with pytest.raises(ValueError, match="2 or more weights"):
        torch.ops.ftcompile.linear_group(x, ws[:1], [], sid)
    with pytest.raises(ValueError, match="one K"):
        torch.ops.ftcompile.linear_group(x, [ws[0], torch.randn(8, 16, 1)], [], sid)


def test_group_encoding_follows_each_member():
    """A group's derived data is keyed on all its members: an in-place change of any one of them
    remakes it; an unchanged group is served from the cache."""
    cache = ftcompile.abft.gemm.DerivedCache()
    a, b = torch.ones(4, 3), torch.ones(2, 3)
    made = []
    make = lambda t: made.append(1) or sum(float(m.sum()) for m in t)
    assert cache.get((a, b), make) == 18.0 and cache.get((a, b), make) == 18.0 and len(made) == 1
    b.mul_(2)
    assert cache.get((a, b), make) == 24.0 and len(made) == 2
    assert cache.get((b, a), make) == 24.0 and len(made) == 3  # another order, another group


@pytest.mark.parametrize("stage", ["output", "accumulator"])
def test_group_fault_in_any_member_is_corrected(stage):
    """The group is checked per output row over all members: a fault in the second member's
    columns is located there and corrected from its own weight."""
    name = f"group-fault-{stage}"
    sid = site(name)
    x = torch.randn(12, 64)
    ws, bs = [torch.randn(32, 64) * 0.1, torch.randn(16, 64) * 0.1], [torch.randn(32), torch.randn(16)]
    clean = torch.ops.ftcompile.linear_group(x, ws, bs, sid)
    with ftcompile.inject(ftcompile.FaultSpec(site=name, stage=stage, index=(5, 40), value=3.0, k_step=0)) as inj:
        y = torch.ops.ftcompile.linear_group(x, ws, bs, sid)
    assert inj.events[0].index == (5, 40)
    torch.testing.assert_close(y, clean, rtol=1e-5, atol=1e-5)
    assert _stats(name) == {"checks": 2, "detected": 1, "corrected": 1, "uncorrectable": 0, "nonfinite_inputs": 0}

"""The decode kernel of ``ftcompile::attention`` (csrc/attention/efta_decode.cuh): split-KV attention
for at most 8 query rows per KV head, with the EFTA protection stages.

CPU part: the split plan covers the key tiles and fills the GPU. CUDA part (sm_90 GPU only): "auto"
picks it for decode shapes; numerics by the 2x rule against fp64 SDPA over GQA, MHA, several query
rows, masks, causal, scale, layouts and long caches; no false alarms; a fault at each stage (and
random ones) detected and corrected, with splits of one tile and of several; two faults in a row
uncorrectable and repaired by the recompute policy; policies; non-finite inputs; CUDA graphs.
"""
import zlib

import pytest
import torch

from ftcompile import FaultDetected, FaultSpec, inject
from ftcompile.ops import cuda_attention as ca
from conftest import site
from test_cuda_attention import (DTYPES, STAGES, _heads_last_equals_contiguous, _inputs,
                                 _protected_and_plain_match_by_the_2x_rule, _random_faults_corrected, _sdpa,
                                 _stats, needs_gpu)


# ------------------------------------------------------------------------------------------- CPU
@pytest.mark.parametrize("batch_heads", [1, 8, 64, 512])
@pytest.mark.parametrize("rows", [1, 4, 5, 8])
@pytest.mark.parametrize("visit", [1, 2, 17, 64, 1024])
def test_decode_plan_covers_every_tile_once_and_fills_the_gpu(batch_heads, rows, visit):
    per_cta, row_blocks, splits, tps = ca.decode_plan(batch_heads, rows, visit, sms=132)
    assert per_cta == (2 if rows <= 2 else 4 if rows <= 4 else 8) and row_blocks * per_cta >= rows
    assert splits * tps >= visit and (splits - 1) * tps < visit  # every tile once, no empty split
    ctas, slots = batch_heads * row_blocks * splits, ca.DECODE_CTAS_PER_SM * 132
    # at least half a wave where the tiles allow it; one wave, not a wave and a bit, where one fits
    assert ctas >= min(slots, batch_heads * row_blocks * visit) // 2
    if batch_heads * row_blocks <= slots:
        assert ctas <= slots


def test_decode_shape_flattens_batch_dims_and_reads_heads():
    q, k = torch.empty(2, 3, 32, 1, 64), torch.empty(2, 3, 8, 100, 64)
    assert ca.decode_shape(q, k) == (6, 32, 8, 1)
    assert ca.decode_shape(torch.empty(5, 64), torch.empty(9, 64)) == (1, 1, 1, 5)


# ------------------------------------------------------------------------------------------ CUDA
def _use_decode(monkeypatch):
    monkeypatch.setattr(ca, "KERNEL", "decode")


CASES = {  # b, hq, hk, sq, sk and extras
    "gqa4-one-row": dict(b=2, hq=8, hk=2, sq=1, sk=300),
    "gqa8-one-row": dict(b=1, hq=16, hk=2, sq=1, sk=1000),
    "mha-one-row": dict(b=2, hq=4, hk=4, sq=1, sk=4097),  # run as 2 rows
    "mha-two-rows": dict(b=2, hq=4, hk=4, sq=2, sk=700),
    "mha-four-rows": dict(b=2, hq=3, hk=3, sq=4, sk=150),
    "gqa4-two-rows": dict(b=2, hq=8, hk=2, sq=2, sk=200),
    "one-key": dict(b=2, hq=8, hk=2, sq=1, sk=1),
    "causal-rect": dict(b=2, hq=4, hk=4, sq=3, sk=130, causal=True),
    "bool-mask": dict(b=2, hq=8, hk=2, sq=1, sk=300, mask="bool"),
    "padding": dict(b=2, hq=8, hk=2, sq=1, sk=300, mask="padding"),
    "float-mask": dict(b=2, hq=4, hk=4, sq=2, sk=260, mask="float"),
    "masked-row": dict(b=2, hq=4, hk=4, sq=2, sk=260, mask="masked-row"),
    "scale": dict(b=2, hq=8, hk=2, sq=1, sk=300, scale=0.05),
    "3d": dict(b=1, hq=8, hk=2, sq=1, sk=300, three_d=True),
    "strided": dict(b=2, hq=8, hk=2, sq=1, sk=300, layout="bshd"),
    "many-heads": dict(b=4, hq=64, hk=64, sq=1, sk=700),  # few splits of many tiles
}


def _mask(c, b, hq, sq, sk, dtype, gen):
    kind = c.get("mask")
    if kind == "bool":
        return torch.rand(b, 1, sq, sk, generator=gen, device="cuda") > 0.3
    if kind == "padding":  # [B, 1, 1, Sk]: the second sequence's last 40 keys padding
        m = torch.ones(b, 1, 1, sk, dtype=torch.bool, device="cuda")
        m[1, ..., -40:] = False
        return m
    if kind in ("float", "masked-row"):
        m = torch.randn(b, hq, sq, sk, generator=gen, device="cuda").to(dtype)
        m[..., ::3] = float("-inf")
        if kind == "masked-row":
            m[1, 2, 1] = float("-inf")  # a row with no key: 0, as the op's contract says
        return m
    return None


@needs_gpu
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_matches_fp64_reference_by_the_2x_rule(case, d, dtype, monkeypatch):
    _use_decode(monkeypatch)
    c = CASES[case]
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"decode-{case}-{d}".encode()))
    b, hq, hk, sq, sk = c["b"], c["hq"], c["hk"], c["sq"], c["sk"]
    q, k, v = _inputs(b, hq, hk, sq, sk, d, dtype, gen, layout=c.get("layout", "bhsd"))
    mask = _mask(c, b, hq, sq, sk, dtype, gen)
    if c.get("three_d"):
        q, k, v = q[0], k[0], v[0]
    causal, scale, gqa = c.get("causal", False), c.get("scale"), hq != hk
    name = f"decode-num-{case}-{d}-{dtype}"
    sid = site(name, "attention")
    out = _protected_and_plain_match_by_the_2x_rule(q, k, v, mask, causal, scale, gqa, sid)
    assert ca.last_kernel() == "decode"
    if case == "masked-row":
        assert (out[1, 2, 1] == 0).all()
    s = _stats(name)
    assert s["checks"] == 1 and s["detected"] == 0 and s["nonfinite_inputs"] == 0


def test_auto_prefers_decode_where_it_measured_faster_than_the_tile_kernels():
    assert ca.decode_preferred(hq=12, hk=12, sq=2)  # 2 rows
    assert ca.decode_preferred(hq=32, hk=8, sq=1)  # 4 rows sharing one cache read
    assert ca.decode_preferred(hq=32, hk=8, sq=2)  # 8 rows
    assert not ca.decode_preferred(hq=32, hk=8, sq=3)  # 12 rows: the tile kernels
    assert not ca.decode_preferred(hq=4, hk=4, sq=9)


def test_auto_runs_the_tensor_core_split_kernel_and_the_setting_picks_either(monkeypatch):
    monkeypatch.setattr(ca, "DECODE_IMPL", "auto")
    assert ca.decode_impl() == "tc"
    monkeypatch.setattr(ca, "DECODE_IMPL", "fma")
    assert ca.decode_impl() == "fma"
    monkeypatch.setattr(ca, "DECODE_IMPL", "mma")
    with pytest.raises(ValueError, match="FTCOMPILE_DECODE_IMPL='mma': expected 'auto', 'tc' or 'fma'"):
        ca.decode_impl()


@needs_gpu
def test_auto_runs_decode_on_decode_shapes_and_the_tile_kernels_past_them():
    sid = site("decode-auto", "attention")
    gen = torch.Generator(device="cuda").manual_seed(3)
    for b, sq, hq, hk, want in [(1, 1, 32, 8, "decode"), (1, 2, 32, 8, "decode"), (1, 8, 4, 4, "decode"),
                                (8, 2, 32, 8, "decode"), (1, 3, 32, 8, "wgmma"), (1, 9, 4, 4, "wgmma")]:
        q, k, v = _inputs(b, hq, hk, sq, 200, 128, torch.bfloat16, gen)
        torch.ops.ftcompile.attention(q, k, v, None, False, None, hq != hk, sid)
        assert ca.last_kernel() == want, (b, sq, hq, hk)


@needs_gpu
@pytest.mark.parametrize("d", [64, 128])
def test_decode_no_false_alarms_over_realistic_distributions(d, monkeypatch):
    """Peaked and flat rows, shifted keys, masked keys, GQA and MHA, long caches: nothing counted and
    no alarm confirmed as a fault by recomputation."""
    _use_decode(monkeypatch)
    name = f"decode-clean-{d}"
    sid = site(name, "attention")
    ca.reset_diagnostics()
    for trial in range(24):
        gen = torch.Generator(device="cuda").manual_seed(2000 + trial)
        dtype = DTYPES[trial % 2]
        q_scale = [0.05, 1.0, 4.0, 12.0][trial % 4]
        b, hq, hk, sq = [(1, 32, 8, 1), (4, 8, 8, 1), (2, 16, 2, 1), (2, 4, 4, 2)][(trial // 4) % 4]
        sk = [128, 1100, 4096, 16384][trial % 4]
        q, k, v = _inputs(b, hq, hk, sq, sk, d, dtype, gen, q_scale=q_scale)
        k = k + (1.5 if trial % 3 == 0 else 0.0)
        mask = None
        if trial % 6 == 5:
            mask = torch.rand(b, 1, sq, sk, generator=gen, device="cuda") > 0.2
        torch.ops.ftcompile.attention(q, k, v, mask, False, None, hq != hk, sid)
    s = _stats(name)
    assert s["checks"] == 24 and s["detected"] == 0 and s["uncorrectable"] == 0
    alarms = ca.alarm_counts()
    assert alarms["tile_faults"] == 0 and alarms["final_alarms"] == 0 and alarms["rowsum_alarms"] == 0
    print(f"d={d}: {alarms['tile_alarms']} tile alarms (recomputed, none confirmed)")


# (b, hq, hk, sk): one tile per split, and few splits of several tiles (tile 1 mid-split)
SPLITS = {"tile-splits": (2, 8, 2, 300), "long-splits": (4, 64, 64, 700), "mha": (2, 8, 8, 300)}
FAULT_INDEX = {"score": (1, 5, 0, 20), "exp": (1, 5, 0, 20), "rowmax": (1, 5, 0), "rowsum": (1, 5, 0),
               "pv": (1, 5, 0, 9), "rescale": (1, 5, 0, 9), "rowsum_mma": (1, 5, 0), "p_mma": (1, 5, 0, 20)}


@needs_gpu
@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("splits", list(SPLITS))
def test_decode_fault_each_stage_detected_and_corrected(stage, d, dtype, splits, monkeypatch):
    """A value fault at one stage of tile 0 (1 for rescale): one event at the element asked for,
    detected, corrected to the fault-free output within an output ulp."""
    _use_decode(monkeypatch)
    b, hq, hk, sk = SPLITS[splits]
    name = f"decode-fault-{stage}-{d}-{dtype}-{splits}"
    sid = site(name, "attention")
    gen = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = _inputs(b, hq, hk, 1, sk, d, dtype, gen)
    gqa = hq != hk
    clean = torch.ops.ftcompile.attention(q, k, v, None, False, None, gqa, sid)
    spec = FaultSpec(site=name, stage=stage, index=FAULT_INDEX[stage], value=2.5,
                     k_step=0 if stage != "rescale" else 1)
    with inject(spec) as inj:
        out = torch.ops.ftcompile.attention(q, k, v, None, False, None, gqa, sid)
    assert ca.last_kernel() == "decode"
    assert len(inj.events) == 1 and inj.events[0].after != inj.events[0].before
    assert inj.events[0].index == FAULT_INDEX[stage]
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    torch.testing.assert_close(out, clean, rtol=ulp, atol=1e-5)
    assert _stats(name) == {"checks": 2, "detected": 1, "corrected": 1, "uncorrectable": 0,
                            "nonfinite_inputs": 0}


@needs_gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("fault", [dict(value=10.0), dict(bit=30, fmt="fp32"), dict(bit=27, fmt="fp32"),
                                   dict(bit=14, fmt="bf16")])
def test_decode_random_faults_detected_and_corrected(d, fault, monkeypatch):
    """Drawn tile and element (the reference's generator), value and bit-flip faults, every stage."""
    _use_decode(monkeypatch)
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = _inputs(2, 16, 4, 2, 530, d, torch.bfloat16, gen)
    # the tensor-core split kernel checks l against the P the products read to 2^-12 (the FMA one bit
    # for bit): a smaller change of a consumed P may pass, moving the output by less than that
    unseen = None if ca.decode_impl() == "fma" else 2.0 ** -12
    checked = _random_faults_corrected(f"decode-rand-{d}", q, k, v, fault, p_mma_unseen=unseen)
    assert checked >= 12, checked


@needs_gpu
def test_decode_two_faults_in_one_output_row_are_uncorrectable_and_recompute_repairs(monkeypatch):
    _use_decode(monkeypatch)
    gen = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = _inputs(1, 8, 2, 1, 200, 64, torch.bfloat16, gen)
    spec = dict(stage="pv", index=(0, 3, 0, 5), k_step=1, value=4.0, count=2)
    sid = site("decode-multi", "attention")
    clean = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    with inject(FaultSpec(site="decode-multi", **spec)):
        y = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    s = _stats("decode-multi")
    assert s["detected"] == 1 and s["uncorrectable"] == 1 and s["corrected"] == 0
    assert not torch.allclose(y, clean)
    rid = site("decode-multi-re", "attention", policy="recompute")
    with inject(FaultSpec(site="decode-multi-re", **spec)):
        y = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, rid)
    torch.testing.assert_close(y, clean, rtol=0, atol=0)
    assert _stats("decode-multi-re")["uncorrectable"] == 1


@needs_gpu
def test_decode_policies_detect_and_raise(monkeypatch):
    _use_decode(monkeypatch)
    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = _inputs(1, 8, 2, 1, 128, 64, torch.bfloat16, gen)
    sid = site("decode-detect", "attention", policy="detect")
    clean = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    with inject(FaultSpec(site="decode-detect", stage="pv", index=(0, 3, 0, 7), k_step=1, value=8.0)):
        y = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    assert _stats("decode-detect")["detected"] == 1 and _stats("decode-detect")["corrected"] == 0
    assert (y - clean)[0, 3, 0, 7].abs() > 0.1
    rid = site("dec.layer.0.attention", "attention", policy="raise")
    with inject(FaultSpec(site=rid, stage="pv", value=5.0)):
        with pytest.raises(FaultDetected, match="dec.layer.0.attention"):
            torch.ops.ftcompile.attention(q, k, v, None, False, None, True, rid)


@needs_gpu
@pytest.mark.parametrize("where", ["q", "k", "v"])
def test_decode_nonfinite_inputs_are_reported_as_inputs_not_faults(where, monkeypatch):
    _use_decode(monkeypatch)
    name = f"decode-nonfinite-{where}"
    sid = site(name, "attention")
    gen = torch.Generator(device="cuda").manual_seed(9)
    q, k, v = _inputs(1, 8, 2, 1, 300, 64, torch.bfloat16, gen)
    {"q": q, "k": k, "v": v}[where][0, 1, 0 if where == "q" else 150, 3] = float("inf")
    out = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    s = _stats(name)
    assert s["nonfinite_inputs"] == 1 and s["detected"] == 0
    assert not torch.isfinite(out[0, 1 if where == "q" else 4]).all()  # the rows that read it (KV head 1: 4-7)
    torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    assert _stats(name)["nonfinite_inputs"] == 2  # counted per call (the flag was cleared)


@needs_gpu
@pytest.mark.parametrize("d", [64, 128])
def test_decode_long_cache(d, monkeypatch):
    """64K keys, one query row per head, GQA 32/8: the 2x rule, nothing counted."""
    _use_decode(monkeypatch)
    sid = site(f"decode-64k-{d}", "attention")
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = _inputs(1, 32, 8, 1, 65536, d, torch.bfloat16, gen)
    out = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    ref = _sdpa(q, k, v, None, False, None, True, torch.float64)
    torch_err = (_sdpa(q, k, v, None, False, None, True).double() - ref).abs().max()
    assert (out.double() - ref).abs().max() <= 2 * torch_err + 1e-5
    assert _stats(f"decode-64k-{d}")["detected"] == 0


@needs_gpu
@pytest.mark.parametrize("stage", ["pv", "score"])
def test_decode_heads_last_output_and_opcheck(stage, monkeypatch):
    _use_decode(monkeypatch)
    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = _inputs(2, 8, 2, 1, 150, 128, torch.bfloat16, gen, layout="bshd")
    _heads_last_equals_contiguous(f"decode-heads-last-{stage}", q, k, v, False, stage, FAULT_INDEX[stage])
    assert ca.last_kernel() == "decode"


@needs_gpu
def test_decode_replays_in_a_cuda_graph(monkeypatch):
    """Captured once, replayed on new inputs: the eager result each time, each replay a checked call."""
    sid = site("decode-graph", "attention")
    gen = torch.Generator(device="cuda").manual_seed(4)
    q, k, v = _inputs(2, 32, 8, 1, 1000, 128, torch.bfloat16, gen)
    torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)  # warm-up (library, plan)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid)
    for seed in range(3):
        fresh = _inputs(2, 32, 8, 1, 1000, 128, torch.bfloat16, torch.Generator(device="cuda").manual_seed(50 + seed))
        for t, f in zip((q, k, v), fresh):
            t.copy_(f)
        graph.replay()
        torch.testing.assert_close(out, torch.ops.ftcompile.attention(q, k, v, None, False, None, True, sid),
                                   rtol=0, atol=0)
    assert ca.last_kernel() == "decode"
    s = _stats("decode-graph")
    assert s["checks"] == 1 + 2 * 3 and s["detected"] == 0  # (a capture runs nothing)

"""Launch plans replayed in C++ (ftcompile/ops/fastpath.py): the twins on the GPU give the public
ops' outputs bit for bit, and the replay keeps ops/replay.py's rule (weights unchanged, no
injection armed, knobs unchanged)."""
import pytest
import torch

import ftcompile
from ftcompile import FaultSpec, inject
from ftcompile.ops import cuda_gemm, fastpath
from conftest import site

FT, TWIN = torch.ops.ftcompile, torch.ops.ftcompile_infer


def test_without_cuda_nothing_is_built_and_offers_are_ignored():
    if torch.cuda.is_available():
        pytest.skip("a CPU-only check")
    assert fastpath.module() is None and fastpath.stats() is None
    fastpath.offer(lambda x: x, ())  # no extension: a no-op
    fastpath.invalidate()


def test_setting_a_knob_goes_through_the_invalidating_module(monkeypatch):
    assert type(cuda_gemm).__name__ == "_Knobs"
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", "tiles")
    assert cuda_gemm.GLOBAL_CHECK == "tiles"


needs_fastpath = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90 GPU (the kernels and the C++ replay)")
H = dict(device="cuda", dtype=torch.float16)


def _calls(sid):
    x, xs = torch.randn(64, 512, **H), torch.randn(8, 512, **H)
    w, b = torch.randn(768, 512, **H) / 20, torch.randn(768, **H)
    wt = torch.randn(512, 1001, **H) / 20  # a Conv1D weight ([K, N]), N's rows unaligned
    q, k, v = (torch.randn(2, 4, 200, 64, **H) for _ in range(3))
    qh = torch.randn(2, 200, 4, 64, **H).transpose(1, 2)  # a head split's view
    causal = torch.ones(200, 200, dtype=torch.bool, device="cuda").tril()
    additive = torch.zeros(2, 1, 200, 200, **H).masked_fill(~causal, float("-inf"))
    return {
        "global": ("linear_global", (x, w, b, sid)),
        "global-transposed-padded": ("linear_global", (x, wt, None, sid, True, True)),
        "thread": ("linear_thread", (xs, w, b, sid)),
        "group": ("linear_group", (x, [w, w[:256]], [b, b[:256]], sid)),
        "attention-causal-heads-last": ("attention", (qh, k, v, None, True, None, False, sid, True)),
        "attention-bool-mask": ("attention", (q, k, v, causal, False, 0.2, False, sid)),
        "attention-additive-mask": ("attention", (q, k, v, additive, False, None, False, sid, True)),
    }


def _hits():
    return fastpath.stats()["hits"]


@pytest.mark.cuda
@needs_fastpath
@pytest.mark.parametrize("case", ["global", "global-transposed-padded", "thread", "group",
                                  "attention-causal-heads-last", "attention-bool-mask",
                                  "attention-additive-mask"])
def test_cpp_replay_gives_the_public_ops_output(case):
    sid = site(f"fast-{case}", "attention" if case.startswith("attention") else "linear")
    name, args = _calls(sid)[case]
    expected = getattr(FT, name).default(*args)
    assert fastpath.module() is not None
    ftcompile.reset_stats()
    outs = [getattr(TWIN, name).default(*args) for _ in range(2)]  # the first files the plan
    before = _hits()
    outs += [getattr(TWIN, name).default(*args) for _ in range(3)]
    assert _hits() - before == 3  # replayed in C++
    for out in outs:
        assert out.shape == expected.shape and out.stride() == expected.stride()
        assert torch.equal(out, expected)
    stats = ftcompile.stats(f"fast-{case}")[f"fast-{case}"]
    assert stats["checks"] == 5 and stats["detected"] == 0


@pytest.mark.cuda
@needs_fastpath
def test_a_weight_changed_in_place_is_not_replayed():
    sid = site("fast-inplace")
    w = torch.nn.Parameter(torch.randn(768, 512, **H) / 20, requires_grad=False)
    x = torch.randn(64, 512, **H)
    for _ in range(2):
        TWIN.linear_global(x, w, None, sid)
    before = _hits()
    with torch.no_grad():
        w.mul_(2)
    out = TWIN.linear_global(x, w, None, sid)
    assert _hits() == before  # the guard saw the change: the full path ran
    assert torch.equal(out, FT.linear_global(x, w, None, sid))
    TWIN.linear_global(x, w, None, sid)
    assert _hits() == before + 1  # and filed a plan of the new weight


@pytest.mark.cuda
@needs_fastpath
def test_an_armed_injection_takes_the_full_path_and_is_corrected():
    sid = site("fast-inject")
    x, w = torch.randn(64, 512, **H), torch.randn(768, 512, **H) / 20
    clean = FT.linear_global(x, w, None, sid)
    for _ in range(2):
        TWIN.linear_global(x, w, None, sid)
    ftcompile.reset_stats()
    before = _hits()
    with inject(FaultSpec(site="fast-inject", stage="output", seed=1, value=1e3)):
        fixed = TWIN.linear_global(x, w, None, sid)
    assert _hits() == before
    diff = (fixed.float() - clean.float()).abs()
    assert float(diff.max()) <= 2.0 ** -6 * float(clean.float().abs().max())
    assert ftcompile.stats("fast-inject")["fast-inject"]["corrected"] == 1
    assert torch.equal(TWIN.linear_global(x, w, None, sid), clean)  # disarmed: replayed again
    assert _hits() == before + 1


@pytest.mark.cuda
@needs_fastpath
def test_a_knob_change_drops_the_plans(monkeypatch):
    sid = site("fast-knob")
    x, w = torch.randn(256, 512, **H), torch.randn(768, 512, **H) / 20
    for _ in range(2):
        TWIN.linear_global(x, w, None, sid)
    assert fastpath.stats()["plans"] > 0
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", "rows")
    assert fastpath.stats()["plans"] == 0
    assert torch.equal(TWIN.linear_global(x, w, None, sid), FT.linear_global(x, w, None, sid))


@pytest.mark.cuda
@needs_fastpath
def test_the_bodys_errors_keep_their_type():
    sid = site("fast-error")
    with pytest.raises(TypeError, match="share a dtype"):
        TWIN.linear_global(torch.randn(8, 64, **H), torch.randn(16, 64, device="cuda", dtype=torch.bfloat16),
                           None, sid)


@pytest.mark.cuda
@needs_fastpath
def test_inference_tensor_weights_are_replayed():
    """Weights made under inference_mode have no version counter: their plans are replayed while
    the storage lives (abft.gemm.owner_version), in C++ as in Python."""
    sid = site("fast-inference-mode")
    with torch.inference_mode():
        w, x = torch.randn(768, 512, **H) / 20, torch.randn(64, 512, **H)
        expected = FT.linear_global(x, w, None, sid)
        for _ in range(2):
            TWIN.linear_global(x, w, None, sid)
        before = _hits()
        assert torch.equal(TWIN.linear_global(x, w, None, sid), expected)
    assert _hits() == before + 1

"""Launch plans (ftcompile.ops.replay): the CPU tier checks the store and its weight guards; the
CUDA tier checks that a replayed call is the full path's call (same output, same counts), and
that what must take the full path does (a weight changed in place or gone, an armed injection)."""
import pytest
import torch
import torch.nn.functional as F

import ftcompile
from ftcompile import FaultSpec, inject
from ftcompile.abft import gemm
from ftcompile.ops import cuda, replay
from conftest import site

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
needs_hopper = pytest.mark.skipif(not HOPPER, reason="needs a CUDA sm_90 GPU")


# ------------------------------------------------------------------------------- CPU tier
def test_plan_is_handed_out_while_its_weight_is_unchanged():
    plans = replay.Plans()
    w, b = torch.randn(4, 3), torch.randn(4)
    plans.put("k", "launch", (w.t(), b))
    assert plans.get("k", (w.t(), b)) == "launch"  # a view made per call, as the ops see it
    assert plans.get("other", (w.t(), b)) is None
    b.add_(1)
    assert plans.get("k", (w.t(), b)) is None
    assert len(plans) == 0  # a stale plan is dropped, the full path makes a new one


def test_plan_of_a_dead_weight_is_not_handed_out_and_goes(monkeypatch):
    monkeypatch.setattr(replay, "SWEEP_EVERY", 3)
    plans = replay.Plans()
    w = torch.randn(64, 64)
    plans.put("k", "launch", (w,))
    plans.put("j", "launch", (w,))
    del w
    w2 = torch.randn(64, 64)  # whatever storage it lands in, it is not the plan's
    assert plans.get("k", (w2,)) is None
    plans.put("other", "launch", (w2,))  # the next sweep drops the dead weight's other plan
    assert len(plans) == 1


def test_plan_sees_its_parameter_change_through_an_alias():
    """Inductor hands the ops tensors rebuilt over a parameter's storage, whose own version counter
    never moves: the guard asks the registered owner, as the weight caches do."""
    plans = replay.Plans()
    param = torch.nn.Parameter(torch.randn(8, 8), requires_grad=False)
    gemm.register_owner(param)
    alias = torch.empty(0).set_(param.untyped_storage(), 0, (8, 8), (8, 1))
    plans.put("k", "launch", (alias,))
    assert plans.get("k", (alias,)) == "launch"
    own = alias._version
    with torch.no_grad():
        param.mul_(2)
    assert alias._version == own and plans.get("k", (alias,)) is None


def test_store_starts_over_past_its_bound(monkeypatch):
    monkeypatch.setattr(replay, "MAX_PLANS", 3)
    plans = replay.Plans()
    for i in range(4):
        plans.put(i, i)
    assert len(plans) == 1 and plans.get(3) == 3


def test_gemm_signature_from_the_op_and_from_its_kernel(monkeypatch):
    """The op's replay and its kernel key a call alike (a group's weights as the op's list or run's
    tuple, no bias as an empty list or None), and the key moves with x's alignment and the knobs."""
    from ftcompile.ops import cuda_gemm
    monkeypatch.setattr(cuda, "raw_stream", lambda device: 7)
    x = torch.randn(4, 64)
    ws = [torch.randn(128, 64), torch.randn(64, 64)]
    key = lambda x, w, b: cuda_gemm._plan_key("linear_global", x, *cuda_gemm._members(w, b), 3, None)
    assert key(x, ws, []) == key(x, tuple(ws), None)
    assert key(x, ws, []) != key(x, ws[:1], [])
    shifted = torch.randn(4 * 64 + 2)[2:].view(4, 64)  # 8 bytes off 16-byte alignment
    assert key(shifted, ws, []) != key(x, ws, [])
    before = key(x, ws, [])
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", "tiles")
    assert key(x, ws, []) != before


def test_no_replay_on_cpu_tensors():
    x, w = torch.randn(2, 8), torch.randn(4, 8)
    assert cuda.replay("linear_global", x, w, None, 0, None) is None
    y = torch.ops.ftcompile.linear_global(x, w, None, site("replay-cpu"))
    torch.testing.assert_close(y, F.linear(x, w))


# ------------------------------------------------------------------------------- CUDA tier
def _stats(name):
    return ftcompile.stats(name)[name]


def _plans(op):
    from ftcompile.ops import cuda_attention, cuda_gemm
    return cuda_attention._plans if op == "attention" else cuda_gemm._plans


def _cases():
    g = torch.Generator().manual_seed(3)
    r = lambda *s, scale=1.0: (torch.randn(*s, generator=g) * scale).to("cuda", torch.bfloat16)
    lin = torch.ops.ftcompile
    cases = {}
    for name, m, n, k in (("global-rows", 512, 1024, 4096), ("global-tiles", 512, 768, 768),
                          ("thread-stream", 8, 768, 768), ("thread-thin", 64, 4096, 4096)):
        w, b = r(n, k, scale=0.02), r(n)
        op = lin.linear_global if name.startswith("global") else lin.linear_thread
        cases[name] = ("gemm", lambda x, sid, op=op, w=w, b=b: op(x, w, b, sid), lambda m=m, k=k: r(m, k))
    wp = r(1001, 768, scale=0.02)  # pad_rows: y's rows of N = 1001 padded to 16 bytes
    cases["global-padded"] = ("gemm", lambda x, sid: lin.linear_global(x, wp, None, sid, False, True),
                              lambda: r(300, 768))
    cases["thread-padded"] = ("gemm", lambda x, sid: lin.linear_thread(x, wp, None, sid, False, True),
                              lambda: r(8, 768))
    ws = [r(1024, 2048, scale=0.02), r(512, 2048, scale=0.02)]
    cases["group"] = ("gemm", lambda x, sid: lin.linear_group(x, ws, [], sid), lambda: r(256, 2048))
    mask = torch.ones(256, 256, dtype=torch.bool, device="cuda").tril()
    fmask = torch.zeros(256, 256, device="cuda", dtype=torch.bfloat16).masked_fill(~mask, float("-inf"))
    qkv = lambda: tuple(r(2, 4, 256, 64) for _ in range(3))
    cases["attention"] = ("attention", lambda t, sid: lin.attention(*t, None, False, None, False, sid), qkv)
    cases["attention-bool-mask"] = ("attention", lambda t, sid: lin.attention(*t, mask, False, None, False, sid), qkv)
    cases["attention-float-mask"] = ("attention", lambda t, sid: lin.attention(*t, fmask, False, None, False, sid), qkv)
    cases["attention-heads-last"] = ("attention", lambda t, sid: lin.attention(*t, None, True, None, False, sid, True), qkv)
    return cases


CASES = ["global-rows", "global-tiles", "thread-stream", "thread-thin", "global-padded", "thread-padded",
         "group", "attention", "attention-bool-mask", "attention-float-mask", "attention-heads-last"]


@needs_hopper
@pytest.mark.parametrize("case", CASES)
def test_replayed_call_is_the_full_paths_call(case):
    """A call with an earlier call's signature is replayed from its plan: the same output as the
    full path on the same inputs (bit for bit: the same kernel and configuration), counted the same,
    no alarm; new inputs of that signature replay too."""
    op, call, make = _cases()[case]
    name = f"replay-{case}"
    sid = site(name, "attention" if op == "attention" else "linear")
    plans = _plans(op)
    first, second = make(), make()
    plans.clear()
    full = call(first, sid)  # full path: leaves a plan
    hits = plans.hits
    again = call(first, sid)
    other = call(second, sid)
    assert plans.hits == hits + 2
    plans.clear()
    other_full = call(second, sid)
    torch.cuda.synchronize()
    assert again.stride() == full.stride() and torch.equal(again, full)
    assert torch.equal(other, other_full)
    assert _stats(name)["checks"] >= 4 and _stats(name)["detected"] == 0


@needs_hopper
@pytest.mark.parametrize("change", ["in-place", "freed"])
def test_changed_or_freed_weight_takes_the_full_path(change):
    """A weight changed in place, or freed and a new one made (likely in its memory): the old
    weight's plan is not replayed, so the output is the new weight's, with no alarm (its own
    checksums, not the old ones)."""
    name = f"replay-{change}"
    sid = site(name)
    x = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16) / 32
    for _ in range(2):  # the second call replays
        torch.ops.ftcompile.linear_global(x, w, None, sid)
    if change == "in-place":
        w.mul_(-3)
    else:
        del w
        w = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16) / 16
    y = torch.ops.ftcompile.linear_global(x, w, None, sid)
    torch.testing.assert_close(y, F.linear(x, w), rtol=2e-2, atol=2e-2)
    assert _stats(name)["detected"] == 0


@needs_hopper
@pytest.mark.parametrize("case,stage", [("global-rows", "output"), ("thread-stream", "output"),
                                        ("attention", "score")])
def test_injection_armed_after_a_plan_is_made_still_happens(case, stage):
    """An injection needs the full path (its records, its events): armed, plans are not replayed."""
    op, call, make = _cases()[case]
    name = f"replay-inject-{case}"
    sid = site(name, "attention" if op == "attention" else "linear")
    inputs = make()
    clean = call(inputs, sid)
    call(inputs, sid)  # a plan exists and is replayed
    spec = FaultSpec(site=name, stage=stage, seed=1, value=1e3) if op == "gemm" else \
        FaultSpec(site=name, stage=stage, index=(1, 2, 5, 7), value=2.5, k_step=0)
    with inject(spec) as inj:
        y = call(inputs, sid)
    torch.cuda.synchronize()
    assert len(inj.events) >= 1
    stats = _stats(name)
    assert stats["detected"] == 1 and stats["corrected"] == 1
    diff = (y.float() - clean.float()).abs()
    assert float(diff.max()) <= 2.0 ** -6 * float(clean.float().abs().max())

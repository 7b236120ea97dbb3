"""What CUDA-graph capture asks of the ops (ftcompile.cudagraphs), on the CPU: capture is simulated,
so these tests run without a GPU; tests/test_cuda_e2e.py captures real graphs."""
import pytest
import torch

import ftcompile
from ftcompile import FaultSpec, cudagraphs, inject
from ftcompile.abft import injection


@pytest.fixture
def capture(monkeypatch, captured_sites_kept):
    """Pretend the current stream is capturing; forget the sites recorded meanwhile."""
    monkeypatch.setattr(cudagraphs, "capturing", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)


def test_policy_raise_refused_under_capture(capture):
    with pytest.raises(ftcompile.GraphCaptureError, match="policy 'raise'"):
        cudagraphs.check_site(7, "layer.fc", "raise")
    assert (7, "layer.fc") not in cudagraphs.captured_sites()


def test_reference_fallback_refused_under_capture(capture):
    with pytest.raises(ftcompile.GraphCaptureError, match="reference op .*fp32"):
        cudagraphs.check_site(7, "layer.fc", "correct", "fp32")


def test_captured_site_recorded_and_injection_refused(capture):
    cudagraphs.check_site(7, "layer.fc", "correct")
    assert (7, "layer.fc") in cudagraphs.captured_sites()
    with pytest.raises(ftcompile.GraphCaptureError, match="cannot inject into layer.fc"):
        with inject(FaultSpec(site="layer.*", stage="output")):
            pass
    with pytest.raises(ftcompile.GraphCaptureError, match="cannot inject into layer.fc"):
        with inject(FaultSpec(site=7, stage="output")):
            pass
    with inject(FaultSpec(site="other.*", stage="output")):  # a site never captured: fine
        pass


def test_pending_injection_refused_under_capture(capture):
    with inject(FaultSpec(site="layer.fc", stage="output")):  # armed before any capture
        with pytest.raises(ftcompile.GraphCaptureError, match="would not inject"):
            injection.pending(3, "layer.fc", injection.GEMM_STAGES)
        assert injection.pending(3, "other", injection.GEMM_STAGES) == []  # not this site: no error


def test_outside_capture_nothing_is_refused():
    assert not cudagraphs.capturing()
    cudagraphs.check_site(7, "layer.fc", "raise", "fp32")
    buf, in_graph = cudagraphs.persistent(torch.device("cpu"), "a buffer", lambda: torch.zeros(3),
                                          per_graph=True)
    assert buf.sum() == 0 and not in_graph


def test_persistent_state_not_created_during_capture(capture):
    with pytest.raises(ftcompile.GraphCaptureError, match="the telemetry counters would be created"):
        cudagraphs.persistent(torch.device("cuda", 0), "the telemetry counters", lambda: 1)
    # a self-cleaning workspace may belong to the graph instead (not cached by the caller)
    assert cudagraphs.persistent(torch.device("cuda", 0), "a workspace", lambda: 1, per_graph=True) == (1, True)


def test_replaced_cache_entry_retired_only_if_captured(monkeypatch):
    """A cache entry a capture read is kept alive when the weight changes (the graph holds its
    address); one no capture read is freed as before."""
    cache = ftcompile.abft.gemm.DerivedCache()
    w = torch.ones(4, 4)
    retired = []
    monkeypatch.setattr(cudagraphs, "retire", retired.append)
    first = cache.get(w, lambda t: t.sum())
    w.add_(1)
    second = cache.get(w, lambda t: t.sum())
    assert retired == [] and second == 32 and first == 16
    key = next(iter(cache._entries))
    cache._captured.add(key)  # as a hit under capture records it (CUDA tensors only)
    w.add_(1)
    assert cache.get(w, lambda t: t.sum()) == 48
    assert len(retired) == 1 and retired[0] is second and key not in cache._captured


def test_uncached_host_sync_refused_under_capture(monkeypatch, capture):
    """A weight computed in the graph (nothing cached) whose encoding reads a value on the host:
    refused at capture with the error; one that needs no host value is computed in the graph."""
    cache = ftcompile.abft.gemm.DerivedCache()
    w = torch.ones(2, 2)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    with pytest.raises(ftcompile.GraphCaptureError, match="needs max"):
        cache.get(w, lambda t: float(t.max()), cache=False, host_sync="max |W|")
    assert cache.get(w, lambda t: t.sum(), cache=False) == 4


def test_capture_miss_says_why():
    """The capture error names the reason a weight missed the cache: changed in place, or a
    storage no warm-up saw (a copy of a warmed-up weight of the same geometry); for a group of
    weights, the member that missed."""
    cache = ftcompile.abft.gemm.DerivedCache()
    w = torch.ones(4, 3)
    cache.get(w, lambda t: t.sum())
    key = cache.key
    copy = w.clone()
    assert "perhaps a copy of one of the 1 warmed-up" in cache._miss_reason((copy,), (key(copy),), None, (0,))
    assert "perhaps" not in cache._miss_reason((copy.t(),), (key(copy.t()),), None, (0,))
    w.add_(1)
    hit = cache._entries[(key(w),)]
    assert "version 0 -> 1" in cache._miss_reason((w,), (key(w),), hit, (w._version,))
    other = torch.ones(2, 3)
    cache.get((w, other), lambda t: t[0].sum() + t[1].sum())
    other.add_(1)
    group_hit = cache._entries[(key(w), key(other))]
    why = cache._miss_reason((w, other), (key(w), key(other)), group_hit, (w._version, other._version))
    assert "weight (2, 3) float32 changed in place since: version 0 -> 1" in why

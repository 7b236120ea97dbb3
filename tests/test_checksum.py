"""Properties of the checksum algebra that every protected op relies on."""
import torch
from hypothesis import given, settings, strategies as st

from ftcompile.abft import checksum


@settings(max_examples=200, deadline=None)
@given(length=st.integers(2, 512), pos=st.integers(0, 511), exponent=st.integers(-2, 30),
       sign=st.sampled_from([-1.0, 1.0]), seed=st.integers(0, 2 ** 16))
def test_a_single_fault_above_threshold_is_located_exactly(length, pos, exponent, sign, seed):
    pos %= length
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(3, length, generator=g)
    checks = torch.stack([y.double().sum(-1), (y.double() * torch.arange(1, length + 1)).sum(-1)], -1).float()
    threshold = torch.full((3,), 1e-4 * length)
    faulty = y.clone()
    faulty[1, pos] += sign * 2.0 ** exponent
    d = checksum.residuals(faulty, checks)
    detected, where = checksum.locate(faulty, d, threshold)
    assert detected.tolist() == [False, True, False]
    assert where.tolist() == [-1, pos, -1]


@settings(max_examples=100, deadline=None)
@given(length=st.integers(1, 512), seed=st.integers(0, 2 ** 16))
def test_a_clean_group_is_never_flagged(length, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(4, length, generator=g) * 100
    checks = torch.stack([y.double().sum(-1), (y.double() * torch.arange(1, length + 1)).sum(-1)], -1).float()
    threshold = 4 * 2.0 ** -24 * y.abs().sum(-1) + 1e-6  # fp32 summation bound
    detected, where = checksum.locate(y, checksum.residuals(y, checks), threshold)
    assert not detected.any() and (where == -1).all()


def test_nan_or_inf_element_is_located_and_nan_counts_as_detected():
    y = torch.randn(2, 16)
    checks = torch.stack([y.sum(-1), (y * torch.arange(1, 17)).sum(-1)], -1)
    for bad in (float("nan"), float("inf")):
        faulty = y.clone()
        faulty[0, 9] = bad
        detected, where = checksum.locate(faulty, checksum.residuals(faulty, checks), torch.ones(2))
        assert detected.tolist() == [True, False] and where.tolist() == [9, -1]

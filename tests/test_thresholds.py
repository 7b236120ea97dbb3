"""V-ABFT / A-ABFT thresholds against the paper's formulas and tables, and the e_max table."""
import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ftcompile.abft import thresholds
from ftcompile.abft.campaign_ops import gemm_verification, run_tightness
from ftcompile.abft.thresholds import (aabft_threshold, b_stats, e_max, extrema_variance,
                                       vabft_from_stats, vabft_threshold)


def _eq23(a_row, b, e, c=2.5, n=None):
    """Eq. 23 of the V-ABFT paper, written out with Python floats and the extrema bound."""
    k_dim, n_cols = b.shape
    n = n or n_cols
    def stats(v):
        v = [float(x) for x in v]
        mu = sum(v) / len(v)
        return mu, max(0.0, (max(v) - mu) * (mu - min(v)))
    mu_a, var_a = stats(a_row)
    mus, vars_ = zip(*(stats(b[k]) for k in range(k_dim)))
    det = n * abs(mu_a) * sum(abs(m) for m in mus)
    t23 = c * math.sqrt(n * mu_a ** 2 * sum(vars_) + n * n * var_a * sum(m * m for m in mus))
    t4 = c * math.sqrt(n) * math.sqrt(var_a) * math.sqrt(sum(vars_))
    return e * (det + t23 + t4)


def test_vabft_matches_equation_23():
    a, b = torch.randn(5, 24) + 0.3, torch.rand(24, 40) - 0.2
    t = vabft_threshold(a, b, e=1e-6)
    for m in range(5):
        assert t[m].item() == pytest.approx(_eq23(a[m], b, 1e-6), rel=1e-5)
    tg = vabft_threshold(a, b, e=1e-6, group=8)  # strided variant: N -> group length
    assert tg[2].item() == pytest.approx(_eq23(a[2], b, 1e-6, n=8), rel=1e-5)


def test_vabft_from_stats_broadcasts_batched_b():
    a, b = torch.randn(3, 4, 16), torch.randn(3, 16, 8)
    mu, var = extrema_variance(a, -1)
    t = vabft_from_stats(mu, var, 8, b_stats(b, -1), 1e-6)
    assert t.shape == (3, 4)
    assert t[1, 2].item() == pytest.approx(_eq23(a[1, 2], b[1], 1e-6), rel=1e-5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=40))
def test_extrema_variance_bounds_variance(values):
    """(max - mu)(mu - min) >= variance exactly; extrema_variance works in fp32, where the data's
    rounding and the mean's (at most ~n eps max|x|) move the bound by that much times the spread
    (its derivative in mu is at most max - min): e.g. [-255.0, -256.74], a spread far below the
    magnitude, falls 1e-5 short of the fp64 variance."""
    x = torch.tensor(values, dtype=torch.float64)
    mu, bound = extrema_variance(x, -1)
    rounding = len(values) * 2.0 ** -24 * x.abs().max().item() * (x.max() - x.min()).item()
    assert bound.item() >= x.var(unbiased=False).item() * (1 - 1e-5) - rounding - 1e-6


def test_aabft_reproduces_paper_tables():
    # Table 5: FP32, 128 x 128, y = 21 -> 2.23e-3.
    a, b = torch.rand(4, 128) * 2 - 1, torch.rand(128, 128) * 2 - 1
    assert aabft_threshold(a, b, 23, y=21)[0].item() == pytest.approx(2.23e-3, rel=0.01)
    # Table 6: BF16, U(0,1), 128 x 128, computed y, t = 8 -> 2.53e2; V-ABFT (e 8e-3) 4.05e1.
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(128, 128, generator=g), torch.rand(128, 128, generator=g)
    assert aabft_threshold(a, b, thresholds.aabft_mantissa_bits(torch.bfloat16)).mean().item() == \
        pytest.approx(253, rel=0.1)
    assert vabft_threshold(a, b, e=8e-3).mean().item() == pytest.approx(40.5, rel=0.1)


def test_tightness_in_paper_range_and_no_false_alarm():
    res = run_tightness("fp32", "fp32_acc", "uniform", sizes=(128, 256), trials=3, progress=False)
    for row in res["rows"]:
        # Paper: 7-20x with its CPU e_max 4e-7; this CPU's calibrated e_max is ~3.6x larger, which
        # only raises it (measured 55-78).
        assert 7 <= row["vabft_tightness"] <= 150
        assert row["aabft_tightness"] > 2 * row["vabft_tightness"]
        assert row["vabft_false_alarms"] == 0 and row["worst_E_over_T"] < 1


def test_shipped_cpu_emax_bounds_the_ops_relative_error():
    from ftcompile.calibrate import positive_matrices, relative_errors
    g = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = positive_matrices(4, 64, 256, dtype, g, "cpu")
        w = positive_matrices(4, 256, 256, dtype, g, "cpu")
        rel = relative_errors(x, w)
        assert rel["fp32_acc"].max().item() < e_max("cpu", dtype, "fp32_acc", n=256)
        if dtype != torch.float32:  # rounding to 16 bits dominates the offline check
            assert rel["rounded"].max().item() > 10 * rel["fp32_acc"].max().item()
            assert rel["rounded"].max().item() < e_max("cpu", dtype, "rounded", n=256)


def test_mirror_agrees_with_the_op_near_the_threshold():
    """gemm_verification (used by calibration and campaigns) forms E and T as the op does:
    a fault of size delta at (row, col) is detected iff |E_row + delta| > T_row."""
    import ftcompile
    from ftcompile import FaultSpec, inject
    sid = ftcompile.register_site("thr.mirror", "linear", "global", policy="detect")
    x, w = torch.randn(1, 16, 256), torch.randn(1, 64, 256)
    d, t, _ = gemm_verification(x, w)
    for row, factor in [(0, 0.6), (1, 0.95), (2, 1.05), (3, 1.6), (4, -1.3), (5, -0.7)]:
        delta = factor * t[0, row].item()
        ftcompile.reset_stats()
        with inject(FaultSpec(site="thr.mirror", stage="output", index=(row, 7), value=delta)):
            torch.ops.ftcompile.linear_global(x[0], w[0], None, sid)
        expect = abs(d[0, row].item() + delta) > t[0, row].item()
        assert ftcompile.stats("thr.mirror")["thr.mirror"]["detected"] == int(expect)


def test_emax_lookup_order(tmp_path, monkeypatch):
    table = tmp_path / "emax.json"
    table.write_text(json.dumps({"emax": {
        "cpu/fp32/fp32_acc": {"a": 1e-8, "b": 2e-6},
        "My CPU/fp32/fp32_acc": {"a": 0.0, "b": 5e-6}}}))
    monkeypatch.setenv("FTCOMPILE_EMAX", str(table))
    thresholds.reload_tables()
    try:
        assert e_max("cpu", torch.float32, n=400) == pytest.approx(1e-8 * 20 + 2e-6)
        assert e_max("cpu", torch.float32, device_name="My CPU") == pytest.approx(5e-6)
        shipped = json.loads(thresholds.PACKAGE_TABLE.read_text())["emax"]["cpu/bf16/rounded"]
        assert e_max("cpu", torch.bfloat16, "rounded") == pytest.approx(shipped["b"])
        with pytest.raises(KeyError, match="calibrate"):
            e_max("tpu", torch.float32)
        with pytest.raises(ValueError):
            thresholds.emax_key("cpu", torch.float32, "fp64_acc")
    finally:
        monkeypatch.delenv("FTCOMPILE_EMAX")
        thresholds.reload_tables()

"""python -m ftcompile.calibrate: measurement, fit, storage where the ops look it up."""
import json
import math

import pytest
import torch

from ftcompile import calibrate
from ftcompile.abft import thresholds


def test_fit_covers_every_point_with_margin():
    pts = {64: 1e-6, 256: 3e-6, 1024: 5e-6}
    a, b = calibrate.fit(pts)
    assert a > 0
    for n, v in pts.items():
        assert a * math.sqrt(n) + b >= 1.2 * v * (1 - 1e-12)
    a, b = calibrate.fit({64: 5e-4, 1024: 1e-4})  # falling with n (rounded paths): a constant
    assert a == 0 and b == pytest.approx(6e-4)


def test_relative_error_is_the_ops_verification_error():
    """|E|/|checksum| as linear_global forms it: a fault of that relative size is the edge."""
    g = torch.Generator().manual_seed(0)
    x = calibrate.positive_matrices(2, 32, 128, torch.bfloat16, g, "cpu")
    w = calibrate.positive_matrices(2, 64, 128, torch.bfloat16, g, "cpu")
    rel = calibrate.relative_errors(x, w)
    assert rel["fp32_acc"].shape == (2, 32) and (rel["fp32_acc"] < 2e-6).all()
    assert rel["rounded"].max() > 1e-4  # bf16 output rounding: ~0.2 u_bf16 over 64 columns
    exact = (x.double() @ w.double().transpose(-1, -2)).sum(-1)
    approx = (x.float() @ w.float().transpose(-1, -2)).sum(-1).double()
    assert ((approx - exact).abs() / exact).max() < rel["fp32_acc"].max() * 10


def test_calibrate_store_and_lookup(tmp_path, monkeypatch):
    table = tmp_path / "user.json"
    monkeypatch.setenv("FTCOMPILE_EMAX", str(table))
    try:
        rec = calibrate.calibrate(["fp32", "bf16"], sizes=[64, 128], rows=256,
                                  show_progress=False)
        assert set(rec["entries"]) == {f"{d}/{p}" for d in ("fp32", "bf16")
                                       for p in ("fp32_acc", "rounded")}
        # fp32_acc pooled over input dtypes: one accumulation, one bound.
        assert rec["entries"]["fp32/fp32_acc"]["b"] == rec["entries"]["bf16/fp32_acc"]["b"]
        calibrate.store(rec)
        data = json.loads(table.read_text())["emax"]
        assert f"{rec['device']}/bf16/rounded" in data and "cpu/bf16/rounded" in data
        e = rec["entries"]["bf16/rounded"]
        assert thresholds.e_max("cpu", torch.bfloat16, "rounded", n=100) == pytest.approx(
            e["a"] * 10 + e["b"])
        worst = max(e["measured_max"].values())
        assert e["b"] >= 1.2 * worst * (1 - 1e-9)
    finally:
        monkeypatch.delenv("FTCOMPILE_EMAX")
        thresholds.reload_tables()


def test_write_defaults_only_touches_this_device_class(tmp_path):
    shipped = tmp_path / "emax.json"
    shipped.write_text(thresholds.PACKAGE_TABLE.read_text())
    before = json.loads(shipped.read_text())
    rec = {"device_class": "cpu", "entries": {"fp16/rounded": {"a": 0.0, "b": 1.234567e-4}}}
    calibrate.write_defaults(rec, shipped)
    after = json.loads(shipped.read_text())
    assert after["emax"]["cpu/fp16/rounded"] == {"a": 0.0, "b": 1.3e-4}  # rounded up, 2 digits
    assert {k: v for k, v in after["emax"].items() if k != "cpu/fp16/rounded"} == \
        {k: v for k, v in before["emax"].items() if k != "cpu/fp16/rounded"}
    assert after["comment"] == before["comment"]
    thresholds.reload_tables()


def test_cli(tmp_path, capsys):
    out = tmp_path / "record.json"
    assert calibrate.main(["--dtypes", "fp16", "--sizes", "64", "--rows", "128", "--quiet",
                           "--table", str(tmp_path / "t.json"), "--json", str(out)]) == 0
    assert "fp16" in capsys.readouterr().out
    assert json.loads(out.read_text())["entries"]["fp16/fp32_acc"]["b"] > 0
    with pytest.raises(SystemExit):
        calibrate.main(["--dtypes", "fp64"])
    thresholds.reload_tables()

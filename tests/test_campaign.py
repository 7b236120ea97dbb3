"""Campaigns (small versions of benchmarks/results/cpu_*): false alarms, detection by bit,
outcome classification, the model campaign, the CLI and its plots, the GEMM crossover figure."""
import json

import pytest
import torch

from ftcompile import campaign, plots
from ftcompile.abft import campaign_data as cd
from ftcompile.abft.campaign_ops import run_fpr_campaign, run_op_campaign


def test_distributions():
    g = torch.Generator().manual_seed(0)
    x = cd.draw("truncnormal", (20000,), g)
    assert x.abs().max() <= 1 and 0.25 < x.var() < 0.35  # N(0,1) truncated to [-1, 1]: 0.291
    assert abs(cd.draw("normal_1", (20000,), g).mean() - 1) < 0.05
    u = cd.draw("uniform", (20000,), g, torch.bfloat16)
    assert u.dtype == torch.bfloat16 and u.min() >= -1 and u.max() <= 1
    with pytest.raises(ValueError):
        cd.draw("cauchy", (3,), g)


def test_classify():
    assert cd.classify(False, 0, 0, 0, True) == "clean"
    assert cd.classify(False, 2, 0, 0, True) == "false_alarm"
    assert cd.classify(True, 0, 0, 0, True) == "masked"
    assert cd.classify(True, 0, 0, 0, False) == "missed"
    assert cd.classify(True, 1, 1, 0, True) == "corrected"
    assert cd.classify(True, 1, 1, 0, False) == "miscorrected"
    assert cd.classify(True, 1, 0, 1, False) == "detected"
    ref = torch.tensor([1.0, -2.0])
    assert cd.output_ok(ref.float(), ref.float(), ref) and not cd.output_ok(ref + 0.1, ref, ref)
    assert cd.max_error(torch.tensor([float("nan")]), torch.tensor([0.0])) == float("inf")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_no_false_alarms_on_clean_gemms(dtype):
    """The fast version of benchmarks/results/cpu_false_positive_campaign (1e4 per config)."""
    for dist in cd.DISTRIBUTIONS:
        res = run_fpr_campaign("linear_global", (128, 1024, 256), dtype, dist, trials=40,
                               progress=False)
        assert res["false_alarm_rows"] == 0 and res["rows_checked"] == 40 * 128
        assert 0 < res["worst_E_over_T"] < 1
    res = run_fpr_campaign("linear_thread", (64, 512, 200), dtype, "normal_1", trials=40,
                           progress=False)
    assert res["false_alarm_rows"] == 0 and res["rows_checked"] == 40 * 64


def _exponent_cell_ok(cell):
    """Every flip that grows the value is detected (the paper's Table 8 counts these); a flip
    that shrinks a value already below the threshold may vanish into rounding (masked), but no
    flip is silent and every detected one is corrected."""
    assert cell["flips_up"] == 0 or cell["detection_rate_up"] == 1.0, cell
    assert cell["missed"] == cell["miscorrected"] == cell["detected"] == 0, cell
    assert cell["corrected"] + cell["masked"] == cell["trials"] and cell["corrected"] > 0, cell


def test_bf16_exponent_flips_always_detected_and_corrected():
    """Bits 11-14 of the bf16 output value (paper Table 8: 100%), fewer trials than the campaign."""
    for dist in cd.DISTRIBUTIONS:
        res = run_op_campaign("linear_global", (64, 512, 128), "bf16", dist, ["output"],
                              bits=range(11, 15), fmt="bf16", trials=4, reuse=8, progress=False)
        for cell in res["summary"]:
            _exponent_cell_ok(cell)
        assert res["clean_runs"]["false_alarm"] == 0 and res["clean_runs"]["clean"] == 2


def test_attention_campaign_outcomes():
    res = run_op_campaign("attention", (1, 2, 96, 32), "fp32", "normal_1e-6",
                          ["score", "rowsum", "pv"], bits=[30], fmt="fp32", trials=4,
                          progress=False)
    for cell in res["summary"]:
        assert cell["sdc_rate"] == 0 and cell["corrected"] + cell["masked"] == cell["trials"]
    assert res["clean_runs"]["false_alarm"] == 0
    assert all(r["index"] is not None for r in res["records"])


def test_model_campaign_unprotected_vs_protected():
    from ftcompile.abft.campaign_model import run_model_campaign, small_gpt2
    model = small_gpt2(0, n_layer=1, n_embd=64, n_head=2, vocab_size=128)
    inputs = torch.randint(0, 128, (1, 24), generator=torch.Generator().manual_seed(0))
    res = run_model_campaign(model, inputs, trials=12, bits=[30], progress=False)
    u, p = res["summary"]["overall"]["unprotected"], res["summary"]["overall"]["protected"]
    assert res["clean_false_alarms"] == 0 and res["clean_unprotected_matches"]
    assert u["sdc_rate"] > 0.3  # exponent MSB flips usually reach the logits unprotected
    assert p["sdc_rate"] == 0 and p["corrected"] + p["masked"] == 12
    assert {"linear", "attention"} <= set(res["sites"].values())


def test_cli_writes_results_and_plots(tmp_path):
    assert campaign.main(["detect", "--out", str(tmp_path), "--shape", "32x256x64", "--dists",
                          "uniform,normal_1", "--bits", "9-14", "--trials", "3", "--quiet"]) == 0
    res = json.loads((tmp_path / "detect.json").read_text())
    assert res["kind"] == "detect" and len(res["runs"]) == 2 and "records" not in res["runs"][0]
    md = (tmp_path / "detect.md").read_text()
    assert "Detection rate" in md and "missed (silent)" in md
    assert campaign.main(["tightness", "--out", str(tmp_path), "--sizes", "64,128", "--trials",
                          "2", "--configs", "fp32:fp32_acc:uniform", "--quiet"]) == 0
    assert campaign.main(["fpr", "--out", str(tmp_path), "--dtypes", "bf16", "--dists",
                          "uniform", "--shapes", "32x128x64", "--trials", "8", "--quiet"]) == 0
    for name in ("detect", "tightness", "fpr"):
        png = tmp_path / f"{name}.png"
        assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "detect.md").unlink()
    assert tmp_path / "detect.md" in campaign.report(tmp_path)


def test_crossover_plot(tmp_path):
    """The thread vs global figure (issue 5) from bench_gemm.py's crossover rows: one panel per
    layer and one for the squares."""
    cross = [{"M": m, "N": n, "K": k, "intensity": m / 2, "thread_over_cublas": 1 + m / 64,
              "global_over_cublas": 2.0, "winner": "thread" if m < 64 else "global"}
             for n, k in ((4096, 4096), (768, 3072)) for m in (1, 16, 128)]
    cross += [{"M": s, "N": s, "K": s, "intensity": s / 3, "thread_over_cublas": 1.5, "global_over_cublas": 1.2,
               "winner": "global"} for s in (256, 1024)]
    png = plots.crossover(cross, tmp_path / "cross.png", cmr=185.0)
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------- long versions

@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("dist", cd.DISTRIBUTIONS)
def test_no_false_alarms_long(dtype, dist):
    res = run_fpr_campaign("linear_global", (128, 1024, 256), dtype, dist, trials=2000,
                           progress=False)
    assert res["false_alarm_rows"] == 0 and res["worst_E_over_T"] < 1


@pytest.mark.slow
@pytest.mark.parametrize("dist", cd.DISTRIBUTIONS)
def test_bf16_exponent_flips_long(dist):
    res = run_op_campaign("linear_global", (128, 1024, 256), "bf16", dist, ["output"],
                          bits=range(11, 15), fmt="bf16", trials=200, progress=False)
    for cell in res["summary"]:
        _exponent_cell_ok(cell)
    assert res["clean_runs"]["false_alarm"] == 0


@pytest.mark.slow
def test_model_campaign_long():
    from ftcompile.abft.campaign_model import run_model_campaign
    res = run_model_campaign(trials=150, progress=False)
    u, p = res["summary"]["overall"]["unprotected"], res["summary"]["overall"]["protected"]
    assert res["clean_false_alarms"] == 0 and p["miscorrected"] == 0
    assert p["sdc_rate"] < u["sdc_rate"] / 5

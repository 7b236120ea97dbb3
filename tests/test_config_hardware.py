"""Options, the device table and the cost model / selection (no graphs involved)."""
import pytest
import torch

from ftcompile import FTConfig, DeviceSpec
from ftcompile.cost import attention_cost, linear_cost
from ftcompile.hardware import DEVICE_TABLE, for_cuda_name, lookup, resolve
from ftcompile.selection import select


def test_unknown_option_key_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown ft option.*'polcy'.*valid options are.*policy"):
        FTConfig.from_options({"polcy": "detect"})


def test_bad_option_values_are_rejected():
    with pytest.raises(ValueError, match="policy"):
        FTConfig(policy="ignore")
    with pytest.raises(ValueError, match="scheme is one of"):
        FTConfig(schemes={"*": "fast"})


def test_override_by_name_and_glob_first_match_wins():
    cfg = FTConfig(schemes={"h.0.mlp.c_fc": "global", "h.*.mlp.*": "thread", "lm_head": "none"})
    assert cfg.override_for("h.0.mlp.c_fc") == "global"
    assert cfg.override_for("h.3.mlp.c_proj") == "thread"
    assert cfg.override_for("lm_head") == "none"
    assert cfg.override_for("h.0.attn") is None


def test_t4_fp16_cmr_about_203():
    assert lookup("T4").cmr(torch.float16) == pytest.approx(203, abs=1)


@pytest.mark.parametrize("name", ["T4", "A10", "L4", "A100-40GB", "A100-80GB", "H100-SXM",
                                  "H100-PCIe", "H200", "L40S", "RTX4090"])
def test_table_has_every_dtype_rate(name):
    spec = DEVICE_TABLE[name]
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        assert 1 < spec.cmr(dtype) < 2000


def test_cuda_names_match_the_right_entry():
    assert for_cuda_name("NVIDIA H200").name == "H200"
    assert for_cuda_name("NVIDIA A100-SXM4-80GB").name == "A100-80GB"
    assert for_cuda_name("NVIDIA H100 80GB HBM3").name == "H100-SXM"
    assert for_cuda_name("Tesla T4").name == "T4"


def test_unknown_gpu_names_the_override():
    with pytest.raises(ValueError, match=r"options=\{'device'"):
        for_cuda_name("NVIDIA GeForce GTX 480")
    with pytest.raises(ValueError, match="unknown device"):
        resolve("B9000", None)


def test_custom_spec_is_accepted():
    spec = DeviceSpec("lab", {"fp32": 1e12, "tf32": 1e12, "fp16": 4e12, "bf16": 4e12}, 1e11)
    assert resolve(spec, None) is spec and spec.cmr(torch.float16) == pytest.approx(40)


def test_linear_intensity_matches_the_formula():
    assert linear_cost((32, 32), (32, 32), torch.float16).intensity == pytest.approx(10.67, abs=0.01)
    assert linear_cost((2048, 2048), (2048, 2048), torch.float16).intensity == pytest.approx(682.7, abs=0.1)
    c = linear_cost((4, 7, 64), (128, 64), torch.float32)
    assert c.flops == 2 * 28 * 64 * 128 and c.bytes == 4 * (28 * 64 + 64 * 128 + 28 * 128)


def test_attention_flops_are_4bhsqskd():
    c = attention_cost((2, 8, 128, 64), (2, 8, 256, 64), (2, 8, 256, 64), torch.float16)
    assert c.flops == 4 * 2 * 8 * 128 * 256 * 64


def _sel(flops_shape, dtype=torch.float16, cfg=FTConfig(), name="fc"):
    return select("linear", name, dtype, linear_cost(*flops_shape, dtype), lookup("T4"), cfg)


def test_selection_table():
    assert _sel(((1, 512), (512, 512))).scheme == "thread"
    assert _sel(((4096, 512), (512, 512))).scheme == "global"
    tiny = _sel(((1, 8), (8, 8)))
    assert tiny.scheme == "none" and "min_flops" in tiny.reason
    assert _sel(((1, 512), (512, 512)), cfg=FTConfig(schemes={"fc": "global"})).scheme == "global"
    with pytest.raises(ValueError, match="valid there"):
        _sel(((1, 512), (512, 512)), cfg=FTConfig(schemes={"fc": "efta"}))


def test_selection_keeps_the_thread_scheme_to_128_rows_on_a_gpu():
    """Below the CMR the thread scheme, but on a GPU only up to 128 rows of x (past that its only
    kernel ran 2-3.6x slower than global, run 45i); the CPU has no such kernels, and an override
    still forces thread."""
    h200 = lookup("H200")
    sel = lambda m, n=4096, spec=h200, cfg=FTConfig(): select(
        "linear", "fc", torch.bfloat16, linear_cost((m, 4096), (n, 4096), torch.bfloat16), spec, cfg)
    assert sel(128).scheme == "thread"
    d = sel(160)
    assert linear_cost((160, 4096), (4096, 4096), torch.bfloat16).intensity < h200.cmr(torch.bfloat16)
    assert d.scheme == "global" and "160 rows" in d.reason
    assert sel(160, cfg=FTConfig(schemes={"fc": "thread"})).scheme == "thread"
    assert sel(4).scheme == "thread" and sel(1024).scheme == "global"
    # The CPU (CMR 20) keeps the intensity rule alone: 200 rows on an 8-wide output, intensity ~8.
    assert sel(200, n=8, spec=lookup("cpu")).scheme == "thread"
    assert sel(200, n=8).scheme == "global"


@pytest.mark.parametrize("dtype", [torch.float64, torch.int8])
def test_unsupported_dtype_is_an_explained_fallback(dtype):
    d = select("linear", "fc", dtype, linear_cost((64, 64), (64, 64), torch.float32), lookup("T4"),
               FTConfig())
    assert d.scheme == "none" and str(dtype) in d.reason

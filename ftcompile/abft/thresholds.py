"""V-ABFT adaptive thresholds (../shared/papers/v-abft-thresholds.txt) and A-ABFT for comparison.

For C = A @ B (A: M x K, B: K x N) the row checksum of C is compared with A @ (B 1). V-ABFT bounds
the verification difference of row m from O(n) statistics (mean, max, min) of row m of A and of
each row k of B (Eq. 23 / Algorithm 1 of the paper):

  T_m = e_max * ( N |mu_Am| sum_k |mu_Bk|                                       (bias, term 1)
                + c_s sqrt( N mu_Am^2 sum_k s_Bk^2 + N^2 s_Am^2 sum_k mu_Bk^2 )  (terms 2 + 3)
                + c_s sqrt(N) s_Am sqrt( sum_k s_Bk^2 ) )                        (term 4)

with variances from the extrema-variance bound s^2 <= (max - mu)(mu - min) (Theorem 1) and
c_s = 2.5. The strided variant (tensor checksums of EFTA and thread-level ABFT) checks groups of
L elements of a row: N -> L (``group=``).

e_max depends on the device class, the input dtype and the accumulation path: "fp32_acc" checks
the fp32 accumulator before output rounding (the fused kernels and the reference ops), "rounded"
checks the output after rounding to the output dtype (offline ABFT). It is the relative
verification error max |E| / |checksum| on positive |N(1,1)| matrices plus 20% (section 3.6),
stored as e_max(n) = a sqrt(n) + b in ftcompile/data/emax.json (shipped defaults) and in the
user table that ``python -m ftcompile.calibrate`` writes for this machine.

The attention checks of EFTA (ftcompile/abft/efta.py) use V-ABFT for both GEMMs (GEMM-I: A = Q,
B = K^T over the 8-strided key groups of a tile; GEMM-II: A = the normalised P, B = V over the
8-strided head-dimension groups) with e_max x 4 for the chain of fp32 operations between checks,
and the selective neuron value restrictions (SNVR) elsewhere: exp via sum log P = sum (S - m)
per group within 16 u (1 + |S - m|) per element; rowmax recomputed exactly; rowsum within
[sum_k exp(m_k - m), n_keys] and equal (256 u) to its MMA-path duplicate.
"""
from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

import torch

PATHS = ("fp32_acc", "rounded")
PACKAGE_TABLE = Path(__file__).resolve().parent.parent / "data" / "emax.json"


def user_table_path() -> Path:
    """Where calibration results are stored (override with FTCOMPILE_EMAX)."""
    env = os.environ.get("FTCOMPILE_EMAX")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "ftcompile" / "emax.json"


def dtype_name(dtype: torch.dtype) -> str:
    """The dtype's short name: fp32, fp16, bf16 or fp64 (KeyError for any other dtype)."""
    return {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
            torch.float64: "fp64"}[dtype]


def device_class(device) -> str:
    """The device class whose e_max defaults apply: "gpu" for a CUDA device, else "cpu"."""
    return "gpu" if torch.device(device).type == "cuda" else "cpu"


_device_class = device_class  # for vabft_threshold, whose keyword argument shadows the name


@functools.lru_cache(maxsize=None)
def _tables() -> Tuple[Dict, Dict]:
    shipped = json.loads(PACKAGE_TABLE.read_text())["emax"]
    user_path = user_table_path()
    user = json.loads(user_path.read_text())["emax"] if user_path.exists() else {}
    return shipped, user


def reload_tables() -> None:
    _tables.cache_clear()


def emax_key(device_class: str, dtype: torch.dtype, path: str) -> str:
    if path not in PATHS:
        raise ValueError(f"accumulation path must be one of {PATHS}, got {path!r}")
    return f"{device_class}/{dtype_name(dtype)}/{path}"


def e_max(device_class: str, dtype: torch.dtype, path: str = "fp32_acc", n: int = 1024,
          device_name: Optional[str] = None) -> float:
    """The calibrated relative verification error bound for an n-long reduction.

    Lookup order: a calibration of this exact device (``device_name``), then of its class, then
    the shipped defaults."""
    shipped, user = _tables()
    keys = []
    if device_name:
        keys.append(f"{device_name}/{dtype_name(dtype)}/{path}")
    keys.append(emax_key(device_class, dtype, path))
    for table in (user, shipped):
        for key in keys:
            if key in table:
                a, b = table[key]["a"], table[key]["b"]
                return a * math.sqrt(n) + b
    raise KeyError(f"no e_max for {keys[-1]}: run python -m ftcompile.calibrate on this device")


@dataclass(frozen=True)
class BStats:
    """Statistics of B (K x N) over its N columns, reduced over k: all V-ABFT needs of B."""
    sum_abs_mu: torch.Tensor  # sum_k |mu_Bk|
    sum_var: torch.Tensor  # sum_k s_Bk^2
    sum_mu2: torch.Tensor  # sum_k mu_Bk^2


def extrema_variance(x: torch.Tensor, dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(mean, variance bound (max - mean)(mean - min)) along dim, in fp32; O(n), one pass."""
    x = x.float()
    mu = x.mean(dim)
    var = ((x.amax(dim) - mu) * (mu - x.amin(dim))).clamp_min(0)
    return mu, var


def b_stats(b: torch.Tensor, col_dim: int = -1) -> BStats:
    """Stats of B whose columns (the summed-over output dimension) run along col_dim."""
    mu, var = extrema_variance(b, col_dim)
    return BStats(mu.abs().sum(-1), var.sum(-1), (mu * mu).sum(-1))


def vabft_from_stats(mu_a: torch.Tensor, var_a: torch.Tensor, n: int, bs: BStats, e: float,
                     c_sigma: float = 2.5) -> torch.Tensor:
    """Algorithm 1 of the V-ABFT paper, for rows with statistics (mu_a, var_a)."""
    sum_abs_mu = bs.sum_abs_mu.unsqueeze(-1) if bs.sum_abs_mu.dim() else bs.sum_abs_mu
    sum_var = bs.sum_var.unsqueeze(-1) if bs.sum_var.dim() else bs.sum_var
    sum_mu2 = bs.sum_mu2.unsqueeze(-1) if bs.sum_mu2.dim() else bs.sum_mu2
    t_det = n * mu_a.abs() * sum_abs_mu
    t_23 = c_sigma * torch.sqrt(n * mu_a * mu_a * sum_var + n * n * var_a * sum_mu2)
    t_4 = c_sigma * math.sqrt(n) * torch.sqrt(var_a) * torch.sqrt(sum_var)
    return e * (t_det + t_23 + t_4)


def vabft_threshold(a: torch.Tensor, b: torch.Tensor, e: Optional[float] = None,
                    c_sigma: float = 2.5, *, device_class: Optional[str] = None,
                    path: str = "fp32_acc", group: Optional[int] = None) -> torch.Tensor:
    """One threshold per output row of ``a @ b`` (a: [..., M, K], b: [K, N]).

    ``group``: check groups of this many elements of a row (strided tensor checksum) instead of
    the whole row. ``e`` defaults to the calibrated e_max for (device class, a.dtype, path)."""
    n = group or b.shape[-1]
    if e is None:
        cls = device_class or _device_class(a.device)
        e = e_max(cls, a.dtype, path, n=max(a.shape[-1], n))
    mu_a, var_a = extrema_variance(a, -1)
    return vabft_from_stats(mu_a, var_a, n, b_stats(b, -1), e, c_sigma)


# Mantissa bits t of A-ABFT's 2^-t that reproduce the V-ABFT paper's comparison tables: Table 5
# (FP32, y = 21 at 128: 2.23e-3) uses t = 23; Table 6 (BF16, computed y) matches t = 8.
AABFT_MANTISSA_BITS = {torch.float32: 23, torch.bfloat16: 8, torch.float16: 11, torch.float64: 52}


def aabft_mantissa_bits(dtype: torch.dtype) -> int:
    return AABFT_MANTISSA_BITS[dtype]


def aabft_threshold(a: torch.Tensor, b: torch.Tensor, mantissa_bits: int = 23,
                    y: Optional[float] = None) -> torch.Tensor:
    """A-ABFT's 3-sigma bound for each row checksum of a @ b (Braun et al., DSN'14; V-ABFT paper
    Eq. 26): sigma = sqrt((n(n+1)(n+0.5) + 2n) / 24) 2^-t y, n = K.

    y defaults to max|A_m| * max_k |sum_j B_kj| per row (the paper's BF16 comparison, Table 6);
    pass y=21 for its FP32/FP64 reproduction (Tables 4-5)."""
    n = a.shape[-1]
    if y is None:
        y_t = a.float().abs().amax(-1) * b.float().sum(-1).abs().max()
    else:
        y_t = torch.full(a.shape[:-1], float(y), device=a.device)
    sigma = math.sqrt((n * (n + 1) * (n + 0.5) + 2 * n) / 24.0) * 2.0 ** (-mantissa_bits) * y_t
    return 3.0 * sigma

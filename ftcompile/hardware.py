"""Device model: peak dense FLOP/s per dtype and memory bandwidth -> compute-to-memory ratio (CMR).

Figures are vendors' dense (no sparsity) tensor-core rates; fp32 is the plain (non-tensor) rate.
A GPU that is not in the table is an error that names the override, never a silent default.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple, Union

import torch

from .abft.thresholds import dtype_name
from .timing import time_ms

T = 1e12
G = 1e9


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    flops: Mapping[str, float]  # dtype name ("fp32", "tf32", "fp16", "bf16") -> FLOP/s
    bandwidth: float  # bytes/s of device memory
    match: Tuple[str, ...] = ()  # substrings of torch.cuda.get_device_name() that select it
    device_class: str = "gpu"  # "gpu" or "cpu": picks the e_max defaults
    measured: bool = False
    # CUDA compute capability: ftcompile's kernels run on (9, 0) only (None: not known)
    capability: Optional[Tuple[int, int]] = None
    # Streaming multiprocessors: the GEMM kernels' tile and check choices depend on them (explain
    # names the choice where it is known; None: not known)
    sms: Optional[int] = None

    def peak(self, dtype: torch.dtype) -> float:
        key = dtype_key(dtype)
        if key not in self.flops:
            raise ValueError(f"{self.name} has no {key} rate in the device table")
        return self.flops[key]

    def cmr(self, dtype: torch.dtype) -> float:
        """FLOPs per byte at which a kernel moves from bandwidth-bound to compute-bound."""
        return self.peak(dtype) / self.bandwidth


def dtype_key(dtype: torch.dtype) -> str:
    try:
        key = dtype_name(dtype)
    except KeyError:
        raise ValueError(f"no rate for dtype {dtype}") from None
    if key == "fp32" and torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    return key


def _gpu(name, cc, fp32, tf32, fp16, bf16, bw_gbs, *match, sms=None) -> DeviceSpec:
    return DeviceSpec(name, {"fp32": fp32 * T, "tf32": tf32 * T, "fp16": fp16 * T, "bf16": bf16 * T},
                      bw_gbs * G, tuple(match), capability=cc, sms=sms)


# Dense rates from the vendors' datasheets. T4 has no bf16 tensor cores: bf16 runs at the fp32 rate.
DEVICE_TABLE: Dict[str, DeviceSpec] = {s.name: s for s in [
    _gpu("T4", (7, 5), 8.1, 8.1, 65, 8.1, 320, "T4"),
    _gpu("A10", (8, 6), 31.2, 62.5, 125, 125, 600, "A10"),
    _gpu("L4", (8, 9), 30.3, 60, 121, 121, 300, "L4"),
    _gpu("A100-40GB", (8, 0), 19.5, 156, 312, 312, 1555, "A100-SXM4-40GB", "A100-PCIE-40GB", "A100 40GB"),
    _gpu("A100-80GB", (8, 0), 19.5, 156, 312, 312, 2039, "A100-SXM4-80GB", "A100 80GB", "A100-PCIE-80GB"),
    _gpu("H100-SXM", (9, 0), 67, 494.7, 989.4, 989.4, 3350, "H100 80GB HBM3", "H100 SXM", sms=132),
    _gpu("H100-PCIe", (9, 0), 51, 378, 756, 756, 2000, "H100 PCIe", sms=114),
    _gpu("H200", (9, 0), 67, 494.7, 989.4, 989.4, 4800, "H200", sms=132),
    _gpu("L40S", (8, 9), 91.6, 183, 362, 362, 864, "L40S"),
    _gpu("RTX4090", (8, 9), 82.6, 82.6, 165.2, 165.2, 1008, "RTX 4090"),
    # A nominal two-socket-class CPU core budget; used when the graph runs on the CPU. Selection on
    # CPU is a dry run of what a GPU would do: pass device="H100" (etc.) to model a real target.
    DeviceSpec("cpu", {"fp32": 1.0 * T, "tf32": 1.0 * T, "fp16": 1.0 * T, "bf16": 1.0 * T,
                       "fp64": 0.5 * T}, 50 * G, ("cpu",), device_class="cpu"),
]}
ALIASES = {"H100": "H100-SXM", "A100": "A100-80GB", "4090": "RTX4090"}


def lookup(name: str) -> DeviceSpec:
    """A table entry by its name or alias (case-insensitive)."""
    key = {k.lower(): k for k in DEVICE_TABLE}.get(name.lower())
    alias = {k.lower(): v for k, v in ALIASES.items()}.get(name.lower())
    if key is None and alias is None:
        raise ValueError(
            f"unknown device {name!r}; known: {sorted(DEVICE_TABLE) + sorted(ALIASES)}. "
            "Pass options={'device': <one of these>} or a ftcompile.DeviceSpec, or "
            "options={'device': 'measure'} on a live GPU.")
    return DEVICE_TABLE[key or alias]


def for_cuda_name(gpu_name: str) -> DeviceSpec:
    # Longest match first, so "A100-SXM4-80GB" is not taken by a shorter pattern.
    candidates = [(len(m), s) for s in DEVICE_TABLE.values() for m in s.match
                  if s.device_class == "gpu" and m.lower() in gpu_name.lower()]
    if not candidates:
        raise ValueError(
            f"GPU {gpu_name!r} is not in ftcompile's device table, so its compute-to-memory ratio "
            f"is unknown. Pass options={{'device': 'H100'}} (any of {sorted(DEVICE_TABLE)}), a "
            "ftcompile.DeviceSpec, or options={'device': 'measure'} to probe this GPU.")
    return max(candidates, key=lambda c: c[0])[1]


@functools.lru_cache(maxsize=None)
def measure(device_index: int = 0) -> DeviceSpec:
    """Probe the live GPU: a large copy (bytes read + written) and large matmuls per dtype."""
    if not torch.cuda.is_available():
        raise RuntimeError("device='measure' needs a CUDA GPU")
    dev = torch.device("cuda", device_index)
    n = 256 * 1024 * 1024
    src = torch.empty(n, dtype=torch.uint8, device=dev).random_()
    dst = torch.empty_like(src)
    bw = 2 * n / (time_ms(lambda: dst.copy_(src), dev, 10) / 1e3)
    flops = {}
    for key, dtype in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        a = torch.randn(8192, 8192, device=dev, dtype=dtype)
        flops[key] = 2 * 8192 ** 3 / (time_ms(lambda: a @ a, dev, 10) / 1e3)
    flops["tf32"] = flops["fp32"]
    try:
        base = for_cuda_name(torch.cuda.get_device_name(dev)).name
    except ValueError:  # not in the table: the measurement is all there is
        base = "gpu"
    return DeviceSpec(f"{base} (measured)", flops, bw, (), "gpu", measured=True,
                      capability=torch.cuda.get_device_capability(dev),
                      sms=torch.cuda.get_device_properties(dev).multi_processor_count)


def resolve(device: Union[None, str, DeviceSpec], tensor_device: Optional[torch.device]) -> DeviceSpec:
    """The spec the cost model uses: the override if given, else the device the graph runs on."""
    if isinstance(device, DeviceSpec):
        return device
    if isinstance(device, str):
        if device == "measure":
            return measure(torch.cuda.current_device())
        return lookup(device)
    if device is not None:
        raise ValueError(f"ft option 'device' must be a name, a DeviceSpec or 'measure', got {device!r}")
    if tensor_device is not None and tensor_device.type == "cuda":
        return for_cuda_name(torch.cuda.get_device_name(tensor_device))
    return DEVICE_TABLE["cpu"]

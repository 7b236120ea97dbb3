"""CUDA kernels for the protected ops: lazy build of csrc/ and dispatch to them.

``kernel_for(op, *tensors)`` returns a callable when a compiled kernel supports the call (CUDA
tensors, dtype, shapes, an sm_90 device), else None and the op runs the reference algorithm on
the tensors' device. The extension is built once per process with torch.utils.cpp_extension and
ninja into TORCH_EXTENSIONS_DIR; a failed build is reported once and the reference path is used.
"""
from __future__ import annotations

import functools
import importlib.util
import warnings
from pathlib import Path
from typing import Callable, Dict, Optional

import torch

def csrc_dir(family: str) -> Path:
    """csrc/<family> (gemm, attention, common): in a source checkout (editable install), else in the
    installed package, where package-dir maps csrc/ to ftcompile.csrc."""
    here = Path(__file__).resolve().parents[2] / "csrc" / family
    if here.is_dir():
        return here
    spec = importlib.util.find_spec("ftcompile.csrc")
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(loc) / family).is_dir():
            return Path(loc) / family
    raise FileNotFoundError(f"ftcompile: csrc/{family} sources not found")


def build_library(family: str, name: str, extra_cuda_cflags=(), extra_cflags=(), verbose: bool = False,
                  root: Optional[Path] = None) -> str:
    """Compile csrc/<family>/*.cu (with csrc/common) for sm_90a through torch.utils.cpp_extension +
    ninja (cached in TORCH_EXTENSIONS_DIR); returns the shared library's path. ``root``: another
    directory holding <family>/ and common/ (benchmarks build a snapshot of older sources)."""
    from torch.utils.cpp_extension import load

    src = Path(root) / family if root is not None else csrc_dir(family)
    common = Path(root) / "common" if root is not None else csrc_dir("common")
    sources = sorted(str(p) for p in src.glob("*.cu"))
    if not sources:
        raise RuntimeError(f"ftcompile: no CUDA sources in {src}")
    # sm_90a only: the kernels use wgmma, TMA and setmaxnreg (no fallback code paths in csrc).
    return load(name=name, sources=sources, extra_include_paths=[str(src), str(common)],
                extra_cflags=list(extra_cflags), is_python_module=False, verbose=verbose,
                extra_cuda_cflags=["-O3", "-std=c++17", "-lineinfo", "-gencode=arch=compute_90a,code=sm_90a",
                                   *extra_cuda_cflags])


# The compute capability the kernels are built for (sm_90a: wgmma, TMA, setmaxnreg): Hopper only.
KERNEL_CAPABILITY = (9, 0)


@functools.lru_cache(maxsize=None)
def is_sm90(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device) == KERNEL_CAPABILITY


def raw_stream(device: torch.device) -> int:
    """The current CUDA stream of ``device`` as a raw handle, as inductor's own launches take it
    (torch.cuda.current_stream built a Stream object: ~15 us of each op's host time, NOTES.md)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch._C._cuda_getCurrentRawStream(index)


# op name -> (supports(*tensors) -> bool, kernel). Filled by ftcompile.ops.kernels on load.
_KERNELS: Dict[str, tuple] = {}
# op name -> replay(*op arguments): the output from a launch plan, or None (ops/replay.py).
_REPLAYS: Dict[str, Callable] = {}


def register(op: str, supports: Callable[..., bool], kernel: Callable,
             replay: Optional[Callable] = None) -> None:
    _KERNELS[op] = (supports, kernel)
    if replay is not None:
        _REPLAYS[op] = replay


def replay(op: str, *args):
    """The op's output from the launch plan an earlier call with this signature left (the kernel's
    host work skipped, ops/replay.py), or None: take the full path."""
    fn = _REPLAYS.get(op)
    return None if fn is None else fn(*args)


@functools.lru_cache(maxsize=None)
def _load() -> bool:
    """Build and import the CUDA kernels; False (with one warning) where that is impossible."""
    if not torch.cuda.is_available():
        return False
    try:
        from . import kernels  # noqa: F401  (registers into _KERNELS)
    except ImportError:
        return False
    except Exception as exc:  # a compiler error must not make the model fail: say it once
        warnings.warn(f"ftcompile: CUDA kernels unavailable ({exc}); using the reference ops")
        return False
    return True


def kernel_for(op: str, *tensors, **hints) -> Optional[Callable]:
    """hints (e.g. static_weight) go to the op's supports() with the tensors."""
    first = tensors[0]
    if not first.is_cuda or not _load():
        return None
    entry = _KERNELS.get(op)
    if entry is None or not entry[0](*tensors, **hints):
        return None
    return entry[1]

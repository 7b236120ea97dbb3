"""Launch plans replayed without Python: C++ CUDA kernels for the inference-only twins.

A replayed call through the twins still ran ~25 us of Python on the H200's host (op body, key,
guards, argument block, ctypes), and about twice that inside a model, whose dozens of different
calls per forward keep the interpreter's caches cold (benchmarks/NOTES.md, session 44). The
extension (csrc/fastpath/fastpath.cpp) registers CUDA kernels for ftcompile_infer::linear_global,
linear_thread, linear_group and attention: a call that matches a plan is replayed there (key,
guards, output and per-call buffers, argument block, the C launcher); any other runs the op's
Python body, which offers the plan it made or replayed (:func:`offer`, :func:`offer_attention`),
and the C++ side files it under the call's key.

What a plan is and when it may be replayed is ops/replay.py's rule, kept here: not while a fault
injection is armed (abft.injection tells the extension through its on_change hook) or a CUDA graph
is captured (checked per call), and only while every weight is the same storage, unchanged in
place (the registered owner's version counter, abft.gemm.owner_version). A change of a module knob
the plans depend on (cuda_gemm.THREAD_KERNEL, ...) drops every plan (:func:`watch_knobs`). The
public ops, and the twins on other devices, are untouched. FTCOMPILE_FASTPATH=0 leaves the extension
unbuilt (the twins then replay from Python, as before).
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
import types
import warnings
from typing import Optional, Sequence

import torch

from ..abft import gemm, injection

_OPS = {"linear_global": 0, "linear_thread": 1, "linear_group": 2, "attention": 3}  # fastpath.cpp's Op


_loaded = None  # the extension once module() built and loaded it (checked on the ops' hot path)


@functools.lru_cache(maxsize=None)
def module():
    """The built extension (its kernels registered), or None where it cannot be: no CUDA, or a
    build that failed (said once; the twins then run their Python bodies)."""
    if not torch.cuda.is_available() or os.environ.get("FTCOMPILE_FASTPATH", "1") == "0":
        return None
    try:
        from torch.utils.cpp_extension import load

        # (inference defines the twins whose CUDA kernels the extension registers)
        from . import cuda, inference, library  # noqa: F401
        src = cuda.csrc_dir("fastpath") / "fastpath.cpp"
        mod = load(name="ftcompile_fastpath", sources=[str(src)], extra_cflags=["-O2"], with_cuda=True,
                   verbose=False)
    except Exception as exc:  # noqa: BLE001  (a compiler error must not stop the model)
        warnings.warn(f"ftcompile: C++ launch-plan replay unavailable ({exc}); replaying from Python")
        return None
    for name, op in _OPS.items():
        mod.set_body(op, library.BODIES[name][0])
    injection.on_change(lambda armed: mod.set_enabled(not armed))
    mod.set_enabled(not injection.armed())
    global _loaded
    _loaded = mod
    return mod


def loaded():
    """The extension if it is already loaded (no build), else None."""
    return _loaded


def offer(launch, persistent: Sequence[torch.Tensor]) -> None:
    """Hand a launch plan of cuda_gemm (its ``spec``) to the C++ call running this op's body.
    ``persistent``: the weights and biases the plan's guards watch, in the op's order."""
    mod = _loaded
    if mod is None or not mod.in_body() or getattr(launch, "spec", None) is None:
        return
    spec = launch.spec
    owners = [gemm.owner(t) for t in persistent]
    mod.offer(spec.block, spec.fn, spec.off_x, spec.off_y, spec.off_xsum, spec.off_xstat, spec.xs_bytes,
              spec.xstat_delta, spec.n, spec.ldy, list(spec.keep), list(persistent), owners)


def offer_attention(launch) -> None:
    """The same for a cuda_attention plan (its ``spec``; no weights to guard)."""
    mod = _loaded
    if mod is None or not mod.in_body() or getattr(launch, "spec", None) is None:
        return
    spec = launch.spec
    mod.offer_attention(spec.block, spec.fn, spec.offsets, spec.cs_bytes, spec.kn_at, spec.vc_at, spec.dv,
                        spec.heads_last, spec.mask_float, spec.map_ints, [])


def invalidate() -> None:
    """Drop every plan (a knob the plans depend on changed)."""
    mod = loaded()
    if mod is not None:
        mod.invalidate()


def watch_knobs(module_name: str, names: tuple) -> None:
    """Setting one of the module's ``names`` (tests and benchmarks do) drops every C++ plan: its
    keys cannot read module globals, which the Python plans' keys carry."""
    class _Knobs(types.ModuleType):
        def __setattr__(self, name, value):
            super().__setattr__(name, value)
            if name in names:
                invalidate()

    sys.modules[module_name].__class__ = _Knobs


class Spec:
    """What the C++ replay needs of a cuda_gemm launch plan: the argument block, the C launcher's
    address, the byte offsets of the per-call pointers, y's geometry, what the block points at."""

    def __init__(self, block: ctypes.Structure, fn, fields: dict, xs_bytes: int, xstat_delta: int,
                 n: int, ldy: int, keep: list):
        self.block = bytes(block)
        self.fn = ctypes.cast(fn, ctypes.c_void_p).value
        self.off_x, self.off_y = fields["x"], fields["y"]
        self.off_xsum = fields["xsum"] if xs_bytes else -1
        self.off_xstat = fields["xstat"] if xs_bytes else -1
        self.xs_bytes, self.xstat_delta, self.n, self.ldy, self.keep = xs_bytes, xstat_delta, n, ldy, keep


class AttentionSpec:
    """The same for a cuda_attention plan: the byte offsets of q, k, v, o, K^c, the key norms, V^c,
    the mask and its tile map (-1: no mask); the checksum buffer's size and parts; o's last
    dimension and layout; whether the mask is converted to fp32, and its tile map's size in int32s."""

    def __init__(self, block: ctypes.Structure, fn, offsets: list, cs_bytes: int, kn_at: int, vc_at: int,
                 dv: int, heads_last: bool, mask_float: bool, map_ints: int):
        self.block = bytes(block)
        self.fn = ctypes.cast(fn, ctypes.c_void_p).value
        self.offsets, self.cs_bytes, self.kn_at, self.vc_at = offsets, cs_bytes, kn_at, vc_at
        self.dv, self.heads_last, self.mask_float, self.map_ints = dv, heads_last, mask_float, map_ints


def field_offsets(struct: type) -> dict:
    return {name: getattr(struct, name).offset for name, _ in struct._fields_}


def stats() -> Optional[dict]:
    """{"plans", "hits"} of the C++ table (tests, benchmarks), or None if it is not loaded."""
    mod = loaded()
    return None if mod is None else {"plans": mod.size(), "hits": mod.hits()}

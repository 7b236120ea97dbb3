"""CUDA kernels (csrc/gemm) for ``ftcompile::linear_global`` and ``ftcompile::linear_thread``
(three kernels: a TMA-ring one for up to 128 rows per CTA, a streaming one for small M, a thin
one computing W x^T on wgmma for 17-128 rows of x and large W: see THREAD_KERNEL).

Hopper (sm_90) only, bf16 and fp16; anything else runs the reference algorithm, and
:func:`fallback_reason` says why. The kernels are built once per process with
``torch.utils.cpp_extension.load`` (ninja, TORCH_EXTENSIONS_DIR) into a plain shared library that
exports C entry points taking one argument block (:class:`_Args`, mirrored from
``csrc/gemm/ft_common.cuh``); ``FTCOMPILE_GEMM_LIB`` points at a prebuilt library instead.

Semantics are those of :mod:`ftcompile.abft.gemm` (same V-ABFT formula, policies, counters, fault
injection draws). What differs, and why (benchmarks/NOTES_gemm.md):
  * e of the threshold is max(calibrated e_max, 2 * steps * 2^-24): the tensor cores' fp32
    accumulation truncates, an error linear in the accumulation chain (see TC_COEF).
  * global: the recheck after a correction allows the rounding of the stored faulty element
    (its fp32 value is gone by then); policy "recompute" recomputes the row in the kernel.
  * thread: an uncorrectable group is recomputed whole (its 8 elements) under "recompute"; the
    other groups of the row were verified independently, so the output is the same.
  * accumulator faults in the global kernel are applied as corrupt(v_t) - v_t with v_t the
    partial sum after k-step t recomputed in fp32 (touching the wgmma accumulators inside the
    pipelined loop would serialise it); in the thread kernels they hit the register directly
    (of the CTA whose K slice holds step t; in the streaming kernel, of the warp that adds the
    first half of step t into its partial sum).
  * global: a CTA corrects at most 32 flagged rows per call (its fix list in shared memory);
    rows past that are counted uncorrectable, with no correction or recomputation.
  * global: where its tiles leave SMs idle, a tile's K is split over CTAs (:func:`global_split`)
    and the checked accumulator is the sum of their fp32 partials (another summation order).
  * global: 128x256 tiles, or 128x192 / 128x128 where the wider ones quantise badly on the SMs
    (:func:`global_tile`); at the same K split the width changes no output element, only the
    order in which the check sums the row.
  * global, check "tiles" (:func:`global_check`): one check per row and 192- / 128-wide tile, as
    the reference's ``tile_width`` (two faults in one row but different tiles are both corrected).
  * thread, thin kernel: one-sided on x, as :func:`ftcompile.abft.gemm.linear_thin` (each column
    of y checked over the call's rows) instead of the strided groups of the other two kernels;
    a fault spec with count > 1 puts its faults in one row, so in separate checks there. Where
    :func:`ftcompile.abft.gemm.thin_replica` says so (up to ``gemm.THIN_REPLICA_ROWS`` rows, and up
    to ``gemm.THIN_REPLICA_WIDE_ROWS`` on narrow weights) each element is checked against a
    replica instead (any number of faults in a column corrected; no V-ABFT threshold: the copies
    agree bit for bit).
  * thread, streaming kernel, up to ``gemm.STREAM_REPLICA_ROWS`` rows: each element against a
    replica (x's rows again in rows 8-15 of the m16 block), as :func:`ftcompile.abft.gemm.linear_stream`:
    the strided groups, but any number of faults in a group corrected, no V-ABFT threshold.
    The diagnostics (``dbg``) are the checksums': a call that asks for them runs those.
  * not (yet) in the kernels: the reference's fallback when the weighted checksum cannot place
    a fault (recompute the group, count elements that moved by > T/2); such faults are counted
    uncorrectable (and recomputed under "recompute").
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import math
import os
import threading
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from .. import config, cudagraphs, telemetry
from ..abft import checksum, gemm, injection, thresholds
from . import cuda, fastpath, layout, replay

K_TILE = gemm.K_TILE
N_TILE = gemm.N_TILE
STRIDE = checksum.STRIDE
MAX_INJ = 8
MAX_GROUP = 4  # sibling weights one global call takes as a group (run with a tuple of weights)
POLICY = {p: i for i, p in enumerate(config.POLICIES)}  # csrc/common/codes.cuh
FMT = {"fp32": 0, "bf16": 1, "fp16": 2}
DTYPES = {torch.bfloat16: 0, torch.float16: 1}
GLOBAL_BM = 128  # the global kernel's tile: 128 rows by GLOBAL_BNS[i] columns (global_tile)
GLOBAL_BNS = (256, 192, 128)
# Where the call has many rows (compute-bound), a narrower tile moves the A tile for fewer columns:
# its estimated cost (waves x width x k-steps per unit) counts divided by its margin, so 192 is
# taken only below 0.92 of the 256-wide cost and 128 below 0.83. With at most GLOBAL_FEW_MTILES
# M-tiles (bandwidth-bound: W's bytes decide) no margin, but a split tile costs GLOBAL_SPLIT_KSTEPS
# k-steps more (its partial's store and reload). NOTES_gemm.md runs 19 and 23: the constants that
# reproduce the sweeps' fastest widths. With many rows a split costs GLOBAL_SPLIT_KSTEPS_MANY
# k-steps (its 128 x width fp32 partial, and the last split's wait and sum at the end of a call of
# one wave): run 64c, 256-wide tiles split 2 against 128-wide unsplit ones (the same units and
# waves) were 13-24 % slower at 2048x1024x4096, 1024x2048x4096 and 2048x1024x2048 (9-13 k-steps).
GLOBAL_MARGINS = {256: 1.0, 192: 0.92, 128: 0.83}
GLOBAL_FEW_MTILES, GLOBAL_SPLIT_KSTEPS, GLOBAL_SPLIT_KSTEPS_MANY = 2, 4, 10
# A call of several waves whose last wave is part-full splits only that wave's tiles (global_tail):
# at most this full, each unit >= GLOBAL_TAIL_MIN_KSTEPS k-steps, for a gain of at least
# GLOBAL_TAIL_GAIN of the call. FTCOMPILE_GLOBAL_TAIL=0 turns it off (the A/B).
GLOBAL_TAIL = os.environ.get("FTCOMPILE_GLOBAL_TAIL", "1") != "0"
GLOBAL_TAIL_FILL, GLOBAL_TAIL_MIN_KSTEPS, GLOBAL_TAIL_GAIN = 0.5, 8, 0.03
# The global scheme's check (NOTES_gemm.md run 24): "rows" checks each output row over all of N
# against x . sum_n W[n], verified by the CTA that finishes the row's last tile (a workspace,
# tickets, x statistics on the consumers' ALU); "tiles" checks each row of each 192- or 128-wide
# tile in registers against checksum columns the tile's own wgmma computes (8 checksum rows of W
# per N-tile, TILE_CHECK_ROWS): no cross-CTA work, +8 columns of tensor work. "auto": global_check.
GLOBAL_CHECK = os.environ.get("FTCOMPILE_GLOBAL_CHECK", "auto")
TILE_CHECK_BNS = (192, 128)  # its widths: the wgmma is n200 / n136 with the checksum columns
TILE_CHECK_FEW_ROWS_W_BYTES = 32 << 20  # two M-tiles: the tile check up to this weight (global_check)
# At K <= 3072, in calls of at most TILE_CHECK_SLACK_WAVES waves, the row check's tail (paid once a
# call) weighs more than the tile check's per-tile cost, so the tile check is taken while its width
# costs at most TILE_CHECK_SLACK times the unprotected kernel's best: 4096x3072x768 (3 waves; tiles
# on 192 against rows on 256, 1.087 in the model) is 1-4.5 % faster with the tile check in runs
# 60e-65c; 2048^3 (1.205) is not; 8192x3072x768 (6 waves) is level, and GPT-2's LM head,
# 4096x50257x768 (48 waves), 11 % slower (run 65c).
TILE_CHECK_SLACK, TILE_CHECK_SLACK_WAVES = 1.1, 4
TILE_CHECK_ROWS = 8  # per N-tile: sum and weighted sum of its W rows, each hi/mid/lo; ones; zeros
W_DEN = 256  # the weighted sums weigh tile column c by (c + 1) / W_DEN (global_gemm.cu)
NCW = 4  # consumer warps of the thread kernel: wm across M (1, 2, 4), 4 / wm across K
# Which thread-scheme kernel runs: "auto" (`thread_kernel`: at 1-8 rows mostly the streaming
# kernel, at 9-128 rows mostly the thin one, the ring kernel beyond where the streaming one does
# not fit), or "stream" / "ring" / "thin" to force one ("thin": W x^T on wgmma for up to
# THIN_MAX_ROWS rows of x, the automatic choice beyond).
THREAD_KERNEL = os.environ.get("FTCOMPILE_THREAD_KERNEL", "auto")
# Weights from this size on are streamed by the rolling loop; smaller ones (GPT-2 layers) are
# faster at depth 1 (the sweep of run 16).
STREAM_BIG_W_BYTES = 8 << 20
# Above M = 32 the streaming kernel reads W once per 32 rows of x; from this size on the ring
# kernel is faster (run 17).
STREAM_REREAD_W_BYTES = 64 << 20
# The streaming and the global kernel are launched with programmatic dependent launch: they start
# (and let the next kernel start) while the previous kernel of the stream ends, and wait for it
# before they touch global memory (NOTES_gemm.md, runs 16 and 18). "0" launches them plainly.
PDL = os.environ.get("FTCOMPILE_PDL", "1") != "0"
SMEM_MAX = 227 << 10  # dynamic shared memory per CTA on sm_90
THREAD_SMEM_FIXED = 1024 + (2 << 10)  # alignment slack + the kernel's Smem block (generous)
# CTAs per cluster of the global kernel (W half-tiles multicast over the pair); 1 or 2.
GLOBAL_CLUSTER = int(os.environ.get("FTCOMPILE_GEMM_CLUSTER", "1"))
# Tensor-core accumulation (wgmma / mma.sync, bf16 and fp16 inputs) adds each k16 product into the
# fp32 accumulator with a biased (truncating) rounding: measured on the H200, about 0.6 * 2^-24 of
# the accumulator per k16 step, so the error grows linearly with the length of one accumulation
# chain, not like the sqrt(n) of the shipped e_max (calibrated on fp32 SIMT products). The
# threshold's e is at least TC_COEF * steps * 2^-24 (notes: benchmarks/NOTES_gemm.md).
TC_COEF = 2.0


# ----------------------------------------------------------------------------- argument block
class _Inj(ctypes.Structure):
    _fields_ = [("row", ctypes.c_int32), ("col", ctypes.c_int32), ("step", ctypes.c_int32),
                ("mode", ctypes.c_int32), ("bit", ctypes.c_int32), ("fmt", ctypes.c_int32),
                ("value", ctypes.c_float), ("slot", ctypes.c_int32)]


class _Args(ctypes.Structure):
    _fields_ = [("x", ctypes.c_void_p), ("w", ctypes.c_void_p), ("bias", ctypes.c_void_p),
                ("y", ctypes.c_void_p), ("ldy", ctypes.c_int64),
                ("batch", ctypes.c_int64), ("M", ctypes.c_int64), ("N", ctypes.c_int64),
                ("K", ctypes.c_int64),
                ("x_bstride", ctypes.c_int64), ("x_rstride", ctypes.c_int64),
                ("w_bstride", ctypes.c_int64), ("w_rstride", ctypes.c_int64),
                ("wsum", ctypes.c_void_p), ("wstats", ctypes.c_void_p), ("wfinite", ctypes.c_void_p),
                ("bstats", ctypes.c_void_p), ("counters", ctypes.c_void_p),
                ("raise_flag", ctypes.c_void_p), ("ws", ctypes.c_void_p), ("inj_log", ctypes.c_void_p),
                ("e", ctypes.c_float), ("c_sigma", ctypes.c_float),
                ("policy", ctypes.c_int32), ("dtype", ctypes.c_int32), ("protect", ctypes.c_int32),
                ("n_inj", ctypes.c_int32), ("split", ctypes.c_int32), ("mtile", ctypes.c_int32),
                ("stream", ctypes.c_int64), ("num_sms", ctypes.c_int32),
                ("ws_rows", ctypes.c_int64), ("dbg", ctypes.c_void_p),
                ("nbox", ctypes.c_int32), ("stages", ctypes.c_int32),
                ("cluster", ctypes.c_int32), ("wm", ctypes.c_int32), ("warps", ctypes.c_int32),
                ("pdl", ctypes.c_int32), ("bn", ctypes.c_int32),
                ("part_tiles", ctypes.c_int64), ("part", ctypes.c_void_p),
                ("local", ctypes.c_int32), ("lscale_inv", ctypes.c_float),
                ("lsum", ctypes.c_void_p), ("btile", ctypes.c_void_p),
                ("groups", ctypes.c_int32), ("gw", ctypes.c_void_p * (MAX_GROUP - 1)),
                ("gcol", ctypes.c_int64 * (MAX_GROUP - 1)),
                ("inj", _Inj * MAX_INJ),
                ("wrow", ctypes.c_void_p), ("xsum", ctypes.c_void_p), ("xstat", ctypes.c_void_p),
                ("w_static", ctypes.c_int32), ("split_from", ctypes.c_int32)]


# ----------------------------------------------------------------------------- build / load
def build(verbose: bool = False) -> str:
    """Compile csrc/gemm/*.cu; returns the shared library's path."""
    return cuda.build_library("gemm", "ftcompile_gemm_sm90a", verbose=verbose)


_lib_lock = threading.Lock()
_LIB = None


def lib():
    """The loaded kernel library (built on first use)."""
    global _LIB
    if _LIB is None:
        with _lib_lock:
            if _LIB is None:
                path = os.environ.get("FTCOMPILE_GEMM_LIB") or build()
                handle = ctypes.CDLL(path)
                for fn in ("ft_gemm_global", "ft_gemm_thread", "ft_gemm_stream", "ft_gemm_thin"):
                    getattr(handle, fn).argtypes = [ctypes.POINTER(_Args)]
                    getattr(handle, fn).restype = ctypes.c_int
                handle.ft_error_string.restype = ctypes.c_char_p
                handle.ft_capture_id.restype = ctypes.c_ulonglong
                handle.ft_capture_id.argtypes = [ctypes.c_int64]
                handle.ft_gemm_global_ws_bytes.restype = ctypes.c_longlong
                handle.ft_gemm_global_ws_bytes.argtypes = [ctypes.c_longlong, ctypes.c_longlong]
                handle.ft_gemm_global_split_bytes.restype = ctypes.c_longlong
                handle.ft_gemm_global_split_bytes.argtypes = [ctypes.c_longlong, ctypes.c_longlong]
                handle.ft_gemm_thin_smem.restype = ctypes.c_longlong
                handle.ft_gemm_thin_smem.argtypes = [ctypes.c_int] * 4
                handle.ft_gemm_thin_max_clusters.argtypes = [ctypes.c_int] * 4
                handle.ft_gemm_thin_replica_checked.argtypes = [ctypes.c_int] * 2
                handle.ft_gemm_stream_max_clusters.argtypes = [ctypes.c_int] * 3
                handle.ft_gemm_global_ws_extrema_offset.restype = ctypes.c_longlong
                handle.ft_gemm_global_ws_extrema_offset.argtypes = [ctypes.c_longlong]
                if handle.ft_args_size() != ctypes.sizeof(_Args):
                    raise RuntimeError(f"ftcompile: argument block mismatch (C {handle.ft_args_size()} "
                                       f"bytes, ctypes {ctypes.sizeof(_Args)})")
                _LIB = handle
    return _LIB


# ----------------------------------------------------------------------------- per-tensor caches
# Keyed on the parameter behind a view (see gemm.DerivedCache); bypassed for weights computed in
# the graph, whose scratch buffers a compiled graph may rewrite without bumping _version.
_wcache = {"linear_global": gemm.DerivedCache(), "linear_thread": gemm.DerivedCache()}
_bcache, _ccache, _mcache = gemm.DerivedCache(), gemm.DerivedCache(), gemm.DerivedCache()
_tcache = {bn: (gemm.DerivedCache(), gemm.DerivedCache()) for bn in TILE_CHECK_BNS}  # (W rows, bias sums)
_rcache = gemm.DerivedCache()  # the thin kernel's W row statistics


def _joined(w):
    """A weight, or a group's members joined along N (transient: only what is derived from it is
    kept, never the joined copy)."""
    return torch.cat(w, -2) if isinstance(w, tuple) else w


def _split3(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """v (fp64) as three 16-bit parts hi + mid + lo: ~24 bits, what the fp32 accumulators keep."""
    hi = v.to(dtype)
    r = v - hi.double()
    mid = r.to(dtype)
    return torch.stack([hi, mid, (r - mid.double()).to(dtype)], -2)


def _tile_sums(v: torch.Tensor, bn: int) -> torch.Tensor:
    """[..., T_N, 2, C] from v [..., N, C] (fp64): per bn-wide N-tile (zero-padded), the sum of its
    rows and their sum weighted by (c + 1) / W_DEN, as the kernel's epilogue weighs the columns."""
    n = v.shape[-2]
    tiles = math.ceil(n / bn)
    vt = F.pad(v, (0, 0, 0, tiles * bn - n)).view(*v.shape[:-2], tiles, bn, v.shape[-1])
    pos = torch.arange(1, bn + 1, dtype=torch.float64, device=v.device)[:, None] / W_DEN
    return torch.stack([vt.sum(-2), (vt * pos).sum(-2)], -2)


def _tile_checksums(weight: torch.Tensor, bn: int, cache: bool = True) -> Tuple[torch.Tensor, float]:
    """(rows [WB, 8 T_N, K] in W's dtype, 1 / scale) of the tile-local check: per bn-wide N-tile,
    the sum of its W rows and their sum weighted by (c + 1) / W_DEN, each scaled by a power of two
    (max |sum| in [1, 2): fp16's exponent range) and split hi/mid/lo, a row of ones (sum x) and a
    zero row. One host sync per weight version (the scale). ``weight``: a tensor or a group's
    members (whose boundaries fall on whole bn-wide tiles)."""
    def make(w):
        w = _joined(w)
        sums = _tile_sums(_batched(w).double(), bn)  # [WB, T, 2, K]
        wb, tiles, _, k = sums.shape
        top = float(sums.abs().max()) if sums.numel() else 0.0
        scale = 2.0 ** -math.floor(math.log2(top)) if math.isfinite(top) and top > 0 else 1.0
        parts = _split3(sums * scale, w.dtype).reshape(wb, tiles, 6, k)
        extra = torch.zeros(wb, tiles, 2, k, dtype=w.dtype, device=w.device)
        extra[:, :, 0] = 1
        return torch.cat([parts, extra], 2).reshape(wb, tiles * TILE_CHECK_ROWS, k).contiguous(), 1.0 / scale
    return _tcache[bn][0].get(weight, make, cache, host_sync="the tile checksums' scale")


def _bias_tile_sums(bias: torch.Tensor, bn: int, cache: bool = True) -> torch.Tensor:
    """fp32 [T_N, 2]: per bn-wide N-tile, the sum of the bias and its sum weighted as the tile's
    columns are (the tile-local check's bias terms)."""
    def make(b):
        return _tile_sums(b.double()[:, None], bn)[..., 0].float().contiguous()
    return _tcache[bn][1].get(bias, make, cache)


def _weight_enc(weight: torch.Tensor, scheme: str, cache: bool = True):
    """(sums [WB,2,K] fp32 or None, stats [WB,3] fp32, finite int32 [1]): what the scheme's kernel
    reads of W (the thread kernel no W sums: it checks against the W tiles it loads). ``weight``:
    a tensor or a group's members (encoded as if joined along N)."""
    def make(w):
        own = cache and not isinstance(w, tuple)  # the joined copy is transient: not a cache key
        w = _joined(w)
        sums = gemm.weight_checksums(w, own).sums.contiguous() if scheme == "linear_global" else None
        st, finite = gemm.weight_stats(w, own)
        stats = torch.stack([st.sum_abs_mu, st.sum_var, st.sum_mu2], -1)
        return sums, stats.float().reshape(-1, 3).contiguous(), finite.to(torch.int32).reshape(1)
    return _wcache[scheme].get(weight, make, cache)


def _bias_stats(bias: torch.Tensor, cache: bool = True) -> torch.Tensor:
    """fp64 [sum b, sum (n+1) b, sum |b|, max |b|] (the bias terms of checks and thresholds)."""
    def make(b):
        bd = b.double()
        pos = torch.arange(1, b.numel() + 1, dtype=torch.float64, device=b.device)
        return torch.stack([bd.sum(), (bd * pos).sum(), bd.abs().sum(), bd.abs().max()]).contiguous()
    return _bcache.get(bias, make, cache)


def _group_bias(biases: tuple, cache: bool = True) -> torch.Tensor:
    """A group's biases joined (the kernel reads one bias vector; small, so a cached copy)."""
    return _ccache.get(biases, lambda bs: torch.cat(bs).contiguous(), cache)


def _batched(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-2], t.shape[-1]) if t.dim() == 3 else t[None]


def _kernel_weight(weight: torch.Tensor, cache: bool = True) -> torch.Tensor:
    """W as [WB, N, K8] with K contiguous, 16-byte rows and K8 = K rounded up to a multiple of 8
    (TMA rows; the zero columns add nothing to products or checksums); a cached copy where the
    weight is not that already."""
    w3 = _batched(weight)
    if w3.shape[-1] % 8 == 0 and _tma_ok(w3):
        return w3
    return _ccache.get(weight, lambda w: F.pad(_batched(w), (0, (-w.shape[-1]) % 8)).contiguous(),
                       cache)


def _tma_ok(t3: torch.Tensor) -> bool:
    return (t3.stride(-1) == 1 and t3.stride(-2) % 8 == 0 and t3.stride(0) % 8 == 0
            and t3.data_ptr() % 16 == 0)


def _weight_maxabs(weight: torch.Tensor, cache: bool = True) -> float:
    """max |W| (one host sync per weight version): fp16 thread checksums must not overflow."""
    return _mcache.get(weight, lambda w: float(w.detach().abs().max()), cache,
                       host_sync="max |W| (the fp16 thread scheme's overflow guard)")


# ----------------------------------------------------------------------------- workspaces
_ws: Dict[tuple, object] = {}
# key -> (capture id, workspace): the latest workspace a capture made on its stream (none cached
# there, or too small), shared by that capture's later calls (one per call put 3 fill kernels
# before every captured GEMM: run 30f). Dropped at the key's first call after that capture.
_graph_ws: Dict[tuple, tuple] = {}


def _cached_workspace(key: tuple):
    """The workspace for key = (kind, device, stream): the one the capture now running on that
    stream made, else the cached one (None: make one)."""
    held = _graph_ws.get(key)
    if held is not None:
        if cudagraphs.capturing() and held[0] == lib().ft_capture_id(key[2]):
            return held[1]
        del _graph_ws[key]  # its capture is over (the memory stays in that graph's pool)
    return _ws.get(key)


def _workspace(kind: str, device: torch.device, stream: int, rows: int = 0, mtiles: int = 0):
    """Self-cleaning workspace per (kind, device, stream): kernels leave it as they found it.

    thread: 8 bytes (the word on which CTAs count non-finite inputs once per call). global:
    (buffer, rows, mtiles); the kernel library gives its size and where its fp32 max (-inf) /
    min (+inf) rows start; the rest starts at zero. Grown by doubling; a replaced one is kept (a
    CUDA graph may hold it). Captured without a warm-up on the capturing stream: one the graph
    owns, initialised at every replay and shared by the capture's calls."""
    key = (kind, device, stream)
    hit = _cached_workspace(key)
    if kind == "thread":
        if hit is None:
            hit = _new_workspace(key, None, "the thread kernel's workspace",
                                 lambda: torch.zeros(2, dtype=torch.int32, device=device))
        return hit
    if hit is None or hit[1] < rows or hit[2] < mtiles:
        rows_c = max(rows, 2 * hit[1] if hit else 0)
        mt_c = max(mtiles, 2 * hit[2] if hit else 0)

        def make():
            buf = torch.zeros(int(lib().ft_gemm_global_ws_bytes(rows_c, mt_c)), dtype=torch.uint8,
                              device=device)
            off = int(lib().ft_gemm_global_ws_extrema_offset(rows_c))
            ext = buf[off: off + rows_c * 8].view(torch.float32)
            ext[:rows_c].fill_(-math.inf)
            ext[rows_c:].fill_(math.inf)
            return buf, rows_c, mt_c
        hit = _new_workspace(key, hit, "the global kernel's workspace", make)
    return hit


def _new_workspace(key: tuple, old, what: str, make):
    """make()'s workspace for key = (kind, device, stream), made off the CUDA-graph pools and cached
    in place of ``old``, which is kept (a captured graph may hold it); during a capture with no
    warm-up on its stream, one the graph owns, kept for that capture alone (_graph_ws)."""
    value, in_graph = cudagraphs.persistent(key[1], what, make, per_graph=True)
    if in_graph:
        _graph_ws[key] = (lib().ft_capture_id(key[2]), value)
    else:
        if old is not None:
            cudagraphs.retire(old)
        _ws[key] = value
    return value


def _split_workspace(device: torch.device, stream: int, tiles: int, splits: int):
    """(buffer, tiles, splits) of the global kernel's split-K workspace per (device, stream): flags
    (zero between calls: the kernel resets them) and the partial tiles of up to `tiles` tiles split
    `splits` ways. Grown by doubling the tiles; under CUDA graphs as _workspace."""
    key = ("split", device, stream)
    hit = _cached_workspace(key)
    if hit is None or hit[1] < tiles or hit[2] < splits:
        tiles_c, splits_c = max(tiles, 2 * hit[1] if hit else 0), max(splits, hit[2] if hit else 0)
        hit = _new_workspace(key, hit, "the global kernel's split-K workspace", lambda: (
            torch.zeros(int(lib().ft_gemm_global_split_bytes(tiles_c, splits_c)), dtype=torch.uint8,
                        device=device), tiles_c, splits_c))
    return hit


# ----------------------------------------------------------------------------- support checks
def fallback_reason(scheme: str, x: torch.Tensor, weight: torch.Tensor,
                    bias: Optional[torch.Tensor] = None, static_weight: bool = True) -> Optional[str]:
    """Why the CUDA kernel does not take this call (None: it does). static_weight: W may be cached
    (a parameter), not recomputed in the graph."""
    if not x.is_cuda:
        return "not a CUDA tensor"
    if not cuda.is_sm90(x.device):
        return "kernels are built for sm_90 (Hopper) only"
    if weight.device != x.device or (bias is not None and bias.device != x.device):
        return "tensors on different devices"
    why = call_reason(x, weight, bias)
    if why is not None:
        return why
    if scheme == "linear_thread" and x.dtype == torch.float16 and _weight_maxabs(weight, static_weight) * 8 > 60000:
        return "fp16 weights so large that an 8-term checksum could overflow fp16"
    return None


def call_reason(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> Optional[str]:
    """fallback_reason's checks of dtypes and shapes alone (no device, no data): what ``explain``
    can say from a graph's fake tensors."""
    if x.dtype not in DTYPES:
        return f"dtype {x.dtype}: the kernels take bf16 and fp16"
    if weight.dim() not in (2, 3):
        return "weight must be [N, K] or [B, N, K]"
    k, n = weight.shape[-1], weight.shape[-2]
    wb = weight.shape[0] if weight.dim() == 3 else 1
    if x.numel() == 0 or n == 0 or x.numel() % (wb * k):
        return "empty or mismatched shapes"
    if max(x.numel() // k, n, k) >= 2 ** 31 - 1:
        return "a dimension beyond 2^31"
    if n >= 2 ** 27 - 8:  # the global epilogue's 32-bit offsets over 16 output rows
        return "N beyond 2^27"
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != n):
        return "bias must be [N]"
    return None


def group_fallback_reason(x: torch.Tensor, weights, biases=(), static_weight: bool = True) -> Optional[str]:
    """Why the global kernel does not take this group of sibling weights as one call (None: it
    does): each member as a linear of its own, and the group's layout (run: every member but the
    last spans whole tiles of the narrowest width; one K and row stride)."""
    if not 1 < len(weights) <= MAX_GROUP:
        return f"a group takes 2 to {MAX_GROUP} weights"
    for i, w in enumerate(weights):
        why = fallback_reason("linear_global", x, w, biases[i] if biases else None, static_weight)
        if why is not None:
            return why
        if w.dim() != 2:
            return "a group's weights are [N, K]"
    if any(w.shape[0] % min(GLOBAL_BNS) for w in weights[:-1]):
        return f"a group's members but the last must span whole {min(GLOBAL_BNS)}-wide tiles"
    if len({(w.shape[1], w.stride(0), w.stride(1)) for w in weights}) > 1:
        return "a group's weights must share K and strides"
    return None


def _supports(scheme):
    def supports(x, weight, bias=None, static_weight=True):
        return fallback_reason(scheme, x, weight, bias, static_weight) is None
    return supports


# ----------------------------------------------------------------------------- injection plan
def plan_injections(injections: List[injection.Injection], rows: int, n: int, k: int, spread: int,
                    site_name: str) -> List[Tuple[injection.Injection, str, int, int, int]]:
    """(inj, stage, row, col, step) per corrupted element, drawing from each spec's generator in
    the reference's order (gemm._accumulate: k-step then index; output stage: index)."""
    n_steps = math.ceil(k / K_TILE)
    out = []
    for inj in injections:
        spec = inj.spec
        g = inj.generator()
        step = gemm.draw_k_step(spec, g, n_steps) if spec.stage == "accumulator" else -1
        index = tuple(int(i) for i in spec.index) if spec.index is not None else \
            injection.draw_index((rows, n), g)
        if len(index) != 2 or not (-rows <= index[0] < rows and -n <= index[1] < n):
            raise IndexError(f"fault index {index} out of range for a [{rows}, {n}] output ({site_name})")
        row, col = index[0] % rows, index[1] % n
        # count > 1: the next elements of the same check group (injection.apply's placement).
        for c in injection.spread_positions(n, col, spec.count, spread, N_TILE if spread > 1 else None,
                                            f"{index} in {site_name} ({spec.stage})"):
            out.append((inj, spec.stage, row, c, step))
    return out


def _fill_injections(args: _Args, plan, device, log=None) -> Optional[torch.Tensor]:
    if not plan:
        return None
    if log is None:
        log = torch.zeros(len(plan), 2, dtype=torch.float32, device=device)
    for i, (inj, stage, row, col, step) in enumerate(plan):
        spec = inj.spec
        r = args.inj[i]
        r.row, r.col, r.step, r.slot = row, col, step, i
        if spec.bit is None:
            r.mode, r.value, r.bit, r.fmt = 0, 10.0 if spec.value is None else float(spec.value), 0, 0
        else:
            r.mode, r.bit, r.fmt, r.value = 1, spec.bit, FMT[spec.fmt], 0.0
    args.n_inj = len(plan)
    args.inj_log = log.data_ptr()
    return log


def _log_events(plan, log: torch.Tensor, site_name: str) -> None:
    for (inj, stage, row, col, _), (before, after) in zip(plan, log.tolist()):
        inj.events.append(injection.Event(site_name, stage, (row, col), before, after))


# ----------------------------------------------------------------------------- launch
_sms: Dict[torch.device, int] = {}


def _num_sms(device) -> int:
    if device not in _sms:
        _sms[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _sms[device]


@functools.lru_cache(maxsize=4096)  # a pure function of the shape: off the per-call path
def thread_config(m: int, n: int, k: int, wb: int, num_sms: int, nbox: Optional[int] = None,
                  stages: Optional[int] = None, wm: Optional[int] = None,
                  mtile: Optional[int] = None) -> Tuple[int, int, int, int, int]:
    """(mtile, wm, split, nbox, stages) of the thread kernel (benchmarks/NOTES_gemm.md).

    Where the N tiles fill the GPU, a CTA holds all of x's rows up to 128 (16 * mtile * wm), so
    W is read once: the 4 consumer warps split M (wm of them, mtile m16 blocks each) and K
    (4 / wm). Ring: 8 deep (a multiple of the K groups, so each slot belongs to one), shallower
    where x is split over warps or K is short; two 64-wide k-boxes per stage (256-byte runs of
    each W row) while the 16-row tiles fit the GPU in one wave and K is long; K split over a
    cluster while the CTAs still fit the GPU at once and each keeps >= 4 stages (tiny-shape
    sweep, run 9: there fixed per-CTA costs outweigh parallelism)."""
    blocks = math.ceil(m / 16)
    if wm is None:  # x over 2-4 warps (W read once) only where the N tiles alone fill the GPU:
        # else more CTAs (one per 32 x rows) win (measured, NOTES_gemm.md run 6)
        wm = 1 if blocks <= 2 or math.ceil(n / N_TILE) * wb < num_sms else (2 if blocks <= 4 else 4)
    mtile = mtile or (1 if blocks == 1 and wm == 1 else 2)
    rows = 16 * mtile * wm
    base = math.ceil(n / N_TILE) * math.ceil(m / rows) * wb
    kb = math.ceil(k / K_TILE)  # 64-wide k-boxes along K
    nbox = nbox or (2 if mtile == 1 and base <= num_sms and kb > 8 else 1)
    stage = nbox * (N_TILE * K_TILE * 2 + rows * K_TILE * 2)
    part = NCW * mtile * 42 * 32 * 4
    wk = NCW // wm
    if stages is None:  # 8; with x split over warps (bigger x tiles) the deepest ring that
        # keeps two CTAs per SM (measured: 4 stages at wm=4 beat 8 by 20%, NOTES_gemm.md run 6)
        fits = lambda ns, cap: max(ns * stage, part) + THREAD_SMEM_FIXED <= cap
        two = [ns for ns in range(8, 3, -1) if ns % wk == 0 and fits(ns, 110 << 10)]
        stages = 8 if wm == 1 or not two else two[0]
        if math.ceil(kb / nbox) <= 4:  # a short K: a deeper ring only costs shared memory
            stages = max(4, wk)
        while not fits(stages, SMEM_MAX):
            stages -= wk
    smem = max(stages * stage, part) + THREAD_SMEM_FIXED
    per_sm = 2 if smem <= (110 << 10) else 1
    nst = math.ceil(k / (K_TILE * nbox))
    split = 1
    while split < 8 and base * split * 2 <= per_sm * num_sms and nst // (split * 2) >= 4:
        split *= 2
    return mtile, wm, split, nbox, stages


def thread_kernel(m: int, n: int, k: int, wb: int, num_sms: int, kernel: Optional[str] = None) -> str:
    """"stream", "thin" or "ring": the thread-scheme kernel for x [wb, m, k] and W [wb, n, k] on a
    GPU of num_sms SMs (see THREAD_KERNEL)."""
    kind = kernel or THREAD_KERNEL
    if kind not in ("auto", "stream", "ring", "thin"):
        raise ValueError(f"ftcompile: thread kernel {kind!r} (auto, stream, ring, thin)")
    if kind == "thin" and m > THIN_MAX_ROWS:  # (beyond its rows: the automatic choice)
        kind = "auto"
    if kind != "auto":
        return kind
    w_bytes = wb * n * k * 2
    tiles = wb * math.ceil(n / THIN_BW)
    # 9-128 rows: the thin kernel (replica checks up to 32 rows), but the streaming kernel past 32
    # rows on a weight of at most THIN_SMALL_W_BYTES. Runs 74c-d (H200, protected / cuBLAS,
    # streaming -> thin): 16 x 2304 / 768 / 3072 x 768 1.11 / 1.10 / 1.18 -> 1.01 / 0.98 / 1.04,
    # 16 x 4096^2 / 4096x11008 1.04 / 1.02 -> 0.92 / 0.99, 16x22016x4096 (two waves) 1.41 -> 1.11,
    # 32 x GPT-2's widths 1.34-1.46 -> 1.19-1.22, 32x4096^2 1.46 -> 1.20, 64 / 128 x 2304x768 1.75 / 2.96
    # -> 1.53 / 1.76, 64 / 128 x 768x3072 1.17 / 1.58 -> 1.11 / 1.35; but 48 / 64 / 128 x 768x768 1.33 /
    # 1.37 / 1.60 against 1.97 / 1.59 / 1.95 and 128 x 1024^2 1.68 against 1.81 (64 x 1024^2 level).
    # Unprotected the thin kernel is ahead at all of these (0.6-1.3 x cuBLAS): its protection past
    # 16 rows is what is left. At 1-8 rows the streaming kernel's replica keeps it ahead at the
    # GPT-2 widths (1 / 8 x 768x768 0.81 / 0.89 against 0.91 / 0.98).
    # Past 32 rows on a small weight the thin kernel too where it checks against replicas (33-64
    # rows, gemm.thin_replica) on at least THIN_REPLICA_W_BYTES: run 76e, protected, us, thin /
    # streaming: 40 / 48 / 64 x 1024^2 6.6-6.8 / 7.5, 64x1024x768 6.5 / 7.0, 64x768x1024 6.8 / 7.1,
    # 64x2048x512 6.8 / 7.2; but 40-64 x 768^2 (1.2 MB) 6.3-6.5 / 6.2-6.3.
    if gemm.STREAM_REPLICA_ROWS < m <= THIN_MAX_ROWS and (
            m <= 32 or w_bytes > THIN_SMALL_W_BYTES or (gemm.thin_replica(m, n) and w_bytes >= THIN_REPLICA_W_BYTES)):
        return "thin"
    if m <= gemm.STREAM_REPLICA_ROWS:
        # The thin kernel where its 128-row tiles fill about half the SMs or more in one wave, the
        # streaming kernel elsewhere: runs 47g / 47j, H200, protected / cuBLAS, streaming -> thin:
        # 1x11008x4096 1.20 -> 1.04, 1 x N x 4096 at N = 8192 1.15 -> 1.11, 10240 1.30 -> 1.07,
        # 12288 1.12 -> 1.00, 16384 1.12 -> 1.05. At 32 tiles the two are level since both check
        # against replicas (run 74d, 1 / 8 rows: 4096^2 0.96 / 1.00 against 0.94 / 0.95, 4096x11008
        # 0.97 / 0.99 against 1.00 / 0.99).
        return "thin" if w_bytes >= THIN_W_BYTES and THIN_FEW_ROWS_SM_SHARE * num_sms <= tiles <= num_sms else "stream"
    # Past 32 rows on a small weight: the streaming kernel while its CTAs fit one wave (each CTA
    # row, 32 rows of x, reads all of W through L2; past one row only while W is small enough that
    # the repeated reads cost less than the ring kernel's fixed part: run 17), else the thin kernel
    # up to its rows (128x2304x768 15.6 against the ring kernel's 11.9 us, run 45b) and the ring
    # kernel (W read once) beyond.
    mtile = stream_mtile(m)
    one_row = m <= 16 * mtile
    fits = _stream_ctas(m, n, wb, mtile) <= num_sms and (one_row or w_bytes < STREAM_REREAD_W_BYTES)
    if m <= THIN_MAX_ROWS and not fits:
        return "thin"
    return "stream" if fits else "ring"


THIN_ROWS = (32, 64, 128)  # x's rows padded: the thin kernel's wgmma N (+ 8 checksum columns)
THIN_MAX_ROWS = THIN_ROWS[-1]
THIN_BW = 128  # rows of W per CTA
# auto: the thin kernel from this weight size on (see thread_kernel): run 43f, protected, us, thin /
# the kernel auto took before: 64x4096^2 24.9 / 26.7, 64x14336x4096 48.4 / 64.7, 128x11008x4096
# 43.1 / 104.9, 32x11008x4096 37.5 / 41.5; GPT-2 sizes (W <= 5 MB) at M <= 64 13-19 / 6-16.
THIN_W_BYTES = 32 << 20
# At M <= 8, the thin kernel from this share of the SMs in tiles on (see thread_kernel: measured
# ahead at 64 tiles of 132 SMs, behind at 32).
THIN_FEW_ROWS_SM_SHARE = 0.45
# Past 32 rows, the streaming kernel on weights of at most this size (see thread_kernel), but
# from THIN_REPLICA_W_BYTES on where the thin kernel checks against replicas.
THIN_SMALL_W_BYTES = 2 << 20
THIN_REPLICA_W_BYTES = 3 << 19  # 1.5 MB


# The thin kernel's time model, which picks its K split (run 45b, H200, 24 shapes x splits 1-4:
# the protected picks are all the measured best; unprotected, 0.7 us lost over all 24). Per wave
# of clusters: a fixed cost (prologue, ring fill, epilogue), then W's bytes at the memory's rate
# or each CTA's stage bytes (W + x) at one CTA's rate, whichever takes longer; protected, the
# tail's checks per row of D a CTA finishes.
THIN_WAVE_US = 3.5
THIN_MEM_BYTES_PER_US = 3.2e6
THIN_CTA_BYTES_PER_US = 8e4
THIN_CHECK_ROW_US = 0.02
THIN_MIN_KSTEPS = 3  # per CTA of a split (K = 768 splits 4 ways: run 45b, 1.3-4.5 us faster)


def thin_time_us(nx: int, k: int, tiles: int, split: int, clusters: int, protect: bool) -> float:
    """Modelled time of the thin kernel: `tiles` 128-row tiles of W (K = k), each over a cluster of
    `split` CTAs, `clusters` clusters at a time (see the THIN_ constants)."""
    tile_w, tile_x = THIN_BW * k * 2, nx * k * 2
    t, left = 0.0, tiles
    while left > 0:
        c = min(left, clusters)
        left -= c
        t += THIN_WAVE_US + max(c * tile_w / THIN_MEM_BYTES_PER_US, (tile_w + tile_x) / split / THIN_CTA_BYTES_PER_US)
        t += THIN_CHECK_ROW_US * THIN_BW / split if protect else 0.0
    return t


def thin_protect(m: int, n: int, protect: bool) -> int:
    """Args.protect of a thin-kernel call: 0 off, 1 on, 2 on with replicas where x's padding allows
    them (gemm.thin_replica; at 33-64 rows the library must be built with FTG_THIN_REPLICA_NX=64,
    the default: thin_gemm.cu's replica_of)."""
    return 0 if not protect else 2 if gemm.thin_replica(m, n) else 1


def thin_config(m: int, n: int, k: int, wb: int, num_sms: int, protect: bool = True,
                split: Optional[int] = None, stages: Optional[int] = None,
                clusters: Optional[Tuple[int, ...]] = None, device: int = 0,
                nx: Optional[int] = None) -> Tuple[int, int, int]:
    """(nx, split, stages) of the thin kernel: x's rows padded to nx (default the least of THIN_ROWS
    that holds them; benchmarks may pass a wider one); K split over a cluster of
    `split` CTAs (1-4), the one `thin_time_us` finds fastest (the smallest among equals), each CTA
    keeping >= THIN_MIN_KSTEPS k-steps; the deepest ring (`_thin_stages`) that fits shared memory.
    A wave holds clusters[split - 1] clusters (default: as many as CUDA device `device` holds,
    `thin_clusters`)."""
    # (cached per protect mode: the replica's stage is smaller than the checksum rows')
    return _thin_config(m, n, k, wb, num_sms, thin_protect(m, n, protect), split, stages, clusters, device, nx)


@functools.lru_cache(maxsize=4096)
def _thin_config(m: int, n: int, k: int, wb: int, num_sms: int, mode: int, split: Optional[int],
                 stages: Optional[int], clusters: Optional[Tuple[int, ...]], device: int,
                 nx: Optional[int]) -> Tuple[int, int, int]:
    if nx is None:
        nx = next(r for r in THIN_ROWS if m <= r)
    elif nx not in THIN_ROWS or nx < m:
        raise ValueError(f"ftcompile: the thin kernel pads x's {m} rows to one of {THIN_ROWS}, not {nx}")
    tiles = math.ceil(n / THIN_BW) * wb
    nk = math.ceil(k / K_TILE)
    if split is None:
        if clusters is None:
            clusters = tuple(thin_clusters(nx, mode, s, num_sms, device) for s in range(1, 5))
        split = min((s for s in range(1, 5) if s == 1 or nk // s >= THIN_MIN_KSTEPS),
                    key=lambda s: (thin_time_us(nx, k, tiles, s, max(1, clusters[s - 1]), mode > 0), s))
    if stages is None:
        stages = _thin_stages(nx, mode, split)
    return nx, split, stages


# Ring depth: bytes in flight. Run 73f: 10-11 stages (x padded to 32) against 8 at 86 tiles of
# 11008x4096: unprotected -0.4..-2.0 us, protected -0.4..-0.8; 14336 / 8192 level (cuBLAS runs 10-12
# stages of 128-row tiles there: run 73e). thin_gemm.cu's MAX_STAGES.
THIN_MAX_STAGES = 12


def _thin_stages(nx: int, protect: int, split: int) -> int:
    """The thin kernel's deepest ring (<= THIN_MAX_STAGES) that fits shared memory at this split
    (protect: Args.protect, `thin_protect`)."""
    stages = THIN_MAX_STAGES
    while stages > 2 and lib().ft_gemm_thin_smem(nx, int(protect), stages, split) > SMEM_MAX:
        stages -= 1
    return stages


@functools.lru_cache(maxsize=256)
def thin_clusters(nx: int, protect: int, split: int, num_sms: int, device: int = 0) -> int:
    """Clusters of `split` thin-kernel CTAs (protect: Args.protect) CUDA device `device` holds at
    once (at most one CTA per SM): clusters do not span GPCs, so on an H200 4-CTA clusters fill
    fewer SMs than 132 / 4 would suggest. Asked of the CUDA runtime; num_sms // split if it cannot
    answer."""
    with torch.cuda.device(device):
        n = lib().ft_gemm_thin_max_clusters(nx, int(protect), _thin_stages(nx, protect, split), split)
    return min(n, num_sms // split) if n > 0 else num_sms // split


@functools.lru_cache(maxsize=16)
def _thin_replica_checked(handle, nx: int, protect: int) -> bool:
    """Whether library `handle` checks thin calls with x padded to nx rows and Args.protect
    `protect` against replicas (then it takes no x-side buffer and no W row statistics); asked
    once, not per call."""
    return bool(handle.ft_gemm_thin_replica_checked(nx, protect))


def _thin_row_stats(w3: torch.Tensor, cache: bool = True) -> torch.Tensor:
    """[WB, N, 2] fp32: each W row's mean and extrema variance over K (V-ABFT's row statistics of
    the thin kernel's check, whose rows are W's)."""
    def make(w):
        mu, var = thresholds.extrema_variance(w, -1)
        return torch.stack([mu, var], -1).float().contiguous()
    return _rcache.get(w3, make, cache)


def _stream_ctas(m: int, n: int, wb: int, mtile: int) -> int:
    """CTAs of the streaming kernel (without its K split): 64-column tiles x CTA rows of mtile m16 blocks."""
    return math.ceil(n / N_TILE) * math.ceil(m / (16 * mtile)) * wb


def stream_mtile(m: int) -> int:
    """m16 blocks of x per streaming CTA: 1, or 2 above M = 16 (each W fragment then serves both
    blocks' MMAs, so W crosses L2 -> SM once per 32 rows; NOTES_gemm.md run 17)."""
    return 1 if m <= 16 else 2


STREAM_MAX_SPLIT = 8  # CTAs per cluster of the streaming kernel (csrc/gemm/stream_gemm.cu)


@functools.lru_cache(maxsize=4096)
def stream_config(m: int, n: int, k: int, wb: int, num_sms: int, mtile: Optional[int] = None,
                  clusters: Optional[Tuple[int, ...]] = None, device: int = 0) -> Tuple[int, int, int]:
    """(split, stages, warps) of the streaming kernel with mtile m16 blocks per CTA (default
    stream_mtile; the sweeps of runs 13, 14 and 16): 16 warps per CTA where one CTA per SM covers
    the tiles and K >= 768 (16 warps loading per SM is what streams near the copy rate; since run
    16's cheaper end they win at GPT-2 sizes too), else 8 (two CTAs per SM); the rolling loop
    (stages 2) for big weights; the largest K split over a cluster (1-8) whose CTAs stay at most
    one per SM, each keeping 4 or more 32-wide k chunks, and whose clusters the device holds at
    once (clusters[split - 1]; default `stream_clusters`): at N = 2048 split 4 would leave two of 32
    clusters of 4 to a second wave on an H200 (30 held), 3 is 3.4-6.2 us faster (run 45f)."""
    mtile = mtile or stream_mtile(m)
    ctas = _stream_ctas(m, n, wb, mtile)
    big = wb * n * k * 2 >= STREAM_BIG_W_BYTES
    warps = 16 if ctas <= num_sms and k >= 768 and mtile == 1 else 8  # 2 blocks: 8 warps at 255 registers
    chunks = math.ceil(k / 32)
    fits = [s for s in range(2, STREAM_MAX_SPLIT + 1) if ctas * s <= num_sms and chunks // s >= 4]
    if fits and clusters is None:
        clusters = tuple(stream_clusters(warps, mtile, s, num_sms, device) for s in range(1, STREAM_MAX_SPLIT + 1))
    split = max([1] + [s for s in fits if ctas <= clusters[s - 1]])
    return split, (2 if big else 1), warps


@functools.lru_cache(maxsize=256)
def stream_clusters(warps: int, mtile: int, split: int, num_sms: int, device: int = 0) -> int:
    """Clusters of `split` streaming CTAs CUDA device `device` holds at once (asked of the CUDA
    runtime; an H200 holds 132 / 66 / 39 / 30 / 22 / 17 / 15 / 15 of 1-8 16-warp CTAs, run 45f),
    num_sms // split if it cannot answer."""
    with torch.cuda.device(device):
        n = lib().ft_gemm_stream_max_clusters(warps, mtile, split)
    return n if n > 0 else num_sms // split


def global_mtiles(m: int) -> int:
    """128-row M-tiles of the global kernel."""
    return math.ceil(m / GLOBAL_BM)


def global_tiles(m: int, n: int, wb: int, bn: int, cluster: int = 1) -> int:
    """128 x bn tiles of the global kernel (M-tiles rounded up to whole clusters)."""
    return wb * math.ceil(global_mtiles(m) / cluster) * cluster * math.ceil(n / bn)


@functools.lru_cache(maxsize=4096)
def global_split(m: int, n: int, k: int, wb: int, num_sms: int, bn: int = 256) -> int:
    """K splits per tile of the global kernel: where its 128 x bn tiles leave SMs idle (small M,
    few tiles), each tile's k-steps are shared by consecutive CTAs whose partial tiles the last
    one adds. The most splits (up to 4) that keep all units in one wave and >= 8 k-steps each:
    a second wave cost more than the split saved in every case the sweep measured, and so did
    splits of 4 k-steps (NOTES_gemm.md, run 18g)."""
    tiles = global_tiles(m, n, wb, bn)
    nk = math.ceil(k / K_TILE)
    return max(s for s in range(1, 5) if s == 1 or (tiles * s <= num_sms and nk // s >= 8))


@functools.lru_cache(maxsize=4096)
def global_tail(m: int, n: int, k: int, wb: int, num_sms: int, bn: int, cluster: int = 1) -> Tuple[int, int]:
    """(split, split_from) for the last wave of an unsplit call of several waves: where that wave is
    at most GLOBAL_TAIL_FILL full, its tiles (from cluster tile split_from on) are each split over
    up to 4 consecutive units (the most that fit the wave's SMs and keep >= GLOBAL_TAIL_MIN_KSTEPS
    k-steps a unit), the tiles before it run whole; (1, 0) otherwise. Its gain, the wave's k-steps
    less a split unit's and its partial's GLOBAL_SPLIT_KSTEPS_MANY, must exceed GLOBAL_TAIL_GAIN of
    the call: 2048x11008x4096 at 256-wide tiles is 5 waves and 28 tiles (NOTES.md, session 60: -6 %)."""
    slots = num_sms // cluster
    tiles = global_tiles(m, n, wb, bn, cluster) // cluster  # cluster tiles
    waves, rest = divmod(tiles, slots)
    nk = math.ceil(k / K_TILE)
    if waves < 1 or rest == 0 or rest > GLOBAL_TAIL_FILL * slots:
        return 1, 0
    split = min(4, slots // rest, nk // GLOBAL_TAIL_MIN_KSTEPS)
    if split < 2:
        return 1, 0
    gain = nk - (math.ceil(nk / split) + GLOBAL_SPLIT_KSTEPS_MANY)
    if gain <= GLOBAL_TAIL_GAIN * (waves + 1) * nk:
        return 1, 0
    return split, waves * slots


@functools.lru_cache(maxsize=4096)
def global_tile(m: int, n: int, k: int, wb: int, num_sms: int,
                widths: Tuple[int, ...] = GLOBAL_BNS) -> Tuple[int, int]:
    """(tile width, K split) of the global kernel. The persistent grid's time is about its waves
    times one unit's work (width x k-steps): 256-wide tiles quantise badly where N is a few of them
    (N = 768: 3 tiles, so 4096 rows make 96 tiles, one wave at 73 % of 132 SMs; 192-wide: 128
    tiles), and where few rows leave SMs idle even after split-K (M <= 128 on 4096-wide layers: 16
    tiles; 128-wide: 32, and 128 units at split 4). Many rows: a narrower tile only where it beats
    the wider ones by its margin (GLOBAL_MARGINS), a split counted GLOBAL_SPLIT_KSTEPS_MANY k-steps
    more; few rows: no margin, a split counted GLOBAL_SPLIT_KSTEPS k-steps more. Ties keep the
    wider. ``widths``: those to choose from (the tile-local check has 192 and 128)."""
    _, bn, split = _global_tile_cost(m, n, k, wb, num_sms, widths)
    return bn, split


def global_cost(m: int, n: int, k: int, wb: int, num_sms: int, bn: int, split: int,
                margins: Optional[Dict[int, float]] = None, split_ksteps_many: Optional[int] = None) -> float:
    """The width model's cost of (width, split) (see global_tile): waves x width x k-steps per unit,
    a split counted GLOBAL_SPLIT_KSTEPS (few rows) or GLOBAL_SPLIT_KSTEPS_MANY k-steps more, divided
    by the width's margin where the call has many rows. ``margins``, ``split_ksteps_many``: other
    constants than the module's (benchmarks/fit_global_model.py fits them)."""
    margins = GLOBAL_MARGINS if margins is None else margins
    many = GLOBAL_SPLIT_KSTEPS_MANY if split_ksteps_many is None else split_ksteps_many
    waves = math.ceil(global_tiles(m, n, wb, bn) * split / num_sms)
    steps = math.ceil(math.ceil(k / K_TILE) / split)
    if global_mtiles(m) <= GLOBAL_FEW_MTILES:
        return waves * bn * (steps + GLOBAL_SPLIT_KSTEPS * (split > 1))
    return waves * bn * (steps + many * (split > 1)) / margins[bn]


@functools.lru_cache(maxsize=4096)
def _global_tile_cost(m: int, n: int, k: int, wb: int, num_sms: int,
                      widths: Tuple[int, ...]) -> Tuple[float, int, int]:
    """(estimated cost, width, split) of the cheapest of ``widths`` (see global_tile); ties keep the
    wider."""
    splits = {bn: global_split(m, n, k, wb, num_sms, bn) for bn in widths}
    c, neg_bn = min((global_cost(m, n, k, wb, num_sms, bn, splits[bn]), -bn) for bn in widths)
    return c, -neg_bn, splits[-neg_bn]


def global_check(m: int, n: int, k: int, wb: int, num_sms: int, allowed: Tuple[int, ...] = GLOBAL_BNS) -> str:
    """The global scheme's check where GLOBAL_CHECK is "auto" (see GLOBAL_CHECK). The tile-local
    check costs ~4 % for its columns, ~1-5 % for x's range and 5-19 % for its epilogue (run 25c,
    NOTES_gemm.md; x's range now comes from the consumers' A fragments, run 37a: median on/cuBLAS
    1.193 -> 1.142, the row check still cheaper at K >= 4096 but for 2048x1024x4096; at 256 wide,
    its checksums from a second wgmma, it loses to the row check by 4-12 %, run 38a); the row
    check 2-8 % at long K but 20-50 % at K <= 3072 (its cross-CTA tail). So: the tile check where
    K <= 3072 and its widths (192, 128) cost no more waves x width than the unprotected kernel's best,
    or in calls of few waves at most TILE_CHECK_SLACK times more (run 25h, rows -> tiles:
    8192x2304x768 1.35 -> 1.28x cuBLAS, 4096x768x768 1.60 -> 1.24, 1024^3 2.32 -> 1.95; run 65a:
    4096x3072x768 -4 %); the row check at longer K, and where 256-wide tiles are much cheaper
    (2048^3). With few rows (bandwidth-bound) the row check's tail, every
    N-tile's sums landed before one CTA verifies the rows, is most of its cost: the tile check wins
    with one M-tile at any K and with two on weights up to TILE_CHECK_FEW_ROWS_W_BYTES (run 26a:
    128x4096^2 23.6 -> 21.4 us, GPT-2 layers at M = 128-256 13 -> 10.6); above that its per-tile
    costs outgrow the tail (256x14336x4096: rows on 256-wide tiles 58 us, tiles 71). At K > 3072
    the tile check also where the call is one wave at its width, that width and split are the
    unprotected kernel's best and W is within the same bound: the row check's tail then runs after
    every tile, unhidden (run 64c: 2048x1024x4096 rows 37.2 / tiles 31.3 us, 1024x2048x4096 36.5 /
    30.9, 1024x1024x4096 28.8 / 21.6). ``allowed``: the widths the call may take (a group's member
    boundaries)."""
    tile_bns = tuple(b for b in TILE_CHECK_BNS if b in allowed)
    if not tile_bns:
        return "rows"
    mtiles = global_mtiles(m)
    if mtiles <= GLOBAL_FEW_MTILES:
        return "tiles" if mtiles == 1 or 2 * n * k * wb <= TILE_CHECK_FEW_ROWS_W_BYTES else "rows"
    tiles, bn, split = _global_tile_cost(m, n, k, wb, num_sms, tile_bns)
    one_wave = global_tiles(m, n, wb, bn) * split <= num_sms
    if k > 3072 and not (one_wave and 2 * n * k * wb <= TILE_CHECK_FEW_ROWS_W_BYTES):
        return "rows"
    best, best_bn, best_split = _global_tile_cost(m, n, k, wb, num_sms, allowed)
    few_waves = global_tiles(m, n, wb, best_bn) * best_split <= TILE_CHECK_SLACK_WAVES * num_sms
    slack = TILE_CHECK_SLACK if k <= 3072 and few_waves else 1.0
    return "tiles" if tiles <= slack * best else "rows"


def global_plan(m: int, n: int, k: int, wb: int, num_sms: int, allowed: Tuple[int, ...] = GLOBAL_BNS,
                protect: bool = True, check: Optional[str] = None, bn: Optional[int] = None,
                split: Optional[int] = None, cluster: int = 1) -> Tuple[str, int, int, int]:
    """(check, tile width, K split, split_from) of a global call: the check given, else GLOBAL_CHECK,
    with "auto" decided by global_check; the width given, else the model's among that check's widths;
    the split given, else global_split's, at most K's k-steps; where neither splits, global_tail's
    split of the last wave's tiles (split_from: its first cluster tile; 0: every tile split)."""
    check = check or GLOBAL_CHECK
    if check not in ("auto", "rows", "tiles"):
        raise ValueError(f"ftcompile: global check {check!r} (auto, rows or tiles)")
    if check == "auto":
        check = "rows" if bn == 256 else global_check(m, n, k, wb, num_sms, allowed)
    widths = tuple(b for b in (TILE_CHECK_BNS if protect and check == "tiles" else GLOBAL_BNS) if b in allowed)
    bn = bn or global_tile(m, n, k, wb, num_sms, widths)[0]
    if bn not in widths:
        raise ValueError(f"ftcompile: global kernel tile width {bn} with the {check} check (one of {widths})")
    given = split
    split = max(1, min(split or global_split(m, n, k, wb, num_sms, bn), math.ceil(k / K_TILE)))
    if GLOBAL_TAIL and split == 1 and given is None:
        return (check, bn, *global_tail(m, n, k, wb, num_sms, bn, cluster))
    return check, bn, split, 0


THREAD_KERNEL_NAMES = {"stream": "the streaming kernel", "thin": "the thin kernel (W x^T on wgmma)",
                       "ring": "the ring kernel"}


def kernel_note(scheme: str, m: int, n: int, k: int, wb: int, num_sms: int,
                allowed: Tuple[int, ...] = GLOBAL_BNS) -> str:
    """Which kernel configuration the launcher takes for a call of this shape (explain's note):
    for the global scheme its tile, K split and check, for the thread scheme its kernel."""
    k = (k + 7) // 8 * 8  # the launcher's K (x and W padded to 16-byte rows)
    if scheme == "thread":
        kind = thread_kernel(m, n, k, wb, num_sms)
        replica = gemm.thin_replica(m, n) if kind == "thin" else kind == "stream" and m <= gemm.STREAM_REPLICA_ROWS
        return f"kernel: {THREAD_KERNEL_NAMES[kind]}" + (", each element checked against a replica" if replica else "")
    check, bn, split, split_from = global_plan(m, n, k, wb, num_sms, allowed, cluster=GLOBAL_CLUSTER)
    if split_from:
        tiles = global_tiles(m, n, wb, bn, GLOBAL_CLUSTER) // GLOBAL_CLUSTER
        splits = f", the last wave's {tiles - split_from} tiles K split {split}"
    else:
        splits = f", K split {split}" if split > 1 else ""
    return f"kernel: {GLOBAL_BM}x{bn} tiles{splits}, {'tile-local' if check == 'tiles' else 'row'} check"


def kernel_e(x: torch.Tensor, thread: bool, n: int, k: int, safety: float, chains: int = 1) -> float:
    """e of the V-ABFT threshold for the kernels: the calibrated e_max (gemm._e), raised to cover
    the biased tensor-core accumulation of the longest accumulator chain (see TC_COEF); K is
    split into `chains` accumulators (warps x CTAs) in the thread kernels."""
    table = gemm._e(x, STRIDE if thread else n, k, safety)
    steps = k / (16 * chains)
    return max(table, TC_COEF * max(steps, 1.0) * 2.0 ** -24 * safety)


def run(scheme: str, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
        site: telemetry.Site, *, protect: bool = True, inject: bool = True,
        split: Optional[int] = None, mtile: Optional[int] = None, nbox: Optional[int] = None,
        stages: Optional[int] = None, wm: Optional[int] = None, plan: Optional[list] = None,
        log: Optional[torch.Tensor] = None, dbg: Optional[torch.Tensor] = None,
        cluster: Optional[int] = None, kernel: Optional[str] = None,
        warps: Optional[int] = None, pdl: Optional[bool] = None, bn: Optional[int] = None,
        check: Optional[str] = None, ldy: Optional[int] = None,
        record: Optional[list] = None) -> torch.Tensor:
    """One protected (or, protect=False, plain) linear through the CUDA kernel of ``scheme``.

    ``plan`` (benchmarks): injection records as from :func:`plan_injections`, used instead of the
    active FaultSpecs and without the host sync that logging events needs; ``log``: a
    preallocated [MAX_INJ, 2] fp32 buffer for their (before, after) values. ``dbg``: fp64 buffer
    that receives (sum, check, threshold) per check (global: per row; thread: per row and group,
    [rows, ceil(N/64)*8, 3]); threshold -1 marks rows with non-finite inputs. ``kernel``: the
    thread scheme's kernel (see THREAD_KERNEL); split, mtile, nbox, stages, wm tune the ring
    kernel, split, stages (1, or 2 for its rolling loop), warps (8, 16 per CTA), mtile (m16
    blocks of x per CTA: 1, or 2 with 8 warps) the streaming one, mtile (x's rows padded: 32, 64,
    128) the thin one; pdl (programmatic dependent
    launch; default PDL) the streaming and the global kernel; bn (256, 192, 128) the global kernel's
    tile width (default: global_tile's, with its split); check ("rows", "tiles", "auto"; default
    GLOBAL_CHECK) the global scheme's check (with "tiles", dbg is [rows, T_N, 3]). ``ldy`` (global
    scheme): y's rows that far apart, N rounded up to 16 bytes (ops/layout.py; default contiguous).
    ``record``: a list that receives the call's launch plan where it can be replayed (ops/replay.py:
    a function of x giving y, and the weights and biases it depends on).

    A group (global scheme): ``weight`` a tuple of [N_j, K] members and ``bias`` None or a tuple
    of their biases; y holds their outputs side by side ([..., sum N_j]), one GEMM over x.
    Members stay where they are (one TMA descriptor each); every member but the last must span
    whole tiles of the narrowest width (128), and the tile width is one that divides those."""
    thread = scheme == "linear_thread"
    group = isinstance(weight, tuple)
    bias_in = bias
    if ldy is not None and (thread or ldy % 8):
        raise ValueError(f"ftcompile: padded output rows (ldy={ldy}) are the global kernel's, in 16-byte rows")
    if group:
        why = "the thread scheme takes no groups" if thread else group_fallback_reason(x, weight, bias or ())
        if why is not None:
            raise ValueError(f"ftcompile: {why}")
        members = tuple(_kernel_weight(w, site.static_weight) for w in weight)
        bounds = list(itertools.accumulate(w.shape[1] for w in members))  # member j ends at bounds[j]
        w3, k_in = members[0], weight[0].shape[-1]
        wb, _, k = w3.shape
        n = bounds[-1]
        if bias is not None:
            bias = _group_bias(tuple(bias), site.static_weight)
    else:
        w3, k_in = _kernel_weight(weight, site.static_weight), weight.shape[-1]
        wb, n, k = w3.shape  # k: K padded to a multiple of 8 (x too: zero columns)
    x3 = x.reshape(wb, -1, k_in)
    if x3.shape[-1] != k:
        x3 = F.pad(x3, (0, k - x3.shape[-1]))
    if not _tma_ok(x3):  # TMA wants K contiguous, 16-byte rows: copy (fresh, aligned storage)
        x3 = x3.contiguous()
        if not _tma_ok(x3):
            x3 = x3.clone()
    m = x3.shape[1]
    if ldy is None or ldy == n:
        y, ldy = torch.empty(wb, m, n, dtype=x.dtype, device=x.device), n
    else:  # in the output's own shape, so that the result is no reshaped copy
        y = layout.empty_rows((*x.shape[:-1], n), ldy, x.dtype, x.device)
    dev = x.device
    a = _Args()
    a.x, a.w, a.y, a.ldy = x3.data_ptr(), w3.data_ptr(), y.data_ptr(), ldy
    a.bias = bias.data_ptr() if bias is not None else None
    a.batch, a.M, a.N, a.K = wb, m, n, k
    a.x_bstride, a.x_rstride = x3.stride(0), x3.stride(1)
    a.w_bstride, a.w_rstride = w3.stride(0), w3.stride(1)
    a.dtype, a.protect = DTYPES[x.dtype], int(protect)
    a.stream, a.num_sms = cuda.raw_stream(dev), _num_sms(dev)
    keep = [x3, w3, y, bias]  # alive until the launch is queued
    raise_flag = None
    xs = None  # the thin kernel's x-side buffer (a new one per call)
    injections = []
    if protect:
        # Encoded from the kernel's weight (padded where K % 8 != 0: statistics over K8 columns,
        # as the kernel's x statistics are).
        enc_w = (members if group else w3) if k != k_in else weight
        sums, stats, finite = _weight_enc(enc_w, scheme, site.static_weight)
        keep += [sums, stats, finite]
        a.wstats, a.wfinite = stats.data_ptr(), finite.data_ptr()
        if sums is not None:
            a.wsum = sums.data_ptr()
        if bias is not None:
            bst = _bias_stats(bias, site.static_weight)
            keep.append(bst)
            a.bstats = bst.data_ptr()
        a.counters = telemetry.counters(dev)[site.id].data_ptr()
        a.policy = POLICY[site.policy]
        a.c_sigma = site.c_sigma
        if site.policy == "raise":
            raise_flag = torch.zeros(1, dtype=torch.int32, device=dev)
            a.raise_flag = raise_flag.data_ptr()
        if plan is None and inject:
            injections = injection.pending(site.id, site.name, injection.GEMM_STAGES)
            if injections:
                plan = plan_injections(injections, wb * m, n, k, STRIDE if thread else 1, site.name)
        if plan:
            if len(plan) > MAX_INJ:
                raise ValueError(f"ftcompile: at most {MAX_INJ} injected elements per call")
            log = _fill_injections(a, plan, dev, log)
    if dbg is not None:
        a.dbg = dbg.data_ptr()
    a.cluster = cluster or GLOBAL_CLUSTER
    tkind = thread_kernel(m, n, k, wb, a.num_sms, kernel) if thread else None
    stream, thin = tkind == "stream", tkind == "thin"
    if thin and dbg is not None:
        raise ValueError("ftcompile: the thin kernel writes no check diagnostics (dbg)")
    a.pdl = int(PDL if pdl is None else pdl) if stream or thin or not thread else 0  # the ring kernel: plain
    if thin:
        a.w_static = int(site.static_weight)  # W may be read before the kernel's dependency wait
        a.protect = thin_protect(m, n, protect)  # (thin_config's own, once)
        a.mtile, a.split, a.stages = _thin_config(m, n, k, wb, a.num_sms, a.protect, split, stages, None,
                                                  dev.index or 0, mtile)
        chains = a.split
        if protect and not _thin_replica_checked(lib(), a.mtile, a.protect):  # (replicas need neither)
            rows = _thin_row_stats(w3, site.static_weight)
            # One buffer (one allocation per call): checksum rows [wb, 8, k] 16-bit, then the
            # statistics [wb, ceil(k / 64), 4] fp32 at the next 16-byte boundary (the x-side pass's output).
            sums_bytes = (wb * 8 * k * 2 + 15) // 16 * 16
            xs = torch.empty(sums_bytes + wb * math.ceil(k / K_TILE) * 16, dtype=torch.uint8, device=dev)
            keep += [rows, xs]
            a.wrow, a.xsum, a.xstat = rows.data_ptr(), xs.data_ptr(), xs.data_ptr() + sums_bytes
    elif stream:  # wm, nbox: the ring kernel's, unread here
        a.mtile = mtile or stream_mtile(m)
        auto_split, auto_stages, auto_warps = stream_config(m, n, k, wb, a.num_sms, a.mtile, device=dev.index or 0)
        a.split, a.stages, a.warps = split or auto_split, stages or auto_stages, warps or auto_warps
        if a.mtile not in (1, 2) or (a.mtile == 2 and a.warps != 8):
            raise ValueError(f"ftcompile: streaming kernel with {a.mtile} m16 blocks and {a.warps} warps "
                             "per CTA (1 block: 8 or 16 warps; 2 blocks: 8)")
        chains = a.warps * a.split
    elif thread:
        a.mtile, a.wm, sp_auto, a.nbox, a.stages = thread_config(m, n, k, wb, a.num_sms, nbox, stages,
                                                                 wm, mtile)
        a.split = max(1, min(split or sp_auto, math.ceil(k / (K_TILE * a.nbox))))
        chains = (NCW // a.wm) * a.split
    else:
        # a group's member boundaries on whole tiles (at least the narrowest: group_fallback_reason)
        allowed = tuple(b for b in GLOBAL_BNS if not group or all(c % b == 0 for c in bounds[:-1]))
        check, a.bn, a.split, a.split_from = global_plan(m, n, k, wb, a.num_sms, allowed, protect, check, bn, split,
                                                         a.cluster)
        a.local = int(protect and check == "tiles")
        a.groups = len(members) if group else 1
        if group:
            for j, (w, col) in enumerate(zip(members[1:], bounds[:-1])):
                a.gw[j], a.gcol[j] = w.data_ptr(), col
            keep.extend(members)
        if a.split > 1:  # (workspace for the split tiles only: CTA tiles from split_from's on)
            tiles = global_tiles(m, n, wb, a.bn, a.cluster) - a.split_from * a.cluster
            part, a.part_tiles, _ = _split_workspace(dev, a.stream, tiles, a.split)
            keep.append(part)
            a.part = part.data_ptr()
    if thread:
        ws = _workspace("thread", dev, a.stream)
    elif protect:
        ws, a.ws_rows, _ = _workspace("global", dev, a.stream, wb * m, wb * global_mtiles(m))
    else:
        ws = None
    if ws is not None:
        keep.append(ws)
        a.ws = ws.data_ptr()
    if protect and a.local:  # the tile-local check's rows of W (and the bias's tile sums)
        lsum, a.lscale_inv = _tile_checksums(enc_w, a.bn, site.static_weight)
        keep.append(lsum)
        a.lsum = lsum.data_ptr()
        if bias is not None:
            bt = _bias_tile_sums(bias, a.bn, site.static_weight)
            keep.append(bt)
            a.btile = bt.data_ptr()
    if protect and thin:  # the check sums a column of y over x's m rows
        a.e = kernel_e(x3, False, m, k, site.e_max_safety, chains)
    elif protect:  # the threshold's terms: a tile's columns with the tile-local check
        a.e = kernel_e(x3, thread, a.bn if a.local else n, k, site.e_max_safety, chains if thread else 1)
    fn = (lib().ft_gemm_thin if thin else lib().ft_gemm_stream if stream else
          lib().ft_gemm_thread if thread else lib().ft_gemm_global)
    _check(fn(ctypes.byref(a)))
    if log is not None and injections:
        _log_events(plan, log, site.name)
    if raise_flag is not None and bool(raise_flag.item()):
        raise telemetry.FaultDetected(site.name)
    if (record is not None and protect and site.static_weight and raise_flag is None and not plan
            and dbg is None and x3.data_ptr() == x.data_ptr() and x3.shape[-1] == k_in
            and not cudagraphs.capturing()):
        persistent = sum(_members(weight, bias_in), ())
        held = {t.untyped_storage()._cdata for t in persistent}  # never keep the weights alive
        keep = [t for t in keep if t is not None and t.untyped_storage()._cdata not in held
                and t is not x3 and t is not y and not (xs is not None and t is xs)]
        record.append((_launcher(a, fn, x.dtype, n, ldy, xs.numel() if xs is not None else 0, keep), persistent))
    return y.reshape(*x.shape[:-1], n) if ldy == n else y


def _launcher(a: _Args, fn, dtype: torch.dtype, n: int, ldy: int, xs_bytes: int, keep: list):
    """Replays the call whose argument block is ``a``: a new y (and, thin kernel protected, its
    x-side buffer) per call, the rest as it was (``keep`` holds what the block points at)."""
    template = _Args.from_buffer_copy(a)
    xstat_off = a.xstat - a.xsum if xs_bytes else 0

    def launch(x: torch.Tensor) -> torch.Tensor:
        shape = (*x.shape[:-1], n)  # y [wb, m, n] in x's leading shape: the same memory
        y = torch.empty(shape, dtype=dtype, device=x.device) if ldy == n else \
            layout.empty_rows(shape, ldy, dtype, x.device)
        b = _Args.from_buffer_copy(template)
        b.x, b.y = x.data_ptr(), y.data_ptr()
        if xs_bytes:
            xs = torch.empty(xs_bytes, dtype=torch.uint8, device=x.device)
            b.xsum = xs.data_ptr()
            b.xstat = b.xsum + xstat_off
        _check(fn(ctypes.byref(b)))
        return y
    launch.keep = keep
    launch.spec = fastpath.Spec(template, fn, _FIELDS, xs_bytes, xstat_off, n, ldy, keep)  # the C++ replay's
    return launch


_FIELDS = fastpath.field_offsets(_Args)


def _check(code: int) -> None:
    if code != 0:
        raise RuntimeError(f"ftcompile gemm kernel: {lib().ft_error_string(code).decode()} ({code})")


# ----------------------------------------------------------------------------- the ops' kernels
_plans = replay.Plans()


def _members(weight, bias) -> Tuple[tuple, tuple]:
    """(weights, biases) of a call as tuples: one weight or a group's, its bias, theirs or none."""
    members = tuple(weight) if isinstance(weight, (tuple, list)) else (weight,)
    biases = tuple(bias) if isinstance(bias, (tuple, list)) else (() if bias is None else (bias,))
    return members, biases


def _plan_key(scheme: str, x, members: tuple, biases: tuple, site_id: int, ldy) -> tuple:
    """A call's signature (ops/replay.py): with equal keys (and unchanged weights) run() does the
    same host work and fills the same argument block, but for x's and y's addresses."""
    return (scheme, site_id, ldy, x.device, cuda.raw_stream(x.device), replay.layout_key(x),
            tuple((w.data_ptr(), w.shape, w.stride(), w.dtype) for w in members),
            tuple((b.data_ptr(), b.shape, b.stride(), b.dtype) for b in biases),
            THREAD_KERNEL, GLOBAL_CHECK, PDL, GLOBAL_CLUSTER)


def _kernel_with_plan(scheme: str, post=None):
    """The op's kernel: run(), leaving a launch plan under the call's key where it can."""
    def kernel(x, weight, bias, site, ldy=None):
        group = isinstance(weight, (tuple, list))
        w = tuple(weight) if group else weight
        b = (tuple(bias) if bias else None) if group else bias
        rec = []
        y = run(scheme, x, w, b, site, ldy=None if post else ldy, record=rec)
        if rec:
            launch, persistent = rec[0]
            if post is not None and ldy is not None:  # (post(y, None) is y)
                launch = functools.partial(_post_launch, launch, post, ldy)
            _plans.put(_plan_key(scheme, x, *_members(weight, bias), site.id, ldy), launch, persistent)
            fastpath.offer(launch, persistent)
        return post(y, ldy) if post is not None else y
    return kernel


def _post_launch(launch, post, ldy, x):
    return post(launch(x), ldy)


def _replay(scheme: str):
    def replay_call(x, weight, bias, site_id, ldy=None):
        if not x.is_cuda or not replay.replayable():
            return None
        members, biases = _members(weight, bias)
        launch = _plans.get(_plan_key(scheme, x, members, biases, site_id, ldy), members + biases)
        if launch is None:
            return None
        fastpath.offer(launch, members + biases)  # (for the C++ call running this body, if any)
        return launch(x)
    return replay_call


_linear_global = _kernel_with_plan("linear_global")
_linear_thread = _kernel_with_plan("linear_thread", post=layout.with_row_stride)  # contiguous y
_linear_group = _kernel_with_plan("linear_global")  # weights and biases as lists


def _group_supports(x, weights, biases=(), static_weight=True):
    return group_fallback_reason(x, weights, biases, static_weight) is None


fastpath.watch_knobs(__name__, ("THREAD_KERNEL", "GLOBAL_CHECK", "PDL", "GLOBAL_CLUSTER"))


# ----------------------------------------------------------------------------- registration
if torch.cuda.is_available():
    if cuda.is_sm90(torch.device("cuda", torch.cuda.current_device())):
        lib()  # build now: a failure here is reported by ftcompile.ops.kernels and the reference runs
        fastpath.module()  # the twins' C++ replay of launch plans (only the kernels make plans)
    cuda.register("linear_global", _supports("linear_global"), _linear_global, _replay("linear_global"))
    cuda.register("linear_thread", _supports("linear_thread"), _linear_thread, _replay("linear_thread"))
    cuda.register("linear_group", _group_supports, _linear_group, _replay("linear_global"))

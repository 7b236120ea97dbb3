"""CUDA kernels of ``ftcompile::attention``: EFTA inside one flash-attention kernel (csrc/attention),
on Hopper's wgmma + TMA (efta_sm90.cuh; the default where TMA can describe q, k, v) or on mma.sync
(efta_kernel.cuh; the fallback). Both carry the same protection code. Calls with at most
DECODE_MAX_ROWS query rows per KV head (decode steps) run a split-KV kernel instead (efta_decode.cuh:
its splits on tensor cores, or on the FMA pipes where FTCOMPILE_DECODE_IMPL=fma asks), whose
protection has the same stages rebuilt for its layout.

``supports(q, k, v, attn_mask, scale, enable_gqa)`` says whether the kernel takes a call (sm_90 GPU,
fp16/bf16, head dims up to 128 (64 and 128 natively, smaller ones zero-padded to the next:
``kernel_head_dim``), matching batch dims, a mask that broadcasts, a positive scale, GQA asked for);
everything else runs the reference (ftcompile.abft.efta) on the GPU: fp32 inputs (the reference is
fp32 throughout), head dims past 128 (no kernel instantiated), other architectures (built for sm_90a
only), and the odd cases, where the reference raises the clear error or computes them.
``kernel(...)`` is registered for the op.

The library is built lazily on first use with torch.utils.cpp_extension (ninja, cached in
TORCH_EXTENSIONS_DIR) and driven through a C ABI (ctypes), so the .cu files need only CUDA headers;
``FTCOMPILE_ATTN_LIB`` points at a prebuilt library instead (benchmarks/attention_ab.py).

Semantics follow the reference: same tiles (64 keys), same stages, same telemetry fields; fault
injection resolves tile and index with the reference's own planner and generator order, so CPU and
GPU corrupt the same element. Differences, by design (see benchmarks/NOTES_attention.md):
  * the GEMM-I/EXP checksum groups are the 16 scores one lane holds per row and tile (keys
    8j+2g, 8j+2g+1); an alarm is confirmed by recomputing the warp's tile, so a fault is counted
    only if the data changed, and the recomputed tile is the correction. Two faults in one group are
    therefore corrected (counted once), not "uncorrectable".
  * the final GEMM-II check covers a whole output row; a failing row is corrected as the reference
    does, by recomputation and comparison (the CTA's block is recomputed; compared on the stored
    16-bit output, so a fault below output rounding counts as none).
  * a row sum that disagrees with the MMA-path row sum (the median of its three copies) or leaves
    its SNVR range is corrected by recomputing the CTA's block and storing the row from it (the
    reference recomputes the row); the 16-bit P rounding of the MMA path limits the agreement test
    to 2^-8 (bf16) / 2^-10 (fp16) relative.
  * the decode kernel checks GEMM-I with a checksum over its rows (q^c = sum of the CTA's query rows)
    per key, the PV products with whole-row checksums, and l against the sum of the P the products
    read (bit for bit in the FMA split kernel, to 2^-12 in the tensor-core one, whose P are 16-bit);
    its final checks run per split, before the combine kernel merges the splits under a check of
    its own.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import struct
import threading
import warnings
from typing import Dict, List, Optional, Tuple

import torch

from .. import config, cudagraphs, telemetry
from ..abft import checksum, efta, injection
from . import cuda, fastpath, layout, replay

HEAD_DIMS = (64, 128)  # the kernels' head dims; smaller ones run zero-padded (kernel_head_dim)
BLOCK_N = efta.BC  # keys per tile: the kernel's tiles are the reference's tiles
ALARM_FIELDS = ("tile_alarms", "tile_faults", "final_alarms", "rowsum_alarms")
# ints per entry of the mask's tile map (kMapFields, csrc/attention/efta_common.cuh)
MAP_FIELDS = 4
DEBUG_FIELDS = ("unified_ratio", "masked_ratio", "final_ratio", "rowsum_ratio")
POLICIES = {p: i for i, p in enumerate(config.POLICIES)}  # csrc/common/codes.cuh
STAGE_IDS = {s: i for i, s in enumerate(injection.ATTENTION_STAGES)}
MAX_INJECTIONS = 16
# Reference order of injection points within a tile (efta.attention): score, rowmax, exp, rowsum,
# p_mma, rowsum_mma, rescale (tiles >= 1), pv.
_REF_STAGE_ORDER = ("score", "rowmax", "exp", "rowsum", "p_mma", "rowsum_mma", "rescale", "pv")

# Threshold constants (NOTES_attention.md, "Thresholds"). A false alarm of the per-tile checks costs
# time only (the tile, or in the wgmma kernel its block, is recomputed and the tile compared), so
# C_GEMM is a worst-case bound, not a tight one.
C_GEMM = 2.0 ** -16  # |sum S - S^c| <= C_GEMM * ||q|| * sum_k ||k|| (hi/lo checksum + fp32 MMA sums)
TOL_AGREE = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -10}  # l vs sum of 16-bit P
REPR_OUT = {torch.bfloat16: 2.0 ** -22, torch.float16: 2.0 ** -19}  # V checksum representation
# Which kernel runs: "wgmma" (Hopper TMA + wgmma, csrc/attention/efta_sm90.cuh), "mma" (mma.sync,
# efta_kernel.cuh), "decode" (split-KV for few query rows, efta_decode.cuh), or "auto": decode where
# it measured faster than the tile kernels (decode_preferred), else wgmma wherever TMA can describe
# q, k, v (16-byte aligned strides), else mma. All carry the same protection stages;
# NOTES_attention.md compares them.
KERNEL = os.environ.get("FTCOMPILE_ATTN_KERNEL", "auto")
_VARIANTS = {"auto": 0, "mma": 1, "wgmma": 2, "decode": 3}
_KERNEL_NAMES = {1: "mma", 2: "wgmma", 3: "decode"}  # the variant the launcher ran (Args.variant on return)
DECODE_MAX_ROWS = 8  # query rows per KV head the decode kernel holds in one CTA (run as 2, 4 or 8)
# Split CTAs per SM the decode kernel plans on (the tensor-core kernel's launch bounds and ~73 KB of
# shared memory at d=128 give 3; the FMA kernel fits 3 at 2 and 4 rows): decode_plan.
DECODE_CTAS_PER_SM = int(os.environ.get("FTCOMPILE_DECODE_CTAS_PER_SM", "3"))
# The decode kernel's split kernel: "tc" (tensor cores), "fma" (fp32 FMAs), or "auto" (decode_impl).
DECODE_IMPL = os.environ.get("FTCOMPILE_DECODE_IMPL", "auto")
_DECODE_IMPLS = {"tc": 0, "fma": 1}
# m16 tiles per warp of the mma kernel at head dim 64 (measured: NOTES_attention.md); d=128 uses 1.
M_TILES_D64 = int(os.environ.get("FTCOMPILE_ATTN_MTILES", "2"))
# fp16 checksum scaling (exact powers of two) so that sums of 16 keys / 128 columns cannot overflow.
KC_UNSCALE = {torch.bfloat16: 1.0, torch.float16: 16.0}
VC1_UNSCALE = {torch.bfloat16: 1.0, torch.float16: 128.0}

_I64 = ("q k v o q_sb q_sh q_ss k_sb k_sh k_ss v_sb v_sh v_ss o_sb o_sh o_ss mask m_sb m_sh m_sq m_sk "
        "mask_map mc_sb mc_sh mc_sq mask_bool "
        "B Hq Hk Sq Sk D causal dtype protect n_tiles mtiles variant kc kn vc policy counters alarms dbg nf_token "
        "inj n_inj inj_log stream dec_rows dec_splits dec_tps dec_visit dec_impl").split()
_F64 = "scale kc_unscale vc1_unscale c_gemm e_out tol_agree".split()


class _HostArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in _I64] + [(n, ctypes.c_double) for n in _F64]


_INJ_REC_BYTES = 48
_lock = threading.Lock()
_last_kernel: Optional[str] = None
_device_buffers: Dict[torch.device, Dict[str, torch.Tensor]] = {}
_debug = False


def build(name: str, flags=(), root=None) -> str:
    """Compile the attention kernels as library `name` (extra nvcc `flags`; `root`: another source
    tree, see cuda.build_library); returns its path. Hidden visibility: each build's template
    instantiations stay its own (two builds in one process, e.g. a measurement build or an A/B
    probe's, must not bind to each other's kernels)."""
    return cuda.build_library("attention", name, root=root,
                              extra_cuda_cflags=[*flags, "-Xcompiler", "-fvisibility=hidden"],
                              extra_cflags=["-fvisibility=hidden"],
                              verbose=os.environ.get("FTCOMPILE_VERBOSE_BUILD") == "1")


@functools.lru_cache(maxsize=None)
def library(ablate: int = 0, debug: bool = False) -> ctypes.CDLL:
    """Build (once per process, cached on disk) and load the kernels; raises where impossible.
    ``ablate`` > 0: a measurement build with protection steps removed (EFTA_ABLATE, see the kernel).
    ``debug``: the diagnostics build (set_debug), which records each check's largest ratio."""
    if not torch.cuda.is_available():
        raise RuntimeError("ftcompile attention kernel: no CUDA device")
    name = "ftcompile_efta_attention" + (f"_ablate{ablate}" if ablate else "") + ("_debug" if debug else "")
    path = (not ablate and not debug and os.environ.get("FTCOMPILE_ATTN_LIB")) or build(
        name, [f"-DEFTA_ABLATE={int(ablate)}", f"-DEFTA_DBG={int(debug)}"])
    lib = ctypes.CDLL(path)
    lib.efta_attention_forward.argtypes = [ctypes.POINTER(_HostArgs)]
    lib.efta_attention_forward.restype = ctypes.c_int
    lib.efta_attention_prepass.argtypes = [ctypes.POINTER(_HostArgs)]
    lib.efta_attention_prepass.restype = ctypes.c_int
    lib.efta_abi_version.restype = ctypes.c_int
    expect = len(_HostArgs._fields_) * 1000 + _INJ_REC_BYTES
    if lib.efta_abi_version() != expect:
        raise RuntimeError(f"ftcompile attention kernel: ABI {lib.efta_abi_version()} != {expect}")
    return lib


@functools.lru_cache(maxsize=None)
def _library_ok() -> bool:
    try:
        library()
        return True
    except Exception as exc:  # a build failure must not break the model: say it once, use the reference
        warnings.warn(f"ftcompile: attention kernel unavailable ({exc}); using the reference op")
        return False


def fallback_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                    scale: Optional[float] = None, enable_gqa: bool = True) -> Optional[str]:
    """None where the kernel takes the call; else why the reference runs instead (and raises the
    clear error, or computes the odd case)."""
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return "not on a CUDA device"
    why = call_reason(q, k, v, attn_mask, scale, enable_gqa)
    if why is not None:
        return why
    if attn_mask is not None and attn_mask.device != q.device:
        return "attn_mask on another device"
    if not cuda.is_sm90(_dev(q)):
        return "not an sm_90 device (the kernels are built for sm_90a)"
    if not _library_ok():
        return "kernel library failed to build"
    return None


def call_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                scale: Optional[float] = None, enable_gqa: bool = True) -> Optional[str]:
    """fallback_reason's checks of dtypes, shapes and arguments alone (no device, no data): what
    ``explain`` can say from a graph's fake tensors."""
    if q.dtype not in (torch.float16, torch.bfloat16):
        return f"dtype {q.dtype}: the kernel is fp16/bf16 (the reference computes fp32 exactly)"
    if not (q.dtype == k.dtype == v.dtype):
        return "q, k, v dtypes differ"
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        return "q, k, v ranks differ or are below 2"
    d = q.shape[-1]
    if k.shape[-1] != d or kernel_head_dim(d, v.shape[-1]) is None:
        return (f"head dims q{d} k{k.shape[-1]} v{v.shape[-1]}: the kernels take q = k head dims and v head "
                f"dims up to {HEAD_DIMS[-1]}")
    if k.shape[-2] != v.shape[-2]:
        return "k and v sequence lengths differ"
    if q.dim() >= 3:
        if q.shape[:-3] != k.shape[:-3] or k.shape[:-2] != v.shape[:-2]:
            return "batch dims differ between q, k, v (no broadcasting in the kernel)"
        if q.shape[-3] % k.shape[-3]:
            return "query heads not a multiple of key/value heads"
        if q.shape[-3] != k.shape[-3] and not enable_gqa:
            return "query and key/value heads differ without enable_gqa"
    if scale is not None and not (math.isfinite(float(scale)) and float(scale) > 0):
        return f"scale {scale}: the kernel takes a positive finite scale"
    if attn_mask is not None:
        if not (attn_mask.dtype == torch.bool or attn_mask.is_floating_point()):
            return "attn_mask neither bool nor floating point"
        try:
            attn_mask.expand(*q.shape[:-1], k.shape[-2])
        except RuntimeError:
            return "attn_mask does not broadcast to the scores"
    if q.numel() == 0 or k.numel() == 0:
        return "empty input"
    return None


def kernel_head_dim(d: int, dv: int) -> Optional[int]:
    """The head dim of the kernel that runs q, k (head dim d) and v (dv): the smallest of HEAD_DIMS
    that holds both (the call's heads zero-padded to it where it is larger: zero columns of q and k
    add nothing to a score, those of v give output columns that are dropped), None past the last."""
    return next((h for h in HEAD_DIMS if max(d, dv) <= h), None) if min(d, dv) >= 1 else None


def padding_note(d: int, dv: int) -> Optional[str]:
    """What ``explain`` says of a call whose heads the kernel runs zero-padded (None: not padded)."""
    kd = kernel_head_dim(d, dv)
    if kd is None or d == dv == kd:
        return None
    return (f"head dim {d if d == dv else f'q{d} v{dv}'} runs the d={kd} kernel on zero-padded heads "
            f"({kd / max(d, dv) - 1:.0%} more kernel work, and a copy of q, k, v and the output)")


def decode_shape(q: torch.Tensor, k: torch.Tensor) -> Tuple[int, int, int, int]:
    """(batch, query heads, KV heads, query rows) of a call, its batch dims flattened as the kernels
    see them: what decode_preferred decides on (Sq x Hq / Hk query rows per KV head)."""
    hq, hk = (q.shape[-3], k.shape[-3]) if q.dim() >= 3 else (1, 1)
    return math.prod(q.shape[:-3]), hq, hk, q.shape[-2]


def decode_preferred(hq: int, hk: int, sq: int) -> bool:
    """Whether "auto" runs the decode kernel rather than a tile kernel: wherever a KV head's group has
    at most DECODE_MAX_ROWS query rows (Sq x Hq / Hk). Run 55e (H200, NOTES_attention.md session 49)
    timed both on every decode shape: the tensor-core decode kernel costs about the same for 1 to 8
    rows and ran 1.06-3.4x faster than the tile kernels at 4-8 rows from 4K keys, 1.1-7x at 1-2
    rows; slower only at 1K keys with 4-8 rows (32/8 x 128, 2 query rows, batch 1: 29.6 against 21.0
    us; 12 x 64, 4 rows, batch 8: 25.6 against 23.8), which one rule leaves to it."""
    return sq * (hq // hk) <= DECODE_MAX_ROWS


def decode_impl() -> str:
    """The decode kernel's split kernel (DECODE_IMPL): "auto" is the tensor-core one, level with the
    FMA one or faster on every decode shape since run 57c (H200, NOTES_attention.md session 51: 12 x
    64 heads, 2 rows per CTA, where the FMA one had been 0.4-0.9 us faster, now 0.2 us slower to 1.1
    us faster, and 20-25 % slower from 4K keys on at batch 8); "fma" runs the FMA one."""
    if DECODE_IMPL in _DECODE_IMPLS:
        return DECODE_IMPL
    if DECODE_IMPL != "auto":
        raise ValueError(f"FTCOMPILE_DECODE_IMPL={DECODE_IMPL!r}: expected 'auto', 'tc' or 'fma'")
    return "tc"


@functools.lru_cache(maxsize=4096)  # (a decode step's key count, hence its plan, moves every call)
def decode_plan(batch_heads: int, rows: int, n_visit: int, sms: int) -> Tuple[int, int, int, int]:
    """(rows per CTA, row blocks, splits, tiles per split) of a decode call: ``batch_heads`` = B x Hk,
    ``rows`` per KV head, ``n_visit`` key tiles. The splits minimise waves x (tiles per split + 1):
    DECODE_CTAS_PER_SM per SM run at once, a CTA's time is its tiles plus about one tile of prologue,
    end-of-split checks and its share of the combine (a second wave of a few CTAs costs a whole
    CTA's time: 1.13 waves ran as slow as 2, NOTES_attention.md session 49)."""
    per_cta = 2 if rows <= 2 else 4 if rows <= 4 else 8
    row_blocks = -(-rows // per_cta)
    heads, slots = batch_heads * row_blocks, DECODE_CTAS_PER_SM * sms

    def cost(splits: int) -> Tuple[int, int]:
        return -(-heads * splits // slots) * (-(-n_visit // splits) + 1), splits

    # Waves only grow with the splits, so for each run length the fewest splits giving it win; those
    # are ceil(n / t) for runs t <= sqrt(n), and below sqrt(n) + 2 splits anyway: ~2 sqrt(n)
    # candidates instead of n (the host paid 3.7 ms per call at 16K tiles).
    r = math.isqrt(n_visit) + 1
    candidates = {-(-n_visit // t) for t in range(1, r + 1)} | set(range(1, min(r + 1, n_visit) + 1))
    tps = -(-n_visit // min(candidates, key=cost))
    return per_cta, row_blocks, -(-n_visit // tps), tps


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def supports(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
             scale: Optional[float] = None, enable_gqa: bool = True) -> bool:
    return fallback_reason(q, k, v, attn_mask, scale, enable_gqa) is None


def _buffers(device: torch.device) -> Dict[str, torch.Tensor]:
    with _lock:
        buf = _device_buffers.get(device)
        if buf is None:
            # nf_token: [the call whose non-finite inputs were counted, the call sequence]: the
            # prepass advances the sequence on the device, so CUDA-graph replays count too.
            buf, _ = cudagraphs.persistent(device, "the attention kernel's buffers", lambda: {
                "alarms": torch.zeros(len(ALARM_FIELDS), dtype=torch.int64, device=device),
                "debug": torch.zeros(len(DEBUG_FIELDS), dtype=torch.float32, device=device),
                # [2]: the decode kernel's non-finite flag (its combine kernel counts and clears it)
                "nf_token": torch.zeros(3, dtype=torch.int32, device=device)})
            _device_buffers[device] = buf
    return buf


def _dev(t: torch.Tensor) -> torch.device:
    return _norm(t.device)


def _norm(device) -> torch.device:
    device = torch.device(device)
    return torch.device("cuda", device.index if device.index is not None else torch.cuda.current_device())


def alarm_counts(device="cuda") -> Dict[str, int]:
    """Diagnostics since reset: tile checks that alarmed, counted per warp (each recomputed: by the
    whole warpgroup in the wgmma kernel at d=64, by the warp alone otherwise), of those the faults
    confirmed, and final/rowsum checks that alarmed."""
    buf = _buffers(_norm(device))["alarms"]
    return dict(zip(ALARM_FIELDS, (int(x) for x in buf.cpu())))


def set_debug(on: bool) -> None:
    """Record the largest residual/threshold ratio of each check (diagnostics: calls then run a
    build of the kernels of their own, compiled with the recording)."""
    global _debug
    _debug = bool(on)


def debug_ratios(device="cuda") -> Dict[str, float]:
    buf = _buffers(_norm(device))["debug"]
    return dict(zip(DEBUG_FIELDS, (float(x) for x in buf.cpu())))


def reset_diagnostics(device="cuda") -> None:
    buf = _buffers(_norm(device))
    buf["alarms"].zero_()
    buf["debug"].zero_()


def _as4d(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 2:
        return t[None, None]
    if t.dim() == 3:
        return t[None]
    if t.dim() == 4:
        return t
    return t.reshape(-1, *t.shape[-3:])


def _mask4(attn_mask: torch.Tensor, q: torch.Tensor, sk: int) -> torch.Tensor:
    """The mask as the kernel reads it: [B, H, Sq, Sk] strides over its data, bool as it is, any
    other dtype as fp32."""
    m = attn_mask if attn_mask.dtype == torch.bool else attn_mask.float()
    return _as4d(m.expand(*q.shape[:-1], sk))


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """Rows must start on 16 bytes (cp.async) with a contiguous head dim."""
    ok = t.stride(-1) == 1 and all(s % 8 == 0 for s in t.stride()[:-1]) and t.data_ptr() % 16 == 0
    return t if ok else t.contiguous()


def _float_bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


def resolve_injections(injections: List[injection.Injection], batch: Tuple[int, ...], sq: int,
                       sk: int, dv: int) -> List[Tuple[str, int, Tuple[int, ...], injection.Injection]]:
    """(stage, tile, index, injection) per corrupted element, in the reference's order and with
    its generator draws (efta._plan, then efta._inject's draw_index per tile and stage)."""
    n_tiles = math.ceil(sk / BLOCK_N)
    plan = efta._plan(injections, n_tiles)
    s = checksum.STRIDE
    lv8 = math.ceil(dv / 8) * 8
    out = []
    for t in range(n_tiles):
        width = math.ceil((min((t + 1) * BLOCK_N, sk) - t * BLOCK_N) / 8) * 8
        for stage in _REF_STAGE_ORDER:
            if stage == "rescale" and t == 0:
                continue
            for inj, g in plan.get((t, stage), []):
                shape = {"score": (*batch, sq, width), "exp": (*batch, sq, width), "p_mma": (*batch, sq, width),
                         "rowmax": (*batch, sq), "rowsum": (*batch, sq), "rowsum_mma": (*batch, sq),
                         "pv": (*batch, sq, lv8), "rescale": (*batch, sq, lv8)}[stage]
                index = inj.spec.index
                if index is None:
                    index = injection.draw_index(shape, g)
                elif stage in ("score", "exp", "p_mma"):
                    index = (*index[:-1], index[-1] - t * BLOCK_N)
                index = tuple(int(i) for i in index)
                if len(index) != len(shape):
                    raise IndexError(f"fault index {inj.spec.index} does not fit the {stage} tensor {shape}")
                index = tuple(i + n if i < 0 else i for i, n in zip(index, shape))
                if any(not 0 <= i < n for i, n in zip(index, shape)):
                    raise IndexError(f"fault index {inj.spec.index} outside the {stage} tensor {shape}")
                spread = s if stage in ("score", "exp", "p_mma", "pv", "rescale") else 1
                for c in range(inj.spec.count):
                    idx = list(index)
                    if c:
                        idx[-1] = (idx[-1] + c * spread) % shape[-1]
                    out.append((stage, t, tuple(idx), inj))
    return out


def _records(resolved, q_shape: Tuple[int, ...], device) -> torch.Tensor:
    """InjRec rows (12 int32 each) for the kernel; batch dims flattened to (b, h) as in _as4d."""
    nb = len(q_shape) - 2
    lead = q_shape[:-3] if len(q_shape) >= 3 else ()
    rows = []
    for stage, t, idx, inj in resolved:
        batch = idx[:nb]
        h = batch[-1] if nb >= 1 else 0
        b = 0
        for i, n in zip(batch[:-1], lead):
            b = b * n + i
        row = idx[nb]
        col = idx[nb + 1] if stage not in ("rowmax", "rowsum", "rowsum_mma") else 0
        spec = inj.spec
        if spec.bit is None:
            mode, bit, value = 0, 0, 10.0 if spec.value is None else float(spec.value)
        else:
            mode, bit, value = {"fp32": 1, "bf16": 2, "fp16": 3}[spec.fmt], spec.bit, 0.0
        rows.append([STAGE_IDS[stage], t, b, h, row, col, mode, bit, _float_bits(value), 0, 0, 0])
    return torch.tensor(rows, dtype=torch.int32).to(device)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
              is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False,
              site: Optional[telemetry.Site] = None, protect: bool = True,
              inj_rows: Optional[torch.Tensor] = None, prepass_only: bool = False,
              ablate: int = 0, m_tiles: Optional[int] = None, kernel: Optional[str] = None) -> torch.Tensor:
    """Run the kernel. ``protect=False``: the same kernel with every protection step compiled out
    (the baseline the overhead is measured against); it needs no site and touches no counters.
    ``inj_rows`` (benchmarks only): pre-resolved injection rows (see ``_records``), applied without
    logging events, so a run with a fault per call needs no host synchronisation.
    ``prepass_only`` (benchmarks only): launch just the checksum prepass (its share of the overhead).
    ``ablate`` (benchmarks only): run a measurement build with protection steps removed.
    ``m_tiles``: m16 tiles per warp of the mma kernel at d=64 (1 or 2; default M_TILES_D64).
    ``kernel``: "auto", "wgmma" or "mma" (default KERNEL); ``last_kernel()`` says which one ran."""
    reason = fallback_reason(q, k, v, attn_mask, scale, enable_gqa)
    if reason is not None:
        raise ValueError(f"ftcompile attention kernel: unsupported call ({reason})")
    return _launch(q, k, v, attn_mask, is_causal, scale, enable_gqa, site, protect, inj_rows, prepass_only,
                   ablate, m_tiles, kernel)


def _map_geometry(a: _HostArgs) -> Tuple[int, int, int]:
    """(entries, query blocks, heads) of the mask's tile map: one entry per 64 query rows along
    each query dimension the mask does not broadcast over (a [B, 1, 1, Sk] padding mask has B)."""
    nqb = -(-a.Sq // 64) if a.m_sq else 1
    hm = a.Hq if a.m_sh else 1
    return (a.B if a.m_sb else 1) * hm * nqb, nqb, hm


def _mask_map(a: _HostArgs, device: torch.device) -> torch.Tensor:
    """The buffer of the mask's tile map (csrc/attention/efta_mask_map.cu), zeroed, its pointers
    and strides set in ``a``."""
    blocks, nqb, hm = _map_geometry(a)
    buf = torch.zeros(blocks, MAP_FIELDS, dtype=torch.int32, device=device)
    a.mask_map = buf.data_ptr()
    a.mc_sb, a.mc_sh, a.mc_sq = hm * nqb if a.m_sb else 0, nqb if a.m_sh else 0, 1 if a.m_sq else 0
    return buf


def _launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
            is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False,
            site: Optional[telemetry.Site] = None, protect: bool = True,
            inj_rows: Optional[torch.Tensor] = None, prepass_only: bool = False,
            ablate: int = 0, m_tiles: Optional[int] = None, kernel: Optional[str] = None,
            heads_last: bool = False, record: Optional[list] = None) -> torch.Tensor:
    """attention() after its support check (the op's kernel: supports() checked the call).
    ``heads_last``: the output [B, H, S, Dv] in [B, S, H, Dv] memory order (the kernel stores
    through the output's strides). ``record``: a list that receives the call's launch plan where
    it can be replayed (ops/replay.py)."""
    if protect and site is None:
        raise ValueError("ftcompile attention kernel: a protected call needs a site")
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    sq, sk, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    kd = kernel_head_dim(d, dv)
    padded = kd != d or kd != dv
    if padded:  # (kernel_head_dim) the thresholds' e and the faults' indices keep d and dv
        q, k, v = (torch.nn.functional.pad(t, (0, kd - t.shape[-1])) for t in (q, k, v))

    mask4 = None if attn_mask is None else _mask4(attn_mask, q, sk)

    q4, k4, v4 = (_aligned(_as4d(t)) for t in (q, k, v))
    shape = (*q.shape[:-1], v.shape[-1])  # the kernel's output (padded: kd columns)
    if heads_last and not padded:
        out = layout.empty_heads_last(shape, q.dtype, q.device)
    else:
        out = torch.empty(shape, dtype=q.dtype, device=q.device)
    o4 = _as4d(out)
    B, Hq, Sq, D = q4.shape
    Hk = k4.shape[1]
    n_tiles = math.ceil(sk / BLOCK_N)
    device = _dev(q)

    a = _HostArgs()
    a.q, a.k, a.v, a.o = q4.data_ptr(), k4.data_ptr(), v4.data_ptr(), o4.data_ptr()
    a.q_sb, a.q_sh, a.q_ss = q4.stride(0), q4.stride(1), q4.stride(2)
    a.k_sb, a.k_sh, a.k_ss = k4.stride(0), k4.stride(1), k4.stride(2)
    a.v_sb, a.v_sh, a.v_ss = v4.stride(0), v4.stride(1), v4.stride(2)
    a.o_sb, a.o_sh, a.o_ss = o4.stride(0), o4.stride(1), o4.stride(2)
    a.B, a.Hq, a.Hk, a.Sq, a.Sk, a.D = B, Hq, Hk, Sq, sk, D
    a.causal, a.dtype, a.protect, a.n_tiles = int(bool(is_causal)), int(q.dtype == torch.float16), int(protect), n_tiles
    a.mtiles = M_TILES_D64 if m_tiles is None else int(m_tiles)
    choice = KERNEL if kernel is None else kernel
    if choice not in _VARIANTS:
        raise ValueError(f"ftcompile attention kernel: kernel {choice!r} is not one of {sorted(_VARIANTS)}")
    # (once per call: pending() counts the call against a spec's `calls`)
    injections = injection.pending(site.id, site.name, injection.ATTENTION_STAGES) if protect else []
    rows = Sq * (Hq // Hk)
    decode = choice == "decode" or (choice == "auto" and not prepass_only and not ablate and m_tiles is None
                                    and decode_preferred(Hq, Hk, Sq))
    if decode:
        if rows > DECODE_MAX_ROWS or prepass_only or ablate:
            raise ValueError(f"ftcompile attention kernel: the decode kernel takes at most {DECODE_MAX_ROWS} "
                             f"query rows per KV head ({rows} here) and no prepass or ablation")
        # Causal (top-left) rows see keys up to their own index: Sq <= 8 rows see the first tile only,
        # unless a fault is to be injected into a later one (the reference visits every tile).
        visit = n_tiles
        if is_causal and inj_rows is None and not injections:
            visit = min(n_tiles, math.ceil(Sq / BLOCK_N))
        a.dec_rows, _, a.dec_splits, a.dec_tps = decode_plan(B * Hk, rows, visit, _sm_count(device))
        a.dec_visit = visit
        a.dec_impl = _DECODE_IMPLS[decode_impl()]
    a.variant = 3 if decode else _VARIANTS[choice]
    mask_map = None
    if mask4 is not None:
        a.mask = mask4.data_ptr()
        a.m_sb, a.m_sh, a.m_sq, a.m_sk = mask4.stride()
        a.mask_bool = int(mask4.dtype == torch.bool)
        if not decode:  # (the decode kernel reads the mask itself: no tile map)
            mask_map = _mask_map(a, device)
    a.scale = scale
    a.stream = cuda.raw_stream(device)

    keep = [q4, k4, v4, o4, mask4, mask_map]  # alive until the launch is queued
    resolved, inj_log = [], None
    before = None
    if protect or decode:  # (the decode kernel's workspace takes the checksums' place)
        keep.append(_checksum_buffers(a, q.dtype, device))
    if protect:
        bufs = _buffers(device)
        row = telemetry.counters(device)[site.id]
        a.kc_unscale, a.vc1_unscale = KC_UNSCALE[q.dtype], VC1_UNSCALE[q.dtype]
        e = efta.attention_e(q, sk, d, site.e_max_safety)
        a.c_gemm = C_GEMM
        a.e_out = 2.0 * e * (site.c_sigma / 2.5) + (n_tiles + 16) * 2.0 ** -24 + REPR_OUT[q.dtype]
        a.tol_agree = TOL_AGREE[q.dtype]
        a.policy = POLICIES[site.policy]
        a.counters = row.data_ptr()
        a.alarms = bufs["alarms"].data_ptr()
        a.dbg = bufs["debug"].data_ptr() if _debug else 0
        a.nf_token = bufs["nf_token"].data_ptr()
        if inj_rows is not None:
            scratch = torch.empty(inj_rows.shape[0], 2, dtype=torch.float32, device=device)
            keep += [inj_rows, scratch]
            a.inj, a.n_inj, a.inj_log = inj_rows.data_ptr(), inj_rows.shape[0], scratch.data_ptr()
        elif injections:
            batch = tuple(q.shape[:-2])
            resolved = resolve_injections(injections, batch, sq, sk, dv)
            if len(resolved) > MAX_INJECTIONS:
                raise ValueError(f"ftcompile attention kernel: at most {MAX_INJECTIONS} injected faults per call")
            if resolved:
                recs = _records(resolved, tuple(q.shape), device)
                inj_log = torch.full((len(resolved), 2), float("nan"), dtype=torch.float32, device=device)
                keep += [recs, inj_log]
                a.inj, a.n_inj, a.inj_log = recs.data_ptr(), len(resolved), inj_log.data_ptr()
        if site.policy == "raise":
            before = row[telemetry.DETECTED].clone()

    with torch.cuda.device(device):
        lib = library(ablate, _debug)
        rc = lib.efta_attention_prepass(ctypes.byref(a)) if prepass_only else lib.efta_attention_forward(ctypes.byref(a))
    _check(rc)
    global _last_kernel
    _last_kernel = _KERNEL_NAMES.get(a.variant)
    del keep
    if inj_log is not None:  # events need the values: the one place this op synchronises
        log = inj_log.cpu().tolist()
        for (stage, t, idx, inj), (b4, a4) in zip(resolved, log):
            inj.events.append(injection.Event(site.name, stage, idx, float(b4), float(a4)))
    if before is not None and bool((telemetry.counters(device)[site.id][telemetry.DETECTED] > before).item()):
        raise telemetry.FaultDetected(site.name, "a fault in attention")
    if (record is not None and protect and site.policy != "raise" and inj_rows is None and not resolved
            and not prepass_only and not ablate and m_tiles is None and kernel is None and not padded
            and all(t4.data_ptr() == t.data_ptr() for t4, t in ((q4, q), (k4, k), (v4, v)))
            and device.index == torch.cuda.current_device() and not cudagraphs.capturing()):
        record.append(_launcher(a, lib.efta_attention_forward, shape, q.dtype, heads_last))
    if padded:  # the call's columns, in the layout asked for
        real = (*shape[:-1], dv)
        kept = layout.empty_heads_last(real, q.dtype, q.device) if heads_last else torch.empty(
            real, dtype=q.dtype, device=q.device)
        return kept.copy_(out[..., :dv])
    return out


def _check(rc: int) -> None:
    if rc != 0:
        what = {200001: "bad arguments", 200002: "TMA cannot describe q, k, v for the wgmma kernel"}
        raise RuntimeError(f"ftcompile attention kernel failed (code {rc}: {what.get(rc, 'CUDA error')})")


def _checksum_layout(a: _HostArgs, dtype: torch.dtype) -> Tuple[int, int, int]:
    """(bytes in all, the key norms' offset, V^c's offset) of the prepass's one buffer: K^c
    [tiles, 8, D], key norms [tiles, 4] fp32, V^c [tiles, 64, 8], each part 256-byte aligned. The
    decode kernel's workspace instead (variant 3): per split CTA its partial result, O [R, D] and
    4 R row values in fp32 (efta_decode.cuh part_floats)."""
    if a.variant == 3:
        row_blocks = -(-a.Sq * (a.Hq // a.Hk) // a.dec_rows)
        return a.B * a.Hk * row_blocks * a.dec_splits * (a.dec_rows * a.D + 4 * a.dec_rows) * 4, 0, 0
    tiles = a.B * a.Hk * a.n_tiles
    up = lambda nbytes: -(-nbytes // 256) * 256
    kc_bytes, kn_bytes = up(tiles * 8 * a.D * dtype.itemsize), up(tiles * 4 * 4)
    return kc_bytes + kn_bytes + tiles * BLOCK_N * 8 * dtype.itemsize, kc_bytes, kc_bytes + kn_bytes


def _checksum_buffers(a: _HostArgs, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """One allocation for the prepass's K^c, key norms and V^c of this call (as three allocations
    were: _checksum_layout); sets a.kc, a.kn, a.vc."""
    total, kn_at, vc_at = _checksum_layout(a, dtype)
    buf = torch.empty(total, dtype=torch.uint8, device=device)
    a.kc = buf.data_ptr()
    a.kn = a.kc + kn_at
    a.vc = a.kc + vc_at
    return buf


def _launcher(a: _HostArgs, fn, shape: Tuple[int, ...], dtype: torch.dtype, heads_last: bool):
    """Replays the call whose argument block is ``a``: new output and checksum buffers per call,
    the mask (if any) converted and mapped per call, the rest as it was."""
    template = _HostArgs.from_buffer_copy(a)
    kernel_name = _KERNEL_NAMES.get(a.variant)
    decode = a.variant == 3

    def launch(q, k, v, attn_mask):
        global _last_kernel
        device = q.device
        out = (layout.empty_heads_last(shape, dtype, device) if heads_last
               else torch.empty(shape, dtype=dtype, device=device))
        b = _HostArgs.from_buffer_copy(template)
        b.q, b.k, b.v, b.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
        keep = [_checksum_buffers(b, dtype, device)]
        if attn_mask is not None:  # as _launch: the geometry is the plan's, the data the call's
            mask4 = _mask4(attn_mask, q, k.shape[-2])
            b.mask = mask4.data_ptr()
            keep += [mask4, _mask_map(b, device) if not decode else None]
        _check(fn(ctypes.byref(b)))
        _last_kernel = kernel_name
        return out
    masked = bool(template.mask)  # (decode: no tile map, the C++ replay passes an empty one, unread)
    launch.spec = fastpath.AttentionSpec(  # what the C++ replay needs
        template, fn, [getattr(_HostArgs, f).offset for f in ("q", "k", "v", "o", "kc", "kn", "vc")]
        + ([_HostArgs.mask.offset, _HostArgs.mask_map.offset] if masked else [-1, -1]),
        *_checksum_layout(template, dtype), shape[-1], heads_last, masked and not template.mask_bool,
        _map_geometry(template)[0] * MAP_FIELDS if masked and not decode else 0)
    return launch


def last_kernel() -> Optional[str]:
    """"wgmma" or "mma": the kernel the last call of ``attention`` ran (tests, benchmarks)."""
    return _last_kernel


def kernel(q, k, v, attn_mask, is_causal, scale, enable_gqa, site: telemetry.Site,
           heads_last: bool = False) -> torch.Tensor:
    """The op's CUDA implementation (registered with ftcompile.ops.cuda; supports() said yes); it
    leaves a launch plan under the call's key where it can (ops/replay.py)."""
    rec = []
    out = _launch(q, k, v, attn_mask, is_causal, scale, enable_gqa, site, protect=True,
                  heads_last=heads_last, record=rec)
    if rec:
        _plans.put(_plan_key(q, k, v, attn_mask, is_causal, scale, enable_gqa, site.id, heads_last), rec[0])
        fastpath.offer_attention(rec[0])
    return out


_plans = replay.Plans()


def _plan_key(q, k, v, attn_mask, is_causal, scale, enable_gqa, site_id: int, heads_last: bool) -> tuple:
    """A call's signature: with equal keys _launch fills the same argument block but for the
    tensors' addresses (the current device too: _launch runs under q's)."""
    return (site_id, q.device, torch.cuda.current_device(), cuda.raw_stream(q.device),
            replay.layout_key(q), replay.layout_key(k), replay.layout_key(v), replay.layout_key(attn_mask),
            bool(is_causal), scale, bool(enable_gqa), bool(heads_last), KERNEL, DECODE_IMPL,
            M_TILES_D64, _debug)


def _replay(q, k, v, attn_mask, is_causal, scale, enable_gqa, site_id, heads_last=False):
    if not q.is_cuda or not replay.replayable():
        return None
    launch = _plans.get(_plan_key(q, k, v, attn_mask, is_causal, scale, enable_gqa, site_id, heads_last))
    if launch is None:
        return None
    fastpath.offer_attention(launch)  # (for the C++ call running this body, if any)
    return launch(q, k, v, attn_mask)


fastpath.watch_knobs(__name__, ("KERNEL", "DECODE_IMPL", "M_TILES_D64", "_debug"))
cuda.register("attention", supports, kernel, _replay)

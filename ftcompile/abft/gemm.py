"""Reference fault-tolerant GEMMs for y = x W^T (+ b): the algorithms the CUDA kernels implement.

global  offline checksums of W (plain and position-weighted sums over its N rows, computed once
        per weight and cached) give the expected row sums of y from one extra GEMV per row;
        the output summation is compared on fp32 accumulators (bias included) against a
        V-ABFT threshold per row. With ``tile_width`` (the CUDA kernel's tile-local check) the
        same per row and tile_width-wide column tile: checksums per N-tile, a threshold of
        tile_width terms.
thread  one-sided thread-level ABFT: the checksums of W are built online, per 64-column tile, as
        strided tensor checksums (elements n, n+8, ..., n+56 of the tile: the registers one thread
        holds in the MMA layout), so each (row, tile, lane) group of 8 outputs is checked.

Both locate a single fault per group with the weighted checksum and correct it by recomputing the
located element (exact, unlike subtracting the residual). The reference then confirms the
single-fault model by recomputing the group: it reports "corrected" only if exactly one element
was off by more than rounding; otherwise the group is uncorrectable (more than one fault, one
possibly below the row threshold) and, under policy "recompute", recomputed whole.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .. import cudagraphs
from . import checksum, injection
from .thresholds import BStats, b_stats, device_class, e_max, extrema_variance, vabft_from_stats

K_TILE = 64  # k-step of the accumulator (what FaultSpec.k_step counts)
N_TILE = 64  # output tile width of the thread-level scheme


@dataclass
class Outcome:
    """Per-call verification result, as 0-d tensors (no host sync needed to record them)."""
    detected: torch.Tensor
    corrected: torch.Tensor
    uncorrectable: torch.Tensor
    nonfinite_inputs: torch.Tensor


@dataclass
class WeightChecksums:
    sums: torch.Tensor  # [WB, 2, K] fp32: sum_n W[n], sum_n (n+1) W[n]
    stats: BStats  # of B = W^T, per weight batch
    finite: torch.Tensor  # 0-d bool: W holds no NaN/Inf


# storage id -> (its weak ref, a weak ref to the parameter that owns it): registered at compile
# time, so an in-place change of the parameter is seen through any tensor over its storage.
_owners: Dict[int, tuple] = {}


def register_owner(param: torch.Tensor) -> None:
    """Make ``param``'s version counter the one that tells an in-place change of its storage.
    Inductor hands ops tensors rebuilt over a parameter's storage (``reinterpret_tensor``), whose
    own version counters start at 0 and never see the parameter change."""
    storage = param.untyped_storage()
    for k in [k for k, (ref, _) in _owners.items() if ref.expired()]:
        del _owners[k]
    _owners[storage._cdata] = (StorageWeakRef(storage), weakref.ref(param))


def owner(t: torch.Tensor, storage=None) -> torch.Tensor:
    """The registered parameter over ``t``'s storage (``t`` itself if none): whose version counter
    tells a change of ``t`` in place."""
    entry = _owners.get((storage if storage is not None else t.untyped_storage())._cdata)
    if entry is not None and not entry[0].expired():
        param = entry[1]()
        if param is not None:
            return param
    return t


def owner_version(t: torch.Tensor, storage=None) -> int:
    """The version of the registered parameter over ``t``'s storage (``t``'s own if none). An
    inference tensor (a model built under torch.inference_mode) has no version counter: it can
    change in place only inside inference mode, untracked, and is taken as unchanged (-1). Such a
    change leaves stale checksums, which the checks then report as faults: never a silent wrong
    output (docs/reliability.md)."""
    o = owner(t, storage)
    return -1 if o.is_inference() else o._version


class DerivedCache:
    """Data derived from a persistent tensor (a weight), recomputed when it changes in place.

    Keyed by the tensor's storage and the view's geometry, so a transposed view of a parameter
    made on every call still hits, and so does another tensor object over the same storage (in
    the warm-up of inductor's CUDA graphs the ops see such aliases, not the parameter); the
    version counter of the registered owner (:func:`register_owner`, else the tensor's own, which
    views share) tells a change in place. Only for tensors that outlive the call
    (parameters, buffers): a compiled graph's scratch buffer can be rewritten by a kernel without
    bumping ``_version``, so callers pass ``cache=False`` for weights that are not parameters.
    A tuple of tensors (a group of sibling weights, one GEMM) is keyed by all of them: a change
    of any member remakes the entry."""

    def __init__(self):
        self._entries: Dict[tuple, tuple] = {}
        self._captured: set = set()  # keys a CUDA-graph capture read: their values are never freed

    def get(self, t, make: Callable, cache: bool = True, host_sync: Optional[str] = None):
        """make(t), cached unless ``cache`` is False; ``t`` a tensor or a tuple of tensors.
        ``host_sync``: what make reads on the host, which a CUDA graph cannot do at every call
        (refused at capture where nothing is cached)."""
        members = t if isinstance(t, tuple) else (t,)
        on_gpu = members[0].is_cuda
        if not cache:
            if host_sync and on_gpu and cudagraphs.capturing():
                raise cudagraphs.GraphCaptureError(
                    f"ftcompile: a weight computed in the graph needs {host_sync} on the host at every "
                    f"call; this cannot run inside a CUDA graph - compile without CUDA graphs")
            return make(t)
        storages = [m.untyped_storage() for m in members]
        key = tuple(self.key(m, s) for m, s in zip(members, storages))  # one per member
        hit = self._entries.get(key)
        version = tuple(owner_version(m, s) for m, s in zip(members, storages))
        if hit is not None and not self._expired(hit) and hit[1] == version:
            if on_gpu and cudagraphs.capturing():
                self._captured.add(key)
            return hit[2]
        what = "a cached weight encoding"
        if on_gpu and cudagraphs.capturing():
            what += " " + self._miss_reason(members, key, hit, version)
        value, _ = cudagraphs.persistent(members[0].device, what, lambda: make(t))
        if hit is not None and key in self._captured:  # a captured graph still reads its address
            cudagraphs.retire(hit[2])
            self._captured.discard(key)
        if hit is None:  # a new storage: forget those that died since (their keys may be reused)
            for k in [k for k, e in self._entries.items() if self._expired(e)]:
                del self._entries[k]
                self._captured.discard(k)
        self._entries[key] = (tuple(StorageWeakRef(s) for s in storages), version, value)
        return value

    @staticmethod
    def _expired(entry: tuple) -> bool:
        return any(ref.expired() for ref in entry[0])

    @staticmethod
    def key(t: torch.Tensor, storage=None) -> tuple:
        storage = storage if storage is not None else t.untyped_storage()
        return (storage._cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device)

    def _miss_reason(self, members: tuple, keys: tuple, hit, version: tuple) -> str:
        """Why the weight (or a member of the group) missed (for the capture error: a warm-up call
        should have cached it)."""
        def shape(m):
            return f"{tuple(m.shape)} {str(m.dtype).replace('torch.', '')}"
        if hit is not None and not self._expired(hit):
            changed = [i for i, (a, b) in enumerate(zip(hit[1], version)) if a != b]
            i = changed[0] if changed else 0
            return f"(weight {shape(members[i])} changed in place since: version {hit[1][i]} -> {version[i]})"
        seen = {k for key in self._entries for k in key}
        i = next((i for i, k in enumerate(keys) if k not in seen), 0)
        alive = [key for key, e in self._entries.items()
                 if not self._expired(e) and len(key) == 1 and key[0][2:] == keys[i][2:]]
        copy = f"; perhaps a copy of one of the {len(alive)} warmed-up weights of its geometry" if alive else ""
        return f"(weight {shape(members[i])} at 0x{members[i].data_ptr():x}: no warm-up call saw this storage{copy})"


_checksum_cache = DerivedCache()


_stats_cache = DerivedCache()


def _weight_stats(weight: torch.Tensor) -> Tuple[BStats, torch.Tensor]:
    w3 = _as_batched(weight)
    with torch.no_grad():
        return b_stats(w3.transpose(-1, -2), -1), torch.isfinite(w3).all()


def weight_stats(weight: torch.Tensor, cache: bool = True) -> Tuple[BStats, torch.Tensor]:
    """(V-ABFT statistics of W^T, W holds no NaN/Inf): what the thread scheme needs of W offline;
    computed once per weight, again if it changes in place."""
    return _stats_cache.get(weight, _weight_stats, cache)


def _encode_weight(weight: torch.Tensor, cache: bool) -> WeightChecksums:
    with torch.no_grad():
        # fp64 sums: offline work, so make the reference checksums as exact as they can be.
        sums = checksum.encode(_as_batched(weight).double()).float()
    return WeightChecksums(sums, *weight_stats(weight, cache))


def weight_checksums(weight: torch.Tensor, cache: bool = True) -> WeightChecksums:
    """Offline encoding of W (computed once per weight, again if it changes in place)."""
    return _checksum_cache.get(weight, lambda w: _encode_weight(w, cache), cache)


def _as_batched(weight: torch.Tensor) -> torch.Tensor:
    return weight.reshape(-1, weight.shape[-2], weight.shape[-1])


def draw_k_step(spec: injection.FaultSpec, g: torch.Generator, n_steps: int) -> int:
    """The k-step after which an accumulator fault hits: the spec's, or drawn from its generator
    (first draw, before the element's index); at most the last step."""
    step = spec.k_step if spec.k_step is not None else int(torch.randint(0, n_steps, (1,), generator=g))
    return min(step, n_steps - 1)


def _accumulate(xf: torch.Tensor, wf: torch.Tensor, bias: Optional[torch.Tensor],
                injections: List[injection.Injection], site_name: str, spread: int,
                k_tiled: bool = False) -> torch.Tensor:
    """fp32 accumulator of x W^T + b (xf [WB, M, K], wf [WB, N, K]: the operands in fp32),
    k-tile by k-tile where an accumulator fault is pending (or ``k_tiled``: the same order
    without one).

    ``spread``: column distance between the faults of one spec with count > 1, so that they
    fall in one check group (1 for whole-row checks, the stride for strided checks)."""
    k = xf.shape[-1]
    acc_specs = [inj for inj in injections if inj.spec.stage == "accumulator"]
    if not acc_specs and not k_tiled:
        acc = xf @ wf.transpose(-1, -2)
    else:
        n_steps = math.ceil(k / K_TILE)
        plan = {}
        for inj in acc_specs:
            g = inj.generator()
            plan.setdefault(draw_k_step(inj.spec, g, n_steps), []).append((inj, g))
        acc = torch.zeros(xf.shape[0], xf.shape[1], wf.shape[1], dtype=torch.float32,
                          device=xf.device)
        for step in range(n_steps):
            sl = slice(step * K_TILE, (step + 1) * K_TILE)
            acc += xf[..., sl] @ wf[..., sl].transpose(-1, -2)
            for inj, g in plan.get(step, []):
                _inject_2d(acc, inj, g, site_name, spread)
    if bias is not None:
        acc = acc + bias.float()
    for inj in injections:
        if inj.spec.stage == "output":
            _inject_2d(acc, inj, inj.generator(), site_name, spread)
    return acc


def _inject_2d(acc: torch.Tensor, inj, g, site_name: str, spread_step: int) -> None:
    """Inject into acc [WB, M, N] at spec.index (row, col) of the flattened 2-D output."""
    wb, m, n = acc.shape
    flat = acc.view(wb * m, n)
    index = inj.spec.index if inj.spec.index is not None else injection.draw_index((wb * m, n), g)
    # Strided groups live inside one N_TILE-wide tile: keep a spec's faults in that tile.
    injection.apply(flat, inj, site_name, tuple(index), spread_step=spread_step,
                    spread_span=N_TILE if spread_step > 1 else None)


def _recompute(x3, w3, bias, b: int, i: int, j: Optional[int] = None) -> torch.Tensor:
    """One element (or one row) of x W^T + b, recomputed in fp32."""
    wrow = w3[b].float() if j is None else w3[b, j].float()
    out = wrow @ x3[b, i].float() if j is not None else x3[b, i].float() @ wrow.transpose(0, 1)
    if bias is not None:
        out = out + (bias.float() if j is None else bias[j].float())
    return out


def _finish(acc: torch.Tensor, group_view: Callable[[torch.Tensor], torch.Tensor],
            col_of: Callable[[int, int], int], checks: torch.Tensor, threshold: torch.Tensor,
            valid_rows: torch.Tensor, x3, w3, bias, policy: str, e: float) -> Outcome:
    """Verify every group, correct single faults, recheck, apply the policy. acc is [WB, M, N]."""
    groups = group_view(acc)  # [WB, M, G, L]
    d = checksum.residuals(groups, checks)
    detected, pos = checksum.locate(groups, d, threshold)
    detected &= valid_rows[..., None]
    zero = torch.zeros((), dtype=torch.int64, device=acc.device)
    n_detected = detected.sum()
    if policy == "detect" or policy == "raise" or not bool(detected.any()):
        return Outcome(n_detected, zero, zero, zero)

    corrected = uncorrectable = 0
    for b, i, gi in detected.nonzero().tolist():
        # The kernels' algorithm: recompute the element that D2/D1 names (exact).
        p = int(pos[b, i, gi])
        j = col_of(gi, p) if p >= 0 else -1
        moved = 0
        if 0 <= j < acc.shape[-1]:  # a position in a tile's padding is no location
            fresh = _recompute(x3, w3, bias, b, i, j)
            tol = _element_tol(x3, w3, bias, b, i, torch.tensor([j], device=acc.device), e,
                               threshold[b, i, gi])
            moved = int(not bool((acc[b, i, j] - fresh).abs() <= tol[0]))
            acc[b, i, j] = fresh
        # The reference's confirmation of the single-fault model: recompute the whole group and
        # count the elements that were off by more than rounding. Exactly one: corrected. None
        # or several: more than one fault (a second one may hide below the row threshold, or the
        # weighted ratio may name a wrong element), uncorrectable.
        idx, fresh, off = _off_elements(acc, groups.shape[-1], col_of, x3, w3, bias, b, i, gi, e,
                                        threshold[b, i, gi])
        if moved + int(off.sum()) == 1:
            acc[b, i, idx[off]] = fresh[off]
            corrected += 1
        else:
            uncorrectable += 1
            if policy == "recompute":
                acc[b, i] = _recompute(x3, w3, bias, b, i)
    as_t = lambda v: torch.tensor(v, dtype=torch.int64, device=acc.device)
    return Outcome(n_detected, as_t(corrected), as_t(uncorrectable), zero)


def _element_tol(x3, w3, bias, b: int, i: int, idx: torch.Tensor, e: float,
                 threshold: torch.Tensor) -> torch.Tensor:
    """How far two fp32 evaluations of y[b, i, idx] may differ by rounding: 2 e_max times the
    sum of the magnitudes of their terms (measured: <= 16 u32 of that sum on CPU, e_max ~ 25 u32),
    and never more than half the group's threshold (a larger difference is a fault)."""
    scale = w3[b, idx].float().abs() @ x3[b, i].float().abs()
    if bias is not None:
        scale = scale + bias[idx].float().abs()
    return torch.minimum(2 * e * scale, threshold / 2)


def _off_elements(acc, length: int, col_of, x3, w3, bias, b: int, i: int, gi: int, e: float,
                  threshold: torch.Tensor):
    """(columns, recomputed values, off-by-more-than-rounding mask) of one check group."""
    n = acc.shape[-1]
    idx = torch.tensor([c for c in (col_of(gi, q) for q in range(length)) if c < n],
                       device=acc.device)
    fresh = w3[b, idx].float() @ x3[b, i].float()
    if bias is not None:
        fresh = fresh + bias[idx].float()
    off = ~((acc[b, i, idx] - fresh).abs() <= _element_tol(x3, w3, bias, b, i, idx, e, threshold))
    return idx, fresh, off


def _prepare(x: torch.Tensor, weight: torch.Tensor):
    w3 = _as_batched(weight)
    wb, n, k = w3.shape
    if x.shape[-1] != k:
        raise ValueError(f"linear: x has {x.shape[-1]} features, weight expects {k}")
    x3 = x.reshape(wb, -1, k)
    row_finite = torch.isfinite(x3).all(-1)
    return x3, w3, row_finite


def _e(x: torch.Tensor, n: int, k: int, e_max_safety: float) -> float:
    return e_max(device_class(x.device), x.dtype, "fp32_acc", n=max(n, k)) * e_max_safety


def linear_global(x, weight, bias, *, site_name: str, site_id: int, policy: str,
                  c_sigma: float, e_max_safety: float, static_weight: bool = True,
                  tile_width: Optional[int] = None) -> Tuple[torch.Tensor, Outcome]:
    x3, w3, row_finite = _prepare(x, weight)
    wb, n, k = w3.shape
    tw = tile_width or n  # check groups: whole rows, or tile_width-wide column tiles of them
    tiles = math.ceil(n / tw)
    pad = tiles * tw - n
    xf = x3.float()
    if tile_width is None:  # the offline (cached) checksums of the whole of N
        enc = weight_checksums(weight, cache=static_weight)
        sums, stats, w_finite = enc.sums[:, None], enc.stats, enc.finite  # [WB, 1, 2, K]
    else:
        sums = checksum.encode(torch.nn.functional.pad(w3.double(), (0, 0, 0, pad)).view(wb, tiles, tw, k))
        stats, w_finite = weight_stats(weight, cache=static_weight)
    injections = injection.pending(site_id, site_name, injection.GEMM_STAGES)
    acc = _accumulate(xf, w3.float(), bias, injections, site_name, spread=1)

    checks = (xf[:, None] @ sums.transpose(-1, -2)).transpose(1, 2)  # [WB, M, T, 2]
    if bias is not None:
        b_tiles = torch.nn.functional.pad(bias.float(), (0, pad)).view(tiles, tw, 1)
        checks = checks + checksum.encode(b_tiles).squeeze(-1)
    mu_a, var_a = extrema_variance(xf, -1)
    e = _e(x, tw, k, e_max_safety)
    threshold = vabft_from_stats(mu_a, var_a, tw, stats, e, c_sigma)
    if bias is not None:
        threshold = threshold + e * bias.float().abs().sum()
    valid = row_finite & w_finite
    outcome = _finish(acc, lambda a: torch.nn.functional.pad(a, (0, pad)).view(wb, -1, tiles, tw),
                      lambda g, p: g * tw + p, checks, threshold[..., None].expand(-1, -1, tiles), valid,
                      x3, w3, bias, policy, e)
    outcome.nonfinite_inputs = (~valid).any().long()
    return _output(acc, x, n), outcome


def row_residuals(x: torch.Tensor, w: torch.Tensor, paths: Sequence[str] = ("fp32_acc",)
                  ) -> Tuple[Dict[str, torch.Tensor], torch.Tensor, WeightChecksums]:
    """linear_global's verification of y = x w^T without the op (no bias, no faults), for fresh
    matrices (nothing cached): x [B, M, K], w [B, N, K].

    Returns ({path: E [B, M]}, the row checksum [B, M], W's encoding). E is the fp32 row sum of
    the accumulator (path "fp32_acc") or of the output rounded to x's dtype ("rounded") minus the
    checksum, x times W's fp64-summed checksum taken in fp32."""
    xf = x.float()
    enc = weight_checksums(w, cache=False)
    check = (xf @ enc.sums.transpose(-1, -2))[..., 0]  # as in linear_global
    acc = xf @ w.float().transpose(-1, -2)
    residuals = {}
    for path in paths:
        y = acc.to(x.dtype).float() if path == "rounded" else acc
        residuals[path] = y.sum(-1) - check
    return residuals, check, enc


def linear_thread(x, weight, bias, *, site_name: str, site_id: int, policy: str,
                  c_sigma: float, e_max_safety: float, static_weight: bool = True
                  ) -> Tuple[torch.Tensor, Outcome]:
    x3, w3, row_finite = _prepare(x, weight)
    wb, n, k = w3.shape
    tiles = math.ceil(n / N_TILE)
    s = checksum.STRIDE
    lanes = N_TILE // s
    xf, wf = x3.float(), w3.float()
    # Online strided encoding of each 64-row tile of W: lane g sums rows g, g+8, ..., g+56.
    w_pad = torch.nn.functional.pad(wf, (0, 0, 0, tiles * N_TILE - n))
    w_groups = w_pad.view(wb, tiles, lanes, s, k).transpose(2, 3)  # [WB, T, g, l, K]
    enc = checksum.encode(w_groups)  # [WB, T, g, 2, K]
    injections = injection.pending(site_id, site_name, injection.GEMM_STAGES)
    acc = _accumulate(xf, wf, bias, injections, site_name, spread=s)

    checks = torch.einsum("bmk,btgck->bmtgc", xf, enc)  # [WB, M, T, g, 2]
    if bias is not None:
        b_pad = torch.nn.functional.pad(bias.float(), (0, tiles * N_TILE - n))
        checks = checks + checksum.encode(b_pad.view(tiles, lanes, s).transpose(1, 2)[..., None]
                                          ).squeeze(-1)
    checks = checks.reshape(wb, -1, tiles * s, 2)

    def group_view(a: torch.Tensor) -> torch.Tensor:
        a_pad = torch.nn.functional.pad(a, (0, tiles * N_TILE - n))
        return a_pad.view(wb, -1, tiles, lanes, s).transpose(3, 4).reshape(wb, -1, tiles * s, lanes)

    def col_of(gi: int, p: int) -> int:
        t, g = divmod(gi, s)
        return t * N_TILE + g + s * p

    mu_a, var_a = extrema_variance(xf, -1)
    stats, w_finite = weight_stats(weight, cache=static_weight)
    e = _e(x, lanes, k, e_max_safety)
    threshold = vabft_from_stats(mu_a, var_a, lanes, stats, e, c_sigma)
    if bias is not None:
        threshold = threshold + e * bias.float().abs().max() * lanes
    valid = row_finite & w_finite
    outcome = _finish(acc, group_view, col_of, checks, threshold[..., None].expand(-1, -1, tiles * s),
                      valid, x3, w3, bias, policy, e)
    outcome.nonfinite_inputs = (~valid).any().long()
    return _output(acc, x, n), outcome


# Up to this many rows of x (padded to 32) the thin kernel checks each element against a replica,
# not checksum rows (thin_gemm.cu).
THIN_REPLICA_ROWS = 32
# At up to THIN_REPLICA_WIDE_ROWS rows (x padded to 64) it does so too where W has at most this many
# rows: with few 128-row tiles the x-side pass and the column checks are most of the protection's
# cost, and the replica's doubled tensor work is cheaper (run 75g: -3..-25 % protected at N <= 3072,
# +1..+6 % at 32-86 tiles of K >= 1024).
THIN_REPLICA_WIDE_ROWS = 64
THIN_REPLICA_WIDE_MAX_N = 3072


def thin_replica(m: int, n: int) -> bool:
    """Whether the thin kernel checks a call of m rows of x and n rows of W against replicas."""
    return m <= THIN_REPLICA_ROWS or (m <= THIN_REPLICA_WIDE_ROWS and n <= THIN_REPLICA_WIDE_MAX_N)


def linear_thin(x, weight, bias, *, site_name: str, site_id: int, policy: str,
                c_sigma: float, e_max_safety: float, static_weight: bool = True
                ) -> Tuple[torch.Tensor, Outcome]:
    """The thread scheme as the thin kernel checks it (csrc/gemm/thin_gemm.cu, for up to 128 rows
    of x): one-sided on x, each column n of y over the call's M rows against W[n] . (sum_m x[m],
    sum_m (m+1) x[m]), with the V-ABFT threshold of M terms whose rows are W's (mean and extrema
    variance over K) and whose B statistics are x's per k over its rows; a single fault is
    located by the weighted checksum and recomputed, then the column rechecked. Inputs holding
    NaN/Inf skip the checks of their weight batch (counted once). Where :func:`thin_replica` says
    so, each element against its replica instead (:func:`_replica_checks`; one check per column of
    y)."""
    x3, w3, row_finite = _prepare(x, weight)
    wb, n, k = w3.shape
    m = x3.shape[1]
    xf, wf = x3.float(), w3.float()
    injections = injection.pending(site_id, site_name, injection.GEMM_STAGES)
    acc = _accumulate(xf, wf, bias, injections, site_name, spread=1)
    if thin_replica(m, n):
        replica = _replica(xf, wf, bias, injections, site_name, spread=1)
        return _output(acc, x, n), _replica_checks(acc, replica, (~same_values(acc, replica)).any(1), x3, w3,
                                                   bias, policy, _nonfinite(row_finite, weight, static_weight))
    columns = acc.transpose(-1, -2)  # [WB, N, M]: one check group per column of y
    checks = wf @ checksum.encode(xf).transpose(-1, -2)  # [WB, N, 2]
    if bias is not None:
        pos_sum = m * (m + 1) / 2
        checks = checks + bias.float()[:, None] * torch.tensor([m, pos_sum], device=acc.device)
    mu_w, var_w = extrema_variance(wf, -1)
    e = _e(x, m, k, e_max_safety)
    threshold = vabft_from_stats(mu_w, var_w, m, b_stats(xf.transpose(-1, -2), -1), e, c_sigma)
    if bias is not None:
        threshold = threshold + e * bias.float().abs() * m
    _, w_finite = weight_stats(weight, cache=static_weight)
    valid = row_finite.all(-1) & w_finite  # [WB]
    detected, pos = checksum.locate(columns, checksum.residuals(columns, checks), threshold)
    detected &= valid[:, None]
    zero = torch.zeros((), dtype=torch.int64, device=acc.device)
    outcome = Outcome(detected.sum(), zero, zero, (~valid).any().long())
    if policy in ("correct", "recompute") and bool(detected.any()):
        corrected = uncorrectable = 0
        for b, j in detected.nonzero().tolist():
            p = int(pos[b, j])
            if p >= 0:
                acc[b, p, j] = _recompute(x3, w3, bias, b, p, j)
            if p >= 0 and not checksum.exceeds(acc[b, :, j].sum() - checks[b, j, 0], threshold[b, j]):
                corrected += 1
            else:
                uncorrectable += 1
                if policy == "recompute":
                    acc[b, :, j] = x3[b].float() @ wf[b, j] + (bias[j].float() if bias is not None else 0)
        outcome.corrected = torch.tensor(corrected, device=acc.device)
        outcome.uncorrectable = torch.tensor(uncorrectable, device=acc.device)
    return _output(acc, x, n), outcome


def _replica(xf, wf, bias, injections, site_name: str, spread: int) -> torch.Tensor:
    """The fault-free accumulator computed a second time in the order :func:`_accumulate` took for
    the first (k-tile by k-tile where an accumulator fault is pending): equal bit for bit to it
    without a fault."""
    tiled = any(inj.spec.stage == "accumulator" for inj in injections)
    return _accumulate(xf, wf, bias, [], site_name, spread=spread, k_tiled=tiled)


def _nonfinite(row_finite: torch.Tensor, weight: torch.Tensor, static_weight: bool) -> torch.Tensor:
    """1 where x or W holds NaN/Inf (counted once per call), else 0."""
    _, w_finite = weight_stats(weight, cache=static_weight)
    return (~(row_finite.all(-1) & w_finite)).any().long()


def same_values(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a and b equal element by element, NaN equal to NaN (a non-finite input reaches a value and
    its replica alike)."""
    return (a == b) | (a.isnan() & b.isnan())


def _replica_checks(acc, replica, detected, x3, w3, bias, policy: str, nonfinite: torch.Tensor) -> Outcome:
    """Every element of acc [WB, M, N] against its replica, computed the same way (equal bit for bit
    without a fault); ``detected``: the checks (the kernel's groups of elements) that see a
    difference. Each differing element is recomputed and the copy nearer that value kept, in place:
    any number of faults in a check is corrected (a single fault moves only its own copy)."""
    zero = torch.zeros((), dtype=torch.int64, device=acc.device)
    outcome = Outcome(detected.sum(), zero, zero, nonfinite)
    if policy in ("correct", "recompute") and bool(detected.any()):
        for b, i, j in (~same_values(acc, replica)).nonzero().tolist():
            t = _recompute(x3, w3, bias, b, i, j)
            dv, dr = (acc[b, i, j] - t).abs(), (replica[b, i, j] - t).abs()
            if bool(dr < dv) or (bool(dv.isnan()) and not bool(dr.isnan())):  # (a NaN copy is never nearer)
                acc[b, i, j] = replica[b, i, j]
        outcome.corrected = detected.sum()
    return outcome


# Up to this many rows of x the streaming kernel checks each element against a replica: x's rows
# again in rows 8-15 of its m16 block, so the same MMAs compute every element twice
# (stream_gemm.cu), not the strided checksums.
STREAM_REPLICA_ROWS = 8


def linear_stream(x, weight, bias, *, site_name: str, site_id: int, policy: str,
                  c_sigma: float, e_max_safety: float, static_weight: bool = True
                  ) -> Tuple[torch.Tensor, Outcome]:
    """The thread scheme as the streaming kernel checks it (csrc/gemm/stream_gemm.cu): up to
    STREAM_REPLICA_ROWS rows, each element against its replica, one check per row and group of 8
    strided columns of a 64-column tile (:func:`linear_thread`'s groups), each differing element
    corrected to its intact copy; NaN/Inf inputs (values non-finite in both copies) are counted
    once and raise no alarm. More rows: :func:`linear_thread`."""
    x3, w3, row_finite = _prepare(x, weight)
    if x3.shape[1] > STREAM_REPLICA_ROWS:
        return linear_thread(x, weight, bias, site_name=site_name, site_id=site_id, policy=policy,
                             c_sigma=c_sigma, e_max_safety=e_max_safety, static_weight=static_weight)
    wb, n, k = w3.shape
    xf, wf = x3.float(), w3.float()
    s = checksum.STRIDE
    injections = injection.pending(site_id, site_name, injection.GEMM_STAGES)
    acc = _accumulate(xf, wf, bias, injections, site_name, spread=s)
    replica = _replica(xf, wf, bias, injections, site_name, spread=s)
    tiles = math.ceil(n / N_TILE)
    differs = torch.nn.functional.pad(~same_values(acc, replica), (0, tiles * N_TILE - n))
    # [WB, M, tile, l, g] -> a check per (row, tile, g): columns g, g + 8, ..., g + 56 of the tile
    detected = differs.view(wb, -1, tiles, N_TILE // s, s).any(3)
    return _output(acc, x, n), _replica_checks(acc, replica, detected, x3, w3, bias, policy,
                                               _nonfinite(row_finite, weight, static_weight))


def _output(acc: torch.Tensor, x: torch.Tensor, n: int) -> torch.Tensor:
    """Round the verified fp32 accumulator to the input dtype, in x's leading shape."""
    return acc.to(x.dtype).reshape(*x.shape[:-1], n)

"""Reference EFTA: end-to-end fault-tolerant flash attention (../shared/papers/efta-ft-transformer.txt).

Tiled online softmax over key tiles of BC keys, all query rows at once, fp32 throughout:

  GEMM-I   S = Q K_j^T with strided tensor checksums of K_j (lane g sums keys g, g+8, ...):
           S^c1, S^c2 = Q (K_j^c1)^T, Q (K_j^c2)^T ride along as 2 x 8 extra columns.
  max      m_new = max(m_old, rowmax(S_t)), S_t = scale * S + mask.
  EXP      P = exp(S_t - m_new).
  check 1  (unified, once per tile, Algorithm 1 line 13) - the GEMM-I residual of every strided
           group against its V-ABFT threshold; the product of each group's P against the exp of
           its argument (compared in the log domain: sum log P = sum (S_t - m), which does not
           underflow like the raw product); the selective range restrictions of SNVR: P <= 1 and
           m_new consistent (a rowmax fault), dead elements (masked or exp < e^-80) hold ~0.
           Correction: a score fault is located with S^c2/S^c1 and the element recomputed (one
           dot product), then the row's max and exp are recomputed; an exp fault is recomputed.
  GEMM-II  O = diag(alpha) O + P V_j and the same update of the output checksums
           O^c1, O^c2 = P V_j^c1, P V_j^c2 (strided over the head dimension), plus three ones
           columns (P 1) that duplicate the row sum on the MMA path; their median is that row sum
           (one copy hit by a fault is outvoted: counted, and it never reaches the output).
  rowsum   l = alpha l + rowsum(P).
  check 2  (once, at the end, Algorithm 1 lines 22-29) - l must lie in [1, n_keys] (SNVR: the
           max's own term is exp(0) = 1) and agree with the MMA-path row sum, else
           the row is recomputed (l or the P the PV products consumed was hit, and the two cannot
           be told apart); after normalisation every strided group of O is
           checked against O^c1; a single fault is located with O^c2 and corrected by
           subtracting the residual (the paper's correction).
Rows with no unmasked key give 0, as PyTorch's SDPA does.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from . import checksum, injection
from .gemm import Outcome, _e
from .thresholds import b_stats, extrema_variance, vabft_from_stats

BC = 64  # keys per tile
DEAD = -80.0  # exp arguments below this count as zero probability (e^-80 ~ 1.8e-35)
U32 = 2.0 ** -24
ATTN_SAFETY = 4.0  # several dependent fp32 operations between checks (scale, mask, rescale)


def attention_e(x: torch.Tensor, sk: int, d: int, e_max_safety: float) -> float:
    """e of EFTA's V-ABFT thresholds for queries ``x`` (its device class and dtype), ``sk`` keys
    and head dimension ``d``: the calibrated fp32-accumulation e_max at n = max(sk, d), times
    ``e_max_safety`` and ATTN_SAFETY."""
    return _e(x, sk, d, e_max_safety) * ATTN_SAFETY


class _Counts:
    def __init__(self, checking: bool):
        # Non-finite inputs poison every check of their rows: they are reported as inputs and
        # the output is what plain attention gives (NaN propagates), not flagged as faults.
        self.checking = checking
        self.detected = self.corrected = self.uncorrectable = 0


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor],
              is_causal: bool, scale: Optional[float], enable_gqa: bool, *, site_name: str,
              site_id: int, policy: str, c_sigma: float, e_max_safety: float
              ) -> Tuple[torch.Tensor, Outcome]:
    q32, k32, v32 = _expand_heads(q, k, v, enable_gqa)
    *batch, sq, d = q32.shape
    sk, dv = k32.shape[-2], v32.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    bias, keep = _mask(attn_mask, is_causal, q32.shape[:-1] + (sk,), q.device)
    finite_in = torch.isfinite(q32).all() & torch.isfinite(k32).all() & torch.isfinite(v32).all()

    e = attention_e(q, sk, d, e_max_safety)
    injections = injection.pending(site_id, site_name, injection.ATTENTION_STAGES)
    n_tiles = math.ceil(sk / BC)
    plan = _plan(injections, n_tiles)
    counts = _Counts(checking=bool(finite_in))

    s = checksum.STRIDE
    lv = math.ceil(dv / s)
    v_pad = torch.nn.functional.pad(v32, (0, lv * s - dv))
    # Lane g of a V row holds head-dim elements g, g+8, ...: checksums over them per lane.
    v_enc = checksum.encode(v_pad.view(*batch, sk, lv, s))  # [..., Sk, 2, 8]
    o = torch.zeros(*batch, sq, lv * s, device=q.device)
    oc = torch.zeros(*batch, sq, 2, s, device=q.device)
    m = torch.full((*batch, sq), float("-inf"), device=q.device)
    l = torch.zeros(*batch, sq, device=q.device)
    l_mma = torch.zeros(*batch, sq, 3, device=q.device)  # the MMA-path row sum, three copies
    qa_mu, qa_var = extrema_variance(q32, -1)

    for t in range(n_tiles):
        j0, j1 = t * BC, min((t + 1) * BC, sk)
        width = math.ceil((j1 - j0) / s) * s
        lg = width // s
        kt = torch.nn.functional.pad(k32[..., j0:j1, :], (0, 0, 0, width - (j1 - j0)))
        k_groups = kt.view(*batch, lg, s, d).transpose(-2, -3)  # [..., g, l, D]
        k_enc = checksum.encode(k_groups)  # [..., g, 2, D]

        # GEMM-I with its checksum columns.
        sc = q32 @ kt.transpose(-1, -2)  # [..., Sq, W]
        sc_chk = torch.einsum("...qd,...gcd->...qgc", q32, k_enc)  # [..., Sq, g, 2]
        _inject(plan, t, "score", sc, site_name)
        kb = b_stats(kt.transpose(-1, -2), -1)  # B = K^T: stats over the tile's keys
        t_score = vabft_from_stats(qa_mu, qa_var, lg, kb, e, c_sigma)[..., None]

        live = torch.zeros(*batch, sq, width, dtype=torch.bool, device=q.device)
        live[..., : j1 - j0] = keep[..., j0:j1]
        bias_t = torch.zeros_like(sc)
        bias_t[..., : j1 - j0] = bias[..., j0:j1]

        m_old = m
        st = torch.where(live, sc * scale + bias_t, torch.full_like(sc, float("-inf")))
        m = torch.maximum(m_old, st.amax(-1))
        _inject(plan, t, "rowmax", m, site_name)
        p = _exp(st, m, live)
        _inject(plan, t, "exp", p, site_name)

        if counts.checking:
            m, st, p = _check_tile(q32, kt, sc, sc_chk, t_score, bias_t, live, scale, m_old, m, st,
                                   p, counts, policy, site_name)

        alpha = torch.where(m_old == float("-inf"), torch.zeros_like(m), torch.exp(m_old - m))
        alpha = torch.nan_to_num(alpha, nan=0.0)
        l = alpha * l + p.sum(-1)
        _inject(plan, t, "rowsum", l, site_name)
        # P as the PV products consume it (in the kernels: packed to 16 bits after the check).
        p_mma = p.clone() if plan.get((t, "p_mma")) else p
        _inject(plan, t, "p_mma", p_mma, site_name)
        vt = torch.nn.functional.pad(v_pad[..., j0:j1, :], (0, 0, 0, width - (j1 - j0)))
        ones = torch.ones(width, 1, device=q.device)
        l_mma = alpha[..., None] * l_mma + p_mma @ ones
        _inject(plan, t, "rowsum_mma", l_mma[..., 0], site_name)
        o = alpha[..., None] * o
        if t:
            _inject(plan, t, "rescale", o, site_name)
        o = o + p_mma @ vt
        venc_t = torch.nn.functional.pad(v_enc[..., j0:j1, :, :], (0, 0, 0, 0, 0, width - (j1 - j0)))
        oc = alpha[..., None, None] * oc + torch.einsum("...qw,...wcg->...qcg", p_mma, venc_t)
        _inject(plan, t, "pv", o, site_name)

    redo_rows = None
    if counts.checking:
        redo_rows = _check_rowsum(l, l_mma, keep, counts, policy, site_name)
    has_key = keep.any(-1)
    denom = torch.where(has_key, l, torch.ones_like(l))[..., None]
    o = torch.where(has_key[..., None], o / denom, torch.zeros_like(o))
    oc = torch.where(has_key[..., None, None], oc / denom[..., None], torch.zeros_like(oc))

    # Threshold of the PV check: A = normalised P (mean 1/Sk, max 1/l, min 0), B = V.
    mu_p = torch.full_like(l, 1.0 / sk)
    pmax = torch.where(has_key, 1.0 / l.clamp_min(1.0), torch.zeros_like(l))
    var_p = ((pmax - mu_p) * mu_p).clamp_min(0)
    vb = b_stats(v_pad, -1)
    t_out = vabft_from_stats(mu_p, var_p, lv, vb, e, c_sigma)[..., None]
    fresh_row = lambda rows: _recompute_row(q32, k32, v32, bias, keep, scale, lv * s, rows)
    if counts.checking:
        o = _check_output(o, oc, t_out, counts, policy, site_name, fresh_row, skip=redo_rows)
    if redo_rows is not None:
        for rows in redo_rows.nonzero().tolist():
            o[tuple(rows)] = fresh_row(tuple(rows))

    if policy == "recompute" and counts.uncorrectable:
        o = _recompute_all(q32, k32, v32, bias, keep, scale)[..., :dv].clone()
        o = torch.nn.functional.pad(o, (0, lv * s - dv))
    dev = q.device
    as_t = lambda v_: torch.tensor(v_, dtype=torch.int64, device=dev)
    outcome = Outcome(as_t(counts.detected), as_t(counts.corrected), as_t(counts.uncorrectable),
                      (~finite_in).long())
    return o[..., :dv].to(q.dtype).contiguous(), outcome


def _expand_heads(q, k, v, enable_gqa):
    hq, hk = q.shape[-3] if q.dim() >= 3 else 1, k.shape[-3] if k.dim() >= 3 else 1
    if hq != hk:
        if not enable_gqa or hq % hk:
            raise ValueError(f"attention: {hq} query heads vs {hk} key/value heads needs "
                             "enable_gqa=True and a divisible head count")
        k = k.repeat_interleave(hq // hk, dim=-3)
        v = v.repeat_interleave(hq // hk, dim=-3)
    return q.float(), k.float(), v.float()


def _mask(attn_mask, is_causal, shape, device):
    """(additive bias [..., Sq, Sk] finite or 0, keep [..., Sq, Sk] bool)."""
    sq, sk = shape[-2], shape[-1]
    keep = torch.ones(shape, dtype=torch.bool, device=device)
    bias = torch.zeros(shape, device=device)
    if is_causal:
        keep &= torch.ones(sq, sk, dtype=torch.bool, device=device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            keep = keep & attn_mask.expand(shape)
        else:
            mf = attn_mask.float().expand(shape)
            keep = keep & (mf != float("-inf"))
            bias = torch.where(keep, mf, torch.zeros_like(mf))
    return bias, keep


def _plan(injections, n_tiles):
    plan = {}
    for inj in injections:
        g = inj.generator()
        step = inj.spec.k_step
        if step is None and inj.spec.index is not None and inj.spec.stage in ("score", "exp"):
            step = inj.spec.index[-1] // BC  # a given key position fixes its tile
        if step is None:
            lo = 1 if inj.spec.stage == "rescale" and n_tiles > 1 else 0
            step = int(torch.randint(lo, n_tiles, (1,), generator=g))
        plan.setdefault((min(step, n_tiles - 1), inj.spec.stage), []).append((inj, g))
    return plan


def _inject(plan, t, stage, tensor, site_name):
    for inj, g in plan.get((t, stage), []):
        index = inj.spec.index
        if index is None:
            index = injection.draw_index(tuple(tensor.shape), g)
        elif stage in ("score", "exp", "p_mma"):  # user indices are global key positions
            if not t * BC <= index[-1] < t * BC + tensor.shape[-1]:
                raise ValueError(f"FaultSpec index {tuple(index)}: key {index[-1]} is not in key "
                                 f"tile {t} (keys {t * BC}..{t * BC + tensor.shape[-1] - 1})")
            index = (*index[:-1], index[-1] - t * BC)
        injection.apply(tensor, inj, site_name, tuple(index), spread_step=checksum.STRIDE
                        if stage in ("score", "exp", "p_mma", "pv", "rescale") else 1)


def _exp(st, m, live):
    arg = st - m[..., None]
    return torch.where(live & (arg >= DEAD), torch.exp(arg), torch.zeros_like(arg))


def _groups(x: torch.Tensor) -> torch.Tensor:
    """[..., W] -> [..., 8, W/8]: lane g holds elements g, g+8, ..."""
    s = checksum.STRIDE
    return x.view(*x.shape[:-1], x.shape[-1] // s, s).transpose(-1, -2)


def _check_tile(q32, kt, sc, sc_chk, t_score, bias_t, live, scale, m_old, m, st, p, counts,
                policy, site_name):
    """Unified verification of GEMM-I, max and EXP for one tile; corrections in place."""
    s = checksum.STRIDE
    d = checksum.residuals(_groups(sc), sc_chk)
    gemm_bad, pos = checksum.locate(_groups(sc), d, t_score.expand_as(d[..., 0]))

    arg = st - m[..., None]
    alive = live & (arg >= DEAD)
    logp = torch.log(torch.where(alive, p, torch.ones_like(p)))
    ref = torch.where(alive, arg, torch.zeros_like(arg))
    t_exp = 4 * ATTN_SAFETY * U32 * _groups(torch.where(alive, 1 + arg.abs(), torch.zeros_like(arg))).sum(-1)
    exp_bad = checksum.exceeds(_groups(logp - ref).sum(-1), t_exp)
    dead_bad = ~(torch.where(alive, torch.zeros_like(p), p).abs() <= math.exp(DEAD))
    exp_bad |= _groups(dead_bad).any(-1)
    m_check = torch.maximum(m_old, st.amax(-1))
    rowmax_bad = ~(m == m_check)

    if not bool(gemm_bad.any() | exp_bad.any() | rowmax_bad.any()):
        return m, st, p
    n_bad = int(gemm_bad.sum() + (exp_bad & ~gemm_bad).sum() + rowmax_bad.sum())
    counts.detected += n_bad
    if policy == "raise":
        from ..telemetry import FaultDetected
        raise FaultDetected(site_name, "a fault in attention (QK^T, max or exp)")
    if policy == "detect":
        return m, st, p

    # Score faults: recompute the located element (a dot product), recheck its group.
    fixed_rows = rowmax_bad.clone()
    for idx in gemm_bad.nonzero().tolist():
        *bh, i, g = idx
        loc = int(pos[tuple(idx)])
        ok, moved = False, 0
        if loc >= 0:
            j = g + s * loc
            fresh = q32[(*bh, i)] @ kt[(*bh, j)]
            moved = int(not bool((sc[(*bh, i, j)] - fresh).abs() <= t_score[(*bh, i, 0)] / 2))
            sc[(*bh, i, j)] = fresh
            r = checksum.residuals(_groups(sc[(*bh, i)])[g][None], sc_chk[(*bh, i, g)][None])[0]
            ok = not bool(checksum.exceeds(r[0], t_score[(*bh, i, 0)]))
        if not ok:
            # The weighted checksum could not place it (e.g. a huge score overflows the weighted
            # sum): recompute the group's scores; exactly one moved is a single fault.
            js = torch.arange(g, sc.shape[-1], s, device=sc.device)
            fresh = kt[(*bh,)][js] @ q32[(*bh, i)]
            off = ~((sc[(*bh, i)][js] - fresh).abs() <= t_score[(*bh, i, 0)] / 2)
            if int(off.sum()) + moved == 1:
                sc[(*bh, i)][js[off]] = fresh[off]
                ok = True
        if ok:
            counts.corrected += 1
        else:
            counts.uncorrectable += 1
            if policy == "recompute":
                sc[(*bh, i)] = q32[(*bh, i)] @ kt[(*bh,)].transpose(-1, -2)
        fixed_rows[(*bh, i)] = True
    # Rows whose scores or max changed: recompute the max and the exponentials of the row.
    st = torch.where(fixed_rows[..., None] & live, sc * scale + bias_t, st)
    m = torch.where(fixed_rows, torch.maximum(m_old, st.amax(-1)), m)
    p_new = _exp(st, m, live)
    p = torch.where(fixed_rows[..., None], p_new, p)
    counts.corrected += int(rowmax_bad.sum())
    # Exp faults alone: recompute that group's exponentials.
    only_exp = exp_bad & ~gemm_bad & ~fixed_rows[..., None]
    if bool(only_exp.any()):
        lanes = only_exp[..., None].expand(*only_exp.shape, p.shape[-1] // s)
        p = torch.where(lanes.transpose(-1, -2).reshape(p.shape), p_new, p)
        counts.corrected += int(only_exp.sum())
    return m, st, p


def _check_rowsum(l, l_mma, keep, counts, policy, site_name):
    """SNVR range restriction on the row sum, l in [1, n_keys] (the row's max contributes
    exp(0) = 1), plus agreement with the MMA-path duplicate (the
    median of its three copies; a copy that disagrees with the others is a detected fault,
    corrected by the vote). Returns the rows to recompute (policies correct and recompute), or
    None: when l and the duplicate disagree, either l was hit or the P the PV products consumed
    (after the tile's check), and the two look alike, so the row is recomputed rather than l
    replaced by the duplicate (which made the second case a wrong row counted "corrected")."""
    # (The paper's lower bound, sum_k exp(m_k - m) over the tiles' maxima, is tighter, but a row
    # sum that the agreement below accepts is within 256 u of the MMA path's: what the tighter bound
    # could add is a fault in both sums, i.e. in P before them, which the tile checks catch.)
    upper = keep.sum(-1).float()
    has_key = upper > 0
    same = (l_mma == l_mma[..., :1]) | (l_mma.isnan() & l_mma[..., :1].isnan())
    outvoted = has_key & ~same.all(-1)
    l_mma = l_mma.nanmedian(-1).values  # NaN only where every copy is (a fault in the P consumed)
    if bool(outvoted.any()):
        counts.detected += int(outvoted.sum())
        if policy == "raise":
            from ..telemetry import FaultDetected
            raise FaultDetected(site_name, "a fault in the MMA-path row sum of attention")
        if policy != "detect":
            counts.corrected += int(outvoted.sum())
    tol = 256 * U32
    in_range = (l >= 1 - tol) & (l <= upper * (1 + tol))
    agree = torch.isfinite(l_mma) & ((l - l_mma).abs() <= tol * l_mma.abs())
    bad = has_key & ~(in_range & agree)
    if not bool(bad.any()):
        return None
    counts.detected += int(bad.sum())
    if policy == "raise":
        from ..telemetry import FaultDetected
        raise FaultDetected(site_name, "a row-sum fault in attention")
    if policy == "detect":
        return None
    counts.corrected += int(bad.sum())
    return bad


def _check_output(o, oc, t_out, counts, policy, site_name, fresh_row=None, skip=None):
    """Final check of GEMM-II + rescale + normalisation on every strided group of O.

    Correction recomputes the row (``fresh_row(rows)``: one row of plain attention) and
    compares the failing group with it: exactly one element off (by more than T/2) is a single
    fault, replaced; none or several is more than one fault, uncorrectable. The paper's
    correction (subtract the residual at the position D2/D1 names) cannot tell two faults in a
    group from one and then writes a wrong value that its own recheck accepts."""
    groups = _groups(o)  # [..., Sq, 8, Lv]
    d = checksum.residuals(groups, oc.transpose(-1, -2))
    bad, _ = checksum.locate(groups, d, t_out.expand_as(d[..., 0]))
    if skip is not None:  # rows the row-sum check sends to recomputation: checked there
        bad &= ~skip[..., None]
    if not bool(bad.any()):
        return o
    counts.detected += int(bad.sum())
    if policy == "raise":
        from ..telemetry import FaultDetected
        raise FaultDetected(site_name, "a fault in attention (PV, rescale or normalisation)")
    if policy == "detect":
        return o
    s = checksum.STRIDE
    fresh_rows = {}
    for idx in bad.nonzero().tolist():
        *rows, g = idx
        rows = tuple(rows)
        if rows not in fresh_rows:
            fresh_rows[rows] = fresh_row(rows)
        js = torch.arange(g, o.shape[-1], s, device=o.device)
        fresh = fresh_rows[rows][js]
        off = ~((o[rows][js] - fresh).abs() <= t_out[rows][0] / 2)
        if int(off.sum()) == 1:
            o[rows][js[off]] = fresh[off]
            counts.corrected += 1
        else:
            counts.uncorrectable += 1
    return o


def _recompute_row(q32, k32, v32, bias, keep, scale, width, rows):
    """One query row of plain attention in fp32, zero-padded to ``width``: rows = (*batch, i)."""
    bh = rows[:-1]
    st = torch.where(keep[rows], k32[bh] @ q32[rows] * scale + bias[rows],
                     torch.full_like(bias[rows], float("-inf")))
    if not bool(keep[rows].any()):
        return torch.zeros(width, device=q32.device)
    out = torch.softmax(st, -1) @ v32[bh]
    return torch.nn.functional.pad(out, (0, width - out.shape[-1]))


def _recompute_all(q32, k32, v32, bias, keep, scale):
    """Plain recomputation (policy "recompute" after an uncorrectable fault)."""
    st = torch.where(keep, q32 @ k32.transpose(-1, -2) * scale + bias, torch.full_like(bias, float("-inf")))
    has_key = keep.any(-1, keepdim=True)
    p = torch.softmax(torch.where(has_key, st, torch.zeros_like(st)), -1) * has_key
    return p @ v32

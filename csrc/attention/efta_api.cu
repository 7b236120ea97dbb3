// C entry point: argument checks at the boundary, then dispatch on (dtype, head dim, protection).
#include "efta_api.cuh"
#include "sm90_host.cuh"

using namespace efta;

static int make_params(const HostArgs* a, Params& p) {
  if (a == nullptr) return EFTA_ERR_ARGS;
  if ((a->D != 64 && a->D != 128) || (a->dtype != 0 && a->dtype != 1)) return EFTA_ERR_ARGS;
  if (a->variant < 0 || a->variant > 3) return EFTA_ERR_ARGS;
  if (a->B < 1 || a->Hq < 1 || a->Hk < 1 || a->Hq % a->Hk || a->Sq < 1 || a->Sk < 1 || a->scale <= 0.0)
    return EFTA_ERR_ARGS;
  if (a->B > 65535 || a->Hq > 65535 || a->n_inj > kMaxInj || a->n_tiles != (a->Sk + kBlockN - 1) / kBlockN)
    return EFTA_ERR_ARGS;
  if (a->mask_map != 0 && a->variant != 3 && (a->mask == 0 || (a->mc_sb != 0) != (a->m_sb != 0) ||
                           (a->mc_sh != 0) != (a->m_sh != 0) || (a->mc_sq != 0) != (a->m_sq != 0)))
    return EFTA_ERR_ARGS;
  if (a->protect && (a->kc == 0 || a->kn == 0 || a->vc == 0 || a->counters == 0 || a->nf_token == 0))
    return EFTA_ERR_ARGS;
  p.q = reinterpret_cast<const void*>(a->q);
  p.k = reinterpret_cast<const void*>(a->k);
  p.v = reinterpret_cast<const void*>(a->v);
  p.o = reinterpret_cast<void*>(a->o);
  p.q_sb = a->q_sb; p.q_sh = a->q_sh; p.q_ss = a->q_ss;
  p.k_sb = a->k_sb; p.k_sh = a->k_sh; p.k_ss = a->k_ss;
  p.v_sb = a->v_sb; p.v_sh = a->v_sh; p.v_ss = a->v_ss;
  p.o_sb = a->o_sb; p.o_sh = a->o_sh; p.o_ss = a->o_ss;
  p.mask = reinterpret_cast<const void*>(a->mask);
  p.mask_bool = (int)a->mask_bool;
  p.m_sb = a->m_sb; p.m_sh = a->m_sh; p.m_sq = a->m_sq; p.m_sk = a->m_sk;
  p.mask_map = reinterpret_cast<const int*>(a->mask_map);
  p.mc_sb = a->mc_sb; p.mc_sh = a->mc_sh; p.mc_sq = a->mc_sq;
  p.B = (int)a->B; p.Hq = (int)a->Hq; p.Hk = (int)a->Hk; p.Sq = (int)a->Sq; p.Sk = (int)a->Sk;
  p.causal = (int)a->causal; p.n_tiles = (int)a->n_tiles;
  p.scale = (float)a->scale;
  p.kc = reinterpret_cast<const void*>(a->kc);
  p.kn = reinterpret_cast<const float*>(a->kn);
  p.vc = reinterpret_cast<const void*>(a->vc);
  p.kc_unscale = (float)a->kc_unscale; p.vc1_unscale = (float)a->vc1_unscale;
  p.c_gemm = (float)a->c_gemm; p.e_out = (float)a->e_out; p.tol_agree = (float)a->tol_agree;
  p.policy = (int)a->policy;
  p.counters = reinterpret_cast<unsigned long long*>(a->counters);
  p.alarms = reinterpret_cast<unsigned long long*>(a->alarms);
  p.dbg = reinterpret_cast<float*>(a->dbg);
  p.nf_token = reinterpret_cast<int*>(a->nf_token);
  p.inj = reinterpret_cast<const InjRec*>(a->inj);
  p.n_inj = (int)a->n_inj;
  p.inj_log = reinterpret_cast<float*>(a->inj_log);
  p.dec_ws = reinterpret_cast<float*>(a->kc);
  p.dec_splits = (int)a->dec_splits, p.dec_tps = (int)a->dec_tps, p.dec_visit = (int)a->dec_visit;
  p.dec_impl = (int)a->dec_impl;
  return 0;
}

// The decode kernel's own argument checks: few rows per KV head, a workspace, splits that cover the
// tiles visited.
static int launch_decode(const HostArgs* a, const Params& p, cudaStream_t s) {
  const int64_t rows = a->Sq * (a->Hq / a->Hk);
  if ((a->dec_rows != 2 && a->dec_rows != 4 && a->dec_rows != 8) || a->kc == 0 || a->dec_splits < 1 || a->dec_tps < 1 ||
      a->dec_visit < 1 || a->dec_visit > a->n_tiles || a->dec_splits * a->dec_tps < a->dec_visit ||
      (a->dec_splits - 1) * a->dec_tps >= a->dec_visit || a->B * a->Hk > 65535 || a->dec_impl < 0 || a->dec_impl > 1)
    return EFTA_ERR_ARGS;
  if (a->protect && a->nf_token == 0) return EFTA_ERR_ARGS;
  const int row_blocks = (int)((rows + a->dec_rows - 1) / a->dec_rows);
  if (row_blocks > 65535) return EFTA_ERR_ARGS;
  return (int)(a->dtype == 0 ? decode_bf16(p, (int)a->D, a->protect != 0, (int)a->dec_rows, row_blocks, s)
                             : decode_fp16(p, (int)a->D, a->protect != 0, (int)a->dec_rows, row_blocks, s));
}

// q, k, v and the checksum tensors as TMA maps; false where TMA cannot describe them.
static bool make_maps(const HostArgs* a, Maps& m) {
  const int64_t q_dims[4] = {a->D, a->Sq, a->Hq, a->B}, q_str[4] = {1, a->q_ss, a->q_sh, a->q_sb};
  const int64_t k_dims[4] = {a->D, a->Sk, a->Hk, a->B}, k_str[4] = {1, a->k_ss, a->k_sh, a->k_sb};
  const int64_t v_str[4] = {1, a->v_ss, a->v_sh, a->v_sb};
  if (!sm90::make_tmap_16b(&m.q, reinterpret_cast<const void*>(a->q), 4, q_dims, q_str, sm90_block_m((int)a->D)) ||
      !sm90::make_tmap_16b(&m.k, reinterpret_cast<const void*>(a->k), 4, k_dims, k_str, kBlockN) ||
      !sm90::make_tmap_16b(&m.v, reinterpret_cast<const void*>(a->v), 4, k_dims, v_str, kBlockN))
    return false;
  m.kc = m.vc = m.q;  // placeholders without protection
  if (a->protect) {
    const int64_t rows = a->B * a->Hk * a->n_tiles * 8;
    const int64_t kc_dims[2] = {a->D, rows}, kc_str[2] = {1, a->D};
    // V^c [keys][8] in 64-column boxes (columns 8-63 zero-filled): the wgmma reads it as V's next box.
    const int64_t vc_dims[2] = {8, rows * (kBlockN / 8)}, vc_str[2] = {1, 8};
    if (!sm90::make_tmap_16b(&m.kc, reinterpret_cast<const void*>(a->kc), 2, kc_dims, kc_str, 8) ||
        !sm90::make_tmap_16b(&m.vc, reinterpret_cast<const void*>(a->vc), 2, vc_dims, vc_str, kBlockN))
      return false;
  }
  return true;
}

// The kernel a call runs (variant 1 mma.sync, 2 wgmma; maps filled for 2); 0 where variant 2 was
// asked for and TMA cannot take it.
static int choose_variant(const HostArgs* a, Maps& maps) {
  return a->variant != 1 && make_maps(a, maps) ? 2 : a->variant == 2 ? 0 : 1;
}

extern "C" EFTA_API int efta_attention_forward(HostArgs* a) {
  Params p;
  if (int rc = make_params(a, p)) return rc;
  cudaStream_t s = reinterpret_cast<cudaStream_t>(a->stream);
  const bool prot = a->protect != 0;
  cudaError_t e;
  if (a->variant == 3) return launch_decode(a, p, s);  // no prepass, no mask map: it reads both itself
  Maps maps;
  a->variant = choose_variant(a, maps);
  if (a->variant == 0) return EFTA_ERR_TMAP;
  if (p.mask_map != nullptr)  // before the kernels (and the prepass, which the wgmma kernel overlaps)
    if (cudaError_t em = launch_mask_map(p, s)) return (int)em;
  if (a->variant == 2) {
    if (a->dtype == 0)
      e = a->D == 64 ? launch_sm90_bf16_64(p, maps, prot, s) : launch_sm90_bf16_128(p, maps, prot, s);
    else
      e = a->D == 64 ? launch_sm90_fp16_64(p, maps, prot, s) : launch_sm90_fp16_128(p, maps, prot, s);
    return (int)e;
  }
  const int mt = a->mtiles == 1 ? 1 : 2;  // d=64: 1 or 2 m16 tiles per warp (default 2); d=128: 1
  if (a->dtype == 0) e = a->D == 64 ? launch_bf16_64(p, prot, mt, s) : launch_bf16_128(p, prot, mt, s);
  else e = a->D == 64 ? launch_fp16_64(p, prot, mt, s) : launch_fp16_128(p, prot, mt, s);
  return (int)e;
}

extern "C" EFTA_API int efta_abi_version() { return (int)(sizeof(HostArgs) / 8) * 1000 + (int)sizeof(InjRec); }

// The checksum prepass alone (benchmarks: its share of the protection overhead).
extern "C" EFTA_API int efta_attention_prepass(const HostArgs* a) {
  Params p;
  if (int rc = make_params(a, p)) return rc;
  if (!a->protect || a->variant == 3) return EFTA_ERR_ARGS;
  Maps maps;
  if (choose_variant(a, maps) == 0) return EFTA_ERR_TMAP;
  cudaStream_t s = reinterpret_cast<cudaStream_t>(a->stream);
  cudaError_t e;
  if (a->dtype == 0) e = a->D == 64 ? prepass_bf16_64(p, s) : prepass_bf16_128(p, s);
  else e = a->D == 64 ? prepass_fp16_64(p, s) : prepass_fp16_128(p, s);
  return (int)e;
}

#ifdef EFTA_DECODE_ONLY
// A measurement build of the decode kernel alone (-DEFTA_DECODE_ONLY: attention_ab.py's decode set
// builds it in a fraction of the whole library's time): the tile kernels' entry points refuse.
namespace efta {
cudaError_t launch_bf16_64(const Params&, bool, int, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_bf16_128(const Params&, bool, int, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_fp16_64(const Params&, bool, int, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_fp16_128(const Params&, bool, int, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_sm90_bf16_64(const Params&, const Maps&, bool, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_sm90_bf16_128(const Params&, const Maps&, bool, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_sm90_fp16_64(const Params&, const Maps&, bool, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_sm90_fp16_128(const Params&, const Maps&, bool, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t prepass_bf16_64(const Params&, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t prepass_bf16_128(const Params&, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t prepass_fp16_64(const Params&, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t prepass_fp16_128(const Params&, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace efta
#endif

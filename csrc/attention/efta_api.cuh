// Host entry point of the EFTA attention kernels (a C ABI, so Python drives it through ctypes and these
// files build with nvcc alone; torch's cpp_extension only compiles and loads the library).
#pragma once
#include "efta_common.cuh"

namespace efta {

// Every field is 8 bytes wide: ftcompile/ops/cuda_attention.py mirrors it as a ctypes.Structure.
struct HostArgs {
  int64_t q, k, v, o;
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss;
  int64_t mask, m_sb, m_sh, m_sq, m_sk;
  // The mask's tile map (0: none): int32 [blocks][2], zeroed by the caller; the strides in blocks
  // (Params) are nonzero exactly where the mask's are.
  int64_t mask_map, mc_sb, mc_sh, mc_sq;
  int64_t mask_bool;  // the mask is bool (1 byte per element, false = masked), else fp32 additive
  int64_t B, Hq, Hk, Sq, Sk, D, causal, dtype, protect, n_tiles, mtiles;
  // in: 0 auto (wgmma where TMA can describe q, k, v), 1 mma.sync, 2 wgmma, 3 decode; out: what ran
  int64_t variant;
  int64_t kc, kn, vc;
  int64_t policy, counters, alarms, dbg, nf_token, inj, n_inj, inj_log;
  int64_t stream;
  // decode (variant 3): rows per CTA (2, 4 or 8), splits, tiles per split, tiles visited; kc is the
  // workspace (kn, vc point into it too); dec_impl: 0 the tensor-core split kernel, 1 the FMA one
  int64_t dec_rows, dec_splits, dec_tps, dec_visit, dec_impl;
  double scale, kc_unscale, vc1_unscale, c_gemm, e_out, tol_agree;
};

cudaError_t launch_bf16_64(const Params& p, bool protect, int mt, cudaStream_t s);
cudaError_t launch_bf16_128(const Params& p, bool protect, int mt, cudaStream_t s);
cudaError_t launch_fp16_64(const Params& p, bool protect, int mt, cudaStream_t s);
cudaError_t launch_fp16_128(const Params& p, bool protect, int mt, cudaStream_t s);
// Query rows per CTA of the wgmma kernel: 64 per consumer warpgroup, 3 warpgroups at both head dims
// (B48: at d=128 the third is worth 4-7 % protected from 2K keys on, 9-13 % unprotected: run 66d).
// -DEFTA_D128_2WG=1 (a measurement build) gives d=128 the two warpgroups it had before.
#ifndef EFTA_D128_2WG
#define EFTA_D128_2WG 0
#endif
__host__ __device__ constexpr int sm90_block_m(int D) { return D == 128 && EFTA_D128_2WG ? 128 : 192; }
// TMA maps of the wgmma kernel: q, k, v [B, H, S, D] and the checksum tensors (protected only).
struct Maps {
  CUtensorMap q, k, v, kc, vc;
};
cudaError_t launch_sm90_bf16_64(const Params& p, const Maps& m, bool protect, cudaStream_t s);
cudaError_t launch_sm90_bf16_128(const Params& p, const Maps& m, bool protect, cudaStream_t s);
cudaError_t launch_sm90_fp16_64(const Params& p, const Maps& m, bool protect, cudaStream_t s);
cudaError_t launch_sm90_fp16_128(const Params& p, const Maps& m, bool protect, cudaStream_t s);
cudaError_t launch_mask_map(const Params& p, cudaStream_t s);
// The decode kernel (efta_decode.cuh): rows = 2, 4 or 8 per CTA, row_blocks CTAs of them per KV head.
cudaError_t decode_bf16(const Params& p, int D, bool protect, int rows, int row_blocks, cudaStream_t s);
cudaError_t decode_fp16(const Params& p, int D, bool protect, int rows, int row_blocks, cudaStream_t s);
cudaError_t prepass_bf16_64(const Params& p, cudaStream_t s);
cudaError_t prepass_bf16_128(const Params& p, cudaStream_t s);
cudaError_t prepass_fp16_64(const Params& p, cudaStream_t s);
cudaError_t prepass_fp16_128(const Params& p, cudaStream_t s);

}  // namespace efta

// The C entry points stay visible when the library is built with -fvisibility=hidden.
#define EFTA_API __attribute__((visibility("default")))

// Error codes besides cudaError_t values.
#define EFTA_ERR_ARGS 200001
#define EFTA_ERR_TMAP 200002  // variant 2 asked for, but TMA cannot describe the tensors

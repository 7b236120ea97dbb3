// Shared pieces of the EFTA attention kernels: parameters, PTX wrappers, element types.
// Only CUDA headers: these files compile-check with plain nvcc on machines without torch's CUDA build.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "codes.cuh"
#include "elem.cuh"
#include "sm90.cuh"

namespace efta {
using namespace sm90;  // Elem, ldsm_x4, corrupt_value, smem_u32, mbarrier, TMA, wgmma (csrc/common)

constexpr int kBlockN = 64;   // keys per tile: the reference's BC, so tile indices mean the same thing
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxInj = 16;
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;

// Stages as in ftcompile.abft.injection.ATTENTION_STAGES.
enum Stage { kScore = 0, kExp = 1, kRowmax = 2, kRowsum = 3, kPV = 4, kRescale = 5, kRowsumMma = 6, kPMma = 7 };
// Diagnostic counters (ftcompile.ops.cuda_attention.ALARM_FIELDS).
enum Alarm { kTileAlarms = 0, kTileFaults = 1, kFinalAlarms = 2, kRowsumAlarms = 3 };

// One corruption, resolved on the host with the reference's generator order.
struct InjRec {
  int stage, tile, b, h, row, col;  // col: key within the tile (score, exp) or head-dim index (pv, rescale)
  int mode;                         // 0: add value, 1: flip bit of fp32, 2: of bf16, 3: of fp16
  int bit;
  float value;
  int pad[3];
};

// Whether an injection record hits rows [r0, r0 + rows) of (batch b, head h).
__device__ __forceinline__ bool hits(const InjRec& rec, int b, int h, int r0, int rows) {
  return rec.b == b && rec.h == h && rec.row >= r0 && rec.row < r0 + rows;
}

struct Params {
  const void* q; const void* k; const void* v; void* o;
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss;
  // additive fp32 (-inf = masked) or, with mask_bool, bool (false = masked), broadcast through zero
  // strides; may be null
  const void* mask;
  int64_t m_sb, m_sh, m_sq, m_sk;
  int mask_bool;
  // The mask's tile map (efta_mask_map.cu; null: every tile up to the last takes the mask): per
  // (mask batch, mask head, block of 64 query rows) kMapFields ints: [0] the key tiles to visit (up
  // to the last one not entirely -inf), [1] n_tiles - the first tile where the mask is not all zero
  // (the tiles from there take the masked path), [2] n_tiles - the first tile not entirely -inf
  // (the wgmma kernel starts there: a left-padded sequence's leading tiles), [3] the last tile where
  // the mask is not all zero, plus one (where that ends before the tiles to visit do, the wgmma
  // kernel takes the masked path only up to there). Each a maximum over zeros (0: no such tile).
  // mc_*: strides in blocks of each query dimension (0 where the mask broadcasts).
  const int* mask_map;
  int64_t mc_sb, mc_sh, mc_sq;
  int B, Hq, Hk, Sq, Sk, causal, n_tiles;
  float scale;
  // protection
  const void* kc;     // [B, Hk, n_tiles, 8, D] hi/lo strided checksums of K (prepass)
  const float* kn;    // [B, Hk, n_tiles, 4] sum of ||k||_2 per checksum group
  const void* vc;     // checksum columns of V: [B, Hk, n_tiles*64, 8]
  float kc_unscale, vc1_unscale;
  float c_gemm;       // QK residual bound relative to ||q|| * sum ||k||
  float e_out;        // final-check bound relative to sum_k p_k sum_d |v_kd|
  float tol_agree;    // row sum vs MMA-path row sum (relative)
  int policy;
  unsigned long long* counters;  // this site's telemetry row
  unsigned long long* alarms;    // diagnostics (may be null)
  float* dbg;                    // max residual/threshold ratios (may be null)
  int* nf_token;  // [2]: the call whose non-finite inputs were counted, the call sequence (prepass)
  const InjRec* inj; int n_inj; float* inj_log;  // [n_inj][2]: before, after
  // The decode kernel (efta_decode.cuh): per split CTA part_floats() of workspace; key tiles
  // [split * dec_tps, min(+dec_tps, dec_visit)); nf_token[2] is its non-finite flag.
  float* dec_ws;
  int dec_splits, dec_tps, dec_visit;
  int dec_impl;  // the split kernel: 0 tensor cores, 1 FMA
};

// The mask's tile-map entry of (mask batch b, mask head h, 64-row block qb) (see Params::mask_map).
constexpr int kMapFields = 4;
__device__ __forceinline__ const int* map_entry(const Params& p, int b, int h, int qb) {
  return p.mask_map + kMapFields * (b * p.mc_sb + h * p.mc_sh + qb * p.mc_sq);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  // src-size 0 zero-fills the 16 bytes: rows past the sequence end read as zeros.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2_t(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float lg2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// sqrt(x) for a threshold, never below it: MUFU's approximation (one instruction, where sqrtf's IEEE
// rounding is a subroutine with a slow path) raised past its relative error (2^-22).
__device__ __forceinline__ float sqrt_bound(float x) {
  float y;
  asm("sqrt.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y * (1.f + 0x1p-20f);
}

// Telemetry: faults are rare, so each thread that finds one adds it to the site's row directly.
__device__ __forceinline__ void bump(unsigned long long* counters, int field, unsigned n = 1) {
  if (n) atomicAdd(counters + field, (unsigned long long)n);
}

// injection.corrupt for one record (mode 0: add value; 1, 2, 3: flip a bit of fp32, bf16, fp16).
__device__ __forceinline__ float corrupt(float v, const InjRec& r) {
  return corrupt_value(v, r.mode == 0, r.mode - 1, r.bit, r.value);
}

// Diagnostics (residual / threshold of a check): out of line, so that the hot loops carry a call
// instead of a division and an atomic (code that never runs in production still costs registers).
// Records max(num / den, num2 / den2) (fmaxf: a 0/0 of a row without threshold drops out when the
// other ratio is a number; with one ratio, the default -1 keeps a NaN a NaN).
static __device__ __noinline__ void dbg_ratio_max(float* addr, float num, float den, float num2 = -1.f,
                                                  float den2 = 1.f) {
  float v = fmaxf(num / den, num2 / den2);
  // Non-negative floats order like their bit patterns; NaN ratios are recorded as +inf.
  if (!(v >= 0.f)) v = __int_as_float(0x7f800000);
  atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}

}  // namespace efta

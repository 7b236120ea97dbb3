// Shared pieces of the protected linear kernels: the argument block (mirrored by ctypes in
// ftcompile/ops/cuda_gemm.py), row dot products, packed extrema, fault injection and the V-ABFT
// threshold. Only CUDA headers: nvcc -c checks it without torch.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "codes.cuh"
#include "elem.cuh"
#include "sm90.cuh"

namespace ftg {
using namespace sm90;  // Elem, mbarrier, TMA, named barriers, wgmma (csrc/common)

// ---------------------------------------------------------------- argument block (C ABI)
constexpr int kMaxInj = 8;

struct Injection {
  int32_t row, col;  // flat output row (batch * M + m) and column
  int32_t step;      // k-step (K_TILE = 64) after which the accumulator is hit; -1: output stage
  int32_t mode;      // 0: add value, 1: flip bit
  int32_t bit, fmt;  // fmt 0 fp32, 1 bf16, 2 fp16 (encoding the bit flip acts on)
  float value;
  int32_t slot;      // where (before, after) go in inj_log
};

constexpr int kMaxGroup = 4;  // weights one global call may take as a group (Args.groups)

struct Args {
  const void* x;     // [batch, M, K], rows x_rstride apart (elements), 16-byte aligned
  const void* w;     // [batch, N, K]
  const void* bias;  // [N] or null
  void* y;           // [batch, M, N], rows ldy apart (elements); batches M * ldy apart
  int64_t ldy;       // N, or (global scheme) N padded to 16-byte rows (the op's pad_rows)
  int64_t batch, M, N, K;
  int64_t x_bstride, x_rstride, w_bstride, w_rstride;
  const float* wsum;      // [batch, 2, K]: sum_n W[n], sum_n (n+1) W[n]   (global scheme)
  const float* wstats;    // [batch, 3]: V-ABFT stats of W^T: sum|mu|, sum var, sum mu^2
  const int32_t* wfinite; // [1]: W holds no NaN/Inf
  const double* bstats;   // [4]: sum b, sum (n+1) b, sum |b|, max |b|   (null without bias)
  long long* counters;    // the site's telemetry row (int64, telemetry.FIELDS order)
  int32_t* raise_flag;    // set to 1 on detection (policy "raise"), else null
  void* ws;               // self-cleaning workspace (zeros / +-inf as the launcher documents)
  float* inj_log;         // [kMaxInj, 2] (before, after) of each injected element
  float e, c_sigma;       // e_max (with safety) and the V-ABFT sigma multiplier
  int32_t policy, dtype, protect, n_inj, split, mtile;  // dtype 0 bf16, 1 fp16; split: K split (CTAs per tile)
  int64_t stream;
  int32_t num_sms;
  int64_t ws_rows;             // global workspace layout: its capacity in rows
  double* dbg;                 // diagnostics (null): per check (sum, check, threshold)
  int32_t nbox, stages;        // thread scheme: 64-wide k boxes per stage, ring depth (multiple of 4/wm)
  int32_t cluster;             // global scheme: CTAs per cluster sharing W tiles by TMA multicast (1, 2)
  int32_t wm;                  // thread scheme: consumer warps across M (1, 2, 4); the rest split K
  int32_t warps;               // streaming thread kernel: warps per CTA (8, 16)
  int32_t pdl;                 // streaming thread and global kernels: programmatic dependent launch (0, 1)
  int32_t bn;                  // global scheme: tile width, 256, 192 or 128 (0 reads as 256)
  int64_t part_tiles;          // global scheme, split > 1: tiles the split-K workspace holds
  void* part;                  // global scheme, split > 1: split-K workspace (flags zero between calls)
  int32_t local;               // global scheme: the tile-local check (192- or 128-wide tiles; else per row)
  float lscale_inv;            // tile-local check: 1 / the power-of-two scale of the checksum rows
  const void* lsum;            // tile-local check: [batch, 8 T_N, K] checksum rows, 8 per N-tile (x's type)
  const float* btile;          // tile-local check with bias: [T_N, 2] the bias's tile sums (plain, weighted)
  // global scheme, a group of sibling weights sharing x (q/k/v, gate/up: one GEMM, W not copied):
  // y's columns [gcol[j-1], gcol[j]) are member j's rows (member 0 is w; gcol ascending, multiples
  // of the tile width, so no tile straddles two members); members share K and w_rstride; batch 1.
  int32_t groups;              // members (1: w alone; at most kMaxGroup)
  const void* gw[kMaxGroup - 1];
  int64_t gcol[kMaxGroup - 1];

  // The group member holding output column n (0 without a group), and its first column.
  __host__ __device__ int member_of(int64_t n) const {
    int j = 0;
    while (j + 1 < groups && n >= gcol[j]) ++j;
    return j;
  }
  __host__ __device__ int64_t member_col0(int j) const { return j ? gcol[j - 1] : 0; }
  Injection inj[kMaxInj];
  // thread scheme, thin kernel (thin_gemm.cu): W's row statistics [batch, N, 2] (mean and extrema
  // variance over K, offline); the x-side pass's checksum rows [batch, 8, K] (x's type) and its
  // statistics per 64-wide chunk of K [batch, ceil(K / 64), 4] (floats).
  const float* wrow;
  void* xsum;
  float* xstat;
  // W is a parameter (the site's static_weight): no kernel that may still run when this one starts
  // writes it, so the thin kernel reads it before its grid-dependency wait.
  int32_t w_static;
  // global scheme, split > 1: the first cluster tile that is split (0: all of them); the tiles
  // before it run whole (the last wave's tiles split over its idle SMs: global_gemm.cu split_units).
  int32_t split_from;
};

// ---------------------------------------------------------------- row dot products (correction paths)
// Batched partial dots over k = k0 + 8 * (idx + step * i) for a correction, whose time is
// latency: each thread loads NB chunks of 8 before it uses any, so a batch costs one round trip
// (a plain unrolled loop, at a tight register budget, issued a load and then its FMA chain). The
// products are summed in ascending k. Chunks past K are neither loaded nor converted (fp64
// conversions are slow: 16 per clock per SM). fp32: two 16-bit rows.
template <typename T, int NB>
__device__ float batched_dot(const T* a, const T* b, int64_t K, int idx, int step) {
  float s = 0.f;
  for (int64_t k0 = 8 * (int64_t)idx; k0 < K; k0 += 8 * (int64_t)step * NB) {
    uint4 va[NB], vb[NB];
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      const int64_t k = k0 + 8 * (int64_t)step * i;
      const bool in = k < K;
      va[i] = in ? __ldg(reinterpret_cast<const uint4*>(a + k)) : make_uint4(0u, 0u, 0u, 0u);
      vb[i] = in ? __ldg(reinterpret_cast<const uint4*>(b + k)) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      if (k0 + 8 * (int64_t)step * i >= K) break;
      const uint32_t* pa = &va[i].x; const uint32_t* pb = &vb[i].x;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 fa = Elem<T>::unpack(pa[j]), fb = Elem<T>::unpack(pb[j]);
        s = fmaf(fa.x, fb.x, s); s = fmaf(fa.y, fb.y, s);
      }
    }
  }
  return s;
}
// fp64: a 16-bit row with an fp32 row (the weighted check: its ratio divides a difference of large sums).
template <typename T, int NB>
__device__ double batched_dot_f64(const T* a, const float* w, int64_t K, int idx, int step) {
  double s = 0.0;
  for (int64_t k0 = 8 * (int64_t)idx; k0 < K; k0 += 8 * (int64_t)step * NB) {
    uint4 va[NB];
    float4 w0[NB], w1[NB];
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      const int64_t k = k0 + 8 * (int64_t)step * i;
      const bool in = k < K;
      const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
      va[i] = in ? __ldg(reinterpret_cast<const uint4*>(a + k)) : make_uint4(0u, 0u, 0u, 0u);
      w0[i] = in ? __ldg(reinterpret_cast<const float4*>(w + k)) : z;
      w1[i] = in ? __ldg(reinterpret_cast<const float4*>(w + k + 4)) : z;
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      if (k0 + 8 * (int64_t)step * i >= K) break;
      const float2 f0 = Elem<T>::unpack(va[i].x), f1 = Elem<T>::unpack(va[i].y), f2 = Elem<T>::unpack(va[i].z),
                   f3 = Elem<T>::unpack(va[i].w);
      s = fma((double)f0.x, (double)w0[i].x, s); s = fma((double)f0.y, (double)w0[i].y, s);
      s = fma((double)f1.x, (double)w0[i].z, s); s = fma((double)f1.y, (double)w0[i].w, s);
      s = fma((double)f2.x, (double)w1[i].x, s); s = fma((double)f2.y, (double)w1[i].y, s);
      s = fma((double)f3.x, (double)w1[i].z, s); s = fma((double)f3.y, (double)w1[i].w, s);
    }
  }
  return s;
}
template <typename V>  // float or double
__device__ __forceinline__ V warp_sum(V v) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// fp32 dot of two 16-bit rows of length K by one warp.
template <typename T>
__device__ float warp_dot(const T* a, const T* b, int64_t K, int lane) {
  return warp_sum(batched_dot<T, 4>(a, b, K, lane, 32));
}

// ---------------------------------------------------------------- packed 16-bit extrema
template <typename T> __device__ __forceinline__ uint32_t hmax2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (std::is_same<T, __nv_bfloat16>::value) asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
template <typename T> __device__ __forceinline__ uint32_t hmin2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (std::is_same<T, __nv_bfloat16>::value) asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("min.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
template <typename T> constexpr uint32_t kNegInf2 = std::is_same<T, __nv_bfloat16>::value ? 0xff80ff80u : 0xfc00fc00u;
template <typename T> constexpr uint32_t kPosInf2 = std::is_same<T, __nv_bfloat16>::value ? 0x7f807f80u : 0x7c007c00u;

// ---------------------------------------------------------------- atomics on floats
__device__ __forceinline__ void atomic_max_f32(float* addr, float v) {
  if (v != v) return;  // NaN rows are flagged through their sums, keep the extrema clean
  if (v >= 0.f) atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
  else atomicMin(reinterpret_cast<unsigned*>(addr), __float_as_uint(v));
}
__device__ __forceinline__ void atomic_min_f32(float* addr, float v) {
  if (v != v) return;
  if (v >= 0.f) atomicMin(reinterpret_cast<int*>(addr), __float_as_int(v));
  else atomicMax(reinterpret_cast<unsigned*>(addr), __float_as_uint(v));
}

// ---------------------------------------------------------------- fault injection
// injection.corrupt for one Injection (fmt: FlipFmt).
__device__ __forceinline__ float corrupt(float v, const Injection& inj) {
  return corrupt_value(v, inj.mode == 0, inj.fmt, inj.bit, inj.value);
}
__device__ __forceinline__ float inject_one(float v, const Injection& inj, float* log) {
  const float after = corrupt(v, inj);
  if (log) {
    log[2 * inj.slot] = v;
    log[2 * inj.slot + 1] = after;
  }
  return after;
}

// ---------------------------------------------------------------- V-ABFT (thresholds.vabft_from_stats)
// One MUFU op, relative error ~2^-23: a threshold is a bound with a safety factor, and sqrtf's
// refinement and slow-path branches sat on the thread kernels' epilogue (NOTES_gemm.md, run 16).
__device__ __forceinline__ float sqrt_approx(float x) {
  float y;
  asm("sqrt.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Rows with statistics (mu, var) of A against B stats (sum|mu_B|, sum var_B, sum mu_B^2), n summed terms.
__device__ __forceinline__ float vabft_threshold(float mu, float var, float n, const float* bst, float e,
                                                 float c_sigma) {
  const float t_det = n * fabsf(mu) * bst[0];
  const float t_23 = c_sigma * sqrt_approx(n * mu * mu * bst[1] + n * n * var * bst[2]);
  const float t_4 = c_sigma * sqrt_approx(n) * sqrt_approx(var) * sqrt_approx(bst[1]);
  return e * (t_det + t_23 + t_4);
}
// |d| > t with NaN counted as exceeding (checksum.exceeds).
__device__ __forceinline__ bool exceeds(float d, float t) { return !(fabsf(d) <= t); }

// ---------------------------------------------------------------- replica checks (thin, streaming)
// a and b the same value (NaN included: a non-finite input reaches both copies alike).
__device__ __forceinline__ bool same(float a, float b) { return a == b || (a != a && b != b); }
// Of two differing copies v and r, the one nearer the recomputed value t (the intact one: a single
// fault moves only its own copy; a NaN copy is never nearer).
__device__ __forceinline__ float nearer_copy(float v, float r, float t) {
  const float dv = fabsf(v - t), dr = fabsf(r - t);
  return (dv != dv ? dr == dr : dr < dv) ? r : v;
}

// ---------------------------------------------------------------- telemetry (one thread per CTA)
// A CTA's check outcomes into the site's counter row; policy "raise" gets its flag on detection.
__device__ __forceinline__ void add_outcomes(const Args& args, int ndet, int ncorr, int nunc) {
  unsigned long long* cnt = reinterpret_cast<unsigned long long*>(args.counters);
  if (ndet) atomicAdd(cnt + kDetected, (unsigned long long)ndet);
  if (ncorr) atomicAdd(cnt + kCorrected, (unsigned long long)ncorr);
  if (nunc) atomicAdd(cnt + kUncorrectable, (unsigned long long)nunc);
  if (ndet && args.raise_flag) atomicExch(args.raise_flag, 1);
}
// Non-finite inputs count once per call. Each of `reporters` CTAs calls this once; with several,
// they meet on one 8-byte-aligned 64-bit word of the self-cleaning workspace: reports in its low
// half, reports of non-finite inputs in its high half, one atomic each. The last reporter counts
// and subtracts what it read (the word is zero again for the next call): no fence and no second
// round trip, which sat at the end of the kernel's critical path (benchmarks/NOTES_gemm.md).
__device__ __forceinline__ void count_nonfinite_once(const Args& args, bool nonfinite, int reporters,
                                                     unsigned long long* word) {
  unsigned long long* cnt = reinterpret_cast<unsigned long long*>(args.counters);
  if (reporters == 1) {
    if (nonfinite) atomicAdd(cnt + kNonfinite, 1ull);
    return;
  }
  const unsigned long long inc = 1ull + (nonfinite ? 1ull << 32 : 0ull);
  const unsigned long long now = atomicAdd(word, inc) + inc;
  if ((now & 0xffffffffull) == (unsigned long long)reporters) {
    if (now >> 32) atomicAdd(cnt + kNonfinite, 1ull);
    atomicAdd(word, 0ull - now);
  }
}

}  // namespace ftg

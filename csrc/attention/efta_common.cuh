// Shared pieces of the EFTA attention kernels: parameters, PTX wrappers, element types.
// Only CUDA headers: these files compile-check with plain nvcc on machines without torch's CUDA build.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "sm90.cuh"

namespace efta {
using namespace sm90;  // smem_u32, mbarrier, TMA, wgmma (csrc/common)

constexpr int kBlockM = 128;  // query rows per CTA: 4 warps x 2 m16 tiles (B fragments reused twice)
constexpr int kBlockN = 64;   // keys per tile: the reference's BC, so tile indices mean the same thing
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxInj = 16;
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;

// Stages as in ftcompile.abft.injection.ATTENTION_STAGES.
enum Stage { kScore = 0, kExp = 1, kRowmax = 2, kRowsum = 3, kPV = 4, kRescale = 5 };
enum Policy { kCorrect = 0, kDetect = 1, kRaise = 2, kRecompute = 3 };
// Telemetry FIELDS order.
enum Field { kChecks = 0, kDetected = 1, kCorrected = 2, kUncorrectable = 3, kNonfinite = 4 };
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

struct Params {
  const void* q; const void* k; const void* v; void* o;
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss;
  const float* mask;  // additive fp32 (-inf = masked), broadcast through zero strides; may be null
  int64_t m_sb, m_sh, m_sq, m_sk;
  int B, Hq, Hk, Sq, Sk, causal, n_tiles;
  float scale;
  // protection
  const void* kc;     // [B, Hk, n_tiles, 8, D] hi/lo strided checksums of K (prepass)
  const float* kn;    // [B, Hk, n_tiles, 4] sum of ||k||_2 per checksum group
  const void* vc;     // checksum columns of V: [B, Hk, n_tiles*64, 8], or [B, Hk, n_tiles, 8, 64] (vc_t)
  int vc_t;           // column-major V checksums (the wgmma kernel reads them as a K-major B operand)
  float kc_unscale, vc1_unscale, vc2_unscale;
  float c_gemm;       // QK residual bound relative to ||q|| * sum ||k||
  float e_out;        // final-check bound relative to sum_k p_k sum_d |v_kd|
  float tol_agree;    // row sum vs MMA-path row sum (relative)
  int policy;
  unsigned long long* counters;  // this site's telemetry row
  unsigned long long* alarms;    // diagnostics (may be null)
  float* dbg;                    // max residual/threshold ratios (may be null)
  int* nf_token; int call_id;    // count non-finite inputs once per call
  const InjRec* inj; int n_inj; float* inj_log;  // [n_inj][2]: before, after
};

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  // src-size 0 zero-fills the 16 bytes: rows past the sequence end read as zeros.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
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

template <typename T> struct Elem;

template <> struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
};

template <> struct Elem<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
};

// The reference's injection.corrupt(): add a value, or flip a bit of the value's encoding in a format.
// Out of line: it runs only while injecting, and inlined copies would bloat the hot loop's code.
static __device__ __noinline__ float corrupt_value(float v, int mode, int bit, float value) {
  if (mode == 0) return v + value;
  if (mode == 1) return __uint_as_float(__float_as_uint(v) ^ (1u << bit));
  if (mode == 2) {
    __nv_bfloat16 h = __float2bfloat16_rn(v);
    unsigned short b = *reinterpret_cast<unsigned short*>(&h) ^ (unsigned short)(1u << bit);
    return __bfloat162float(*reinterpret_cast<__nv_bfloat16*>(&b));
  }
  __half h = __float2half_rn(v);
  unsigned short b = *reinterpret_cast<unsigned short*>(&h) ^ (unsigned short)(1u << bit);
  return __half2float(*reinterpret_cast<__half*>(&b));
}
__device__ __forceinline__ float corrupt(float v, const InjRec& r) { return corrupt_value(v, r.mode, r.bit, r.value); }

__device__ __forceinline__ void atomic_max_pos(float* addr, float v) {
  // Non-negative floats order like their bit patterns; NaN ratios are recorded as +inf.
  if (!(v >= 0.f)) v = __int_as_float(0x7f800000);
  atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}

}  // namespace efta

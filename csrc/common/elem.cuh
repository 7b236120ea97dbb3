// 16-bit element types both kernel families compute in: conversions, packing, the warp-level
// m16n8k16 MMA and ldmatrix, and the fault-injection arithmetic of ftcompile.abft.injection.corrupt.
// Only CUDA headers: nvcc -c checks it without torch.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace sm90 {

template <typename T> struct Elem;

template <> struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float2 unpack(uint32_t u) {  // exact: bf16 is fp32's top half
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
  }
  // c (+)= a b for one m16n8k16 tile (mma.sync fragments).
  static __device__ __forceinline__ void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static constexpr float kUnitRoundoff = 0.00390625f;  // 2^-8
  static constexpr uint32_t kOnes = 0x3f803f80u;        // (1.0, 1.0)
};

template <> struct Elem<__half> {
  static __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    __half2 h = *reinterpret_cast<__half2*>(&u);
    return __half22float2(h);
  }
  static __device__ __forceinline__ void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static constexpr float kUnitRoundoff = 0.00048828125f;  // 2^-11
  static constexpr uint32_t kOnes = 0x3c003c00u;
};

__device__ __forceinline__ void ldsm_x4(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Encodings a bit flip acts on (ftcompile.abft.injection: fmt "fp32", "bf16", "fp16").
enum FlipFmt : int { kFlipFp32 = 0, kFlipBf16 = 1, kFlipFp16 = 2 };

// The reference's injection.corrupt(): add `value` (add = true), or flip bit `bit` of v's encoding in
// format `fmt` (after rounding to it). Out of line: it runs only while injecting, and inlined copies
// would bloat the hot loops' code.
static __device__ __noinline__ float corrupt_value(float v, bool add, int fmt, int bit, float value) {
  if (add) return v + value;
  if (fmt == kFlipFp32) return __uint_as_float(__float_as_uint(v) ^ (1u << bit));
  if (fmt == kFlipBf16) {
    __nv_bfloat16 h = __float2bfloat16_rn(v);
    unsigned short b = *reinterpret_cast<unsigned short*>(&h) ^ (unsigned short)(1u << bit);
    return __bfloat162float(*reinterpret_cast<__nv_bfloat16*>(&b));
  }
  __half h = __float2half_rn(v);
  unsigned short b = *reinterpret_cast<unsigned short*>(&h) ^ (unsigned short)(1u << bit);
  return __half2float(*reinterpret_cast<__half*>(&b));
}

}  // namespace sm90

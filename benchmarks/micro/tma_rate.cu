// How fast does one CTA stream W through a TMA ring with nothing else to do? The thin kernel's
// (thin_gemm.cu) 128-row W tiles of 64 k (16 KB) through an 8-stage ring, one CTA per tile, one
// thread issuing and waiting (no consumers, no x): mode 0 as the thin kernel loads them (a 2-D TMA box
// of 128 rows x 128 bytes), modes 1-2 the same 16 KB from a tile-major copy of W (one 16 KB or four
// 4 KB 1-D bulk copies: is a 128-byte-row box slower than contiguous bytes?). N = 11008 / 14336 /
// 16896 (86 / 112 / 132 CTAs), K = 4096, four copies of W so that each call reads DRAM; event-timed,
// best of 3. Run 46k (NOTES_gemm.md, session 40). Build and run (repository root):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/tma_rate benchmarks/micro/tma_rate.cu && /tmp/tma_rate
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#define CK(x) do { auto e = (x); if (e != cudaSuccess) { printf("err %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)
__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t par) {
  uint32_t done = 0;
  do { asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(sa(bar)), "r"(par) : "memory"); } while (!done);
}
__device__ __forceinline__ void expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(bar)), "r"(bytes) : "memory");
}
constexpr int S = 8, STAGE = 16384;
template <int MODE>  // 0: TMA 2-D box 64 x 128 rows; 1: one 16 KB bulk copy; 2: four 4 KB bulk copies
__global__ void __launch_bounds__(128, 1) stream(const __grid_constant__ CUtensorMap tm, const uint8_t* tiled, int nk, int ntiles, unsigned* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint64_t full[S];
  uint8_t* base = (uint8_t*)(((uintptr_t)smem + 1023) & ~(uintptr_t)1023);
  if (threadIdx.x != 0) return;
  for (int s = 0; s < S; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  unsigned acc = 0;
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    auto issue = [&](int ks) {
      const int slot = ks % S;
      uint8_t* dst = base + slot * STAGE;
      expect(&full[slot], STAGE);
      if (MODE == 0) {
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
                     :: "r"(sa(dst)), "l"((uint64_t)&tm), "r"(sa(&full[slot])), "r"(ks * 64), "r"(t * 128) : "memory");
      } else {
        const uint8_t* src = tiled + ((size_t)t * nk + ks) * STAGE;
        const int parts = MODE == 1 ? 1 : 4;
        for (int p = 0; p < parts; ++p)
          asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                       :: "r"(sa(dst + p * (STAGE / parts))), "l"(src + p * (STAGE / parts)), "r"(STAGE / parts), "r"(sa(&full[slot])) : "memory");
      }
    };
    for (int ks = 0; ks < S && ks < nk; ++ks) issue(ks);
    for (int ks = 0; ks < nk; ++ks) {
      const int slot = ks % S;
      wait(&full[slot], (unsigned)(((size_t)t / gridDim.x * nk + ks) / S) & 1u);
      acc += base[slot * STAGE + (ks & 1023)];
      if (ks + S < nk) issue(ks + S);
    }
  }
  if (acc == 12345678u) sink[0] = acc;
}
typedef CUresult (*Enc)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                        const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
int main() {
  Enc enc = nullptr; cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void**)&enc, cudaEnableDefault, &q));
  const int K = 4096, nk = K / 64;
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int Ns[] = {11008, 14336, 16896};
  size_t maxbytes = (size_t)16896 * K * 2;
  uint8_t *w, *tiled; unsigned* sink;
  CK(cudaMalloc(&w, maxbytes * 4)); CK(cudaMalloc(&tiled, maxbytes * 4)); CK(cudaMalloc(&sink, 4));
  cudaMemset(w, 1, maxbytes * 4); cudaMemset(tiled, 1, maxbytes * 4);
  size_t smem = S * STAGE + 1024;
  cudaFuncSetAttribute(stream<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  cudaFuncSetAttribute(stream<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  cudaFuncSetAttribute(stream<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int N : Ns) {
    const int tiles = N / 128;
    const size_t bytes = (size_t)N * K * 2;
    for (int mode = 0; mode < 3; ++mode) {
      float best = 1e9;
      for (int rep = 0; rep < 3; ++rep) {
        cudaEventRecord(a);
        for (int it = 0; it < 4; ++it) {  // 4 copies of W: each call streams from DRAM
          CUtensorMap tm;
          cuuint64_t gd[2] = {(cuuint64_t)K, (cuuint64_t)N}, gs[1] = {(cuuint64_t)K * 2};
          cuuint32_t box[2] = {64, 128}, es[2] = {1, 1};
          enc(&tm, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, w + it * bytes, gd, gs, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
          const int grid = tiles < sms ? tiles : sms;
          if (mode == 0) stream<0><<<grid, 128, smem>>>(tm, tiled + it * bytes, nk, tiles, sink);
          if (mode == 1) stream<1><<<grid, 128, smem>>>(tm, tiled + it * bytes, nk, tiles, sink);
          if (mode == 2) stream<2><<<grid, 128, smem>>>(tm, tiled + it * bytes, nk, tiles, sink);
        }
        cudaEventRecord(b); CK(cudaEventSynchronize(b));
        float ms; cudaEventElapsedTime(&ms, a, b); ms /= 4;
        if (ms < best) best = ms;
      }
      CK(cudaGetLastError());
      printf("N=%d tiles=%d mode=%s: %.1f us, %.2f TB/s, %.1f GB/s per CTA\n", N, tiles,
             mode == 0 ? "tma-box-128rows" : mode == 1 ? "bulk-16KB" : "bulk-4x4KB", best * 1e3, bytes / best / 1e9,
             bytes / best / 1e6 / (tiles < sms ? tiles : sms));
    }
  }
  return 0;
}

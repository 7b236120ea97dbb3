// What does one m64nNk16 wgmma cost the tensor pipe, by N? The tile-local check of the global GEMM
// folds 8 checksum columns into its wgmma (n200 for a 192-wide tile, n136 for 128) and measured far
// more than 8/192 of the tile's time (NOTES_gemm.md run 24). This times the instruction alone, in
// the mainloop's pattern (one CTA per SM, WGS consumer warpgroups, 4 wgmmas per k-step from a
// 128-byte-swizzled A and B in shared memory, one commit group per k-step, wait<1>), no loads.
// Build and run: benchmarks/micro/wgmma_rate.sh (generates the wrappers for the shapes below).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "sm90.cuh"
#include "wgmma_rate_ops.cuh"  // generated: wgmma_m64n<N>k16_bf16 for every N of NS

using namespace sm90;

template <int N>
__device__ __forceinline__ void mma(float* d, uint64_t da, uint64_t db);
#define FTW_MMA(n) \
  template <> __device__ __forceinline__ void mma<n>(float* d, uint64_t da, uint64_t db) { wgmma_m64n##n##k16_bf16(d, da, db, 1); }
FTW_EACH_N(FTW_MMA)

constexpr int A_WG_BYTES = 64 * 128, B_BYTES = 256 * 128;

template <int N, int WGS>
__global__ void __launch_bounds__(128 * WGS, 1) rate_kernel(int steps, long long* cycles, float* sink, int write) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // small bf16 values (zeros might let the tensor pipe idle its multipliers)
  for (int i = threadIdx.x; i < (WGS * A_WG_BYTES + B_BYTES) / 2; i += blockDim.x)
    reinterpret_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16(0.0078125f * (float)((i * 7) % 13 - 6));
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const uint64_t da = desc_k_sw128(smem_u32(base) + wg * A_WG_BYTES);
  const uint64_t db = desc_k_sw128(smem_u32(base + WGS * A_WG_BYTES));
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
  const long long t0 = clock64();
  for (int s = 0; s < steps; ++s) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) mma<N>(acc, da + 2 * kk, db + 2 * kk);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s += acc[i];
  if (write) sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int N, int WGS>
void run(int sms, int steps, long long* cycles_d, float* sink) {
  auto kern = rate_kernel<N, WGS>;
  const int smem = 200 * 1024;  // one CTA per SM
  cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kern<<<sms, 128 * WGS, smem>>>(steps / 8, cycles_d, sink, 0);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  kern<<<sms, 128 * WGS, smem>>>(steps, cycles_d, sink, 0);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, e0, e1);
  long long c[1024];
  cudaMemcpy(c, cycles_d, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  long long mx = 0;
  for (int i = 0; i < sms; ++i) mx = c[i] > mx ? c[i] : mx;
  const double per_mma = (double)mx / ((double)steps * 4 * WGS);  // SM cycles per wgmma, WGS issuing
  const double flop = 2.0 * 64 * N * 16 * 4 * (double)steps * WGS * sms;
  printf("N=%3d wgs=%d  cycles/wgmma %7.2f  cycles/column %.4f  (math at N/2: %5.1f)  %6.1f TFLOP/s\n", N, WGS,
         per_mma, per_mma / N, N / 2.0, flop / (ms * 1e-3) / 1e12);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("error: %s\n", cudaGetErrorString(err));
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* cycles_d;
  float* sink;
  cudaMalloc(&cycles_d, 1024 * sizeof(long long));
  cudaMalloc(&sink, 1024 * 384 * sizeof(float));
  const int steps = 20000;
#define FTW_RUN2(n) run<n, 2>(sms, steps, cycles_d, sink);
#define FTW_RUN1(n) run<n, 1>(sms, steps, cycles_d, sink);
  FTW_EACH_N(FTW_RUN2)
  FTW_EACH_N(FTW_RUN1)
  return 0;
}

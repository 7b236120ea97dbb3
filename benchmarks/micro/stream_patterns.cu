// How fast can an H200 stream a row-major [N, K] bf16 weight (decode GEMV) under different load
// patterns? No math, only the loads (folded into one word per thread so they are not removed).
// Patterns (CTA = 8 warps on 64 rows x K / split, as the streaming thread kernel):
//   0 frag:   a warp instruction reads 8 rows x 64 B (the MMA-fragment layout of stream_gemm.cu),
//             warps interleaved over 32-wide k chunks; DEPTH chunks in flight per warp
//   1 rows:   a warp instruction reads 512 contiguous bytes of one row; warp w owns rows 8w..8w+7,
//             DEPTH x 8 loads in flight per lane
//   2 linear: the weight as one flat array, 4 KB per warp step, grid-stride (the copy-like ceiling)
//   3 frag through a per-warp cp.async ring of DEPTH chunks in shared memory (what stream_gemm.cu
//             tried in run 14a, NOTES_gemm.md)
// Build and run: nvcc -O3 -arch=sm_90a -o /tmp/sp stream_patterns.cu && /tmp/sp
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <vector>

template <bool PF>
__device__ __forceinline__ uint4 ld(const void* p) {
  uint4 v;
  if (PF)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

template <int PATTERN, int DEPTH, bool PF>
__global__ void __launch_bounds__(256) stream_kernel(const uint16_t* __restrict__ w, int N, int K, int split,
                                                     uint32_t* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  uint32_t acc = 0;
  if (PATTERN == 0) {
    const int tile = blockIdx.x / split, r = blockIdx.x % split;
    const int nq = K / 32, qb = r * nq / split, qe = (r + 1) * nq / split;
    const uint16_t* base = w + ((int64_t)tile * 64 + g) * K + 8 * c;
    for (int q = qb + warp; q < qe; q += 8 * DEPTH) {
      uint4 v[DEPTH][8];
#pragma unroll
      for (int d = 0; d < DEPTH; ++d)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          v[d][j] = q + 8 * d < qe ? ld<PF>(base + (int64_t)8 * j * K + 32 * (q + 8 * d)) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int d = 0; d < DEPTH; ++d)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc += fold(v[d][j]);
    }
  } else if (PATTERN == 1) {
    const int tile = blockIdx.x / split, r = blockIdx.x % split;
    const int kb = r * (K / split), ke = (r + 1) * (K / split);
    const uint16_t* base = w + ((int64_t)tile * 64 + 8 * warp) * K + 8 * lane;
    for (int k = kb; k < ke; k += 256 * DEPTH) {
      uint4 v[DEPTH][8];
#pragma unroll
      for (int d = 0; d < DEPTH; ++d)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          v[d][j] = k + 256 * d + 8 * lane < ke ? ld<PF>(base + (int64_t)j * K + k + 256 * d) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int d = 0; d < DEPTH; ++d)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc += fold(v[d][j]);
    }
  } else if (PATTERN == 3) {
    extern __shared__ __align__(16) uint8_t ring_smem[];
    const int tile = blockIdx.x / split, r = blockIdx.x % split;
    const int nq = K / 32, qb = r * nq / split, qe = (r + 1) * nq / split;
    const uint16_t* base = w + ((int64_t)tile * 64 + g) * K + 8 * c;
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(ring_smem) + warp * DEPTH * 4096 + 16 * lane;
    const int nit = qe - qb > warp ? (qe - qb - warp + 7) / 8 : 0;
    auto issue = [&](int i) {
      const int q = qb + warp + 8 * i;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(ring + (i % DEPTH) * 4096 + 512 * j),
                     "l"(base + (int64_t)8 * j * K + 32 * q) : "memory");
    };
#pragma unroll
    for (int i = 0; i < DEPTH - 1; ++i) {
      if (i < nit) issue(i);
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
    for (int i = 0; i < nit; ++i) {
      if (i + DEPTH - 1 < nit) issue(i + DEPTH - 1);
      asm volatile("cp.async.commit_group;" ::: "memory");
      asm volatile("cp.async.wait_group %0;" ::"n"(DEPTH - 1) : "memory");
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(ring + (i % DEPTH) * 4096 + 512 * j));
        acc += fold(v);
      }
    }
  } else {
    const int64_t total = (int64_t)N * K / 8;  // 16-byte vectors
    const int64_t wid = (int64_t)blockIdx.x * 8 + warp, nw = (int64_t)gridDim.x * 8;
    const uint4* v4 = reinterpret_cast<const uint4*>(w);
    for (int64_t i = wid * 256 * DEPTH; i < total; i += nw * 256 * DEPTH) {
      uint4 v[DEPTH][8];
#pragma unroll
      for (int d = 0; d < DEPTH; ++d)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t e = i + 256 * d + 32 * j + lane;
          v[d][j] = e < total ? ld<PF>(v4 + e) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
      for (int d = 0; d < DEPTH; ++d)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc += fold(v[d][j]);
    }
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

template <int P, int D, bool PF>
float time_us(std::vector<uint16_t*>& bufs, int N, int K, int split, int grid, uint32_t* sink) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  const int smem = P == 3 ? 8 * D * 4096 : 0;
  cudaFuncSetAttribute(stream_kernel<P, D, PF>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (int i = 0; i < 4; ++i) stream_kernel<P, D, PF><<<grid, 256, smem>>>(bufs[i % bufs.size()], N, K, split, sink);
  const int iters = 40;
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) stream_kernel<P, D, PF><<<grid, 256, smem>>>(bufs[i % bufs.size()], N, K, split, sink);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms;
  cudaEventElapsedTime(&ms, a, b);
  return 1000.f * ms / iters;
}

int main() {
  uint32_t* sink;
  cudaMalloc(&sink, 4);
  const int shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
  printf("%-12s %-28s %8s %8s\n", "N x K", "pattern", "us", "GB/s");
  for (auto& s : shapes) {
    const int N = s[0], K = s[1];
    const size_t bytes = (size_t)N * K * 2;
    std::vector<uint16_t*> bufs;
    for (size_t tot = 0; tot < (size_t)200 << 20 || bufs.size() < 2; tot += bytes) {
      uint16_t* p; cudaMalloc(&p, bytes); cudaMemset(p, 1, bytes); bufs.push_back(p);
    }
    const int tiles = N / 64;
    int sm; cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0);
    auto row = [&](const char* name, float us) {
      printf("%5dx%-6d %-28s %8.2f %8.0f\n", N, K, name, us, bytes / us / 1e3);
    };
    char name[64];
    for (int split : {1, 2, 4}) {
      const int grid = tiles * split;
      snprintf(name, 64, "frag d1 pf s%d (g%d)", split, grid); row(name, time_us<0, 1, true>(bufs, N, K, split, grid, sink));
      snprintf(name, 64, "frag d1 nopf s%d", split); row(name, time_us<0, 1, false>(bufs, N, K, split, grid, sink));
      snprintf(name, 64, "frag d2 pf s%d", split); row(name, time_us<0, 2, true>(bufs, N, K, split, grid, sink));
      snprintf(name, 64, "frag cp.async d2 s%d", split); row(name, time_us<3, 2, true>(bufs, N, K, split, grid, sink));
      snprintf(name, 64, "frag cp.async d4 s%d", split); row(name, time_us<3, 4, true>(bufs, N, K, split, grid, sink));
      snprintf(name, 64, "rows d1 pf s%d", split); row(name, time_us<1, 1, true>(bufs, N, K, split, grid, sink));
      snprintf(name, 64, "rows d1 nopf s%d", split); row(name, time_us<1, 1, false>(bufs, N, K, split, grid, sink));
      snprintf(name, 64, "rows d2 nopf s%d", split); row(name, time_us<1, 2, false>(bufs, N, K, split, grid, sink));
    }
    for (int grid : {sm, 2 * sm, 4 * sm}) {
      snprintf(name, 64, "linear d1 g%d", grid); row(name, time_us<2, 1, false>(bufs, N, K, 1, grid, sink));
      snprintf(name, 64, "linear d2 g%d", grid); row(name, time_us<2, 2, false>(bufs, N, K, 1, grid, sink));
    }
    for (auto p : bufs) cudaFree(p);
  }
  cudaError_t e = cudaDeviceSynchronize();
  printf("status: %s\n", cudaGetErrorString(e));
  return 0;
}

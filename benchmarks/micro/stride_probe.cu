// Does the streaming kernel's read order cost DRAM bandwidth? Loads only (no math), in the exact
// pattern of stream_gemm.cu: a CTA of NW warps on 64 rows of a row-major [N, K] bf16 weight, warps
// interleaved over 32-wide k chunks, a warp instruction reading 8 rows x 64 B, evict-first L2 policy.
// Two changes that leave the bytes alone, each alone and together:
//   rot: tile t starts rot * t chunks into its K range (wrapping), so that the tiles streaming at
//        once are not all at the same column offset of rows 2K bytes apart;
//   pad: the row stride is K + 64 elements instead of K (rows no longer a power of two apart).
// If 11008x4096 (8 KB rows) streams slower than 4096x11008 (22 KB rows) for want of either, one of
// them is what the kernel lacks (NOTES_gemm.md, session 30).
// Build and run: nvcc -O3 -arch=sm_90a -o /tmp/sp2 benchmarks/micro/stride_probe.cu && /tmp/sp2
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <vector>
#include "timing.cuh"

__device__ __forceinline__ uint4 ld(const void* p, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
  return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

template <int NW, int DEPTH>
__global__ void __launch_bounds__(32 * NW) frag_kernel(const uint16_t* __restrict__ w, int K, int64_t ld_rows,
                                                      int split, int rot_mul, uint32_t* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  const int tile = blockIdx.x / split, r = blockIdx.x % split;
  const int nq = (K + 31) / 32, qb = (int)((int64_t)r * nq / split), qe = (int)((int64_t)(r + 1) * nq / split);
  const int L = qe - qb, rot = L > 0 ? (int)((int64_t)tile * rot_mul % L) : 0;
  const uint16_t* base = w + ((int64_t)tile * 64 + g) * ld_rows + 8 * c;
  const int nit = L > warp ? (L - warp + NW - 1) / NW : 0;
  auto k_of = [&](int i) {
    const int q = warp + NW * i + rot;
    return (int64_t)(qb + (q >= L ? q - L : q)) * 32;
  };
  uint32_t acc = 0;
  for (int i = 0; i < nit; i += DEPTH) {
    uint4 v[DEPTH][8];
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const bool ok = i + d < nit;
      const int64_t k = ok ? k_of(i + d) : 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) v[d][j] = ok ? ld(base + 8 * j * ld_rows + k, pol) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int d = 0; d < DEPTH; ++d)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += fold(v[d][j]);
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

// The copy-like ceiling: the weight as one flat array, 4 KB per warp step, grid-stride.
__global__ void __launch_bounds__(256) linear_kernel(const uint4* __restrict__ v4, int64_t total, uint32_t* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  uint32_t acc = 0;
  for (int64_t i = ((int64_t)blockIdx.x * 8 + warp) * 256; i < total; i += (int64_t)gridDim.x * 8 * 256) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = i + 32 * j + lane < total ? ld(v4 + i + 32 * j + lane, pol) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += fold(v[j]);
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

int main() {
  uint32_t* sink;
  cudaMalloc(&sink, 4);
  struct Shape { int N, K, nw, split; };
  // The production configurations (cuda_gemm.stream_config at M = 1), and 4096x11008 as the control.
  const Shape shapes[] = {{11008, 4096, 8, 1}, {14336, 4096, 8, 1}, {8192, 4096, 16, 1}, {4096, 4096, 16, 2},
                          {4096, 11008, 16, 2}, {4096, 14336, 16, 2}};
  printf("%-12s %-26s %8s %8s\n", "N x K", "variant", "us", "TB/s");
  for (const Shape& s : shapes) {
    const int N = s.N, K = s.K;
    const size_t bytes = (size_t)N * K * 2;
    for (int pad : {0, 64}) {
      const int64_t ldr = K + pad;
      const size_t alloc = (size_t)N * ldr * 2;
      std::vector<uint16_t*> bufs;
      for (size_t tot = 0; tot < ((size_t)400 << 20) || bufs.size() < 2; tot += alloc) {
        uint16_t* p; cudaMalloc(&p, alloc); cudaMemset(p, 1, alloc); bufs.push_back(p);
      }
      const int grid = N / 64 * s.split;
      for (int depth : {1, 2})
        for (int rot : {0, 1, 16, 37}) {
          auto launch = [&](int i) {
            if (s.nw == 8) {
              if (depth == 1) frag_kernel<8, 1><<<grid, 256>>>(bufs[i], K, ldr, s.split, rot, sink);
              else frag_kernel<8, 2><<<grid, 256>>>(bufs[i], K, ldr, s.split, rot, sink);
            } else {
              if (depth == 1) frag_kernel<16, 1><<<grid, 512>>>(bufs[i], K, ldr, s.split, rot, sink);
              else frag_kernel<16, 2><<<grid, 512>>>(bufs[i], K, ldr, s.split, rot, sink);
            }
          };
          const float us = time_us(launch, (int)bufs.size());
          printf("%5dx%-6d w%d k%d d%d pad%-3d rot%-3d %8.2f %8.2f\n", N, K, s.nw, s.split, depth, pad, rot, us,
                 bytes / us / 1e6);
        }
      if (pad == 0) {
        int sm;
        cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0);
        for (int grid : {sm, 2 * sm, 4 * sm}) {
          auto launch = [&](int i) {
            linear_kernel<<<grid, 256>>>(reinterpret_cast<const uint4*>(bufs[i]), (int64_t)(bytes / 16), sink);
          };
          const float us = time_us(launch, (int)bufs.size());
          printf("%5dx%-6d linear g%-18d %8.2f %8.2f\n", N, K, grid, us, bytes / us / 1e6);
        }
      }
      for (auto p : bufs) cudaFree(p);
    }
  }
  cudaError_t e = cudaDeviceSynchronize();
  printf("status: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}

// Can a streaming CTA hold more of W in flight than its registers allow? Loads and fragment reads
// only (no math). The streaming kernel (stream_gemm.cu) loads W straight into registers: 4 KB per
// warp, 32-64 KB per SM, and a flat read needs ~128 KB per SM in flight to reach the copy rate
// (stride_probe.cu, NOTES_gemm.md session 30). Here NPW producer warps fill a ring of S stages in
// shared memory with 1-D bulk copies (cp.async.bulk: one per W row and stage, CHB contiguous bytes,
// evict-first), and NWC consumer warps read their MMA fragments out of it (lane (g, c): 16 bytes of
// row 8j + g at 16c of its 64-byte chunk, ld.shared.v4; rows padded by 64 bytes, conflict-free) and
// release each stage. CTA = 64 W rows x a K range (K split over `split` CTAs), as stream_gemm.cu.
// NPW = 0: no producer warps; each consumer warp issues the copies of 64 / NWC rows of every stage
// and refills a slot once every warp has read it (the layout of the ring kernel tried in
// stream_gemm.cu, branch wip/stream-ring). `work`: a dependent chain of that many FMAs per chunk
// after its reads, standing in for the MMAs and checks of the real kernel. main() runs run 36f's
// variants; runs 36b-c (1, 2, 4 producer warps, CHB 256-1024, 2-10 stages) called run() with others.
// Build and run (repository root): nvcc -O3 -std=c++17 -arch=sm_90a -Icsrc/common -o /tmp/brp
//   benchmarks/micro/bulk_ring_probe.cu && /tmp/brp
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <vector>
#include "sm90.cuh"
#include "timing.cuh"

using namespace sm90;

__device__ __forceinline__ void bulk_load_hint(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                               uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar), "l"(pol)
      : "memory");
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

constexpr int ROWS = 64, MAXS = 16;

template <int NWC, int CHB, int NPW>
__global__ void __launch_bounds__(32 * (NWC + NPW)) ring_kernel(const uint16_t* __restrict__ w, int N, int K, int split,
                                                             int S, int work, uint32_t* sink) {
  constexpr int PITCH = CHB + 64, STAGE = ROWS * PITCH, CPS = CHB / 64;  // chunks of 32 k per stage
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t full[MAXS], empty[MAXS];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int tile = blockIdx.x / split, r = blockIdx.x % split;
  const int nq = (K + 31) / 32, qb = (int)((int64_t)r * nq / split), qe = (int)((int64_t)(r + 1) * nq / split);
  const int nstage = (qe - qb + CPS - 1) / CPS;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) { mbar_init(&full[i], NPW ? NPW : NWC); mbar_init(&empty[i], NWC); }
    fence_barrier_init();
  }
  __syncthreads();
  const uint32_t ring = smem_u32(smem);
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  auto stage_k0 = [&](int s) { return (qb + s * CPS) * 32; };  // stage s: k in [stage_k0, +stage_bytes / 2)
  auto stage_bytes = [&](int s) { return (uint32_t)(min(K, min(qe, qb + (s + 1) * CPS) * 32) - stage_k0(s)) * 2; };
  // The copies of stage s for `count` rows row0, row0 + step, ... (lane l: the l-th, l + 32-th, ...),
  // announced on the stage's full barrier by lane 0.
  const int rows = min(ROWS, N - tile * ROWS);
  auto issue = [&](int s, int row0, int step, int count) {
    const int slot = s % S;
    if (lane == 0) mbar_expect_tx(&full[slot], stage_bytes(s) * count);
    __syncwarp();
    for (int i = lane; i < count; i += 32) {
      const int row = row0 + step * i;
      bulk_load_hint(ring + slot * STAGE + row * PITCH, w + ((int64_t)tile * ROWS + row) * K + stage_k0(s),
                     stage_bytes(s), smem_u32(&full[slot]), pol);
    }
  };
  // NPW = 0: consumer warp w copies rows RPW w ... RPW w + RPW - 1 of every stage.
  constexpr int RPW = ROWS / NWC;
  const int nmine = max(0, min(RPW, rows - RPW * warp));
  if constexpr (NPW == 0) {
    for (int s = 0; s < S && s < nstage; ++s) issue(s, RPW * warp, 1, nmine);
  } else if (warp >= NWC) {  // producers: warp p issues the copies of rows p, p + NPW, ...
    const int p = warp - NWC, mine = rows > p ? (rows - p + NPW - 1) / NPW : 0;
    for (int s = 0; s < nstage; ++s) {
      if (s >= S) mbar_wait(&empty[s % S], ((s / S) + 1) & 1);
      issue(s, p, NPW, mine);
    }
    return;
  }
  uint32_t acc = 0;
  float fa = 1.f;
  for (int s = 0; s < nstage; ++s) {
    const int slot = s % S;
    mbar_wait(&full[slot], (s / S) & 1);
    const int q0 = qb + s * CPS, nc = min(qe - q0, CPS);
    for (int q = warp; q < nc; q += NWC) {
      uint4 v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = lds128(ring + slot * STAGE + (8 * j + g) * PITCH + 64 * q + 16 * c);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += fold(v[j]);
    }
    fence_proxy_async_smem();
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[slot]);
    if (NPW == 0 && s + S < nstage) {
      mbar_wait(&empty[slot], (s / S) & 1);
      issue(s + S, RPW * warp, 1, nmine);
    }
    // the chunk's work, after its stage is released and (NPW 0) refilled, as in the ring kernel
    const float fb = __uint_as_float((acc & 0x007fffffu) | 0x3f800000u);
    for (int q = warp; q < nc; q += NWC)
      for (int f = 0; f < work; ++f) fa = fmaf(fa, fb, -0.5f);
  }
  if (acc == 0x12345678u || fa == 1234.5f) sink[0] = acc;
}

template <int NWC, int CHB, int NPW>
void run(std::vector<uint16_t*>& bufs, int N, int K, int split, int S, uint32_t* sink, size_t bytes, int work = 0) {
  constexpr int STAGE = ROWS * (CHB + 64);
  const int smem = S * STAGE;
  if (S > MAXS || smem > 227 * 1024) return;
  cudaFuncSetAttribute(ring_kernel<NWC, CHB, NPW>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ring_kernel<NWC, CHB, NPW>, 32 * (NWC + NPW), smem);
  const int grid = (N / ROWS) * split;
  auto launch = [&](int i) { ring_kernel<NWC, CHB, NPW><<<grid, 32 * (NWC + NPW), smem>>>(bufs[i], N, K, split, S, work,
                                                                                       sink); };
  const float us = time_us(launch, (int)bufs.size());
  cudaError_t e = cudaGetLastError();
  printf("%5dx%-6d w%-2d p%d k%d ch%-4d s%-2d work %-4d (%3d KB of ring/SM, %d CTA/SM, grid %d) %8.2f us %6.2f TB/s%s\n",
         N, K, NWC, NPW, split, CHB, S, work, per_sm * smem / 1024, per_sm, grid, us, bytes / us / 1e6,
         e == cudaSuccess ? "" : cudaGetErrorString(e));
}

int main() {
  uint32_t* sink;
  cudaMalloc(&sink, 4);
  struct Shape { int N, K, split; };
  const Shape shapes[] = {{11008, 4096, 1}, {8192, 4096, 1}, {4096, 4096, 2}};
  for (const Shape& sh : shapes) {
    const size_t bytes = (size_t)sh.N * sh.K * 2;
    std::vector<uint16_t*> bufs;
    for (size_t tot = 0; tot < ((size_t)400 << 20) || bufs.size() < 2; tot += bytes) {
      uint16_t* p; cudaMalloc(&p, bytes); cudaMemset(p, 1, bytes); bufs.push_back(p);
    }
    // 4 producer warps against copies issued by the consumers (NPW 0), with a stand-in for the
    // kernel's work per chunk (a dependent FMA chain: 0, 150, 400 FMAs, ~4 cycles each)
    for (int work : {0, 150, 400}) {
      run<8, 512, 4>(bufs, sh.N, sh.K, sh.split, 3, sink, bytes, work);
      run<8, 512, 0>(bufs, sh.N, sh.K, sh.split, 3, sink, bytes, work);
      run<16, 1024, 0>(bufs, sh.N, sh.K, sh.split, 3, sink, bytes, work);
    }
    for (auto p : bufs) cudaFree(p);
  }
  cudaError_t e = cudaDeviceSynchronize();
  printf("status: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}

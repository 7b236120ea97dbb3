// Global ABFT linear y = x W^T + b for compute-bound shapes (Hopper: TMA + wgmma, persistent).
//
// CTA = 3 warpgroups: WG0 warp 0 lane 0 issues TMA loads into a 4-stage ring; WG0 warps 1-3 take
// part in the ring and compute the x-side of the check from the A tiles in shared memory on every
// T_N-th k-step (x . sum_n W[n], sum x, max x, min x per row: no extra launch, no extra pass over
// x); WG1/WG2 run m64n256k16 wgmma on a 128x256 tile, add the bias to the fp32 accumulators, fold
// the output row sums (plain and position-weighted) into per-row fp64 workspace sums, round and
// store (16-byte stores through a staging buffer). The CTA that finishes the last N-tile of an
// M-tile (atomic ticket) verifies those rows against V-ABFT thresholds, locates a single fault
// with the weighted checksum, recomputes that element and rechecks; everything it read is reset
// for the next call. Optional 2-CTA clusters multicast the W half-tiles (args.cluster = 2).
#include <type_traits>

#include "ft_common.cuh"
#include "ft_host.cuh"
#include "wgmma_ops.cuh"

namespace ftg {
namespace glb {

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4, THREADS = 384, GROUP_M = 8;
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int STATS_THREADS = 96, SYNC_THREADS = 256 + STATS_THREADS;

// Epilogue staging: each consumer warp stages 16 rows x 64 columns (rows padded to 144 B: the
// fragment writes and the 16-byte row reads are both bank-conflict free), then stores whole rows.
constexpr int STG_PITCH = 144, STG_WARP = 16 * STG_PITCH;

struct Smem {
  uint64_t full[STAGES], empty[STAGES];
  double rs2[BM], rc1[BM];
  float rd1[BM], rt[BM];
  double red[8];                                         // block reductions (8 consumer warps)
  int flagged[BM];
  int last, nflag, ndet, ncorr, nunc, ninvalid, pos;
};
constexpr size_t SMEM_BYTES = 1024 + (size_t)STAGES * STAGE_BYTES + 8 * STG_WARP + sizeof(Smem);

// Workspace: fp64 s1, s2, c1, sx [R] | fp32 max, min [R] | int ticket [batch*T_M] | int done, flag.
struct Ws {
  double *s1, *s2, *c1, *sx;
  float *mx, *mn;
  int *ticket, *done, *flag;
  __device__ Ws(void* base, int64_t rows, int64_t mtiles) {
    double* d = static_cast<double*>(base);
    s1 = d; s2 = d + rows; c1 = d + 2 * rows; sx = d + 3 * rows;
    mx = reinterpret_cast<float*>(d + 4 * rows); mn = mx + rows;
    ticket = reinterpret_cast<int*>(mn + rows); done = ticket + mtiles; flag = done + 1;
  }
};

// Release a ring slot: the W half-tiles are multicast, so a slot is free for the producers of
// every CTA of the cluster only once all of their consumers are done with it.
__device__ __forceinline__ void release_slot(Smem& sm, int slot, int cl, uint32_t rank) {
  mbar_arrive(&sm.empty[slot]);
  if (cl > 1) mbar_arrive_cluster(&sm.empty[slot], rank ^ 1u);
}

// The pipelined k-loop of one consumer warpgroup over the nk k-steps of a tile.
template <typename T>
__device__ __forceinline__ void mainloop(float* acc, Smem& sm, uint8_t* base, int nk, int& it, int wgc, int lane,
                                         int cl, uint32_t rank) {
  for (int ks = 0; ks < nk; ++ks, ++it) {
    const int slot = it % STAGES;
    mbar_wait(&sm.full[slot], (it / STAGES) & 1);
    const uint32_t sa = smem_u32(base + slot * STAGE_BYTES) + wgc * 64 * 128;
    const uint32_t sb = smem_u32(base + slot * STAGE_BYTES + A_BYTES);
    const uint64_t da = desc_k_sw128(sa), db = desc_k_sw128(sb);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_ss<T, BN>(acc, da + 2 * kk, db + 2 * kk, (ks | kk) != 0);
    wgmma_commit();
    wgmma_wait<1>();
    if (ks > 0 && lane == 0) release_slot(sm, (it - 1) % STAGES, cl, rank);
  }
  if (nk > 0) {  // the last stage is released once its wgmma retired
    wgmma_wait<0>();
    if (lane == 0) release_slot(sm, (it - 1) % STAGES, cl, rank);
  }
}

struct TileCoord { int b, mt, nt; };
// Grouped rasterisation: GROUP_M M-tiles sweep N together so W tiles are reused from L2.
__device__ __forceinline__ TileCoord tile_coord(int t, int tm_n, int tn_n) {
  const int per_b = tm_n * tn_n;
  TileCoord c;
  c.b = t / per_b;
  int r = t % per_b;
  const int span = GROUP_M * tn_n;
  const int first_m = (r / span) * GROUP_M;
  const int gsize = min(tm_n - first_m, GROUP_M);
  r %= span;
  c.mt = first_m + r % gsize;
  c.nt = r / gsize;
  return c;
}

template <typename T>
__device__ __forceinline__ float part_dot_f32(const T* a, const float* b, int64_t K, int idx, int step) {
  float s = 0.f;
  for (int64_t k = 8 * (int64_t)idx; k < K; k += 8 * (int64_t)step) {
    uint4 va = __ldg(reinterpret_cast<const uint4*>(a + k));
    float4 b0 = __ldg(reinterpret_cast<const float4*>(b + k)), b1 = __ldg(reinterpret_cast<const float4*>(b + k + 4));
    float2 f0 = Elem<T>::unpack(va.x), f1 = Elem<T>::unpack(va.y), f2 = Elem<T>::unpack(va.z), f3 = Elem<T>::unpack(va.w);
    s = fmaf(f0.x, b0.x, s); s = fmaf(f0.y, b0.y, s); s = fmaf(f1.x, b0.z, s); s = fmaf(f1.y, b0.w, s);
    s = fmaf(f2.x, b1.x, s); s = fmaf(f2.y, b1.y, s); s = fmaf(f3.x, b1.z, s); s = fmaf(f3.y, b1.w, s);
  }
  return s;
}
// Sum over the 256 consumer threads (ct), result in every thread. Uses named barrier 2.
__device__ __forceinline__ double block_sum(Smem& sm, float v, int ct) {
  v = warp_sum(v);
  if (ct % 32 == 0) sm.red[ct / 32] = v;
  named_bar_sync(2, 256);
  double s = 0.0;
#pragma unroll
  for (int w = 0; w < 8; ++w) s += sm.red[w];
  named_bar_sync(2, 256);
  return s;
}

template <typename T>
__device__ __forceinline__ float bias_at(const Args& a, int64_t n) {
  return (a.bias && n < a.N) ? Elem<T>::to_f(static_cast<const T*>(a.bias)[n]) : 0.f;
}
// Bias of columns n, n+1 (n even): one 4-byte load where N is even.
template <typename T>
__device__ __forceinline__ float2 bias_pair(const Args& a, int64_t n) {
  if (!a.bias) return make_float2(0.f, 0.f);
  if ((a.N & 1) == 0 && n + 1 < a.N)
    return Elem<T>::unpack(__ldg(reinterpret_cast<const uint32_t*>(static_cast<const T*>(a.bias) + n)));
  return make_float2(bias_at<T>(a, n), bias_at<T>(a, n + 1));
}

// Locate, correct and recheck one flagged row; all 256 consumer threads (rare path).
template <typename T>
__device__ void fixup_row(const Args& a, Smem& sm, int b, int64_t m, int lr, int ct) {
  const int64_t N = a.N, K = a.K, row = (int64_t)b * a.M + m;
  T* yrow = static_cast<T*>(a.y) + row * N;
  const T* xrow = static_cast<const T*>(a.x) + b * a.x_bstride + m * a.x_rstride;
  const T* W = static_cast<const T*>(a.w) + b * a.w_bstride;
  const float d1 = sm.rd1[lr], thr = sm.rt[lr];
  const float u = Elem<T>::kUnitRoundoff;
  if (isfinite(d1)) {
    double c2 = block_sum(sm, part_dot_f32(xrow, a.wsum + (int64_t)b * 2 * K + K, K, ct, 256), ct);
    if (a.bias) c2 += a.bstats[1];
    const double ratio = (sm.rs2[lr] - c2) / (double)d1;
    const double near = rint(ratio);
    if (ct == 0)
      sm.pos = (isfinite(ratio) && fabs(ratio - near) < 0.3 && near >= 1 && near <= (double)N) ? (int)near - 1 : -1;
  } else {  // a non-finite element: found by value when it is the only one
    float cnt = 0.f;
    int pos = -1;
    for (int64_t n = ct; n < N; n += 256)
      if (!isfinite(Elem<T>::to_f(__ldcg(yrow + n)))) { cnt += 1.f; pos = (int)n; }
    if (ct == 0) sm.pos = -1;
    named_bar_sync(2, 256);
    if (pos >= 0) atomicMax(&sm.pos, pos);
    if (block_sum(sm, cnt, ct) != 1.0) {
      if (ct == 0) sm.pos = -1;
    }
  }
  named_bar_sync(2, 256);
  const int p = sm.pos;
  bool ok = false;
  if (p >= 0) {
    const float t = (float)block_sum(sm, part_dot(xrow, W + p * a.w_rstride, K, ct, 256), ct) + bias_at<T>(a, p);
    const float yold = Elem<T>::to_f(__ldcg(yrow + p));
    if (isfinite(d1) && isfinite(yold)) {
      // The faulty fp32 value is gone (stored rounded): allow its rounding error in the recheck.
      ok = !exceeds(d1 - (yold - t), thr + u * fabsf(yold));
    } else {  // non-finite sum or stored element: recheck the stored row with the correction in
      float s = 0.f, sa = 0.f;
      for (int64_t n = ct; n < N; n += 256) {
        const float v = (n == p) ? t : Elem<T>::to_f(__ldcg(yrow + n));
        s += v; sa += fabsf(v);
      }
      const double ss = block_sum(sm, s, ct), sas = block_sum(sm, sa, ct);
      ok = !exceeds((float)(ss - sm.rc1[lr]), thr + u * (float)sas);
    }
    named_bar_sync(2, 256);
    if (ct == 0) yrow[p] = Elem<T>::from_f(t);
  }
  if (ok) {
    if (ct == 0) sm.ncorr++;
    return;
  }
  if (ct == 0) sm.nunc++;
  if (a.policy == kRecompute) {  // the whole row, one warp per element
    const int lane = ct % 32;
    for (int64_t n = ct / 32; n < N; n += 8) {
      const float t = warp_dot(xrow, W + n * a.w_rstride, K, lane) + bias_at<T>(a, n);
      if (lane == 0) yrow[n] = Elem<T>::from_f(t);
    }
  }
}

// Fault injection into the finished tile (no wgmma in flight: ptxas keeps the pipeline async).
// "output" faults hit the final fp32 value. An accumulator fault "after k-step t" changes the
// final value by corrupt(v_t) - v_t, v_t = the partial sum over the first 64(t+1) k (recomputed
// by the owner's warp, fp32, no bias): the same element ends up with the same error.
template <typename T>
__device__ void inject_tile(float* acc, const Args& a, const Injection& inj, const TileCoord& c, int64_t r_lo,
                            int lane) {
  const int64_t M = a.M, ib = inj.row / M, im = inj.row % M;
  const int64_t warp_row0 = r_lo - lane / 4;  // first row of this warp's 16
  if (ib != c.b || inj.col / BN != c.nt || im < warp_row0 || im >= warp_row0 + 16) return;
  const int lr = (int)(im - warp_row0), lc = inj.col % BN;
  const bool owner = lane == (lr % 8) * 4 + (lc % 8) / 2;
  const int idx = 4 * (lc / 8) + 2 * (lr / 8) + (lc % 2);
  float v = 0.f;
#pragma unroll
  for (int r = 0; r < 128; ++r) v = (r == idx) ? acc[r] : v;
  float after;
  if (inj.step >= 0) {
    const T* xr = static_cast<const T*>(a.x) + c.b * a.x_bstride + im * a.x_rstride;
    const T* wr = static_cast<const T*>(a.w) + c.b * a.w_bstride + (int64_t)inj.col * a.w_rstride;
    const int64_t len = min(a.K, (int64_t)64 * (inj.step + 1));
    const float vt = warp_dot(xr, wr, len, lane);
    const float ct = corrupt(vt, inj);
    after = v + (ct - vt);
    if (owner && a.inj_log) { a.inj_log[2 * inj.slot] = vt; a.inj_log[2 * inj.slot + 1] = ct; }
    if (!isfinite(ct)) after = ct + (v - vt);  // keep Inf/NaN as the hardware would
  } else {
    after = corrupt(v, inj);
    if (owner && a.inj_log) { a.inj_log[2 * inj.slot] = v; a.inj_log[2 * inj.slot + 1] = after; }
  }
  if (owner) {
#pragma unroll
    for (int r = 0; r < 128; ++r) acc[r] = (r == idx) ? after : acc[r];
  }
}

// x-side statistics (3 warps of the producer warpgroup): per row, sum x, x . sum_n W[n], max x,
// min x over this tile's share of the k-steps (every T_N-th, so the work is spread over the
// tile), read from the A tiles the TMA already put in shared memory: these warps take part in
// the ring (wait on each stage, release it), so the statistics cost no global traffic besides
// the fp32 checksum vector. Thread st owns chunks 2(st % 4), +1 (16 k) of rows st / 4 + 24 i.
constexpr int ST_RG = STATS_THREADS / 4, ST_ROWS = (BM + ST_RG - 1) / ST_RG;
template <typename T>
__device__ void tile_stats(const Args& args, Smem& sm, const Ws& ws, uint8_t* base, const TileCoord& c, int tn_n,
                           int nk, int& it, int st, int cl, uint32_t rank) {
  const int64_t M = args.M, K = args.K;
  const int lane = st % 32, cp = st & 3, rg = st >> 2;
  const float* sv = args.wsum + (int64_t)c.b * 2 * K;
  float sum[ST_ROWS], dot[ST_ROWS];
  uint32_t mx[ST_ROWS], mn[ST_ROWS];
#pragma unroll
  for (int i = 0; i < ST_ROWS; ++i) { sum[i] = 0.f; dot[i] = 0.f; mx[i] = kNegInf2<T>; mn[i] = kPosInf2<T>; }
  for (int ks = 0; ks < nk; ++ks, ++it) {
    const int slot = it % STAGES;
    mbar_wait(&sm.full[slot], (it / STAGES) & 1);
    if (ks % tn_n == c.nt) {
      const uint8_t* at = base + slot * STAGE_BYTES;
#pragma unroll 1
      for (int h = 0; h < 2; ++h) {
        const int ch = 2 * cp + h;
        const int64_t k = (int64_t)ks * BK + ch * 8;
        if (k >= K) break;  // zero fill past K must not reach max/min
        const float4 w0 = __ldg(reinterpret_cast<const float4*>(sv + k));
        const float4 w1 = __ldg(reinterpret_cast<const float4*>(sv + k + 4));
#pragma unroll
        for (int i = 0; i < ST_ROWS; ++i) {
          const int r = rg + ST_RG * i;
          if (r < BM) {
            const uint4 v = *reinterpret_cast<const uint4*>(at + r * 128 + ((ch ^ (r & 7)) << 4));
            const float2 f0 = Elem<T>::unpack(v.x), f1 = Elem<T>::unpack(v.y), f2 = Elem<T>::unpack(v.z),
                         f3 = Elem<T>::unpack(v.w);
            sum[i] += ((f0.x + f0.y) + (f1.x + f1.y)) + ((f2.x + f2.y) + (f3.x + f3.y));
            float d = f0.x * w0.x;
            d = fmaf(f0.y, w0.y, d); d = fmaf(f1.x, w0.z, d); d = fmaf(f1.y, w0.w, d);
            d = fmaf(f2.x, w1.x, d); d = fmaf(f2.y, w1.y, d); d = fmaf(f3.x, w1.z, d); d = fmaf(f3.y, w1.w, d);
            dot[i] += d;
            mx[i] = hmax2<T>(mx[i], hmax2<T>(hmax2<T>(v.x, v.y), hmax2<T>(v.z, v.w)));
            mn[i] = hmin2<T>(mn[i], hmin2<T>(hmin2<T>(v.x, v.y), hmin2<T>(v.z, v.w)));
          }
        }
      }
    }
    __syncwarp();
    if (lane == 0) release_slot(sm, slot, cl, rank);
  }
  if (c.nt >= nk) return;  // this tile owned no k-step
#pragma unroll
  for (int i = 0; i < ST_ROWS; ++i) {
    float s = sum[i], d = dot[i];
    const float2 a = Elem<T>::unpack(mx[i]), b = Elem<T>::unpack(mn[i]);
    float x = fmaxf(a.x, a.y), n = fminf(b.x, b.y);
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {  // the 4 lanes of a row group
      s += __shfl_xor_sync(0xffffffffu, s, o);
      d += __shfl_xor_sync(0xffffffffu, d, o);
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
      n = fminf(n, __shfl_xor_sync(0xffffffffu, n, o));
    }
    const int r = rg + ST_RG * i;
    const int64_t m = (int64_t)c.mt * BM + r;
    if (cp == 0 && r < BM && m < M) {
      const int64_t row = c.b * M + m;
      atomicAdd(ws.c1 + row, (double)d);
      atomicAdd(ws.sx + row, (double)s);
      atomic_max_f32(ws.mx + row, x);
      atomic_min_f32(ws.mn + row, n);
    }
  }
}

template <typename T, bool PROTECT>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_global_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                       const __grid_constant__ Args args) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* staging = base + STAGES * STAGE_BYTES;
  Smem& sm = *reinterpret_cast<Smem*>(staging + 8 * STG_WARP);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = tid / 128;
  const int64_t M = args.M, N = args.N, K = args.K;
  const int cl = args.cluster;  // CTAs of a cluster take adjacent M-tiles of one N-tile
  const uint32_t rank = cl > 1 ? cluster_rank() : 0u;
  const int tm_n = cdiv(M, BM), tn_n = cdiv(N, BN), nk = cdiv(K, BK);
  const int tm_c = cdiv(tm_n, cl);  // M-tiles in units of clusters
  const int total = (int)args.batch * tm_c * tn_n, cid = blockIdx.x / cl, ncl = gridDim.x / cl;
  // A cluster tile -> this CTA's tile (its M-tile may lie past M: it still feeds the multicast).
  auto my_tile = [&](int t) {
    TileCoord c = tile_coord(t, tm_c, tn_n);
    c.mt = c.mt * cl + (int)rank;
    return c;
  };

  if (tid == 0) {
    const uint32_t releases = (uint32_t)cl * (8 + (PROTECT ? 3 : 0));  // consumer + stats warps
    for (int s = 0; s < STAGES; ++s) { mbar_init(&sm.full[s], 1); mbar_init(&sm.empty[s], releases); }
    fence_barrier_init();
    tma_prefetch_desc(&tmA);
    tma_prefetch_desc(&tmB);
    if (PROTECT && blockIdx.x == 0) atomicAdd(reinterpret_cast<unsigned long long*>(args.counters + kChecks), 1ull);
  }
  if (cl > 1) cluster_sync();  // barriers initialised before any peer multicasts or arrives
  else __syncthreads();

  if (wg == 0) {
    // Register split: 56 for the producer/stats warpgroup, 224 for the consumers. Keep slack in
    // the 64K file: with 64/224 (exactly 65536) the consumers' setmaxnreg.inc never returned.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    if (warp == 0) {
      if (lane == 0) {  // ------------------------------------------- TMA producer
        int it = 0;
        const uint16_t mask = (uint16_t)((1u << cl) - 1u);
        for (int t = cid; t < total; t += ncl) {
          const TileCoord c = my_tile(t);
          for (int ks = 0; ks < nk; ++ks, ++it) {
            const int slot = it % STAGES;
            mbar_wait(&sm.empty[slot], ((it / STAGES) & 1) ^ 1);
            mbar_expect_tx(&sm.full[slot], STAGE_BYTES);
            uint8_t* st = base + slot * STAGE_BYTES;
            tma_load_3d(st, &tmA, &sm.full[slot], ks * BK, c.mt * BM, c.b);
            if (cl > 1) {  // my half of the W tile, to every CTA of the cluster
              tma_load_3d_mc(st + A_BYTES + rank * (B_BYTES / 2), &tmB, &sm.full[slot], ks * BK,
                             c.nt * BN + (int)rank * (BN / 2), c.b, mask);
            } else {
              tma_load_3d(st + A_BYTES, &tmB, &sm.full[slot], ks * BK, c.nt * BN, c.b);
              tma_load_3d(st + A_BYTES + B_BYTES / 2, &tmB, &sm.full[slot], ks * BK, c.nt * BN + BN / 2, c.b);
            }
          }
        }
      }
    } else if constexpr (PROTECT) {  // ---------------------------- x statistics (warps 1-3)
      const Ws ws(args.ws, args.ws_rows, args.ws_mtiles);
      int it = 0;
      for (int t = cid; t < total; t += ncl) {
        tile_stats<T>(args, sm, ws, base, my_tile(t), tn_n, nk, it, tid - 32, cl, rank);
        named_bar_sync(1, SYNC_THREADS);  // the ticket thread's fence releases these atomics
      }
    }
  } else {
  // ------------------------------------------------------------ consumers (WG1, WG2)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
  const int wgc = wg - 1, wi = warp % 4, ct = tid - 128;
  uint8_t* stg = staging + (wgc * 4 + wi) * STG_WARP;
  float acc[128];
  int it = 0;
  for (int t = cid; t < total; t += ncl) {
    const TileCoord c = my_tile(t);
    // Fresh accumulators: ends the previous tile's live range (wgmma's "+f" operands would
    // otherwise keep 128 registers alive through the verification code).
#pragma unroll
    for (int r = 0; r < 128; ++r) acc[r] = 0.f;
    mainloop<T>(acc, sm, base, nk, it, wgc, lane, cl, rank);

    // ---------------------------------------------------------- epilogue
    const int64_t row_w = (int64_t)c.mt * BM + wgc * 64 + wi * 16;  // this warp's first row
    const int64_t r_lo = row_w + lane / 4, r_hi = r_lo + 8;
    const int64_t col0 = (int64_t)c.nt * BN + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float2 bv = bias_pair<T>(args, col0 + 8 * j);
      acc[4 * j] += bv.x; acc[4 * j + 1] += bv.y; acc[4 * j + 2] += bv.x; acc[4 * j + 3] += bv.y;
    }
    if constexpr (PROTECT) {
      for (int i = 0; i < args.n_inj; ++i) inject_tile<T>(acc, args, args.inj[i], c, r_lo, lane);
    }
    float s1a = 0.f, s1b = 0.f, s2a = 0.f, s2b = 0.f;
    if constexpr (PROTECT) {
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        // Tile-local position weight / 256 (<= 1: a huge faulty value cannot overflow the sum).
        const float w0 = (float)(8 * j + 2 * (lane % 4) + 1) * (1.f / BN), w1 = w0 + 1.f / BN;
        s1a += acc[4 * j] + acc[4 * j + 1];
        s1b += acc[4 * j + 2] + acc[4 * j + 3];
        s2a += w0 * acc[4 * j] + w1 * acc[4 * j + 1];
        s2b += w0 * acc[4 * j + 2] + w1 * acc[4 * j + 3];
      }
    }
    // Round and store through the warp's staging buffer: 16-byte stores of whole row segments.
    T* yb = static_cast<T*>(args.y) + (int64_t)c.b * M * N;
    const bool vec = (N % 8) == 0;
#pragma unroll
    for (int cc = 0; cc < BN / 64; ++cc) {
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const int j = 8 * cc + jj, col = jj * 8 + 2 * (lane % 4);
        *reinterpret_cast<uint32_t*>(stg + (lane / 4) * STG_PITCH + col * 2) = Elem<T>::pack(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<uint32_t*>(stg + (lane / 4 + 8) * STG_PITCH + col * 2) =
            Elem<T>::pack(acc[4 * j + 2], acc[4 * j + 3]);
      }
      __syncwarp();
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int chunk = lane + 32 * i, rr = chunk >> 3, part = chunk & 7;
        const int64_t gm = row_w + rr, gn = (int64_t)c.nt * BN + cc * 64 + part * 8;
        const uint4 v = *reinterpret_cast<const uint4*>(stg + rr * STG_PITCH + part * 16);
        if (gm < M) {
          if (vec && gn + 8 <= N) {
            *reinterpret_cast<uint4*>(yb + gm * N + gn) = v;
          } else {
            const T* e = reinterpret_cast<const T*>(&v);
            for (int q = 0; q < 8; ++q)
              if (gn + q < N) yb[gm * N + gn + q] = e[q];
          }
        }
      }
      __syncwarp();
    }
    if constexpr (!PROTECT) continue;
    else {
      const Ws ws(args.ws, args.ws_rows, args.ws_mtiles);
#pragma unroll
      for (int o = 1; o < 4; o <<= 1) {
        s1a += __shfl_xor_sync(0xffffffffu, s1a, o); s1b += __shfl_xor_sync(0xffffffffu, s1b, o);
        s2a += __shfl_xor_sync(0xffffffffu, s2a, o); s2b += __shfl_xor_sync(0xffffffffu, s2b, o);
      }
      if (lane % 4 == 0) {
        const double off = (double)c.nt * BN;  // global weight = off + local weight
        if (r_lo < M) {
          atomicAdd(ws.s1 + c.b * M + r_lo, (double)s1a);
          atomicAdd(ws.s2 + c.b * M + r_lo, BN * (double)s2a + off * (double)s1a);
        }
        if (r_hi < M) {
          atomicAdd(ws.s1 + c.b * M + r_hi, (double)s1b);
          atomicAdd(ws.s2 + c.b * M + r_hi, BN * (double)s2b + off * (double)s1b);
        }
      }
      named_bar_sync(1, SYNC_THREADS);  // with the stats warps: this tile's sums are all in
      if (c.mt >= tm_n) continue;       // a cluster's spare tile past M: nothing to verify
      if (ct == 0) {
        // One release fence after the barrier covers every thread's atomics and output stores
        // (PTX fences are cumulative over what the barrier ordered before them): 352 per-thread
        // fences made each thread wait for its own stores (benchmarks/NOTES_gemm.md).
        __threadfence();
        const int old = atomicAdd(ws.ticket + c.b * tm_n + c.mt, 1);
        sm.last = old == tn_n - 1;
        sm.nflag = sm.ndet = sm.ncorr = sm.nunc = sm.ninvalid = 0;
      }
      named_bar_sync(2, 256);
      if (sm.last) {
        __threadfence();
        // ---------------------------------------------------- verify the M-tile's rows
        if (ct < BM) {
          const int64_t m = (int64_t)c.mt * BM + ct;
          if (m < M) {
            const int64_t row = c.b * M + m;
            const double s1 = __ldcg(ws.s1 + row), s2 = __ldcg(ws.s2 + row), sx = __ldcg(ws.sx + row);
            double c1 = __ldcg(ws.c1 + row);
            const float mx = __ldcg(ws.mx + row), mn = __ldcg(ws.mn + row);
            ws.s1[row] = 0.0; ws.s2[row] = 0.0; ws.c1[row] = 0.0; ws.sx[row] = 0.0;
            ws.mx[row] = -INFINITY; ws.mn[row] = INFINITY;
            if (args.bias) c1 += args.bstats[0];
            const bool valid = isfinite(sx) && isfinite(c1) && *args.wfinite;
            float thr = 0.f;
            if (!valid) {
              atomicAdd(&sm.ninvalid, 1);
            } else {
              const float mu = (float)(sx / (double)K);
              const float var = fmaxf(0.f, (mx - mu) * (mu - mn));
              thr = vabft_threshold(mu, var, (float)N, args.wstats + 3 * c.b, args.e, args.c_sigma);
              if (args.bias) thr += args.e * (float)args.bstats[2];
              const float d1 = (float)(s1 - c1);
              if (exceeds(d1, thr)) {
                atomicAdd(&sm.ndet, 1);
                if (args.policy == kCorrect || args.policy == kRecompute) {
                  const int f = atomicAdd(&sm.nflag, 1);
                  sm.flagged[f] = ct;
                  sm.rd1[ct] = d1; sm.rt[ct] = thr; sm.rs2[ct] = s2; sm.rc1[ct] = c1;
                }
              }
            }
            if (args.dbg) {
              args.dbg[3 * row] = s1; args.dbg[3 * row + 1] = c1; args.dbg[3 * row + 2] = valid ? thr : -1.0;
            }
          }
        }
        if (ct == 0) ws.ticket[c.b * tm_n + c.mt] = 0;
        named_bar_sync(2, 256);
        for (int f = 0; f < sm.nflag; ++f) {
          const int lr = sm.flagged[f];
          fixup_row<T>(args, sm, c.b, (int64_t)c.mt * BM + lr, lr, ct);
        }
        named_bar_sync(2, 256);
        if (ct == 0) {  // the verifier of each M-tile reports its rows' inputs
          add_outcomes(args, sm.ndet, sm.ncorr, sm.nunc);
          count_nonfinite_once(args, sm.ninvalid != 0, (int)args.batch * tm_n, ws.done, ws.flag);
        }
      }
      named_bar_sync(2, 256);  // sm.last / counters are reused by the next tile
    }
  }
  }
  if (cl > 1) cluster_sync();  // peers may still arrive on this CTA's barriers until here
}

template <typename T, bool PROTECT>
int launch(const Args* a, const CUtensorMap& ta, const CUtensorMap& tb) {
  auto kern = gemm_global_kernel<T, PROTECT>;
  if (cudaError_t e = sm90::allow_smem<gemm_global_kernel<T, PROTECT>>(SMEM_BYTES)) return e;
  const int cl = a->cluster;
  const int total = (int)a->batch * cdiv(cdiv(a->M, BM), cl) * cdiv(a->N, BN);  // cluster tiles
  const int clusters = total < a->num_sms / cl ? total : a->num_sms / cl;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(clusters * cl));
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = SMEM_BYTES;
  cfg.stream = reinterpret_cast<cudaStream_t>(a->stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cl;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kern, ta, tb, *a);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace glb
}  // namespace ftg

extern "C" int ft_gemm_global(const ftg::Args* a) {
  using namespace ftg;
  if (a->K % 8 || a->M < 1 || a->N < 1 || a->batch < 1 || (a->cluster != 1 && a->cluster != 2)) return FTG_ERR_ARGS;
  CUtensorMap ta, tb;
  if (!make_tmap(&ta, a->x, a->batch, a->M, a->K, a->x_rstride, a->x_bstride, glb::BM) ||
      !make_tmap(&tb, a->w, a->batch, a->N, a->K, a->w_rstride, a->w_bstride, glb::BN / 2))
    return FTG_ERR_TMAP;
  const bool prot = a->protect != 0;
  if (a->dtype == 0)
    return prot ? glb::launch<__nv_bfloat16, true>(a, ta, tb) : glb::launch<__nv_bfloat16, false>(a, ta, tb);
  return prot ? glb::launch<__half, true>(a, ta, tb) : glb::launch<__half, false>(a, ta, tb);
}

// Bytes of the global scheme's workspace for `rows` output rows in `mtiles` 128-row tiles.
extern "C" long long ft_gemm_global_ws_bytes(long long rows, long long mtiles) {
  return rows * (4 * 8 + 2 * 4) + (mtiles + 2) * 4;
}

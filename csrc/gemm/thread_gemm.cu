// One-sided thread-level ABFT linear y = x W^T + b for bandwidth-bound shapes (M <= 256).
//
// CTA = 4 consumer warps + 1 TMA producer warp; CTA tile = (16*MT*wm rows, up to 128: W is read
// once for all of x) x 64 columns (one checksum tile), K split over a cluster of `split` CTAs.
// Inside a CTA the 4 warps form wm (across M, MT m16 blocks each) x 4/wm (across K) groups; the
// K groups take turns on the stages of a TMA ring (each slot belongs to one K group, whose wm
// warps all read it). A warp's m16n8k16 B fragments of one k16 step hold,
// for n8-blocks j = 0..7, W[8j + g][k] (g = lane/4): their sum over j is the strided checksum of
// group g (columns g, g+8, ..., g+56 of the tile). The thread adds its own fragments in fp32, splits
// the sum into bf16 hi+mid+lo (fp16: hi + 2^-11-scaled mid) so the extra MMA is exact to fp32, and
// issues it against the same A fragment: the C layout then puts the check of groups 2q, 2q+1 in the
// thread that holds those outputs. One more MMA against ones gives the row sums of x, packed
// max/min of the A fragments give the extrema: the V-ABFT statistics come from registers too.
// Partials are reduced across warps (shared memory) and across the cluster (DSMEM) into the
// leader CTA, which verifies each group in registers, corrects a single fault (recomputing the
// group's 8 elements, locating with the weighted checksum), and stores. No extra global traffic.
#include <type_traits>

#include "ft_common.cuh"
#include "ft_host.cuh"

namespace ftg {
namespace thr {

// 4 consumer warps (+1 producer) and 2 CTAs per SM: measured faster than 8 warps at 1 CTA per SM
// (same speed for <= 132 CTAs, 1.3 waves instead of 1 beyond; NOTES_gemm.md, runs 3 and 5).
constexpr int BN = 64, BK = 64, MAX_NS = 8, NCW = 4, THREADS = 32 * (NCW + 1), NREG = 42, MAX_FLAG = 32;

// A stage is NBOX k-boxes of 64 (TMA boxes are 128 bytes wide with the 128-byte swizzle): several
// boxes per stage make each W row's reads NBOX*128 contiguous bytes (DRAM runs, not 128-byte bits).
template <int MT, int NBOX> struct Cfg {
  static constexpr int W_BOX = BN * BK * 2, W_BYTES = NBOX * W_BOX;
  static constexpr int E = MT * NREG * 32;             // floats of one warp's partials
  static constexpr int PART = NCW * E * 4;             // per-warp partials, fragment order
  static __host__ __device__ int bm(int wm) { return 16 * MT * wm; }  // x rows per CTA
  static __host__ __device__ int x_box(int wm) { return bm(wm) * BK * 2; }
  static __host__ __device__ int stage(int wm) { return NBOX * (W_BOX + x_box(wm)); }
};

struct Smem {
  uint64_t full[MAX_NS], empty[MAX_NS];
  // Per-call constants, fetched by the producer warp's idle lanes while the ring fills (their
  // load latency would otherwise sit in the epilogue's critical path).
  float bias[BN], wst[3], bias_max;
  int wfin;
  float t[MAX_FLAG][8];  // recomputed group elements
  int frow[MAX_FLAG], fgrp[MAX_FLAG];
  int nflag, ndet, ncorr, nunc, ninvalid;
};
template <int MT, int NBOX> size_t smem_bytes(int ns, int wm) {
  const size_t ring = (size_t)ns * Cfg<MT, NBOX>::stage(wm);
  return 1024 + (ring > (size_t)Cfg<MT, NBOX>::PART ? ring : (size_t)Cfg<MT, NBOX>::PART) + sizeof(Smem);
}

// Partial sums of one warp: main accumulators, checks, and x statistics, per m16 block.
template <typename T, int MT> struct Frag {
  float acc[MT][8][4];
  float chk[MT][4];
  float chk2[MT][4];  // fp16: the 2^-11-scaled low part of the check
  float sx[MT][4];
  uint32_t mx[MT][2], mn[MT][2];
};

template <typename T, int MT, bool PROTECT>
__device__ __forceinline__ void consume_stage(Frag<T, MT>& f, uint32_t wt, uint32_t xt, int lane) {
  const int mi = lane >> 3, r8 = lane & 7;
#pragma unroll
  for (int s = 0; s < BK / 16; ++s) {  // k16 steps of the 64-wide stage (one k16 live: fewer registers)
    uint32_t b[8][2];  // b[j] = W[8j + g][k16 slice] as the MMA's B fragment
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      const int row = 8 * (j + (mi >> 1)) + r8, chunk = 2 * s + (mi & 1);
      uint32_t r[4];
      ldsm_x4(r, wt + row * 128 + ((chunk ^ r8) << 4));
      b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
    }
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int row = mt * 16 + (mi & 1) * 8 + r8, chunk = 2 * s + (mi >> 1);
      ldsm_x4(a[mt], xt + row * 128 + ((chunk ^ r8) << 4));
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < 8; ++j) Elem<T>::mma(f.acc[mt][j], a[mt], b[j][0], b[j][1]);
    if constexpr (PROTECT) {
      // Strided checksum of the fragments this thread holds: sum over the 8 n8-blocks, in fp32,
      // then split so that hi + mid + lo (bf16) or hi + 2^-11 mid (fp16) carries it exactly.
      uint32_t hi[2], mid[2], lo[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float2 v = Elem<T>::unpack(b[0][r]);
#pragma unroll
        for (int j = 1; j < 8; ++j) {
          const float2 u = Elem<T>::unpack(b[j][r]);
          v.x += u.x; v.y += u.y;
        }
        hi[r] = Elem<T>::pack(v.x, v.y);
        const float2 h = Elem<T>::unpack(hi[r]);
        const float r0 = v.x - h.x, r1 = v.y - h.y;
        if constexpr (std::is_same<T, __nv_bfloat16>::value) {
          mid[r] = Elem<T>::pack(r0, r1);
          const float2 m = Elem<T>::unpack(mid[r]);
          lo[r] = Elem<T>::pack(r0 - m.x, r1 - m.y);
        } else {  // fp16: scale the residual out of the subnormal range
          mid[r] = Elem<T>::pack(r0 * 2048.f, r1 * 2048.f);
          lo[r] = 0u;
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Elem<T>::mma(f.chk[mt], a[mt], hi[0], hi[1]);
        if constexpr (std::is_same<T, __nv_bfloat16>::value) {
          Elem<T>::mma(f.chk[mt], a[mt], mid[0], mid[1]);
          Elem<T>::mma(f.chk[mt], a[mt], lo[0], lo[1]);
        } else {
          Elem<T>::mma(f.chk2[mt], a[mt], mid[0], mid[1]);
        }
        Elem<T>::mma(f.sx[mt], a[mt], Elem<T>::kOnes, Elem<T>::kOnes);
        f.mx[mt][0] = hmax2<T>(f.mx[mt][0], hmax2<T>(a[mt][0], a[mt][2]));
        f.mx[mt][1] = hmax2<T>(f.mx[mt][1], hmax2<T>(a[mt][1], a[mt][3]));
        f.mn[mt][0] = hmin2<T>(f.mn[mt][0], hmin2<T>(a[mt][0], a[mt][2]));
        f.mn[mt][1] = hmin2<T>(f.mn[mt][1], hmin2<T>(a[mt][1], a[mt][3]));
      }
    }
  }
}

__device__ __forceinline__ float combine(int r, float v, float u) {  // partial slot r of NREG
  return r < 38 ? v + u : (r < 40 ? fmaxf(v, u) : fminf(v, u));      // sums, max, min
}

// part[slot(e)] = combine over sources of part[slot(e) + src offset], for e < n; 8 independent
// loads per thread in flight (DSMEM loads are "memory"-clobbered asm: one at a time is latency).
template <int E, typename Load>
__device__ __forceinline__ void reduce_slots(float* part, int n, int wk, int tid, int nthreads, int nsrc, Load load) {
  constexpr int B = 8;
  for (int e0 = tid; e0 < n; e0 += B * nthreads) {
    int ix[B];
    float v[B];
#pragma unroll
    for (int q = 0; q < B; ++q) {
      const int e = e0 + q * nthreads;
      ix[q] = e < n ? (e / E) * wk * E + e % E : -1;
      v[q] = ix[q] >= 0 ? part[ix[q]] : 0.f;
    }
    for (int s = 1; s < nsrc; ++s) {
      float u[B];
#pragma unroll
      for (int q = 0; q < B; ++q) u[q] = ix[q] >= 0 ? load(ix[q], s) : 0.f;
#pragma unroll
      for (int q = 0; q < B; ++q) v[q] = combine((ix[q] / 32) % NREG, v[q], u[q]);
    }
#pragma unroll
    for (int q = 0; q < B; ++q)
      if (ix[q] >= 0) part[ix[q]] = v[q];
  }
}


template <typename T, int MT, int NBOX, bool PROTECT>
__global__ void __launch_bounds__(THREADS, 2)
    gemm_thread_kernel(const __grid_constant__ CUtensorMap tmW, const __grid_constant__ CUtensorMap tmX,
                       const __grid_constant__ Args args) {
  using C = Cfg<MT, NBOX>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int NS = args.stages, WM = args.wm, WK = NCW / WM;
  const int BMc = C::bm(WM), XB = C::x_box(WM), STAGE = C::stage(WM);
  const int ring = NS * STAGE;
  Smem& sm = *reinterpret_cast<Smem*>(base + (ring > C::PART ? ring : C::PART));
  float* part = reinterpret_cast<float*>(base);  // aliases the ring once the k-loop is done

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int S = args.split;
  const int rank = (int)cluster_rank();
  const int tile = blockIdx.x / S, mb = blockIdx.y, b = blockIdx.z;
  const int64_t M = args.M, N = args.N, K = args.K;
  const int nst = cdiv(K, BK * NBOX);  // stages over the whole K; the cluster splits whole stages
  const int s_begin = (int)((int64_t)rank * nst / S), s_end = (int)((int64_t)(rank + 1) * nst / S);
  const int nloc = s_end - s_begin;

  if (tid == 0) {
    for (int s = 0; s < NS; ++s) { mbar_init(&sm.full[s], 1); mbar_init(&sm.empty[s], WM); }
    fence_barrier_init();
    tma_prefetch_desc(&tmW);
    tma_prefetch_desc(&tmX);
    sm.nflag = sm.ndet = sm.ncorr = sm.nunc = sm.ninvalid = 0;
    if (PROTECT && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(args.counters + kChecks), 1ull);
  }
  __syncthreads();

  Frag<T, MT> f;
  if (warp == NCW) {  // ------------------------------------------- TMA producer
    if (PROTECT && lane > 0) {  // per-call constants for the epilogue (read after cluster_sync)
      const T* bias = static_cast<const T*>(args.bias);
      for (int c = lane - 1; c < BN; c += 31) {
        const int64_t n = (int64_t)tile * BN + c;
        sm.bias[c] = (bias && n < N) ? Elem<T>::to_f(bias[n]) : 0.f;
      }
      if (lane <= 3) sm.wst[lane - 1] = args.wstats[3 * b + lane - 1];
      if (lane == 4) sm.wfin = *args.wfinite;
      if (lane == 5) sm.bias_max = args.bias ? (float)args.bstats[3] : 0.f;
    }
    if (lane == 0) {
      for (int i = 0; i < nloc; ++i) {
        const int slot = i % NS;
        if (i >= NS) mbar_wait(&sm.empty[slot], ((i / NS) - 1) & 1);
        mbar_expect_tx(&sm.full[slot], STAGE);
        uint8_t* st = base + slot * STAGE;
        const int k0 = (s_begin + i) * NBOX * BK;
#pragma unroll
        for (int bx = 0; bx < NBOX; ++bx)
          tma_load_3d(st + bx * C::W_BOX, &tmW, &sm.full[slot], k0 + bx * BK, tile * BN, b);
#pragma unroll
        for (int bx = 0; bx < NBOX; ++bx)
          tma_load_3d(st + C::W_BYTES + bx * XB, &tmX, &sm.full[slot], k0 + bx * BK, mb * BMc, b);
      }
    }
  } else {  // ----------------------------------------------------- consumers
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
#pragma unroll
        for (int j = 0; j < 8; ++j) f.acc[mt][j][e] = 0.f;
        f.chk[mt][e] = 0.f; f.chk2[mt][e] = 0.f; f.sx[mt][e] = 0.f;
      }
      f.mx[mt][0] = f.mx[mt][1] = kNegInf2<T>;
      f.mn[mt][0] = f.mn[mt][1] = kPosInf2<T>;
    }
    const int wk = warp % WK, wmi = warp / WK;  // K group, M group (m16 blocks wmi*MT ...)
    for (int i = wk; i < nloc; i += WK) {
      const int slot = i % NS;
      mbar_wait(&sm.full[slot], (i / NS) & 1);
      const uint32_t wt = smem_u32(base + slot * STAGE), xt = wt + C::W_BYTES + wmi * MT * 16 * 128;
#pragma unroll 1
      for (int bx = 0; bx < NBOX; ++bx) {
      consume_stage<T, MT, PROTECT>(f, wt + bx * C::W_BOX, xt + bx * XB, lane);
      if constexpr (PROTECT) {
        for (int q = 0; q < args.n_inj; ++q) {  // accumulator faults "after k-step" (64-wide)
          const Injection& inj = args.inj[q];
          if (inj.step != (s_begin + i) * NBOX + bx) continue;
          const int64_t ib = inj.row / M, im = inj.row % M;
          if (ib != b || im / BMc != mb || inj.col / BN != tile) continue;
          const int lr = (int)(im % BMc), lc = inj.col % BN;
          if (lr / 16 / MT != wmi || lane != ((lr % 16) % 8) * 4 + (lc % 8) / 2) continue;
          const int imt = (lr / 16) % MT, ij = lc / 8, ie = 2 * ((lr % 16) / 8) + (lc % 2);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                if (mt == imt && j == ij && e == ie) f.acc[mt][j][e] = inject_one(f.acc[mt][j][e], inj, args.inj_log);
        }
      }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&sm.empty[slot]);
    }
    // Row extrema: both halves of the packed pair, then the 4 lanes that share a row.
    float mxf[MT][2], mnf[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 a = Elem<T>::unpack(f.mx[mt][h]), c = Elem<T>::unpack(f.mn[mt][h]);
        float vx = fmaxf(a.x, a.y), vn = fminf(c.x, c.y);
        vx = fmaxf(vx, __shfl_xor_sync(0xffffffffu, vx, 1)); vx = fmaxf(vx, __shfl_xor_sync(0xffffffffu, vx, 2));
        vn = fminf(vn, __shfl_xor_sync(0xffffffffu, vn, 1)); vn = fminf(vn, __shfl_xor_sync(0xffffffffu, vn, 2));
        mxf[mt][h] = vx; mnf[mt][h] = vn;
      }
    named_bar_sync(1, NCW * 32);  // every stage consumed: the ring may be overwritten
    float* p = part + (size_t)warp * MT * NREG * 32 + lane;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float* q = p + mt * NREG * 32;
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) q[(4 * j + e) * 32] = f.acc[mt][j][e];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        q[(32 + e) * 32] = std::is_same<T, __half>::value ? f.chk[mt][e] + f.chk2[mt][e] * (1.f / 2048.f) : f.chk[mt][e];
      q[36 * 32] = f.sx[mt][0]; q[37 * 32] = f.sx[mt][2];
      q[38 * 32] = mxf[mt][0]; q[39 * 32] = mxf[mt][1];
      q[40 * 32] = mnf[mt][0]; q[41 * 32] = mnf[mt][1];
    }
    named_bar_sync(1, NCW * 32);
    // Sum each M group's K-group partials into the slot of its first warp (fixed order:
    // deterministic); warp w = wmi * WK + wk wrote slot w.
    if (WK > 1)
      reduce_slots<C::E>(part, WM * C::E, WK, tid, NCW * 32, WK,
                         [&](int ix, int w) { return part[ix + w * C::E]; });
  }
  cluster_sync();  // every CTA of the cluster has its partials in shared memory

  // ------------------------------------------------------------- leader: reduce, verify, store
  if (rank == 0 && S > 1)  // add the other CTAs' partials (DSMEM) into the leader's
    reduce_slots<C::E>(part, WM * C::E, WK, tid, THREADS, S,
                       [&](int ix, int rk) { return ld_dsmem_f32(smem_u32(part + ix), rk); });
  cluster_sync();  // remote partials read: the other CTAs may exit
  if (rank != 0) return;

  // Rounds of 5 warps over the CTA's m16 blocks (warp w takes block round * 5 + w); every
  // thread takes part in each round (the correction path synchronises the CTA).
  const int g = lane / 4, q4 = lane % 4;
  const int MTT = MT * WM;
  const T* bias = static_cast<const T*>(args.bias);
#pragma unroll 1
  for (int round = 0; round * (THREADS / 32) < MTT; ++round) {
    const int mtw = round * (THREADS / 32) + warp;
    const bool active = mtw < MTT;
    float v[NREG];
    if (active) {
      const float* src = part + (size_t)((mtw / MT) * WK * MT + mtw % MT) * NREG * 32 + lane;
#pragma unroll
      for (int r = 0; r < NREG; ++r) v[r] = src[r * 32];
    }
    if constexpr (PROTECT) {
      if (round > 0) {  // the previous round's flags are consumed
        __syncthreads();
        if (tid == 0) sm.nflag = 0;
        __syncthreads();
      }
    }
    const int64_t row0 = (int64_t)mb * BMc + mtw * 16 + g;  // rows row0, row0 + 8 (within batch)
    const int64_t col0 = (int64_t)tile * BN + 2 * q4;
    float y[8][4];
    bool flag[4] = {false, false, false, false};
    int slot[4] = {0, 0, 0, 0};
    float thr[2] = {0.f, 0.f}, chkv[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
    if (active) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t n = col0 + 8 * j + e;
          const float bv = PROTECT ? sm.bias[8 * j + 2 * q4 + e] : (bias && n < N) ? Elem<T>::to_f(bias[n]) : 0.f;
          y[j][e] = v[4 * j + e] + bv;
          y[j][2 + e] = v[4 * j + 2 + e] + bv;
          if constexpr (PROTECT) { chkv[e] += bv; chkv[2 + e] += bv; }
        }
      if constexpr (PROTECT) {
        for (int qi = 0; qi < args.n_inj; ++qi) {  // output-stage faults (final fp32 values)
          const Injection& inj = args.inj[qi];
          if (inj.step != -1) continue;
          const int64_t ib = inj.row / M, im = inj.row % M;
          if (ib != b || inj.col / BN != tile) continue;
          const int lc = inj.col % BN;
          const int h = im == row0 ? 0 : (im == row0 + 8 ? 1 : -1);
          if (h < 0 || (lc % 8) / 2 != q4) continue;
          const int ij = lc / 8, ie = 2 * h + (lc % 2);
#pragma unroll
          for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (j == ij && e == ie) y[j][e] = inject_one(y[j][e], inj, args.inj_log);
        }
        // V-ABFT threshold per row (n = 8 summed terms), validity, then the four groups.
        const float* bst = sm.wst;
        const float bias_term = args.e * sm.bias_max * 8.f;
        bool valid[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float sx = v[36 + h], mx = v[38 + h], mn = v[40 + h];
          const float mu = sx / (float)K;
          const float var = fmaxf(0.f, (mx - mu) * (mu - mn));
          thr[h] = vabft_threshold(mu, var, 8.f, bst, args.e, args.c_sigma) + bias_term;
          const bool in_range = row0 + 8 * h < M;
          valid[h] = in_range && isfinite(sx) && sm.wfin;
          if (in_range && !valid[h] && q4 == 0) atomicAdd(&sm.ninvalid, 1);
        }
#pragma unroll
        for (int ge = 0; ge < 4; ++ge) {  // ge = 2*h + e: row half h, group 2*q4 + e
          float s = 0.f;
#pragma unroll
          for (int j = 0; j < 8; ++j) s += y[j][ge];
          chkv[ge] += v[32 + ge];
          d1[ge] = s - chkv[ge];
          if (args.dbg && row0 + 8 * (ge / 2) < M) {  // (sum, check, threshold) per group
            const int64_t gi = ((int64_t)b * M + row0 + 8 * (ge / 2)) * (cdiv(N, BN) * 8) + tile * 8 + 2 * q4 + ge % 2;
            args.dbg[3 * gi] = s; args.dbg[3 * gi + 1] = chkv[ge];
            args.dbg[3 * gi + 2] = valid[ge / 2] ? thr[ge / 2] : -1.0;
          }
          if (valid[ge / 2] && exceeds(d1[ge], thr[ge / 2])) {
            atomicAdd(&sm.ndet, 1);
            if (args.policy == kCorrect || args.policy == kRecompute) {
              const int fi = atomicAdd(&sm.nflag, 1);
              if (fi < MAX_FLAG) {
                flag[ge] = true; slot[ge] = fi;
                sm.frow[fi] = (int)(row0 + 8 * (ge / 2));
                sm.fgrp[fi] = 2 * q4 + (ge % 2);
              } else {
                atomicAdd(&sm.nunc, 1);
              }
            }
          }
        }
      }
    }
    if constexpr (PROTECT) {
      __syncthreads();
      const int nflag = min(sm.nflag, MAX_FLAG);
      if (nflag > 0) {  // rare: recompute each flagged group's 8 elements, one warp per dot
        const T* W = static_cast<const T*>(args.w) + b * args.w_bstride;
        const T* X = static_cast<const T*>(args.x) + b * args.x_bstride;
        for (int d = warp; d < nflag * 8; d += THREADS / 32) {
          const int fi = d / 8, l = d % 8;
          const int64_t n = (int64_t)tile * BN + sm.fgrp[fi] + 8 * l;
          float t = 0.f;
          if (n < N) {
            t = warp_dot(X + sm.frow[fi] * args.x_rstride, W + n * args.w_rstride, K, lane);
            if (bias) t += Elem<T>::to_f(bias[n]);
          }
          if (lane == 0) sm.t[fi][l] = t;
        }
        __syncthreads();
        if (active) {
#pragma unroll
          for (int ge = 0; ge < 4; ++ge) {
            if (!flag[ge]) continue;
            float t[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) t[j] = sm.t[slot[ge]][j];
            // Locate: weighted over plain residual with the checks c1 = sum t_l, c2 = sum (l+1) t_l
            // (terms scaled by 1/8 so a huge faulty value cannot overflow), or the only non-finite
            // element.
            int p = -1;
            bool finite = true;
#pragma unroll
            for (int j = 0; j < 8; ++j) finite = finite && isfinite(y[j][ge]);
            if (finite) {
              float r1 = 0.f, r2 = 0.f;
#pragma unroll
              for (int j = 0; j < 8; ++j) {
                const float dj = y[j][ge] * 0.125f - t[j] * 0.125f;
                r1 += dj;
                r2 += (float)(j + 1) * dj;
              }
              const float ratio = r2 / r1, near = rintf(ratio);
              if (isfinite(ratio) && fabsf(ratio - near) < 0.3f && near >= 1.f && near <= 8.f) p = (int)near - 1;
            } else {
              int cnt = 0;
#pragma unroll
              for (int j = 0; j < 8; ++j)
                if (!isfinite(y[j][ge])) { ++cnt; p = j; }
              if (cnt != 1) p = -1;
            }
            bool ok = false;
            if (p >= 0) {
              float s = 0.f;
#pragma unroll
              for (int j = 0; j < 8; ++j) {
                if (j == p) y[j][ge] = t[j];
                s += y[j][ge];
              }
              ok = !exceeds(s - chkv[ge], thr[ge / 2]);
            }
            if (ok) {
              atomicAdd(&sm.ncorr, 1);
            } else {
              atomicAdd(&sm.nunc, 1);
              if (args.policy == kRecompute) {
#pragma unroll
                for (int j = 0; j < 8; ++j) y[j][ge] = t[j];
              }
            }
          }
        }
      }
    }
    // ------------------------------------------------------------- store
    if (active) {
      T* yb = static_cast<T*>(args.y) + (int64_t)b * M * N;
      const bool pairs = (N % 2) == 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t m = row0 + 8 * h;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t n = col0 + 8 * j;
          if (pairs && n + 1 < N) {
            *reinterpret_cast<uint32_t*>(yb + m * N + n) = Elem<T>::pack(y[j][2 * h], y[j][2 * h + 1]);
          } else {
            if (n < N) yb[m * N + n] = Elem<T>::from_f(y[j][2 * h]);
            if (n + 1 < N) yb[m * N + n + 1] = Elem<T>::from_f(y[j][2 * h + 1]);
          }
        }
      }
    }
  }  // rounds
  if constexpr (PROTECT) {
    __syncthreads();
    if (tid == 0) {
      add_outcomes(args, sm.ndet, sm.ncorr, sm.nunc);
      if (tile == 0) {  // the first N tile of each M-block reports its rows' inputs
        count_nonfinite_once(args, sm.ninvalid || !sm.wfin, (int)(gridDim.y * gridDim.z),
                             static_cast<unsigned long long*>(args.ws));  // the workspace's 8 bytes
      }
    }
  }
}

template <typename T, int MT, int NBOX, bool PROTECT>
int launch(const Args* a, const CUtensorMap& tw, const CUtensorMap& tx) {
  auto kern = gemm_thread_kernel<T, MT, NBOX, PROTECT>;
  const size_t smem = smem_bytes<MT, NBOX>(a->stages, a->wm);
  if (cudaError_t e = sm90::allow_smem<gemm_thread_kernel<T, MT, NBOX, PROTECT>>(smem, true)) return e;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(cdiv(a->N, BN) * a->split), (unsigned)cdiv(a->M, Cfg<MT, NBOX>::bm(a->wm)),
                     (unsigned)a->batch);
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = reinterpret_cast<cudaStream_t>(a->stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = a->split;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = a->split > 1 ? 1 : 0;  // a lone CTA is its own (implicit) cluster: no cluster launch
  cudaError_t e = cudaLaunchKernelEx(&cfg, kern, tw, tx, *a);
  return e != cudaSuccess ? e : cudaGetLastError();
}

template <typename T, int NBOX>
int dispatch_p(const Args* a, const CUtensorMap& tw, const CUtensorMap& tx) {
  const bool p = a->protect != 0;
  if (a->mtile == 1) return p ? launch<T, 1, NBOX, true>(a, tw, tx) : launch<T, 1, NBOX, false>(a, tw, tx);
  return p ? launch<T, 2, NBOX, true>(a, tw, tx) : launch<T, 2, NBOX, false>(a, tw, tx);
}
template <typename T>
int dispatch(const Args* a, const CUtensorMap& tw, const CUtensorMap& tx) {
  if (a->nbox == 1) return dispatch_p<T, 1>(a, tw, tx);
  return dispatch_p<T, 2>(a, tw, tx);
}

}  // namespace thr
}  // namespace ftg

extern "C" int ft_gemm_thread(const ftg::Args* a) {
  using namespace ftg;
  if (a->K % 8 || a->M < 1 || a->N < 1 || a->batch < 1 || (a->mtile != 1 && a->mtile != 2) || a->split < 1 ||
      a->split > 16 || (a->nbox != 1 && a->nbox != 2) || (a->wm != 1 && a->wm != 2 && a->wm != 4) ||
      a->stages < 2 || a->stages > thr::MAX_NS || a->stages % (thr::NCW / a->wm))  // a slot belongs to one K group
    return FTG_ERR_ARGS;
  CUtensorMap tw, tx;
  if (!make_tmap(&tw, a->w, a->batch, a->N, a->K, a->w_rstride, a->w_bstride, thr::BN) ||
      !make_tmap(&tx, a->x, a->batch, a->M, a->K, a->x_rstride, a->x_bstride, 16 * a->mtile * a->wm))
    return FTG_ERR_TMAP;
  return a->dtype == 0 ? thr::dispatch<__nv_bfloat16>(a, tw, tx) : thr::dispatch<__half>(a, tw, tx);
}

extern "C" const char* ft_error_string(int code) {
  if (code == FTG_ERR_TMAP) return "TMA descriptor rejected (alignment/stride)";
  if (code == FTG_ERR_ARGS) return "invalid arguments";
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

// sizeof(Args): the Python side checks its ctypes mirror against it once at load.
extern "C" int ft_args_size() { return (int)sizeof(ftg::Args); }

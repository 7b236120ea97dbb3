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
#include "thread_abft.cuh"

namespace ftg {
namespace thr {

// 4 consumer warps (+1 producer) and 2 CTAs per SM: measured faster than 8 warps at 1 CTA per SM
// (same speed for <= 132 CTAs, 1.3 waves instead of 1 beyond; NOTES_gemm.md, runs 3 and 5).
using namespace tabft;
constexpr int BK = 64, MAX_NS = 8, NCW = 4, THREADS = 32 * (NCW + 1);

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
  CheckSmem cs;
};
template <int MT, int NBOX> size_t smem_bytes(int ns, int wm) {
  const size_t ring = (size_t)ns * Cfg<MT, NBOX>::stage(wm);
  return 1024 + (ring > (size_t)Cfg<MT, NBOX>::PART ? ring : (size_t)Cfg<MT, NBOX>::PART) + sizeof(Smem);
}

template <typename T, int MT, bool PROTECT>
__device__ __forceinline__ void consume_stage(Frag<MT>& f, uint32_t wt, uint32_t xt, int lane) {
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
    mma_step<T, MT, PROTECT>(f, a, b);
  }
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
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* base = sm90::align_1024(smem_raw);
  const int NS = args.stages, WM = args.wm, WK = NCW / WM;
  const int BMc = C::bm(WM), XB = C::x_box(WM), STAGE = C::stage(WM);
  const int ring = NS * STAGE;
  Smem& sm = *reinterpret_cast<Smem*>(base + (ring > C::PART ? ring : C::PART));
  float* part = reinterpret_cast<float*>(base);  // aliases the ring once the k-loop is done

  // The warp index through a shuffle: warp-uniform to the compiler, so the k-loop (its trip count
  // is the warp's) is not a divergent one and needs no WARPSYNC per iteration.
  const int tid = threadIdx.x, warp = __shfl_sync(0xffffffffu, tid / 32, 0), lane = tid % 32;
  const int S = args.split;
  const int rank = (int)cluster_rank();
  const int tile = blockIdx.x / S, mb = blockIdx.y, b = blockIdx.z;
  const int64_t M = args.M, K = args.K;
  const int nst = cdiv(K, BK * NBOX);  // stages over the whole K; the cluster splits whole stages
  const int s_begin = (int)((int64_t)rank * nst / S), s_end = (int)((int64_t)(rank + 1) * nst / S);
  const int nloc = s_end - s_begin;

  if (tid == 0) {
    for (int s = 0; s < NS; ++s) { mbar_init(&sm.full[s], 1); mbar_init(&sm.empty[s], WM); }
    fence_barrier_init();
    tma_prefetch_desc(&tmW);
    tma_prefetch_desc(&tmX);
    reset_outcomes(sm.cs);
    if (PROTECT && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(args.counters + kChecks), 1ull);
  }
  __syncthreads();

  Frag<MT> f;
  if (warp == NCW) {  // ------------------------------------------- TMA producer
    if (lane > 0) fetch_constants<T>(sm.cs, args, tile, b, lane - 1, 31);  // read after cluster_sync
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
    f.zero();
    f.template reset_extrema<T>();
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
          if (lr / 16 / MT != wmi || lane != owner_lane(lr, lc)) continue;
          inject_acc<MT>(f, lr % (16 * MT), lc, inj, args.inj_log);
        }
      }
      }
      fence_proxy_async_smem();  // the slot's ldmatrix reads done before the TMA refills it
      __syncwarp();
      if (lane == 0) mbar_arrive(&sm.empty[slot]);
    }
    named_bar_sync(1, NCW * 32);  // every stage consumed: the ring may be overwritten
    float* p = part + (size_t)warp * MT * NREG * 32 + lane;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) write_partial<T, MT>(f, mt, p + mt * NREG * 32);
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
#pragma unroll 1
  for (int round = 0; round * (THREADS / 32) < MTT; ++round) {
    const int mtw = round * (THREADS / 32) + warp;
    Block blk;
    blk.active = mtw < MTT;
    blk.row0 = (int64_t)mb * BMc + mtw * 16 + g;  // rows row0, row0 + 8 (within batch)
    blk.col0 = (int64_t)tile * BN + 2 * q4;
    if constexpr (PROTECT) {
      if (round > 0) {  // the previous round's flags are consumed
        __syncthreads();
        if (tid == 0) sm.cs.nflag = 0;
        __syncthreads();
      }
    }
    if (blk.active) {
      float v[NREG];
      const float* src = part + (size_t)((mtw / MT) * WK * MT + mtw % MT) * NREG * 32 + lane;
#pragma unroll
      for (int r = 0; r < NREG; ++r) v[r] = src[r * 32];
      check_block<T, PROTECT, PROTECT>(blk, v, sm.cs, args, tile, b, q4);
    }
    if constexpr (PROTECT) {
      __syncthreads();
      const int nflag = min(sm.cs.nflag, MAX_FLAG);
      if (nflag > 0) {
        recompute_flagged<T>(sm.cs, args, nflag, tile, b, warp, THREADS / 32, lane);
        __syncthreads();
        if (blk.active) fix_block(blk, sm.cs, args);
      }
    }
    if (blk.active) store_block<T>(blk, args, b);
  }  // rounds
  if constexpr (PROTECT) {
    __syncthreads();
    if (tid == 0) report(sm.cs, args, tile, (int)(gridDim.y * gridDim.z));
  }
}

template <typename T, int MT, int NBOX, bool PROTECT>
int launch(const Args* a, const CUtensorMap& tw, const CUtensorMap& tx) {
  constexpr auto kern = &gemm_thread_kernel<T, MT, NBOX, PROTECT>;
  const size_t smem = smem_bytes<MT, NBOX>(a->stages, a->wm);
  if (cudaError_t e = sm90::allow_smem<kern>(smem, true)) return e;
  const dim3 grid((unsigned)(cdiv(a->N, BN) * a->split), (unsigned)cdiv(a->M, Cfg<MT, NBOX>::bm(a->wm)),
                  (unsigned)a->batch);
  return launch_split(kern, grid, THREADS, smem, a->stream, a->split, false, tw, tx, *a);
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
      a->ldy != a->N ||  // contiguous y only (the global kernel's is padded where asked)
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

// The id of the CUDA graph capture running on `stream` (0: none). A capture without warm-up calls
// on its stream makes its own workspaces; the Python side keys them on this id, so all calls of
// one capture share one (cuda_gemm._workspace).
extern "C" unsigned long long ft_capture_id(int64_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(reinterpret_cast<cudaStream_t>(stream), &status, &id) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: leave no error for the next launch to report
    return 0;
  }
  return status == cudaStreamCaptureStatusActive ? id : 0;
}

// sizeof(Args): the Python side checks its ctypes mirror against it once at load.
extern "C" int ft_args_size() { return (int)sizeof(ftg::Args); }

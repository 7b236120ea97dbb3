// One-sided thread-level ABFT linear y = x W^T + b for small M (decode): W streamed from global
// memory straight into the registers the MMAs read, no shared-memory ring, no producer warp.
//
// CTA = NW warps (8 or 16) on one 64-column tile (8 n8 blocks) of MT m16 blocks of x rows (MT = 2:
// each W fragment serves two blocks' MMAs, so W crosses L2 -> SM once per 32 rows); K is split over
// the warps (32-wide k chunks, interleaved: neighbouring warps read neighbouring bytes of each
// row) and over a cluster of `split` CTAs. A lane loads 16 bytes per n8 block and chunk:
// W[8j + g][k + 8c .. k + 8c + 7] (g = lane / 4, c = lane % 4), and x rows g, g + 8 at the same
// k. The dot product does not care in which order k is summed, so those 8 contiguous elements
// serve as the B (and A) fragments of two m16n8k16 MMAs under one permutation of k: logical
// k {2c, 2c+1, 2c+8, 2c+9} of MMA s are physical 8c + 4s + {0, 1, 2, 3}. The thread then holds,
// for j = 0..7, W[8j + g] fragments: the strided checksum and the checks are those of
// thread_abft.cuh, computed from registers, with no extra global traffic.
//
// Loads in flight (NOTES_gemm.md, runs 13 and 14): at DEPTH 1 a warp loads a chunk, waits, and
// computes it. At DEPTH 2 (rolling) the next chunk's vector j is loaded into wv[j] as soon as the
// current chunk's block j has had its two MMAs, so the next chunk's loads fly while the rest of
// this one computes, in the same registers. The checksum is summed over j in the same order, and
// each accumulator sees its MMAs in the same order: the two depths give bit-identical results.
//
// End of a CTA: each warp's partials go to shared memory and are combined (fixed order); the
// other CTAs of a cluster push theirs into the leader's shared memory with st.async, which
// completes bytes on the leader's mbarrier, and exit (one one-way signal, no cluster-wide wait).
// Warp mt of the leader verifies m16 block mt, the whole CTA recomputes flagged groups (rare),
// warp mt stores block mt.
// The end costs ~2 us of serial single-warp work per CTA (NOTES_gemm.md, run 16, phase stamps).
//
// Replica checks (REP; protected calls of up to REPLICA_ROWS rows, one m16 block): x's rows g
// again as the block's rows g + 8, in the A fragments the thread already holds (no extra load), so
// the MMAs compute every element twice, bit for bit alike (thread_abft.cuh). The k-loop is then
// the unprotected one (no checksum MMAs, sums or extrema), and the partials carry the 32 outputs
// of each row and its replica. -DFTG_STREAM_REPLICA=0: the strided checksums at every row count.
//
// Launch: with programmatic dependent launch (Args.pdl) a call's set-up overlaps the previous
// kernel's end; it waits for that kernel before its first global memory access.
#include "ft_common.cuh"
#include "ft_host.cuh"
#include "phase_stamps.cuh"
#include "thread_abft.cuh"

#ifndef FTG_STREAM_REPLICA
#define FTG_STREAM_REPLICA 1
#endif

namespace ftg {
namespace stream {
using namespace tabft;

constexpr int REPLICA_ROWS = 8;  // gemm.STREAM_REPLICA_ROWS: x's rows g < 8 fill half an m16 block

// NW = 8 or 16 warps per CTA, at most 128 registers: two CTAs of 8 warps or one of 16 per SM (the
// loads of 16 warps per SM are what streams near the copy rate: NOTES_gemm.md, run 14). MT = 2
// (twice the accumulators) runs 8 warps, one CTA per SM.
constexpr int KQ = 32, MAX_SPLIT = 8;  // any split 1-8: a cluster needs no power of two
constexpr int PART = NREG * 32;  // floats of one partial (slot-major, lane-minor)

struct Ctrl {
  uint64_t pushed;  // leader: the other CTAs' partials have landed (transaction bytes)
  CheckSmem cs;
};
// Shared memory: Ctrl | nw warp partials | split - 1 pushed partials; a partial is MT blocks' PART.
__host__ __device__ constexpr size_t part_offset() { return (sizeof(Ctrl) + 15) / 16 * 16; }
size_t smem_bytes(int nw, int split, int mt) { return part_offset() + (size_t)(nw + split - 1) * mt * PART * 4; }

// No L1 allocation; 256-byte L2 prefetch (the neighbouring warps' bytes of the row); L2 policy
// `pol` (w_policy). Volatile: the rolling loop places each load after the MMAs that free its
// registers.
__device__ __forceinline__ uint4 ld_stream(const void* p, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(pol));
  return v;
}
// W's L2 policy: where one CTA row covers all of x's rows, W is read once, and its lines go first
// out of L2 (evict-first: 0-6 % faster at every decode shape measured, never slower, NOTES_gemm.md
// session 28); with more CTA rows the others read the same W through L2 (normal policy).
__device__ __forceinline__ uint64_t w_policy() {
  uint64_t first, normal;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
  asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(normal));
#ifdef FTG_STREAM_DEFAULT_L2  // diagnostic build (benchmarks/evict_probe.py): the normal policy everywhere
  return normal;
#else
  return gridDim.y == 1 ? first : normal;
#endif
}
__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : (i == 1 ? v.y : (i == 2 ? v.z : v.w));
}
// v folded with n (<= MAXN) more partials at float4 e of u, u + STRIDE, ... in that order (the
// same order every call). A float4 lies in one slot (32 lane-consecutive floats), so it is all
// sums, all maxima or all minima; every load is issued before the first fold. This runs once per
// CTA on the call's critical path: a combine per load made a chain of load, branches, load, ...
// that took ~1.5 us (NOTES_gemm.md, run 16).
template <int MAXN, int STRIDE>
__device__ __forceinline__ float4 fold_partials(float4 v, const float4* u, int e, int n) {
  float4 w[MAXN];
#pragma unroll
  for (int i = 0; i < MAXN; ++i)
    if (i < n) w[i] = u[i * STRIDE + e];
  const int r = 4 * (STRIDE == PART / 4 ? e : e % (PART / 4)) / 32;  // slot
  if (r < SLOT_MAX) {
#pragma unroll
    for (int i = 0; i < MAXN; ++i)
      if (i < n) v = make_float4(v.x + w[i].x, v.y + w[i].y, v.z + w[i].z, v.w + w[i].w);
  } else if (r < SLOT_MIN) {
#pragma unroll
    for (int i = 0; i < MAXN; ++i)
      if (i < n) v = make_float4(fmaxf(v.x, w[i].x), fmaxf(v.y, w[i].y), fmaxf(v.z, w[i].z), fmaxf(v.w, w[i].w));
  } else {
#pragma unroll
    for (int i = 0; i < MAXN; ++i)
      if (i < n) v = make_float4(fminf(v.x, w[i].x), fminf(v.y, w[i].y), fminf(v.z, w[i].z), fminf(v.w, w[i].w));
  }
  return v;
}

template <typename T, bool PROTECT, bool INJECT, int DEPTH, int NW, int MT, bool REP>
__global__ void __launch_bounds__(32 * NW, NW == 8 && MT == 1 ? 2 : 1) gemm_stream_kernel(const __grid_constant__ Args args) {
  static_assert(MT == 1 || (MT == 2 && NW == 8), "MT = 2 runs 8 warps per CTA");
  static_assert(!REP || (PROTECT && MT == 1), "replica checks: protected, one m16 block");
  constexpr bool CHK = PROTECT && !REP;  // the strided checksums' work in the k-loop
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Ctrl& ctl = *reinterpret_cast<Ctrl*>(smem_raw);
  float* part = reinterpret_cast<float*>(smem_raw + part_offset());  // [NW + split - 1][MT][PART]
  constexpr int THREADS = 32 * NW, ROWS = 16 * MT, P4 = MT * PART / 4;  // P4: float4s of a partial
  // Phase timestamps (diagnostic build only): 0 entry, 1 set-up done, 2 first chunk computed (depth
  // 1 only: a stamp inside the rolling loop makes it spill), 3 loop end (warp 0), 4 all warps' loops
  // done, 5 cluster wait, 6 warp partials combined (a non-leader has pushed them and exits), 7 leader:
  // the pushed partials landed, 8 cluster partials combined, 9 checked, 10 corrected, 11 stored and
  // reported.
  phase_stamps::Stamper st;
  st.begin();

  // The warp index through a shuffle: warp-uniform to the compiler, so the k-loop (its trip count
  // is the warp's) is not a divergent one and needs no WARPSYNC per iteration.
  const int tid = threadIdx.x, warp = __shfl_sync(0xffffffffu, tid / 32, 0);
  const int lane = tid % 32, g = lane / 4, c = lane % 4;
  const int S = args.split;
  const int rank = S > 1 ? (int)cluster_rank() : 0;
  const int tile = blockIdx.x / S, mb = blockIdx.y, b = blockIdx.z;
  const int64_t M = args.M, N = args.N, K = args.K;
  const int nq = cdiv(K, KQ);  // 32-wide chunks; the cluster splits them evenly
  const int q_begin = (int)((int64_t)rank * nq / S), q_end = (int)((int64_t)(rank + 1) * nq / S);
  // Rows of x in m16 block mt: only their share of the partials is written, combined and pushed
  // (at M = 1, 1/16 of it). A function, not a value: a value held across the main loop spills.
  auto block_rows = [&](int mt) {
    const int64_t r = M - (int64_t)mb * ROWS - 16 * mt;
    return (int)(r < 0 ? 0 : (r < 16 ? r : 16));
  };
  auto cta_rows = [&] {
    int n = 0;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) n += block_rows(mt);
    return n;
  };

  if (tid == 0) {
    reset_outcomes(ctl.cs);
    if (rank == 0 && S > 1) {
      mbar_init(&ctl.pushed, 1);
      fence_barrier_init();
      mbar_expect_tx(&ctl.pushed, (uint32_t)((S - 1) * needed_float4s<REP>(cta_rows()) * 16));  // see row_needed
    }
  }
  if (S > 1) cluster_arrive_relaxed();  // the leader's mbarrier init is released by fence_barrier_init
  // Programmatic dependent launch (Args.pdl): the next kernel of the stream may launch now (its
  // CTAs get SMs as this grid's leave), and this grid's start above overlapped the previous
  // kernel's end. Nothing before the wait touches global memory.
  grid_dep_launch_dependents();
  grid_dep_wait();
  if (tid == 0 && PROTECT && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
    atomicAdd(reinterpret_cast<unsigned long long*>(args.counters + kChecks), 1ull);
  if (rank == 0 && warp == NW - 1) fetch_constants<T>(ctl.cs, args, tile, b, lane, 32, !REP);
  st.mark(1);

  // ------------------------------------------------------------- stream W, MMAs in registers
  const T* Wg = static_cast<const T*>(args.w) + b * args.w_bstride + ((int64_t)tile * BN + g) * args.w_rstride;
  const T* Xg = static_cast<const T*>(args.x) + b * args.x_bstride + ((int64_t)mb * ROWS + g) * args.x_rstride;
  bool xa_ok[MT], xb_ok[MT];  // rows g, g + 8 of block mt
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    xa_ok[mt] = (int64_t)mb * ROWS + 16 * mt + g < M;
    xb_ok[mt] = (int64_t)mb * ROWS + 16 * mt + g + 8 < M;
  }
  bool w_ok[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) w_ok[j] = (int64_t)tile * BN + 8 * j + g < N;
  const int64_t w8 = 8 * args.w_rstride, x8 = 8 * args.x_rstride;

  Frag<MT> f;
  f.zero();
  f.template reset_extrema<T>();
  // The warp's chunks: q = q_begin + warp + NW * i, i < nit.
  const int nit = q_end - q_begin > warp ? cdiv(q_end - q_begin - warp, NW) : 0;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  auto k_of = [&](int i) { return (int64_t)(q_begin + warp + NW * i) * KQ + 8 * c; };
  // K % 8 == 0: a 16-byte vector is all in or all out.
  const uint64_t wpol = w_policy();
  auto load_w = [&](int64_t k, int j) { return k < K && w_ok[j] ? ld_stream(Wg + j * w8 + k, wpol) : zero; };
  auto load_x = [&](int64_t k, bool ok, int64_t off) {
    return k < K && ok ? __ldg(reinterpret_cast<const uint4*>(Xg + off + k)) : zero;
  };
  auto load_xs = [&](int64_t k, uint4 (&xa)[MT], uint4 (&xb)[MT]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      xa[mt] = load_x(k, xa_ok[mt], 2 * mt * x8);
      xb[mt] = load_x(k, xb_ok[mt], (2 * mt + 1) * x8);
    }
  };
  auto load_chunk = [&](int64_t k, uint4 (&wv)[8], uint4 (&xa)[MT], uint4 (&xb)[MT]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) wv[j] = load_w(k, j);
    load_xs(k, xa, xb);
  };
  // Accumulator faults "after k-step t" (64-wide): the chunk 2t's warp.
  auto inject = [&](int q) {
    if constexpr (INJECT) {
      for (int i = 0; i < args.n_inj; ++i) {
        const Injection& inj = args.inj[i];
        if (inj.step < 0 || 2 * inj.step != q) continue;
        const int64_t ib = inj.row / M, im = inj.row % M;
        if (ib != b || im / ROWS != mb || inj.col / BN != tile) continue;
        const int lr = (int)(im % ROWS), lc = inj.col % BN;
        if (lane == owner_lane(lr, lc)) inject_acc<MT>(f, lr, lc, inj, args.inj_log);
      }
    }
  };
  auto a_frag = [](const uint4 (&xa)[MT], const uint4 (&xb)[MT], int s, uint32_t (&a)[MT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {  // REP: rows g + 8 are x's rows g again (xb is never loaded)
      a[mt][0] = word(xa[mt], 2 * s); a[mt][1] = word(REP ? xa[mt] : xb[mt], 2 * s);
      a[mt][2] = word(xa[mt], 2 * s + 1); a[mt][3] = word(REP ? xa[mt] : xb[mt], 2 * s + 1);
    }
  };
  if constexpr (DEPTH == 1) {
    // One chunk's loads per warp in flight (4 KB; loading two before use spilled at 128 registers
    // and measured slower: NOTES_gemm.md, run 13c). Protected, the first chunk is peeled off the
    // loop: at K = 768 it is a warp's only one, and straight-line code for it took 3-6 % off the
    // protected GPT-2 decode calls; the unprotected ones were level or 1-3 % slower, and keep the
    // plain loop (NOTES.md, session 61, runs 69f-g).
    auto chunk = [&](int i) {
      uint4 wv[8], xa[MT], xb[MT];
      load_chunk(k_of(i), wv, xa, xb);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint32_t a[MT][4], bf[8][2];
        a_frag(xa, xb, s, a);
#pragma unroll
        for (int j = 0; j < 8; ++j) { bf[j][0] = word(wv[j], 2 * s); bf[j][1] = word(wv[j], 2 * s + 1); }
        mma_step<T, MT, CHK>(f, a, bf);
      }
      inject(q_begin + warp + NW * i);
    };
    if constexpr (CHK) {
      if (nit > 0) {
        chunk(0);
        st.mark(2);
      }
      for (int i = 1; i < nit; ++i) chunk(i);
    } else {
      for (int i = 0; i < nit; ++i) {
        chunk(i);
        if (i == 0) st.mark(2);
      }
    }
  } else {
    uint4 wv[8], xa[MT], xb[MT];
    if (nit > 0) load_chunk(k_of(0), wv, xa, xb);
    for (int i = 0; i < nit; ++i) {
      const int64_t kn = i + 1 < nit ? k_of(i + 1) : K;  // K: nothing more to load
      uint32_t a[2][MT][4];
      a_frag(xa, xb, 0, a[0]);
      a_frag(xa, xb, 1, a[1]);
      load_xs(kn, xa, xb);
      float2 v[2][2];  // checksum sums [k16 step][register]
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int s = 0; s < 2; ++s) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            Elem<T>::mma(f.acc[mt][j], a[s][mt], word(wv[j], 2 * s), word(wv[j], 2 * s + 1));
          if constexpr (CHK) add_block<T>(v[s], word(wv[j], 2 * s), word(wv[j], 2 * s + 1), j == 0);
        }
        wv[j] = load_w(kn, j);
      }
      if constexpr (CHK) {
        check_step<T, MT>(f, a[0], v[0]);
        check_step<T, MT>(f, a[1], v[1]);
      }
      inject(q_begin + warp + NW * i);
    }
  }

  // ------------------------------------------------------------- combine: warps, then the cluster
  st.mark(3);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) write_partial<T, MT, REP>(f, mt, part + (warp * MT + mt) * PART + lane, block_rows(mt));
  __syncthreads();
  st.mark(4);
  if (S > 1) cluster_wait();
  st.mark(5);
  float4* p4 = reinterpret_cast<float4*>(part);
  // Non-leaders: this CTA's slot in the leader's shared memory, and the leader's mbarrier.
  const uint32_t slot = rank ? mapa(smem_u32(p4 + (NW + rank - 1) * P4), 0) : 0u;
  const uint32_t pushed = rank ? mapa(smem_u32(&ctl.pushed), 0) : 0u;
  // float4 e of a partial: block e / (PART / 4), float4 e % (PART / 4) of its PART.
  auto needed = [&](int e) {
    if constexpr (MT == 1) return row_needed<REP>(e, block_rows(0));
    else return row_needed(e % (PART / 4), block_rows(e / (PART / 4)));
  };
  for (int e = tid; e < P4; e += THREADS) {
    if (!needed(e)) continue;
    const float4 v = fold_partials<NW - 1, P4>(p4[e], p4 + P4, e, NW - 1);
    if (rank == 0) p4[e] = v;
    else st_async_v4(slot + 16 * e, pushed, v);
  }
  st.mark(6);
  if (rank != 0) return;
  if (S > 1) {  // add the pushed partials, in rank order (deterministic)
    mbar_wait(&ctl.pushed, 0);
    st.mark(7);
    __syncthreads();  // this CTA's combined partial is complete too
    for (int e = tid; e < P4; e += THREADS)
      if (needed(e)) p4[e] = fold_partials<MAX_SPLIT - 1, P4>(p4[e], p4 + NW * P4, e, S - 1);
  }
  __syncthreads();
  st.mark(8);

  // ------------------------------------------------------------- leader: verify, correct, store
  // Warp mt < MT checks and stores m16 block mt (combined partial: the first MT * PART floats).
  const bool checker = warp < MT;
  Block blk;
  blk.active = checker;
  blk.row0 = (int64_t)mb * ROWS + 16 * warp + g;
  blk.col0 = (int64_t)tile * BN + 2 * c;
  if (checker) {
    constexpr int NV = REP ? SLOT_CHK : NREG;
    float v[NV];  // lanes of rows >= M read leftovers: never checked, flagged or stored
#pragma unroll
    for (int r = 0; r < NV; ++r) v[r] = part[warp * PART + r * 32 + lane];
    if constexpr (REP) check_replica_block<T, INJECT>(blk, v, ctl.cs, args, tile, b, c);
    else check_block<T, PROTECT, INJECT>(blk, v, ctl.cs, args, tile, b, c);
  }
  st.mark(9);
  if constexpr (PROTECT) {
    // Only the checker warps flag groups: they read the count after a barrier among themselves and
    // let the other warps know with a non-blocking arrive, so a clean block goes on to its store
    // without waiting.
    if (checker) {
      __syncwarp();
      named_bar_arrive(1, THREADS);
      if constexpr (MT > 1) named_bar_sync(2, 32 * MT);
    } else {
      named_bar_sync(1, THREADS);
    }
    const int nflag = min(ctl.cs.nflag, MAX_FLAG);
    if (nflag > 0) {
      recompute_flagged<T>(ctl.cs, args, nflag, tile, b, warp, NW, lane);
      __syncthreads();
      if (checker) {
        if constexpr (REP) fix_replica_block(blk, ctl.cs);
        else fix_block(blk, ctl.cs, args);
      }
    }
  }
  st.mark(10);
  if (!checker) return;
  store_block<T>(blk, args, b);
  if constexpr (PROTECT) {
    if constexpr (MT > 1) named_bar_sync(2, 32 * MT);  // every checker's outcomes are counted
    else __syncwarp();
    if (warp == 0 && lane == 0) report(ctl.cs, args, tile, (int)(gridDim.y * gridDim.z));
  }
  st.mark(11);
}

template <typename T, bool PROTECT, bool INJECT, int DEPTH, int NW, int MT, bool REP = false>
int launch(const Args* a) {
  constexpr auto kern = &gemm_stream_kernel<T, PROTECT, INJECT, DEPTH, NW, MT, REP>;
  const size_t smem = smem_bytes(NW, a->split, MT);
  if (cudaError_t e = sm90::allow_smem<kern>(smem_bytes(NW, MAX_SPLIT, MT), true)) return e;
  const dim3 grid((unsigned)(cdiv(a->N, BN) * a->split), (unsigned)cdiv(a->M, 16 * MT), (unsigned)a->batch);
  return launch_split(kern, grid, 32 * NW, smem, a->stream, a->split, a->pdl != 0, *a);
}

// How many clusters of `split` CTAs of this kernel (NW warps, MT m16 blocks) the device holds at
// once, or a negative CUDA error.
template <int NW, int MT>
int max_clusters(int split) {
  constexpr auto kern = &gemm_stream_kernel<__nv_bfloat16, true, false, 1, NW, MT, false>;
  if (cudaError_t e = sm90::allow_smem<kern>(smem_bytes(NW, MAX_SPLIT, MT), true)) return -(int)e;
  return sm90::max_active_clusters(kern, 32 * NW, smem_bytes(NW, split, MT), split);
}

template <typename T, int DEPTH, int NW, int MT>
int dispatch_depth(const Args* a) {
  if (!a->protect) return launch<T, false, false, DEPTH, NW, MT>(a);
  if constexpr (MT == 1 && FTG_STREAM_REPLICA) {
    if (a->M <= REPLICA_ROWS && !a->dbg)  // (the diagnostics are the checksums')
      return a->n_inj > 0 ? launch<T, true, true, DEPTH, NW, MT, true>(a) : launch<T, true, false, DEPTH, NW, MT, true>(a);
  }
  return a->n_inj > 0 ? launch<T, true, true, DEPTH, NW, MT>(a) : launch<T, true, false, DEPTH, NW, MT>(a);
}
template <typename T>
int dispatch(const Args* a) {
  if (a->mtile == 2) return a->stages == 1 ? dispatch_depth<T, 1, 8, 2>(a) : dispatch_depth<T, 2, 8, 2>(a);
  if (a->warps == 16) return a->stages == 1 ? dispatch_depth<T, 1, 16, 1>(a) : dispatch_depth<T, 2, 16, 1>(a);
  return a->stages == 1 ? dispatch_depth<T, 1, 8, 1>(a) : dispatch_depth<T, 2, 8, 1>(a);
}

}  // namespace stream
}  // namespace ftg

// The streaming thread-scheme kernel: any M (one CTA row per `mtile` = 1 or 2 m16 blocks of x, each
// reading all of W: meant for small M); 16-byte aligned x and W rows (K and the row strides % 8 == 0);
// `stages` 1 (load, then compute) or 2 (rolling: the next chunk loads while this one computes);
// `warps` 8 or 16 (mtile 2: 8).
extern "C" int ft_gemm_stream(const ftg::Args* a) {
  using namespace ftg;
  const int s = a->split;
  if (a->K % 8 || a->K < 8 || a->M < 1 || a->N < 1 || a->batch < 1 || s < 1 || s > stream::MAX_SPLIT ||
      a->ldy != a->N ||  // contiguous y only (the global kernel's is padded where asked)
      a->stages < 1 || a->stages > 2 || (a->warps != 8 && a->warps != 16) || (a->mtile != 1 && a->mtile != 2) ||
      (a->mtile == 2 && a->warps != 8) ||
      a->x_rstride % 8 || a->w_rstride % 8 || a->x_bstride % 8 || a->w_bstride % 8 ||
      reinterpret_cast<uintptr_t>(a->x) % 16 || reinterpret_cast<uintptr_t>(a->w) % 16)
    return FTG_ERR_ARGS;
  return a->dtype == 0 ? stream::dispatch<__nv_bfloat16>(a) : stream::dispatch<__half>(a);
}

// Clusters of `split` streaming CTAs (`warps` 8 or 16, `mtile` 1 or 2) resident at once on the
// current device (the host's choice of split), or a negative CUDA error.
extern "C" int ft_gemm_stream_max_clusters(int warps, int mtile, int split) {
  using namespace ftg::stream;
  if (split < 1 || split > MAX_SPLIT) return -1;
  if (mtile == 2) return warps == 8 ? max_clusters<8, 2>(split) : -1;
  return warps == 16 ? max_clusters<16, 1>(split) : warps == 8 ? max_clusters<8, 1>(split) : -1;
}

#ifdef PHASE_STAMPS
// Diagnostic build: copies up to `cap` phase records (phase_stamps::Rec) of the launches since the
// last call into `out` and starts over; returns how many CTAs recorded (may exceed cap).
extern "C" int ft_gemm_stream_stamps(void* out, int cap) { return phase_stamps::copy_records(out, cap); }
extern "C" int ft_gemm_stream_stamp_size() { return (int)sizeof(phase_stamps::Rec); }
#endif

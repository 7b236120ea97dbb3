// One-sided thread-level ABFT on mma.sync m16n8k16 fragments: what both thread-scheme kernels
// (thread_gemm.cu: TMA ring, any M up to 256; stream_gemm.cu: W streamed into registers, M <= 16
// per CTA) share. A warp owns 64 output columns (8 n8 blocks) of an m16 block of x rows:
//  * the MMAs of one k16 step: main tiles, the strided checksum of the 8 B fragments the thread
//    holds (summed in fp32, split into bf16 hi+mid+lo / fp16 hi + 2^-11-scaled mid so the extra
//    MMA is exact to fp32), row sums of x (an MMA against ones) and packed row extrema;
//  * the partial sums in a fixed fragment order (NREG floats per lane), combined across warps
//    and CTAs (sums, max, min);
//  * the epilogue of one m16 x 64 block: bias, the V-ABFT check of each group of 8 columns
//    (g, g+8, ..., g+56) in the thread that holds them, single-fault location by the weighted
//    checksum of the recomputed group, correction, store;
//  * replica checks instead (streaming kernel, <= 8 rows of x, REP): x's rows g again in the m16
//    block's rows g + 8, so accumulator registers 2, 3 are registers 0, 1 computed a second time by
//    the same MMAs, equal bit for bit without a fault; no checksum MMAs, no statistics, no
//    threshold; a differing element is recomputed and its intact copy kept.
#pragma once
#include <type_traits>

#include "ft_common.cuh"

namespace ftg {
namespace tabft {

constexpr int BN = 64;        // output columns of a check tile (8 groups of 8 strided columns)
constexpr int NREG = 42;      // partial floats per lane: 32 outputs, 4 checks, 2 x sums, 2 max, 2 min
// Slots of a partial: 0..31 outputs, then the checks, x row sums, row maxima and row minima (the
// statistics two each: rows g, g + 8). Slots below SLOT_MAX combine by sums.
constexpr int SLOT_CHK = 32, SLOT_SX = 36, SLOT_MAX = 38, SLOT_MIN = 40;
constexpr int MAX_FLAG = 32;  // flagged groups a CTA corrects per m16 block round

// Partial sums of one warp: main accumulators, checks, and x statistics, per m16 block.
template <int MT> struct Frag {
  float acc[MT][8][4];
  float chk[MT][4];
  float chk2[MT][4];  // fp16: the 2^-11-scaled low part of the check
  float sx[MT][4];
  uint32_t mx[MT][2], mn[MT][2];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[mt][j][e] = 0.f;
        chk[mt][e] = 0.f; chk2[mt][e] = 0.f; sx[mt][e] = 0.f;
      }
    }
  }
  template <typename T> __device__ __forceinline__ void reset_extrema() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      mx[mt][0] = mx[mt][1] = kNegInf2<T>;
      mn[mt][0] = mn[mt][1] = kPosInf2<T>;
    }
  }
};

// The check MMAs of one k16 step: v[r] = the fp32 sums over the 8 n8 blocks of the thread's B
// fragment register r (the strided checksum, summed j = 0..7 in order), split into 16-bit parts so
// the MMA is exact to fp32; x row sums (an MMA against ones) and packed row extrema.
template <typename T, int MT>
__device__ __forceinline__ void check_step(Frag<MT>& f, const uint32_t (&a)[MT][4], const float2 (&v)[2]) {
  uint32_t hi[2], mid[2], lo[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    hi[r] = Elem<T>::pack(v[r].x, v[r].y);
    const float2 h = Elem<T>::unpack(hi[r]);
    const float r0 = v[r].x - h.x, r1 = v[r].y - h.y;
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

// Block j's B fragment (b0, b1) into the strided checksum sums v[r] of one k16 step (j = 0 first).
template <typename T>
__device__ __forceinline__ void add_block(float2 (&v)[2], uint32_t b0, uint32_t b1, bool first) {
  const float2 u0 = Elem<T>::unpack(b0), u1 = Elem<T>::unpack(b1);
  if (first) {
    v[0] = u0; v[1] = u1;
  } else {
    v[0].x += u0.x; v[0].y += u0.y; v[1].x += u1.x; v[1].y += u1.y;
  }
}

// One k16 step: a[mt] the A fragments of the m16 blocks, b[j] = W[8j + g][k16 slice] as B fragments.
template <typename T, int MT, bool PROTECT>
__device__ __forceinline__ void mma_step(Frag<MT>& f, const uint32_t (&a)[MT][4], const uint32_t (&b)[8][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < 8; ++j) Elem<T>::mma(f.acc[mt][j], a[mt], b[j][0], b[j][1]);
  if constexpr (PROTECT) {
    float2 v[2];
#pragma unroll
    for (int j = 0; j < 8; ++j) add_block<T>(v, b[j][0], b[j][1], j == 0);
    check_step<T, MT>(f, a, v);
  }
}

// Accumulator fault "after k-step" on the lane holding (row lr of the warp's m16 blocks, column lc
// of the 64): injection.corrupt on the register itself.
template <int MT>
__device__ __forceinline__ void inject_acc(Frag<MT>& f, int lr, int lc, const Injection& inj, float* log) {
  const int imt = lr / 16, ij = lc / 8, ie = 2 * ((lr % 16) / 8) + (lc % 2);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (mt == imt && j == ij && e == ie) f.acc[mt][j][e] = inject_one(f.acc[mt][j][e], inj, log);
}
// The lane of a warp that holds local output (row lr % 16, column lc) of an m16 x 64 block.
__device__ __forceinline__ int owner_lane(int lr, int lc) { return ((lr % 16) % 8) * 4 + (lc % 8) / 2; }

// The warp's partials of m16 block mt into p[r * 32] (r < NREG, lane-strided): row extrema
// reduced over both packed halves and the 4 lanes that share a row first. Only rows < `rows` of
// the block are written (the others are never checked or stored); REP: the outputs of rows g < `rows`
// and of their replicas g + 8, no checks or statistics.
template <typename T, int MT, bool REP = false>
__device__ __forceinline__ void write_partial(const Frag<MT>& f, int mt, float* p, int rows = 16) {
  const int g = (threadIdx.x % 32) / 4;
  const bool ok[2] = {g < rows, (REP ? g : g + 8) < rows};
  float mxf[2], mnf[2];
  if constexpr (!REP) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 a = Elem<T>::unpack(f.mx[mt][h]), c = Elem<T>::unpack(f.mn[mt][h]);
      float vx = fmaxf(a.x, a.y), vn = fminf(c.x, c.y);
      vx = fmaxf(vx, __shfl_xor_sync(0xffffffffu, vx, 1)); vx = fmaxf(vx, __shfl_xor_sync(0xffffffffu, vx, 2));
      vn = fminf(vn, __shfl_xor_sync(0xffffffffu, vn, 1)); vn = fminf(vn, __shfl_xor_sync(0xffffffffu, vn, 2));
      mxf[h] = vx; mnf[h] = vn;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // accumulator registers 2h, 2h + 1 hold row g + 8h
    if (!ok[h]) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) p[(4 * j + e) * 32] = f.acc[mt][j][e];
    if constexpr (!REP) {
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e)
        p[(SLOT_CHK + e) * 32] =
            std::is_same<T, __half>::value ? f.chk[mt][e] + f.chk2[mt][e] * (1.f / 2048.f) : f.chk[mt][e];
      p[(SLOT_SX + h) * 32] = f.sx[mt][2 * h];
      p[(SLOT_MAX + h) * 32] = mxf[h];
      p[(SLOT_MIN + h) * 32] = mnf[h];
    }
  }
}
// Does float4 e of a partial (floats 4e .. 4e + 3: slot r = e / 8, lanes 4 (e % 8) + 0..3, so row
// g = e % 8 of half h) belong to one of the block's first `rows` rows? Half 1 (row g + 8): the
// accumulator registers 2, 3, checks 2, 3, and the odd statistics slots 37, 39, 41. Each half is
// NREG / 2 slots, so a block of `rows` rows needs NREG / 2 * rows float4s of a partial (REP: the
// 32 output slots of rows g < `rows`, both halves: 32 * rows).
template <bool REP = false>
__device__ __forceinline__ bool row_needed(int e, int rows) {
  const int r = e / 8, g = e % 8;
  if constexpr (REP) return r < SLOT_CHK && g < rows;
  const int h = r < SLOT_CHK ? (r % 4) / 2 : (r < SLOT_SX ? (r - SLOT_CHK) / 2 : (r - SLOT_SX) % 2);
  return g + 8 * h < rows;
}
template <bool REP = false>
__host__ __device__ constexpr int needed_float4s(int rows) { return (REP ? 32 : NREG / 2) * rows; }

__device__ __forceinline__ float combine(int r, float v, float u) {  // partial slot r of NREG
  return r < SLOT_MAX ? v + u : (r < SLOT_MIN ? fmaxf(v, u) : fminf(v, u));  // sums, max, min
}

// ---------------------------------------------------------------- epilogue of one m16 x 64 block
// Per-call constants and the CTA's check outcomes, in shared memory.
struct CheckSmem {
  float bias[BN], wst[3], bias_max;
  int wfin;
  float t[MAX_FLAG][8];  // recomputed group elements
  int frow[MAX_FLAG], fgrp[MAX_FLAG];
  int nflag, ndet, ncorr, nunc, ninvalid;
};

// Helper i of n (n >= 5) fetches the tile's bias and the per-call constants (`stats`: the check's
// statistics; replica checks read none); fetched early, their load latency stays out of the
// epilogue's critical path.
template <typename T>
__device__ __forceinline__ void fetch_constants(CheckSmem& cs, const Args& args, int tile, int b, int i, int n,
                                                bool stats = true) {
  const T* bias = static_cast<const T*>(args.bias);
  for (int c = i; c < BN; c += n) {
    const int64_t col = (int64_t)tile * BN + c;
    cs.bias[c] = (bias && col < args.N) ? Elem<T>::to_f(bias[col]) : 0.f;
  }
  if (!args.protect) return;
  if (!stats) {
    if (i == 3) cs.wfin = 1;  // a non-finite W shows as values non-finite in both copies
    return;
  }
  if (i < 3) cs.wst[i] = args.wstats[3 * b + i];
  if (i == 3) cs.wfin = *args.wfinite;
  if (i == 4) cs.bias_max = args.bias ? (float)args.bstats[3] : 0.f;
}
__device__ __forceinline__ void reset_outcomes(CheckSmem& cs) { cs.nflag = cs.ndet = cs.ncorr = cs.nunc = cs.ninvalid = 0; }

// One thread's share of a block: outputs y[j][2h + e] = (row row0 + 8h, column col0 + 8j + e).
struct Block {
  float y[8][4];
  bool flag[4];
  int slot[4];
  float thr[2], chk[4];
  int64_t row0, col0;
  bool active;
};

// Rare paths of the check, out of line: the epilogue runs once per CTA with a cold instruction
// cache, so its common path is kept short and straight (NOTES_gemm.md, run 13).
// A failed group: counted, and put on the CTA's list for correction (slot, or -1).
static __device__ __noinline__ int flag_group(CheckSmem& cs, int policy, int row, int grp) {
  atomicAdd(&cs.ndet, 1);
  if (policy != kCorrect && policy != kRecompute) return -1;
  const int fi = atomicAdd(&cs.nflag, 1);
  if (fi >= MAX_FLAG) {
    atomicAdd(&cs.nunc, 1);
    return -1;
  }
  cs.frow[fi] = row;
  cs.fgrp[fi] = grp;
  return fi;
}
// Diagnostics: (sum, check, threshold) of group `grp` of `row`; threshold -1 for invalid rows.
static __device__ __noinline__ void dump_group(const Args& args, int b, int64_t row, int tile, int grp, float sum, float chk,
                                        float thr) {
  const int64_t gi = ((int64_t)b * args.M + row) * (cdiv(args.N, BN) * 8) + tile * 8 + grp;
  args.dbg[3 * gi] = sum; args.dbg[3 * gi + 1] = chk; args.dbg[3 * gi + 2] = thr;
}

// The thread's share of the block: the combined partials plus the bias (CHECKS: and the bias's
// share of the checks, summed in column order).
template <bool CHECKS>
__device__ __forceinline__ void add_bias(Block& s, const float* v, const CheckSmem& cs, int q4) {
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float bv = cs.bias[8 * j + 2 * q4 + e];
      s.y[j][e] = v[4 * j + e] + bv;
      s.y[j][2 + e] = v[4 * j + 2 + e] + bv;
      if constexpr (CHECKS) { s.chk[e] += bv; s.chk[2 + e] += bv; }
    }
}
// Output-stage faults (final fp32 values) on the thread's share of the block.
__device__ __forceinline__ void inject_outputs(Block& s, const Args& args, int tile, int b, int q4) {
  for (int qi = 0; qi < args.n_inj; ++qi) {
    const Injection& inj = args.inj[qi];
    if (inj.step != -1) continue;
    const int64_t ib = inj.row / args.M, im = inj.row % args.M;
    if (ib != b || inj.col / BN != tile) continue;
    const int lc = inj.col % BN;
    const int h = im == s.row0 ? 0 : (im == s.row0 + 8 ? 1 : -1);
    if (h < 0 || (lc % 8) / 2 != q4) continue;
    const int ij = lc / 8, ie = 2 * h + (lc % 2);
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (j == ij && e == ie) s.y[j][e] = inject_one(s.y[j][e], inj, args.inj_log);
  }
}

// Bias, output-stage faults, the check of the thread's 4 groups; flagged groups go to the CTA's
// list (policies correct / recompute). v: the combined partials (NREG) of this lane.
template <typename T, bool PROTECT, bool INJECT>
__device__ __forceinline__ void check_block(Block& s, const float* v, CheckSmem& cs, const Args& args, int tile,
                                            int b, int q4) {
  const int64_t M = args.M, K = args.K;
#pragma unroll
  for (int ge = 0; ge < 4; ++ge) { s.flag[ge] = false; s.slot[ge] = 0; s.chk[ge] = 0.f; }
  s.thr[0] = s.thr[1] = 0.f;
  add_bias<PROTECT>(s, v, cs, q4);
  if constexpr (!PROTECT) return;
  if constexpr (INJECT) inject_outputs(s, args, tile, b, q4);
  // V-ABFT threshold per row (n = 8 summed terms), validity, then the four groups.
  const float bias_term = args.e * cs.bias_max * 8.f;
  bool valid[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sx = v[SLOT_SX + h], mx = v[SLOT_MAX + h], mn = v[SLOT_MIN + h];
    const float mu = __fdividef(sx, (float)K);  // 2 ulp, no slow path (see sqrt_approx)
    const float var = fmaxf(0.f, (mx - mu) * (mu - mn));
    s.thr[h] = vabft_threshold(mu, var, 8.f, cs.wst, args.e, args.c_sigma) + bias_term;
    const bool in_range = s.row0 + 8 * h < M;
    valid[h] = in_range && isfinite(sx) && cs.wfin;
    if (in_range && !valid[h] && q4 == 0) atomicAdd(&cs.ninvalid, 1);
  }
#pragma unroll
  for (int ge = 0; ge < 4; ++ge) {  // ge = 2*h + e: row half h, group 2*q4 + e
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += s.y[j][ge];
    s.chk[ge] += v[SLOT_CHK + ge];
    const float d1 = sum - s.chk[ge];
    if (args.dbg && s.row0 + 8 * (ge / 2) < M)
      dump_group(args, b, s.row0 + 8 * (ge / 2), tile, 2 * q4 + ge % 2, sum, s.chk[ge],
                 valid[ge / 2] ? s.thr[ge / 2] : -1.f);
    if (valid[ge / 2] && exceeds(d1, s.thr[ge / 2])) {
      const int fi = flag_group(cs, args.policy, (int)(s.row0 + 8 * (ge / 2)), 2 * q4 + (ge % 2));
      s.flag[ge] = fi >= 0;
      s.slot[ge] = fi;
    }
  }
}

// Rare: the flagged groups' 8 elements recomputed, one warp per dot (warp `warp` of `nwarps`).
template <typename T>
__device__ void recompute_flagged(CheckSmem& cs, const Args& args, int nflag, int tile, int b, int warp, int nwarps,
                                  int lane) {
  const T* W = static_cast<const T*>(args.w) + b * args.w_bstride;
  const T* X = static_cast<const T*>(args.x) + b * args.x_bstride;
  const T* bias = static_cast<const T*>(args.bias);
  for (int d = warp; d < nflag * 8; d += nwarps) {
    const int fi = d / 8, l = d % 8;
    const int64_t n = (int64_t)tile * BN + cs.fgrp[fi] + 8 * l;
    float t = 0.f;
    if (n < args.N) {
      t = warp_dot(X + cs.frow[fi] * args.x_rstride, W + n * args.w_rstride, args.K, lane);
      if (bias) t += Elem<T>::to_f(bias[n]);
    }
    if (lane == 0) cs.t[fi][l] = t;
  }
}

// Locate (weighted over plain residual with the checks c1 = sum t_l, c2 = sum (l+1) t_l, terms
// scaled by 1/8 so a huge faulty value cannot overflow, or the only non-finite element) and
// correct the thread's flagged groups; policy "recompute" takes the recomputed group whole where
// that fails.
__device__ __forceinline__ void fix_block(Block& s, CheckSmem& cs, const Args& args) {
#pragma unroll
  for (int ge = 0; ge < 4; ++ge) {
    if (!s.flag[ge]) continue;
    float t[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) t[j] = cs.t[s.slot[ge]][j];
    int p = -1;
    bool finite = true;
#pragma unroll
    for (int j = 0; j < 8; ++j) finite = finite && isfinite(s.y[j][ge]);
    if (finite) {
      float r1 = 0.f, r2 = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float dj = s.y[j][ge] * 0.125f - t[j] * 0.125f;
        r1 += dj;
        r2 += (float)(j + 1) * dj;
      }
      const float ratio = r2 / r1, near = rintf(ratio);
      if (isfinite(ratio) && fabsf(ratio - near) < 0.3f && near >= 1.f && near <= 8.f) p = (int)near - 1;
    } else {
      int cnt = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (!isfinite(s.y[j][ge])) { ++cnt; p = j; }
      if (cnt != 1) p = -1;
    }
    bool ok = false;
    if (p >= 0) {
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (j == p) s.y[j][ge] = t[j];
        sum += s.y[j][ge];
      }
      ok = !exceeds(sum - s.chk[ge], s.thr[ge / 2]);
    }
    if (ok) {
      atomicAdd(&cs.ncorr, 1);
    } else {
      atomicAdd(&cs.nunc, 1);
      if (args.policy == kRecompute) {
#pragma unroll
        for (int j = 0; j < 8; ++j) s.y[j][ge] = t[j];
      }
    }
  }
}

// Replica checks (REP): bias, output-stage faults, then each of the thread's 2 groups (row g,
// columns 8j + 2 q4 + e) against its replica (registers 2 + e) exactly; a differing group goes to
// the CTA's list (policies correct / recompute), values non-finite in both copies count as
// non-finite inputs. (Rows g >= M: the leftovers of the partial, never checked or stored.)
template <typename T, bool INJECT>
__device__ __forceinline__ void check_replica_block(Block& s, const float* v, CheckSmem& cs, const Args& args,
                                                    int tile, int b, int q4) {
#pragma unroll
  for (int ge = 0; ge < 4; ++ge) { s.flag[ge] = false; s.slot[ge] = 0; }
  add_bias<false>(s, v, cs, q4);
  if constexpr (INJECT) inject_outputs(s, args, tile, b, q4);
  if (s.row0 >= args.M) return;
  bool nonfinite = false;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    bool bad = false;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      bad |= !same(s.y[j][e], s.y[j][2 + e]);
      nonfinite |= !isfinite(s.y[j][e]) && !isfinite(s.y[j][2 + e]);
    }
    if (bad) {
      const int fi = flag_group(cs, args.policy, (int)s.row0, 2 * q4 + e);
      s.flag[e] = fi >= 0;
      s.slot[e] = fi;
    }
  }
  if (nonfinite) atomicAdd(&cs.ninvalid, 1);
}
// Rare, replica checks: each differing element of the thread's flagged groups takes the copy nearer
// its recomputed value (any number of faults in a group corrected).
__device__ __forceinline__ void fix_replica_block(Block& s, CheckSmem& cs) {
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    if (!s.flag[e]) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (!same(s.y[j][e], s.y[j][2 + e])) s.y[j][e] = nearer_copy(s.y[j][e], s.y[j][2 + e], cs.t[s.slot[e]][j]);
    atomicAdd(&cs.ncorr, 1);
  }
}

template <typename T>
__device__ __forceinline__ void store_block(const Block& s, const Args& args, int b) {
  const int64_t M = args.M, N = args.N;
  T* yb = static_cast<T*>(args.y) + (int64_t)b * M * N;
  const bool pairs = (N % 2) == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t m = s.row0 + 8 * h;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t n = s.col0 + 8 * j;
      if (pairs && n + 1 < N) {
        *reinterpret_cast<uint32_t*>(yb + m * N + n) = Elem<T>::pack(s.y[j][2 * h], s.y[j][2 * h + 1]);
      } else {
        if (n < N) yb[m * N + n] = Elem<T>::from_f(s.y[j][2 * h]);
        if (n + 1 < N) yb[m * N + n + 1] = Elem<T>::from_f(s.y[j][2 * h + 1]);
      }
    }
  }
}

// The CTA's outcomes into the telemetry (one thread); the first N tile of each M block reports
// its rows' non-finite inputs once per call (`reporters` such CTAs).
__device__ __forceinline__ void report(const CheckSmem& cs, const Args& args, int tile, int reporters) {
  add_outcomes(args, cs.ndet, cs.ncorr, cs.nunc);
  if (tile == 0)
    count_nonfinite_once(args, cs.ninvalid || !cs.wfin, reporters,
                         static_cast<unsigned long long*>(args.ws));  // the workspace's 8 bytes
}

}  // namespace tabft
}  // namespace ftg

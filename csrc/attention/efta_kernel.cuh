// EFTA: flash-attention forward (mma.sync m16n8k16, ldmatrix, cp.async) with the EFTA paper's hybrid
// protection inside the kernel; kProtect=false is the same kernel with every protection step removed.
//
// CTA: 4 warps x MT m16 tiles of query rows (d=64: MT=2 by default, 128 rows; d=128: MT=1, 64 rows); key
// tiles of 64 (the reference's BC); K/V double-buffered with cp.async; XOR-swizzled shared memory.
//
// Protection (per warp, per key tile), see ftcompile/abft/efta.py for the reference semantics:
//  * GEMM-I: an extra n8 MMA tile against 8 checksum rows of K (prepass): rows 2g, 2g+1 hold the hi and
//    lo halves (two 16-bit numbers, ~16 significant bits) of sum_{k in group g} K_k, group g = keys
//    {8j + 2g, 8j + 2g + 1}: exactly the 16 scores lane (lane % 4 == g) holds for each of its rows, so a
//    lane verifies its own data (no inter-thread communication, the point of strided checksums).
//  * unified check of GEMM-I + max + EXP (Algorithm 1, line 13), once per tile and group: the product
//    of the group's P against exp(scale * S^c - 16 m), compared in the log2 domain. The product is
//    taken by multiplication (1 op per element) where it cannot underflow, else as (sum of exponent
//    fields, product of mantissas), exact for every normal P, at 3 ops per element. Tiles with masked
//    keys check GEMM-I (sum of raw scores) and EXP (sum of clamped exponents) separately.
//  * rowmax (SNVR): the row max must bound every lane's local max and equal one of them (or the old max).
//  * an alarm is confirmed by recomputing the warp's tile before its P reaches O (deterministic MMAs):
//    counted only if the data changed, and the recomputed tile is what continues (correction of score,
//    exp and rowmax faults). A false alarm (e.g. an underflowed P) costs one tile, never a count.
//    (The wgmma kernel at d=128 recomputes with mma.sync, another instruction: there a row counts if
//    its recomputation passes the checks its first pass failed; efta_sm90.cuh.)
//  * GEMM-II + rescale + normalisation: one n8 MMA tile against checksum columns of V
//    [c1 hi, lo, lo2, -, ones, ones, ones, |v|] rescaled together with O, verified once at the end. A row
//    that fails is corrected by recomputing the block and comparing element by element (as the
//    reference does): exactly one element off is a single fault, several are uncorrectable. (The
//    paper's locator, a weighted checksum, cannot tell two faults from one and then "corrects" onto
//    a wrong value its own recheck accepts.)
//  * rowsum (SNVR): l in [1, n_keys] and equal to the MMA-path row sum, else the block
//    is recomputed and the row stored from the recomputation: a fault in l's FADD chain and one in the
//    P the PV MMA consumed (packed after the tile's check) look alike here, so l is not "repaired" from
//    the duplicate. The MMA computes that row sum three times (three ones columns, free in the n8 tile)
//    and the median is taken, so a fault in one copy is outvoted without a recomputation.
#pragma once
#include "efta_common.cuh"
#include "sm90_host.cuh"

// Measurement only (benchmarks/bench_attention.py --ablate): remove protection steps one by one to
// see what each costs. 1: no alarm confirmation (the slow path and, in the wgmma kernel, the
// per-tile vote that enters it; the wgmma kernel keeps the checks' verdict live, folded into a flag
// read once per block, so that the compiler does not drop the checks); 2: + no injection hooks, and
// of the per-element checks only the products (no per-row verification, no rowmax SNVR); 3: + no
// per-element checks; 4: + no checksum MMAs or final checks (the wgmma kernel: no checksum columns in
// its S and PV wgmmas, nor their loads); 5 (wgmma kernel): + no prepass. Detection is broken for any
// level > 0.
#ifndef EFTA_ABLATE
#define EFTA_ABLATE 0
#endif

namespace efta {
constexpr int kAbl = EFTA_ABLATE;
// The diagnostics build (cuda_attention.set_debug): the largest residual / threshold ratio of each
// check, recorded where Params.dbg is set. Compiled out of the production build: its call sites in
// the tile loop cost the d=64 kernel 1-2 % even when never taken (NOTES_attention.md run 38c).
#ifndef EFTA_DBG
#define EFTA_DBG 0
#endif
constexpr bool kDbg = EFTA_DBG;

// Element offset of (row, 16-byte chunk) in a tile with D elements per row: the chunk index is XORed
// with row % 8 so that the 8 rows one ldmatrix phase reads sit in 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// m16 tiles per warp (MT): 2 reuses each K/V fragment twice (half the ldmatrix traffic per MMA) but
// needs about twice the registers; d=128 always uses 1 (at 2, O alone is 128 floats per lane and the
// kernel spills). A CTA holds 4 warps: 64 * MT query rows.
template <int MT>
__host__ __device__ constexpr int block_m() { return 64 * MT; }

template <typename T, int D, bool kProtect, int MT>
__host__ __device__ constexpr size_t smem_bytes() {
  return sizeof(T) * (block_m<MT>() * D + 4 * kBlockN * D + (kProtect ? 2 * 8 * D + 2 * kBlockN * 8 : 0)) +
         (kProtect ? 2 * 4 * sizeof(float) : 0);
}

// Per-warp running state.
template <int D, int MT>
struct State {
  float o[MT][D / 8][4];
  float oc[MT][4];
  // qtol: scale log2(e) C_GEMM ||q|| per row (the GEMM-I bound per unit of sum ||k||, in log2
  // units), computed once: the per-tile threshold is then one FFMA.
  float m[2 * MT], l[2 * MT], qtol[2 * MT];

  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][nt][e] = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) oc[mt][e] = 0.f;
    }
#pragma unroll
    for (int rr = 0; rr < 2 * MT; ++rr) {
      m[rr] = -INFINITY;
      l[rr] = 0.f;
      qtol[rr] = 0.f;
    }
  }
};

// One tile's softmax results.
template <int MT>
struct TileOut {
  float m_new[2 * MT], lsum[2 * MT], gs[2 * MT], gx[2 * MT], M[2 * MT], M2[2 * MT];
  float mx[2 * MT];  // m_new in log2 units (0 for a row with no live key yet), as the exponentials took it
  uint32_t E[2 * MT], E2[2 * MT];  // two partial sums/products each: half the dependency chain
  bool grpbad[2 * MT];
  // The rowmax check's lane bits (softmax_tile): bit rr, the lane's local max of row rr is above the
  // row max; bit 4 + rr, it equals the row max (or the previous max does). A row fails if a lane of
  // its quad is above or none attains it (quad_snvr, row_bad).
  uint32_t snvr;
};

struct Ctx {
  int lane, w, b, h, t, wrow0, rows, j0, Sq, Sk, causal;  // rows: query rows per warp
  const void* mask;  // offset to (b, h); bytes with mask_bool, else fp32
  int64_t m_sq, m_sk;
  int mask_bool;
  float scale, scale_log2, ka, A;  // ka: S^c's unscale times scale log2(e); A: the tile's sum of ||k||
  const InjRec* inj;
  int n_inj;
  float* inj_log;
  float* dbg;
};

// Key tiles that rows [r0, r0 + rows) of (b, h) visit: up to their diagonal when causal, and every
// tile an injected fault targets (the reference visits every tile, so must a faulted one).
// *injected (if given): a fault hits these rows.
__device__ __forceinline__ int tiles_for(const Params& p, int b, int h, int r0, int rows, bool* injected = nullptr) {
  bool hit = false;
  int n = 0;
  if (r0 < p.Sq) {
    n = p.n_tiles;
    if (p.causal) n = min(n, (min(r0 + rows, p.Sq) - 1) / kBlockN + 1);
    if (p.mask_map != nullptr) {  // past the mask's last live key tile every score is -inf: skipped
      int live = 1;  // a row masked whole still visits tile 0, as without the map
      const int* mm = map_entry(p, b, h, 0);  // the entries of its 64-row blocks, mc_sq entries apart
      for (int qb = r0 >> 6; qb <= (min(r0 + rows, p.Sq) - 1) >> 6; ++qb)
        live = max(live, __ldg(mm + kMapFields * qb * p.mc_sq));
      n = min(n, live);
    }
    for (int r = 0; r < p.n_inj; ++r) {
      const InjRec rec = p.inj[r];
      if (hits(rec, b, h, r0, rows)) {
        hit = true;
        n = max(n, rec.tile + 1);
      }
    }
  }
  if (injected != nullptr) *injected = hit;
  return n;
}

// The first key tile that the warp whose rows start at wrow0 (a multiple of 16: its rows lie in one
// 64-row block) takes with the masked softmax: where the mask stops adding only zeros (its tile
// map; 0 without one), the last tile if partial, the diagonal when causal (j0 + 63 > wrow0 holds
// from tile wrow0 / 64 on). One int held across the tile loop in place of three tests (a per-tile
// map pointer held there cost the d=64 wgmma kernel 236 B of spills).
__device__ __forceinline__ int masked_from(const Params& p, int b, int h, int wrow0) {
  int from = p.n_tiles;
  if (p.mask != nullptr)
    from = p.mask_map == nullptr ? 0
         : p.n_tiles - __ldg(map_entry(p, b, h, wrow0 >> 6) + 1);
  if (p.Sk % kBlockN != 0) from = min(from, p.n_tiles - 1);
  if (p.causal) from = min(from, wrow0 / kBlockN);
  return from;
}

// The context of a warp whose `rows` query rows start at wrow0 (per tile: t, j0, A).
__device__ __forceinline__ Ctx make_ctx(const Params& p, int lane, int w, int b, int h, int wrow0, int rows) {
  Ctx cx;
  cx.lane = lane; cx.w = w; cx.b = b; cx.h = h; cx.t = 0; cx.wrow0 = wrow0; cx.rows = rows; cx.j0 = 0;
  cx.Sq = p.Sq; cx.Sk = p.Sk; cx.causal = p.causal;
  const int64_t moff = b * p.m_sb + h * p.m_sh;
  cx.mask = p.mask == nullptr ? nullptr
          : p.mask_bool ? static_cast<const void*>(static_cast<const uint8_t*>(p.mask) + moff)
                        : static_cast<const void*>(static_cast<const float*>(p.mask) + moff);
  cx.m_sq = p.m_sq; cx.m_sk = p.m_sk; cx.mask_bool = p.mask_bool;
  cx.scale = p.scale; cx.scale_log2 = p.scale * kLog2e; cx.ka = cx.scale_log2 * p.kc_unscale;
  cx.A = 0.f;
  cx.inj = p.inj; cx.n_inj = p.n_inj; cx.inj_log = p.inj_log; cx.dbg = p.dbg;
  return cx;
}

template <typename F>
__device__ __forceinline__ void for_recs(const Ctx& cx, int stage, F f) {
  for (int r = 0; r < cx.n_inj; ++r) {
    const InjRec rec = cx.inj[r];
    if (rec.stage == stage && rec.tile == cx.t && hits(rec, cx.b, cx.h, cx.wrow0, cx.rows)) f(r, rec);
  }
}

// Corrupt element (row rl of the warp, column col) of an accumulator fragment array.
template <int N, int MT>
__device__ __forceinline__ void inj_frag(float (&a)[MT][N][4], int rl, int col, const InjRec& rec, float* log,
                                         int lane) {
  const int mt = rl >> 4, hh = (rl >> 3) & 1, nt = col >> 3, e = (col & 1) + 2 * hh;
  if ((lane >> 2) != (rl & 7) || (lane & 3) != ((col >> 1) & 3)) return;
  // Registers are indexed by constants only: select the element, corrupt it once, select it back.
  float before = 0.f;
#pragma unroll
  for (int m2 = 0; m2 < MT; ++m2)
#pragma unroll
    for (int n2 = 0; n2 < N; ++n2)
#pragma unroll
      for (int e4 = 0; e4 < 4; ++e4) before = (m2 == mt && n2 == nt && e4 == e) ? a[m2][n2][e4] : before;
  const float after = corrupt(before, rec);
#pragma unroll
  for (int m2 = 0; m2 < MT; ++m2)
#pragma unroll
    for (int n2 = 0; n2 < N; ++n2)
#pragma unroll
      for (int e4 = 0; e4 < 4; ++e4)
        if (m2 == mt && n2 == nt && e4 == e) a[m2][n2][e4] = after;
  log[0] = before;
  log[1] = after;
}

__device__ __forceinline__ int rr_of(int rl) { return 2 * (rl >> 4) + ((rl >> 3) & 1); }

// Sum over the quad of lanes that holds one row's fragments.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFull, x, 1);
  return x + __shfl_xor_sync(kFull, x, 2);
}
__device__ __forceinline__ bool quad_any(bool b) {
  unsigned x = b;
  x |= __shfl_xor_sync(kFull, x, 1);
  return (x | __shfl_xor_sync(kFull, x, 2)) != 0u;
}


// S = Q K^T for the warp's 32 rows and the tile's 64 keys, and S^c = Q (K^c)^T.
// Per-lane byte offsets of the ldmatrix rows inside a swizzled tile. A k-step (or n-pair) ks moves the
// chunk by 2: with the XOR swizzle that is (offset ^ (ks << 5)) plus an immediate row offset.
struct LaneOff {
  uint32_t q, k, v, kc;
};
template <int D, int MT>
__device__ __forceinline__ LaneOff lane_offsets(int lane, int w) {
  LaneOff L;
  const int r8 = lane & 7;
  L.q = (uint32_t)((16 * MT * w + r8 + 8 * ((lane >> 3) & 1)) * 2 * D + ((((lane >> 4) & 1) ^ r8) << 4));
  L.k = (uint32_t)((r8 + 8 * (lane >> 4)) * 2 * D + ((((lane >> 3) & 1) ^ r8) << 4));
  L.v = (uint32_t)((r8 + 8 * ((lane >> 3) & 1)) * 2 * D + ((((lane >> 4) & 1) ^ r8) << 4));
  L.kc = (uint32_t)(r8 * 2 * D + ((((lane >> 3) & 1) ^ r8) << 4));
  return L;
}

template <typename T, int D, bool kProtect, int MT>
__device__ __forceinline__ void qk_mma(float (&s)[MT][8][4], float (&sc)[MT][4], uint32_t sQ, uint32_t sK, uint32_t sKc,
                                       const LaneOff& L) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[mt][e] = 0.f;
  }
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) ldsm_x4(a[mt], sQ + (L.q ^ (ks << 5)) + mt * 32 * D);  // Q from shared memory
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t bk[4];
      ldsm_x4(bk, sK + (L.k ^ (ks << 5)) + np * 32 * D);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Elem<T>::mma(s[mt][2 * np], a[mt], bk[0], bk[1]);
        Elem<T>::mma(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
      }
    }
    if constexpr (kProtect && kAbl < 4) {
      uint32_t bc[2];
      ldsm_x2(bc, sKc + (L.kc ^ (ks << 5)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) Elem<T>::mma(sc[mt], a[mt], bc[0], bc[1]);
    }
  }
}

// O += P V (and O^c += P V^c).
template <typename T, int D, bool kProtect, int MT>
__device__ __forceinline__ void pv_mma(State<D, MT>& st, const uint32_t (&pa)[MT][4][4], uint32_t sV, uint32_t sVc,
                                       const LaneOff& L, int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t bv[4];
      ldsm_x4_t(bv, sV + (L.v ^ (np << 5)) + kk * 32 * D);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Elem<T>::mma(st.o[mt][2 * np], pa[mt][kk], bv[0], bv[1]);
        Elem<T>::mma(st.o[mt][2 * np + 1], pa[mt][kk], bv[2], bv[3]);
      }
    }
    if constexpr (kProtect && kAbl < 4) {
      uint32_t bc[2];
      ldsm_x2_t(bc, sVc + 2 * 8 * (16 * kk + (lane & 15)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) Elem<T>::mma(st.oc[mt], pa[mt][kk], bc[0], bc[1]);
    }
  }
}

// The P-operand injection hook of tile cx.t: one 16-bit P value the PV MMA consumes (packed after the
// tile's check), at (row, key) of the tile; pa in pack_p's layout.
template <typename T, bool kProtect, bool kHooks, int MT>
__device__ __forceinline__ void p_hooks(uint32_t (&pa)[MT][4][4], const Ctx& cx) {
  if constexpr (kProtect && kHooks) {
    for_recs(cx, kPMma, [&](int r, const InjRec& rec) {
      const int rl = rec.row - cx.wrow0, col = rec.col, lane = cx.lane;
      if ((lane >> 2) != (rl & 7) || (lane & 3) != ((col >> 1) & 3)) return;
      const int mt = rl >> 4, nt = col >> 3, kk = nt >> 1, i = 2 * (nt & 1) + ((rl >> 3) & 1);
      // Registers are indexed by constants only: select the word, corrupt its half, select it back.
      uint32_t word = 0u;
#pragma unroll
      for (int m2 = 0; m2 < MT; ++m2)
#pragma unroll
        for (int k2 = 0; k2 < 4; ++k2)
#pragma unroll
          for (int i2 = 0; i2 < 4; ++i2) word = (m2 == mt && k2 == kk && i2 == i) ? pa[m2][k2][i2] : word;
      float2 v = Elem<T>::unpack(word);
      float& x = (col & 1) ? v.y : v.x;
      const float before = x;
      x = corrupt(before, rec);
      cx.inj_log[2 * r] = before;
      cx.inj_log[2 * r + 1] = x;
      word = Elem<T>::pack(v.x, v.y);
#pragma unroll
      for (int m2 = 0; m2 < MT; ++m2)
#pragma unroll
        for (int k2 = 0; k2 < 4; ++k2)
#pragma unroll
          for (int i2 = 0; i2 < 4; ++i2)
            if (m2 == mt && k2 == kk && i2 == i) pa[m2][k2][i2] = word;
    });
  }
}

// P of one tile packed to 16 bits as the A operand of PV (mma.sync A fragment layout).
template <typename T, int MT>
__device__ __forceinline__ void pack_p(const float (&s)[MT][8][4], uint32_t (&pa)[MT][4][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      pa[mt][kk][0] = Elem<T>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      pa[mt][kk][1] = Elem<T>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      pa[mt][kk][2] = Elem<T>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      pa[mt][kk][3] = Elem<T>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
}

// Softmax numerators of one tile (in place in s: the fp32 P stays for check_tile and pack_p), the
// tile's row max, row sums, and the rowmax check. `hooks`: apply pending fault injections (rowmax, exp).
template <typename T, int D, bool kProtect, bool kMasked, int MT>
__device__ __forceinline__ void softmax_tile(float (&s)[MT][8][4], const float (&sc)[MT][4], const float (&m_old)[2 * MT],
                                             const float (&qtol)[2 * MT], TileOut<MT>& to, const Ctx& cx, bool hooks) {
  const int lane = cx.lane, tq = lane & 3, rq = lane >> 2;
  float lm[2 * MT];
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    to.gs[rr] = 0.f;
    to.gx[rr] = 0.f;
  }
  if constexpr (kMasked) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int rr = 2 * mt + (e >> 1);
          float x = s[mt][nt][e];
          if constexpr (kProtect && kAbl < 3) to.gs[rr] += x;  // raw scores: the GEMM-I residual
          const int row = cx.wrow0 + 16 * mt + 8 * (e >> 1) + rq;
          const int key = cx.j0 + 8 * nt + 2 * tq + (e & 1);
          bool live = key < cx.Sk && row < cx.Sq && (!cx.causal || key <= row);
          float bias = 0.f;
          if (live && cx.mask != nullptr) {
            const int64_t at = row * cx.m_sq + key * cx.m_sk;
            if (cx.mask_bool) {
              live = __ldg(static_cast<const uint8_t*>(cx.mask) + at) != 0;
            } else {
              bias = __ldg(static_cast<const float*>(cx.mask) + at);
              live = bias != -INFINITY;
            }
          }
          s[mt][nt][e] = live ? fmaf(x, cx.scale, bias) : -INFINITY;
        }
  }
  // The lane's row maxima as trees (depth 4, not a chain of 16: the max is on the critical path
  // between the S wgmma and the exponentials).
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    const int mt = rr >> 1, hh = rr & 1;
    float v[8];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) v[nt] = fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]);
#pragma unroll
    for (int w = 4; w >= 1; w >>= 1)
#pragma unroll
      for (int i = 0; i < w; ++i) v[i] = fmaxf(v[i], v[i + w]);
    lm[rr] = v[0];
  }
  if constexpr (!kMasked) {
#pragma unroll
    for (int rr = 0; rr < 2 * MT; ++rr) lm[rr] *= cx.scale;  // scale > 0 commutes with max
  }
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    float t = fmaxf(lm[rr], __shfl_xor_sync(kFull, lm[rr], 1));
    t = fmaxf(t, __shfl_xor_sync(kFull, t, 2));
    to.m_new[rr] = fmaxf(m_old[rr], t);
  }
  if constexpr (kProtect) {
    if (hooks)
      for_recs(cx, kRowmax, [&](int r, const InjRec& rec) {
        const int rl = rec.row - cx.wrow0, target = rr_of(rl);
        if ((lane >> 2) != (rl & 7)) return;
#pragma unroll
        for (int rr = 0; rr < 2 * MT; ++rr)
          if (rr == target) {
            const float before = to.m_new[rr], after = corrupt(before, rec);
            to.m_new[rr] = after;
            if (tq == 0) {
              cx.inj_log[2 * r] = before;
              cx.inj_log[2 * r + 1] = after;
            }
          }
      });
  }

  float mu[2 * MT];
  float (&mx)[2 * MT] = to.mx;
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    mu[rr] = to.m_new[rr] == -INFINITY ? 0.f : to.m_new[rr];  // a row with no live key yet
    mx[rr] = mu[rr] * kLog2e;
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = 2 * mt + (e >> 1);
        if constexpr (kMasked) {
          float x = (s[mt][nt][e] - mu[rr]) * kLog2e;
          if constexpr (kProtect && kAbl < 3) {
            x = fmaxf(x, -126.f);  // masked keys: 2^-126 (a normal float, negligible) keeps the log check exact
            to.gx[rr] += x;
          }
          s[mt][nt][e] = ex2(x);
        } else {
          s[mt][nt][e] = ex2(fmaf(s[mt][nt][e], cx.scale_log2, -mx[rr]));
        }
      }
  if constexpr (kProtect) {
    if (hooks)
      for_recs(cx, kExp, [&](int r, const InjRec& rec) {
        inj_frag<8>(s, rec.row - cx.wrow0, rec.col, rec, cx.inj_log + 2 * r, lane);
      });
  }
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) to.lsum[rr] = 0.f;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) to.lsum[2 * mt + (e >> 1)] += s[mt][nt][e];
  if constexpr (kProtect) {
    // SNVR on the max: no lane's local max above it, and it is one of them (or the previous max).
    // Only the lane's bits here, after the exponentials, whose inputs it does not gate; the quad's
    // verdict is taken where it is read (tile_alarm, the rare paths).
    uint32_t bits = kAbl < 2 ? 0u : 16u * ((1u << (2 * MT)) - 1u);
    if constexpr (kAbl < 2) {
#pragma unroll
      for (int rr = 0; rr < 2 * MT; ++rr) {
        if (lm[rr] > to.m_new[rr]) bits |= 1u << rr;
        if (lm[rr] == to.m_new[rr] || m_old[rr] == to.m_new[rr]) bits |= 16u << rr;
      }
    }
    to.snvr = bits;
  }
}

// log2 of the product of each row group's 16 P values, exactly: (sum of exponent fields, product of
// mantissas), right for every normal P and immune to underflow of the product, at 3 ops per element.
template <int MT>
__device__ __forceinline__ void exact_log2_products(const float (&s)[MT][8][4], TileOut<MT>& to, float (&meas)[2 * MT]) {
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    to.E[rr] = to.E2[rr] = 0u;
    to.M[rr] = to.M2[rr] = 1.f;
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = 2 * mt + (e >> 1);
        const uint32_t u = __float_as_uint(s[mt][nt][e]);
        uint32_t mant;  // (u & 0x7fffff) | 0x3f800000 in one LOP3: the mantissa as a float in [1, 2)
        asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(mant) : "r"(u), "n"(0x7fffff), "n"(0x3f800000));
        if (nt & 1) {
          to.E2[rr] += u >> 23;  // exponent field (sign too: a negative value is far off)
          to.M2[rr] *= __uint_as_float(mant);
        } else {
          to.E[rr] += u >> 23;
          to.M[rr] *= __uint_as_float(mant);
        }
      }
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    to.E[rr] += to.E2[rr];
    to.M[rr] *= to.M2[rr];  // < 2^16: exact enough, no overflow
    meas[rr] = (float)((int)to.E[rr] - 16 * 127) + lg2(to.M[rr]);
  }
}

__device__ __forceinline__ float mul_ftz(float a, float b) {
  float y;
  asm("mul.ftz.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

// The unified check of GEMM-I + max + EXP for one tile (Algorithm 1, line 13), from the fp32 P left
// in s by softmax_tile: log2 of the product of each group's 16 P against scale * S^c - 16 m.
// Unmasked tiles take the product by plain multiplication (1 op per element): two chains of 8 per
// row, started at 2^63 and flushed to zero on underflow, so a nonzero result had no subnormal
// intermediate and is exact to ~16 roundings; a lane whose products underflowed (sum of the exponent
// arguments below about -190 per chain) takes the exact path instead. Masked tiles always do.
template <bool kProtect, bool kMasked, int MT>
__device__ __forceinline__ void check_tile(const float (&s)[MT][8][4], const float (&sc)[MT][4],
                                           const float (&qtol)[2 * MT], TileOut<MT>& to, const Ctx& cx) {
  if constexpr (kProtect) {
#pragma unroll
    for (int rr = 0; rr < 2 * MT; ++rr) {
      to.grpbad[rr] = false;
      to.E[rr] = 0u;
      to.M[rr] = 1.f;
    }
  }
  if constexpr (kProtect && kAbl < 3) {
    float meas[2 * MT];
    if constexpr (kMasked) {
      exact_log2_products(s, to, meas);
    } else {
      float pe[2 * MT], po[2 * MT];
#pragma unroll
      for (int rr = 0; rr < 2 * MT; ++rr) pe[rr] = po[rr] = 0x1p63f;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int rr = 2 * mt + (e >> 1);
            if (nt & 1) po[rr] = mul_ftz(po[rr], s[mt][nt][e]);
            else pe[rr] = mul_ftz(pe[rr], s[mt][nt][e]);
          }
      bool underflow = false;
#pragma unroll
      for (int rr = 0; rr < 2 * MT; ++rr) {
        to.M[rr] = mul_ftz(pe[rr], po[rr]);  // 2^126 times the product
        underflow |= !(to.M[rr] >= 0x1p-126f);  // zero (or NaN: the exact path reports it)
      }
      if constexpr (kAbl == 2) underflow = false;  // measurement: the products alone (below)
      if (underflow) {
        exact_log2_products(s, to, meas);
      } else {
#pragma unroll
        for (int rr = 0; rr < 2 * MT; ++rr) meas[rr] = lg2(to.M[rr]) - 126.f;
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2 * MT; ++rr) {
      if constexpr (kAbl == 2) {  // measurement: the products alone, no per-row verification
        to.grpbad[rr] = !(to.M[rr] > 0.f);
        continue;
      }
      const int mt = rr >> 1, hh = rr & 1;
      // scale * S^c in log2 units, and the GEMM-I bound |sum S - S^c| in the same units: qtol
      // (scale log2(e) C_GEMM ||q||, per row) times the tile's sum of ||k||.
      const float a = (sc[mt][2 * hh] + sc[mt][2 * hh + 1]) * cx.ka;
      const float tol_g = qtol[rr] * cx.A;
      // NaN never passes: the comparisons are written as !(|d| <= tol).
      if constexpr (kMasked) {
        const float dg = fabsf(fmaf(to.gs[rr], cx.scale_log2, -a)), de = fabsf(meas[rr] - to.gx[rr]);
        const float te = 0x1p-19f * (16.f + fabsf(to.gx[rr]));
        to.grpbad[rr] = !(dg <= tol_g) || !(de <= te) || !(tol_g < 0x1p100f);
        if (kDbg && cx.dbg != nullptr) dbg_ratio_max(cx.dbg + 1, dg, tol_g, de, te);
      } else {
        const float b = 16.f * to.mx[rr];  // softmax_tile's value: no second multiply and select
        const float d = fabsf(meas[rr] - (a - b));
        const float tol = fmaf(0x1p-20f, fabsf(a) + fabsf(b), fmaf(qtol[rr], cx.A, 0x1p-16f));
        // A huge score (exponent flip) can overflow 16 m and with it the tolerance: never pass that.
        to.grpbad[rr] = !(d <= tol) || !(tol < 0x1p100f);
        if (kDbg && cx.dbg != nullptr) dbg_ratio_max(cx.dbg, d, tol);
      }
    }
  }
}

// A 32-bit digest of one group's checked quantities (exponent sum, mantissa product, raw score sum,
// exponent-argument sum): a recomputed tile with the same digest carried the same data.
template <int MT>
__device__ __forceinline__ uint32_t fingerprint(const TileOut<MT>& to, int rr) {
  uint32_t h = to.E[rr] * 0x9E3779B1u;
  h ^= __float_as_uint(to.M[rr]) + 0x7F4A7C15u + (h << 6) + (h >> 2);
  h ^= __float_as_uint(to.gs[rr]) + 0x94D049BBu + (h << 6) + (h >> 2);
  h ^= __float_as_uint(to.gx[rr]) + 0x2545F491u + (h << 6) + (h >> 2);
  return h;
}

// Pieces of one key tile's protection shared by both kernels (this file's tile_step and the wgmma
// kernel's loop, efta_sm90.cuh).

// The rowmax check's bits of the lane's quad (two shuffles, every lane of the warp present: in the
// tile's alarm test and the rare paths), and row rr's verdict from them.
template <int MT>
__device__ __forceinline__ uint32_t quad_snvr(const TileOut<MT>& to) {
  uint32_t b = to.snvr | __shfl_xor_sync(kFull, to.snvr, 1);
  return b | __shfl_xor_sync(kFull, b, 2);
}
__device__ __forceinline__ bool row_bad(uint32_t quad_bits, int rr) {
  return ((quad_bits >> rr) & 1u) || !((quad_bits >> (rr + 4)) & 1u);
}

// Whether the tile fails a check in this lane's rows (a group check, or the rowmax check of the
// lane's quad); the callers take the warp's vote of it.
template <int MT>
__device__ __forceinline__ bool tile_alarm(const TileOut<MT>& to) {
  const uint32_t q = kAbl < 2 ? quad_snvr(to) : to.snvr;
  bool bad = false;
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) bad |= row_bad(q, rr) | to.grpbad[rr];
  return bad;
}

// What an alarmed tile's first pass computed, to compare with its recomputation.
template <int MT>
struct Alarm1 {
  uint32_t flags, fp[2 * MT];
  float m[2 * MT];
};
template <int MT>
__device__ __forceinline__ Alarm1<MT> alarm_record(const TileOut<MT>& to) {
  Alarm1<MT> a;
  a.flags = 0u;
  const uint32_t q = quad_snvr(to);
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    a.m[rr] = to.m_new[rr];
    a.flags |= (row_bad(q, rr) ? 1u : 0u) << rr;
    a.flags |= (to.grpbad[rr] ? 16u : 0u) << rr;
    a.fp[rr] = fingerprint(to, rr);
  }
  return a;
}

template <int MT>
__device__ __forceinline__ bool any_nonfinite(const float (&s)[MT][8][4], const float (&sc)[MT][4]) {
  bool nf = false;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) nf |= !isfinite(s[mt][nt][e]);
#pragma unroll
    for (int e = 0; e < 4; ++e) nf |= !isfinite(sc[mt][e]);
  }
  return nf;
}

// An alarmed tile's outcome, counted: `faults` (this lane's share) are detected, and corrected where
// the policy repairs (count: first attempt only); the diagnostics count the alarm and its faults.
__device__ __forceinline__ void record_tile_faults(unsigned faults, int lane, int policy, bool count,
                                                   unsigned long long* counters, unsigned long long* alarms) {
  if (count && faults) {
    bump(counters, kDetected, faults);
    if (policy == kCorrect || policy == kRecompute) bump(counters, kCorrected, faults);
  }
  if (alarms != nullptr) {
    const unsigned f = __reduce_add_sync(kFull, faults);
    if (lane == 0) {
      atomicAdd(alarms + kTileAlarms, 1ull);
      if (f) atomicAdd(alarms + kTileFaults, (unsigned long long)f);
    }
  }
}

// Compare the recomputed tile (to) with the first pass (a): the MMAs are deterministic, so data that
// changed was hit by a fault. Counts the faults (count: first attempt only) and the diagnostics.
template <int MT>
__device__ __forceinline__ void alarm_outcome(const Alarm1<MT>& a, const TileOut<MT>& to, int lane, int policy,
                                              bool count, unsigned long long* counters,
                                              unsigned long long* alarms) {
  const int tq = lane & 3;
  unsigned faults = 0;
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    if ((a.flags >> rr) & 1u) {
      if (tq == 0) ++faults;  // a rowmax fault: one per row (the quad computed the max redundantly)
    } else if (__float_as_uint(a.m[rr]) != __float_as_uint(to.m_new[rr])) {
      if (tq == 0) ++faults;  // a score fault that moved the max: every group of the row changed, one fault
    } else if ((a.flags >> (rr + 4)) & 1u) {
      if (a.fp[rr] != fingerprint(to, rr)) ++faults;  // the group's data changed: it was a fault
    }
  }
  record_tile_faults(faults, lane, policy, count, counters, alarms);
}

// Online softmax update (Algorithm 1, lines 17-20): m, l, O (and O^c)
// rescaled; the rowsum and rescale injection hooks of tile cx.t.
// kSkipSame (the wgmma kernel): where no row of the warp has a new max, every alpha is ex2(0) = 1 and
// the rescale of O would leave it bit for bit as it is, so it is skipped (a warp-uniform branch;
// after the first tiles a row's max rarely moves). The mma.sync kernel keeps the multiplies: the
// branch cost it 36 B more spills and ~2 % (NOTES_attention.md B16).
template <int D, bool kProtect, bool kHooks, int MT, bool kSkipSame = false>
__device__ __forceinline__ void online_update(State<D, MT>& st, const TileOut<MT>& to, const Ctx& cx) {
  const int lane = cx.lane, tq = lane & 3;
  bool same = kSkipSame;
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) same &= st.m[rr] == to.m_new[rr] && st.m[rr] != -INFINITY;
  const bool rescale = !kSkipSame || !__all_sync(kFull, same);
  float alpha[2 * MT];
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    alpha[rr] = st.m[rr] == -INFINITY ? 0.f : ex2((st.m[rr] - to.m_new[rr]) * kLog2e);
    st.l[rr] = st.l[rr] * alpha[rr] + to.lsum[rr];
    st.m[rr] = to.m_new[rr];
  }
  if constexpr (kProtect && kHooks) {
    for_recs(cx, kRowsum, [&](int r, const InjRec& rec) {
        // l is spread over the quad until the end: corrupt the row's total, keep it in lane 0 of the quad.
        float full[2 * MT];
#pragma unroll
        for (int rr = 0; rr < 2 * MT; ++rr) full[rr] = quad_sum(st.l[rr]);
        const int rl = rec.row - cx.wrow0, target = rr_of(rl);
        if ((lane >> 2) != (rl & 7)) return;
#pragma unroll
        for (int rr = 0; rr < 2 * MT; ++rr)
          if (rr == target) {
            const float after = corrupt(full[rr], rec);
            st.l[rr] = tq == 0 ? after : 0.f;
            if (tq == 0) {
              cx.inj_log[2 * r] = full[rr];
              cx.inj_log[2 * r + 1] = after;
            }
          }
      });
  }
  if (rescale) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) st.o[mt][nt][e] *= alpha[2 * mt + (e >> 1)];
      if constexpr (kProtect) {
#pragma unroll
        for (int e = 0; e < 4; ++e) st.oc[mt][e] *= alpha[2 * mt + (e >> 1)];
      }
    }
  }
  if constexpr (kProtect && kHooks) {
    for_recs(cx, kRescale, [&](int r, const InjRec& rec) {
        inj_frag<D / 8>(st.o, rec.row - cx.wrow0, rec.col, rec, cx.inj_log + 2 * r, cx.lane);
      });
  }
}

// The PV-accumulator injection hooks of tile cx.t (after that tile's PV MMAs): an element of O, or
// the MMA-path row sum (the first of its three copies: column 6 of O^c, lane 3 of the row's quad).
template <int D, bool kProtect, bool kHooks, int MT>
__device__ __forceinline__ void pv_hooks(State<D, MT>& st, const Ctx& cx) {
  if constexpr (kProtect && kHooks) {
    for_recs(cx, kPV, [&](int r, const InjRec& rec) {
        inj_frag<D / 8>(st.o, rec.row - cx.wrow0, rec.col, rec, cx.inj_log + 2 * r, cx.lane);
      });
    for_recs(cx, kRowsumMma, [&](int r, const InjRec& rec) {
        float (&oc)[MT][1][4] = reinterpret_cast<float (&)[MT][1][4]>(st.oc);
        inj_frag<1>(oc, rec.row - cx.wrow0, 6, rec, cx.inj_log + 2 * r, cx.lane);
      });
  }
}

// One key tile for one warp: S, softmax and its checks, then (checked data only) the online update
// and PV. An alarm is confirmed by recomputing the tile before its P reaches O (Algorithm 1: "error
// verification must be performed at each iteration to prevent error propagation"). kHooks: the
// instantiation that applies fault injections; the hot one (false) carries no injection code at all
// (measured: dead hook code in the loop cost 16-22 % of the kernel's time, NOTES_attention.md).
template <typename T, int D, bool kProtect, bool kMasked, bool kHooks, int MT>
__device__ __forceinline__ void tile_step(State<D, MT>& st, uint32_t sQ, uint32_t sK,
                                          uint32_t sV, uint32_t sKc, uint32_t sVc, const LaneOff& L, const Ctx& cx,
                                          int policy, bool count, unsigned long long* counters, bool& nonfinite_in,
                                          unsigned long long* alarms) {
  const int lane = cx.lane;
  float s[MT][8][4], sc[MT][4];
  qk_mma<T, D, kProtect>(s, sc, sQ, sK, sKc, L);
  if constexpr (kProtect && kHooks) {
    for_recs(cx, kScore, [&](int r, const InjRec& rec) {
      inj_frag<8>(s, rec.row - cx.wrow0, rec.col, rec, cx.inj_log + 2 * r, lane);
    });
  }
  TileOut<MT> to;
  softmax_tile<T, D, kProtect, kMasked>(s, sc, st.m, st.qtol, to, cx, kHooks);
  check_tile<kProtect, kMasked>(s, sc, st.qtol, to, cx);

  if constexpr (kProtect) {
    if (kAbl < 1 && __any_sync(kFull, tile_alarm(to))) {
      // Confirm by recomputing the tile; the recomputed tile is the one that continues (the correction).
      const Alarm1<MT> a1 = alarm_record(to);
      qk_mma<T, D, kProtect>(s, sc, sQ, sK, sKc, L);
      nonfinite_in |= any_nonfinite(s, sc);
      softmax_tile<T, D, kProtect, kMasked>(s, sc, st.m, st.qtol, to, cx, false);
      check_tile<kProtect, kMasked>(s, sc, st.qtol, to, cx);
      alarm_outcome(a1, to, lane, policy, count, counters, alarms);
    }
  }
  online_update<D, kProtect, kHooks>(st, to, cx);
  uint32_t pa[MT][4][4];
  pack_p<T>(s, pa);
  p_hooks<T, kProtect, kHooks>(pa, cx);
  pv_mma<T, D, kProtect>(st, pa, sV, sVc, L, lane);
  pv_hooks<D, kProtect, kHooks>(st, cx);
}

constexpr int kRedoRowsum = 8;  // finish_block's redo bits: the row sum's start here

// End of a block (Algorithm 1, lines 21-29) for one warp whose rows start at row0: row sums and SNVR
// on l, normalisation, verification of GEMM-II + rescale + normalisation, and the store. On the second
// attempt (first = false), a row flagged by the final check is compared element by element with what
// the first pass stored, and a row flagged by the row-sum check is stored from the recomputation.
// Sets rerun where the block must be recomputed, and in redo why, per row: bit rr for the final
// check, bit kRedoRowsum + rr for the row sum. quiet (first attempt): the warp's data is to be
// replaced by the block's recomputation anyway (a tile alarmed, efta_sm90.cuh): rerun, judge nothing.
template <typename T, int D, bool kProtect, int MT>
__device__ __forceinline__ void finish_block(State<D, MT>& st, const Params& p, T* go, int row0, int lane, bool first,
                                             uint32_t& redo, bool& rerun, bool& nonfinite_in, bool quiet = false) {
  const int tq = lane & 3, rq = lane >> 2;
  const bool fix = p.policy == kCorrect || p.policy == kRecompute;
  const bool judge = !(first && quiet);
  if (!judge) rerun = true;
  float inv[2 * MT];
  bool has_key[2 * MT], row_nf[2 * MT], l_bad[2 * MT];
  float c1[2 * MT], ab[2 * MT];
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) {
    st.l[rr] = quad_sum(st.l[rr]);
    has_key[rr] = st.m[rr] != -INFINITY;
    row_nf[rr] = l_bad[rr] = false;
  }
  if constexpr (kProtect && kAbl < 4) {
    const int base = lane & ~3;
#pragma unroll
    for (int rr = 0; rr < 2 * MT; ++rr) {
      const int mt = rr >> 1, hh = rr & 1;
      const float v0 = st.oc[mt][2 * hh], v1 = st.oc[mt][2 * hh + 1];
      // columns [c1 hi, c1 lo, c1 lo2, -, ones, ones, ones, |v|], two per lane of the quad
      const float c1a = __shfl_sync(kFull, v0 + v1, base), c1b = __shfl_sync(kFull, v0, base + 1);
      const float l4 = __shfl_sync(kFull, v0, base + 2), l5 = __shfl_sync(kFull, v1, base + 2);
      const float l6 = __shfl_sync(kFull, v0, base + 3), abv = __shfl_sync(kFull, v1, base + 3);
      // The MMA-path row sum: the median of its three copies (the same products in three columns,
      // bit-identical unless one was hit). fmin/fmax drop a NaN copy too.
      const float lm = fmaxf(fminf(l4, l5), fminf(fmaxf(l4, l5), l6));
      c1[rr] = (c1a + c1b) * p.vc1_unscale;
      ab[rr] = abv * p.vc1_unscale;
      const int row = row0 + 16 * mt + 8 * hh + rq;
      // Non-finite Q or K surface as a non-finite max: inputs, not faults. A non-finite MMA-path row
      // sum or checksum with a finite max is non-finite V, or a fault in the P the PV MMA consumed:
      // where the policy recomputes, the recomputation tells them apart (inputs repeat, a fault not).
      const bool mma_nf = has_key[rr] && (!isfinite(lm) || !isfinite(c1[rr]) || !isfinite(ab[rr]));
      row_nf[rr] = has_key[rr] && (!isfinite(st.m[rr]) || (mma_nf && (!first || !fix)));
      nonfinite_in |= row_nf[rr];
      if (has_key[rr] && !row_nf[rr] && !mma_nf && row < p.Sq && !(l4 == l5 && l5 == l6) && first && judge &&
          tq == 0) {
        bump(p.counters, kDetected);  // a copy outvoted: the median is the row sum the checks use
        if (fix) bump(p.counters, kCorrected);
      }
      const float upper = p.causal ? (float)min(row + 1, p.Sk) : (float)p.Sk;
      const float tol_r = 0x1p-12f;
      // l >= 1: the row's max contributes exp(0) = 1 (the paper's bound, sum_k exp(m_k - m) over the
      // tiles' maxima, is tighter but cost an exponential per row and tile; what it adds beyond the
      // agreement with the MMA-path sum is a fault in both sums, i.e. in P, which the tile checks see).
      const bool l_ok = st.l[rr] >= 1.f - tol_r && st.l[rr] <= upper * (1.f + tol_r) &&
                        fabsf(st.l[rr] - lm) <= p.tol_agree * lm;
      if (kDbg && p.dbg != nullptr && has_key[rr] && !row_nf[rr] && row < p.Sq)
        dbg_ratio_max(p.dbg + 3, fabsf(st.l[rr] - lm), p.tol_agree * lm);
      // l and the MMA-path row sum disagree, or l left its SNVR range: l's FADD chain was hit, or the
      // P the PV MMA consumed (packed to 16 bits after the tile's check), and the two look alike here.
      // So the block is recomputed and the row stored from the recomputation, counted there. (Taking
      // the duplicate as the repair made the second case a wrong row counted "corrected".)
      l_bad[rr] = has_key[rr] && !row_nf[rr] && row < p.Sq && (!l_ok || mma_nf);
      if (l_bad[rr] && first && judge) {
        if (tq == 0 && p.alarms != nullptr) atomicAdd(p.alarms + kRowsumAlarms, 1ull);
        if (fix) redo |= 1u << (kRedoRowsum + rr), rerun = true;
        else if (tq == 0) bump(p.counters, kDetected);
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < 2 * MT; ++rr) inv[rr] = has_key[rr] ? 1.f / st.l[rr] : 0.f;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[mt][nt][e] *= inv[2 * mt + (e >> 1)];

  if constexpr (kProtect && kAbl < 4) {
    // Row sums of the normalised output against the rescaled, normalised checksum (Algorithm 1,
    // lines 25-29). A row that fails is corrected by recomputing the block and comparing: exactly
    // one element off is a single fault (replaced); several are more than one (uncorrectable).
#pragma unroll
    for (int rr = 0; rr < 2 * MT; ++rr) {
      const int mt = rr >> 1, hh = rr & 1;
      float a1 = 0.f;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) a1 += st.o[mt][nt][2 * hh] + st.o[mt][nt][2 * hh + 1];
      const float s1 = quad_sum(a1);
      const float thr = p.e_out * ab[rr] * inv[rr] + 1e-30f;
      const int row = row0 + 16 * mt + 8 * hh + rq;
      const float ratio = fabsf(s1 - c1[rr] * inv[rr]) / thr;
      // (A row the row-sum check sends to recomputation is stored from it: not checked here.)
      const bool bad = has_key[rr] && !row_nf[rr] && !l_bad[rr] && row < p.Sq && !(ratio <= 1.f);
      if (kDbg && p.dbg != nullptr && has_key[rr] && !row_nf[rr] && row < p.Sq) dbg_ratio_max(p.dbg + 2, ratio, 1.f);
      if (bad && first && judge) {
        if (tq == 0 && p.alarms != nullptr) atomicAdd(p.alarms + kFinalAlarms, 1ull);
        if (fix) redo |= 1u << rr, rerun = true;  // counted after the comparison (attempt 2)
        else if (tq == 0) bump(p.counters, kDetected);
      }
    }
  }

  // Store (rows past Sq are padding). On the recomputation, a row flagged by the final check is
  // compared element by element with what the first pass stored; a row flagged by the row-sum check
  // is stored as recomputed.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int rr = 2 * mt + hh;
      const int row = row0 + 16 * mt + 8 * hh + rq;
      T* dst = go + (int64_t)min(row, p.Sq - 1) * p.o_ss + 2 * tq;
      bool write = row < p.Sq;
      if (kProtect && !first) {  // warp-uniform: the shuffles below need every lane
        int ndiff = 0;
        if (row < p.Sq && ((redo >> rr) & 1u)) {
#pragma unroll
          for (int nt = 0; nt < D / 8; ++nt) {
            const uint32_t mine = Elem<T>::pack(st.o[mt][nt][2 * hh], st.o[mt][nt][2 * hh + 1]);
            const uint32_t was = *reinterpret_cast<const uint32_t*>(dst + 8 * nt);
            ndiff += ((mine ^ was) & 0xffffu) != 0u;
            ndiff += ((mine ^ was) >> 16) != 0u;
          }
        }
        ndiff += __shfl_xor_sync(kFull, ndiff, 1);
        ndiff += __shfl_xor_sync(kFull, ndiff, 2);
        if ((redo >> rr) & 1u) {
          if (tq == 0 && ndiff > 0) {  // nothing off: the alarm was no fault of the data
            bump(p.counters, kDetected);
            bump(p.counters, ndiff == 1 ? kCorrected : kUncorrectable);
          }
          write &= ndiff <= 1 || p.policy == kRecompute;
        }
        if (((redo >> (kRedoRowsum + rr)) & 1u) && row < p.Sq) {
          if (tq == 0 && !row_nf[rr]) {  // a fault, unless it repeats (inputs, or beyond a fault)
            bump(p.counters, kDetected);
            bump(p.counters, l_bad[rr] ? kUncorrectable : kCorrected);
          }
          write = true;
        }
      }
      if (write) {
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt)
          *reinterpret_cast<uint32_t*>(dst + 8 * nt) =
              Elem<T>::pack(st.o[mt][nt][2 * hh], st.o[mt][nt][2 * hh + 1]);
      }
    }

}

// Once per CTA, every thread: non-finite inputs count once per call (token), the call's check once.
__device__ __forceinline__ void report_call(const Params& p, bool nonfinite_in) {
  const bool nf = __syncthreads_or(nonfinite_in);
  if (threadIdx.x == 0) {
    // Counted once per call: the call's number is the sequence the prepass advanced (on the device,
    // so a CUDA-graph replay is a new call too).
    if (nf) {
      const int call = __ldcg(p.nf_token + 1);
      if (atomicExch(p.nf_token, call) != call) atomicAdd(p.counters + kNonfinite, 1ull);
    }
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) atomicAdd(p.counters + kChecks, 1ull);
  }
}

template <typename T, int D, bool kProtect, int MT>
__global__ void __launch_bounds__(kThreads, 2) attn_fwd_kernel(const Params p) {
  constexpr int BM = block_m<MT>();
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQp = reinterpret_cast<T*>(smem_raw);
  T* sKp = sQp + BM * D;
  T* sVp = sKp + 2 * kBlockN * D;
  T* sKcp = sVp + 2 * kBlockN * D;
  T* sVcp = sKcp + 2 * 8 * D;
  float* sKn = reinterpret_cast<float*>(sVcp + 2 * kBlockN * 8);

  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, tq = lane & 3;
  const int nqb = (p.Sq + BM - 1) / BM;
  const int qb = p.causal ? nqb - 1 - (int)blockIdx.x : (int)blockIdx.x;  // heavy causal blocks first
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.Hq / p.Hk);
  const int i0 = qb * BM;
  const T* gq = reinterpret_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh;
  const T* gk = reinterpret_cast<const T*>(p.k) + b * p.k_sb + hk * p.k_sh;
  const T* gv = reinterpret_cast<const T*>(p.v) + b * p.v_sb + hk * p.v_sh;
  T* go = reinterpret_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh;
  const int64_t tile_base = (int64_t)(b * p.Hk + hk) * p.n_tiles;

  bool cta_inj;
  const int n_tiles = tiles_for(p, b, h, i0, BM, &cta_inj);

  const uint32_t sQ = smem_u32(sQp);
  const LaneOff L = lane_offsets<D, MT>(lane, w);
  auto load_tile = [&](int t, int stg) {
    const int j0 = t * kBlockN;
    for (int c = tid; c < kBlockN * (D / 8); c += kThreads) {
      const int row = c / (D / 8), ch = c % (D / 8), gr = j0 + row, cr = min(gr, p.Sk - 1);
      cp_async16(smem_u32(sKp + stg * kBlockN * D + swz<D>(row, ch)), gk + cr * p.k_ss + ch * 8, gr < p.Sk);
      cp_async16(smem_u32(sVp + stg * kBlockN * D + swz<D>(row, ch)), gv + cr * p.v_ss + ch * 8, gr < p.Sk);
    }
    if constexpr (kProtect) {
      const T* gkc = reinterpret_cast<const T*>(p.kc) + (tile_base + t) * 8 * D;
      for (int c = tid; c < 8 * (D / 8); c += kThreads) {
        const int row = c / (D / 8), ch = c % (D / 8);
        cp_async16(smem_u32(sKcp + stg * 8 * D + swz<D>(row, ch)), gkc + row * D + ch * 8, true);
      }
      const T* gvc = reinterpret_cast<const T*>(p.vc) + (tile_base + t) * kBlockN * 8;
      for (int c = tid; c < kBlockN; c += kThreads)
        cp_async16(smem_u32(sVcp + stg * kBlockN * 8 + c * 8), gvc + c * 8, true);
      if (tid == 0) cp_async16(smem_u32(sKn + stg * 4), p.kn + (tile_base + t) * 4, true);
    }
  };

  bool nonfinite_in = false;  // a non-finite input seen by this thread
  uint32_t redo = 0u;  // rows whose final or row-sum check failed: see finish_block

  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool first = attempt == 0;
    State<D, MT> st;
    st.reset();

    for (int c = tid; c < BM * (D / 8); c += kThreads) {
      const int row = c / (D / 8), ch = c % (D / 8), gr = i0 + row;
      cp_async16(smem_u32(sQp + swz<D>(row, ch)), gq + min(gr, p.Sq - 1) * p.q_ss + ch * 8, gr < p.Sq);
    }
    load_tile(0, 0);
    cp_async_commit();

    for (int t = 0; t < n_tiles; ++t) {
      const int stg = t & 1;
      if (t + 1 < n_tiles) load_tile(t + 1, stg ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
      if (kProtect && t == 0) {
        // The GEMM-I threshold factor of each row (State::qtol: ||q||, from the Q fragments, times
        // scale log2(e) C_GEMM).
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            uint32_t a[4];
            ldsm_x4(a, sQ + (L.q ^ (ks << 5)) + mt * 32 * D);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const T* pr = reinterpret_cast<const T*>(&a[i]);
              const float x0 = Elem<T>::to_f(pr[0]), x1 = Elem<T>::to_f(pr[1]);
              st.qtol[2 * mt + (i & 1)] += x0 * x0 + x1 * x1;  // a0,a2: row r; a1,a3: row r+8
            }
          }
#pragma unroll
        for (int rr = 0; rr < 2 * MT; ++rr) st.qtol[rr] = p.scale * kLog2e * p.c_gemm * sqrtf(quad_sum(st.qtol[rr]));
      }
      const int wrow0 = i0 + 16 * MT * w, j0 = t * kBlockN;
      bool warp_inj = false;
      if constexpr (kProtect) {
        if (cta_inj && first)
          for (int r = 0; r < p.n_inj; ++r) warp_inj |= p.inj[r].tile == t && hits(p.inj[r], b, h, wrow0, 16 * MT);
      }
      const bool above = p.causal && j0 > wrow0 + 16 * MT - 1;  // every key of the tile is masked for every row
      if ((!above && wrow0 < p.Sq) || warp_inj) {
        Ctx cx = make_ctx(p, lane, w, b, h, wrow0, 16 * MT);
        cx.t = t;
        cx.j0 = j0;
        cx.A = kProtect ? sKn[stg * 4 + tq] : 0.f;
        const uint32_t sK = smem_u32(sKp + stg * kBlockN * D), sV = smem_u32(sVp + stg * kBlockN * D);
        const uint32_t sKc = smem_u32(sKcp + stg * 8 * D), sVc = smem_u32(sVcp + stg * kBlockN * 8);
        const bool masked = above || t >= masked_from(p, b, h, wrow0);  // per tile: held across the loop, 32 B more spills
        const bool hooks = warp_inj && kAbl < 2;
        if (masked) {
          if (hooks)
            tile_step<T, D, kProtect, true, kProtect>(st, sQ, sK, sV, sKc, sVc, L, cx, p.policy, first,
                                                             p.counters, nonfinite_in, p.alarms);
          else
            tile_step<T, D, kProtect, true, false>(st, sQ, sK, sV, sKc, sVc, L, cx, p.policy, first,
                                                           p.counters, nonfinite_in, p.alarms);
        } else {
          if (hooks)
            tile_step<T, D, kProtect, false, kProtect>(st, sQ, sK, sV, sKc, sVc, L, cx, p.policy, first,
                                                              p.counters, nonfinite_in, p.alarms);
          else
            tile_step<T, D, kProtect, false, false>(st, sQ, sK, sV, sKc, sVc, L, cx, p.policy, first,
                                                            p.counters, nonfinite_in, p.alarms);
        }
      }
      __syncthreads();  // stage stg is refilled by the next iteration's prefetch
    }
    cp_async_wait<0>();

    bool rerun = false;
    finish_block<T, D, kProtect, MT>(st, p, go, i0 + 16 * MT * w, lane, first, redo, rerun, nonfinite_in);

    if constexpr (!kProtect) break;
    // A second pass of the whole block (no injection, no counts): the correction of a failed final
    // check, and policy "recompute" after an uncorrectable fault.
    if (!first || !__syncthreads_or(rerun)) break;
    cta_inj = false;
    __syncthreads();
  }

  if constexpr (kProtect) report_call(p, nonfinite_in);
}

// Checksums of K and V for the protected kernel. The prepass only streams K and V once, so it is
// written for memory-level parallelism: thread (r, c) of a tile owns the 16-byte chunk c of keys
// r, r + 8, ..., r + 56 (r = key mod 8) and issues its 8 K and 8 V loads before any arithmetic; K is
// read once. Everything is then reduced in registers: a strided group's K sum over its 16 keys (the
// thread's 8 plus its partner's, residue r ^ 1), and per key ||k||^2, sum v, sum |v| over the head dim
// (a reduce-scatter across the CH lanes of a key row: 8 values -> 1 in log2(8) exchanges).
template <int D>
struct PrepassLay {
  static constexpr int CH = D / 8;               // 16-byte chunks per row
  static constexpr int kTiles = kThreads / (8 * CH);  // key tiles per CTA (d=64: 2, d=128: 1)
  static_assert(kTiles >= 1 && kThreads % (8 * CH) == 0, "a CTA covers whole tiles");
};

// Reduce-scatter of v[0..7] over the CH lanes of a key row (lane bits below CH): afterwards v[0] is
// the sum over the row's lanes of value c / (CH / 8), the same in lanes that share that index.
template <int CH>
__device__ __forceinline__ void row_reduce_scatter(float (&v)[8], int c) {
#pragma unroll
  for (int half = 4, o = CH / 2; half >= 1; half >>= 1, o >>= 1) {
    const bool up = (c & o) != 0;
#pragma unroll
    for (int q = 0; q < half; ++q) {
      const float send = up ? v[q] : v[q + half], keep = up ? v[q + half] : v[q];
      v[q] = keep + __shfl_xor_sync(kFull, send, o);
    }
  }
#pragma unroll
  for (int o = CH / 16; o >= 1; o >>= 1) v[0] += __shfl_xor_sync(kFull, v[0], o);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) prepass_kernel(const Params p) {
  // The wgmma kernel that follows may launch now: its set-up (barriers, the Q tile, ||q||) overlaps
  // this kernel's last wave, and it waits for these checksums before it reads them (grid_dep_wait).
  grid_dep_launch_dependents();
  if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) atomicAdd(p.nf_token + 1, 1);
  using L = PrepassLay<D>;
  constexpr int CH = L::CH;
  const int tid = threadIdx.x, lt = tid / (8 * CH), r = (tid / CH) % 8, c = tid % CH;
  const int t = blockIdx.x * L::kTiles + lt, hk = blockIdx.y, b = blockIdx.z;
  const bool tile_ok = t < p.n_tiles;  // whole warps: a warp lies inside one tile
  const int j0 = min(t, p.n_tiles - 1) * kBlockN;
  const T* gk = reinterpret_cast<const T*>(p.k) + b * p.k_sb + hk * p.k_sh + 8 * c;
  const T* gv = reinterpret_cast<const T*>(p.v) + b * p.v_sb + hk * p.v_sh + 8 * c;
  const int64_t tile_id = (int64_t)(b * p.Hk + hk) * p.n_tiles + t;
  const float ks = 1.f / p.kc_unscale, s1 = 1.f / p.vc1_unscale;
  __shared__ float norms[L::kTiles][kBlockN];

  uint4 kq[8], vq[8];  // keys j0 + r + 8 i (rows past the end read the last key, dropped below)
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t key = min(j0 + r + 8 * i, p.Sk - 1);
    kq[i] = __ldg(reinterpret_cast<const uint4*>(gk + key * p.k_ss));
    vq[i] = __ldg(reinterpret_cast<const uint4*>(gv + key * p.v_ss));
  }
  float a[8] = {}, nk[8], c1[8], av[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const bool live = j0 + r + 8 * i < p.Sk;
    const T* ke = reinterpret_cast<const T*>(&kq[i]);
    const T* ve = reinterpret_cast<const T*>(&vq[i]);
    nk[i] = c1[i] = av[i] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float x = live ? Elem<T>::to_f(ke[j]) : 0.f, y = live ? Elem<T>::to_f(ve[j]) : 0.f;
      a[j] += x;
      nk[i] = fmaf(x, x, nk[i]);
      c1[i] += y;
      av[i] += fabsf(y);
    }
  }
  // K^c: group g = r / 2 holds keys of residues 2g and 2g + 1 (the 16 scores a lane of the main
  // kernel owns per row); rows 2g and 2g + 1 of the tile's checksum block are the hi and lo halves
  // of their sum (fp16: pre-scaled so 16 summed keys cannot overflow). The even residue writes hi.
  __align__(16) T out[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float s = (a[j] + __shfl_xor_sync(kFull, a[j], CH)) * ks;
    const T h = Elem<T>::from_f(s);
    out[j] = (r & 1) ? Elem<T>::from_f(s - Elem<T>::to_f(h)) : h;
  }
  T* kc = reinterpret_cast<T*>(const_cast<void*>(p.kc)) + (tile_id * 8 + r) * D + 8 * c;
  if (tile_ok) *reinterpret_cast<uint4*>(kc) = *reinterpret_cast<const uint4*>(out);

  // ||k|| per key and the V checksum columns [c1 hi, lo, lo2, 0, live, live, live, sum |v|].
  row_reduce_scatter<CH>(nk, c);
  row_reduce_scatter<CH>(c1, c);
  row_reduce_scatter<CH>(av, c);
  if (c % (CH / 8) == 0) {
    const int kl = r + 8 * (c / (CH / 8));
    norms[lt][kl] = sqrtf(nk[0]);
    float x = c1[0] * s1;
    out[0] = Elem<T>::from_f(x); x -= Elem<T>::to_f(out[0]);
    out[1] = Elem<T>::from_f(x); x -= Elem<T>::to_f(out[1]);
    out[2] = Elem<T>::from_f(x);
    out[3] = Elem<T>::from_f(0.f);  // free column
    out[4] = out[5] = out[6] = Elem<T>::from_f(j0 + kl < p.Sk ? 1.f : 0.f);  // the row sum, three times
    out[7] = Elem<T>::from_f(av[0] * s1 * 1.0078125f);  // rounded up a little: it bounds a residual
    T* vc = reinterpret_cast<T*>(const_cast<void*>(p.vc)) + tile_id * kBlockN * 8;
    if (tile_ok) *reinterpret_cast<uint4*>(vc + kl * 8) = *reinterpret_cast<const uint4*>(out);
  }
  __syncthreads();
  if (tid < 4 * L::kTiles && blockIdx.x * L::kTiles + tid / 4 < p.n_tiles) {
    const int tl = tid / 4, g = tid % 4;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += norms[tl][8 * j + 2 * g] + norms[tl][8 * j + 2 * g + 1];
    const int64_t id = (int64_t)(b * p.Hk + hk) * p.n_tiles + blockIdx.x * L::kTiles + tl;
    const_cast<float*>(p.kn)[id * 4 + g] = s * 1.0078125f;
  }
}

template <typename T, int D>
cudaError_t launch_prepass(const Params& p, cudaStream_t stream) {
  constexpr int per = PrepassLay<D>::kTiles;
  prepass_kernel<T, D><<<dim3((p.n_tiles + per - 1) / per, p.Hk, p.B), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int D, bool kProtect, int MT>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  if constexpr (kProtect) {
    launch_prepass<T, D>(p, stream);
  }
  constexpr size_t smem = smem_bytes<T, D, kProtect, MT>();
  constexpr auto kern = &attn_fwd_kernel<T, D, kProtect, MT>;
  if (cudaError_t e = sm90::allow_smem<kern>(smem)) return e;
  const dim3 grid((p.Sq + block_m<MT>() - 1) / block_m<MT>(), p.Hq, p.B);
  kern<<<grid, kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace efta

// EFTA on Hopper: the protection of efta_kernel.cuh with the GEMMs on wgmma and the loads on TMA
// (FA3-style warp specialisation). The tile functions of efta_kernel.cuh are reused as they are: a
// warp's share of a wgmma m64nN accumulator has the mma.sync m16n8 fragment layout, repeated over
// the n8 blocks, and the A operand from registers has the mma.sync A layout.
//
//  * CTA = a producer warpgroup + kCons consumer warpgroups of 64 query rows each. The producer (one
//    thread) streams K with its 8 checksum rows right behind it (so S^c comes out of the same wgmma:
//    N = 64 + 8), V with its 8 checksum columns right behind it (O^c out of the PV wgmma: N = D + 8)
//    through a ring of kStages slots.
//  * Per key tile t a consumer warpgroup issues S(t) = Q K(t)^T, then O += P(t-1) V(t-1), waits for
//    S(t) only and runs tile t's softmax and checks while PV(t-1) is on the tensor cores.
//  * An alarmed tile's P never reaches the stored output. d=64 (B25): the warp records its first
//    alarmed tile (which checks failed, the digests of the checked data) and goes on; the whole
//    block is then recomputed (the second attempt, which a failed final check also takes), and that
//    tile's recomputation is compared with the record: data that changed was a fault (counted, and
//    the recomputed block is what is stored: the correction), data that repeats was not (inputs, or
//    data the checks cannot take). d=128: the alarmed warp recomputes its 16 rows of the tile alone,
//    with mma.sync from the K tile still in shared memory (redo_tile, out of line), before the tile's
//    P reaches O; a row counts as a fault if its first pass failed a check and the recomputation
//    passes them all.
//  * The end of the block (final GEMM-II check, row sums, store, block recomputation) is
//    efta_kernel.cuh's finish_block; the producer streams the tiles again for a second attempt.
#pragma once
#include "efta_api.cuh"
#include "efta_kernel.cuh"
#include "phase_stamps.cuh"
#include "wgmma_ops.cuh"

namespace efta {
namespace h90 {


template <int D, bool kProtect>
struct Lay {
  // Consumer warpgroups of 64 query rows: 3 (more warps to hide the softmax chain; 160 registers
  // each; at d=128, where O alone is 64 of them, the protected loop makes ~6 local-memory accesses a
  // tile on its unmasked path, ~40 on the mask tensor's, and is still 4-7 % faster than two
  // warpgroups at 232 registers: NOTES_attention.md B48).
  static constexpr int kCons = sm90_block_m(D) / 64;
  static constexpr int kBM = 64 * kCons;
  static constexpr int kThreadsH = 128 * (kCons + 1);
  static constexpr int kHalves = D / 64;  // 64-column (128-byte) TMA boxes per row
  // Ring depth: 4 at both head dims (two-slot rings at d=128 left the consumers waiting for K at
  // every tile: 29 % of their stall samples, NOTES_attention.md run D). One CTA per SM, so the shared memory is there
  // (protected: d=64 ~133 KB, d=128 ~217 KB).
  static constexpr int kStages = 4;
  static constexpr int kQ = kBM * D * 2;                               // [half][kBM rows][128 B]
  // The checksum columns (K^c rows, V^c box); measurement level 4 (EFTA_ABLATE) runs without them.
  static constexpr bool kCols = kProtect && kAbl < 4;
  static constexpr int kKHalf = (kBlockN + (kCols ? 8 : 0)) * 128;  // K rows, then the K^c rows
  static constexpr int kK = kHalves * kKHalf;
  static constexpr int kVHalf = kBlockN * 128;
  static constexpr int kV = kHalves * kVHalf;
  // V^c: the 8 checksum columns of the tile's keys as one more 64-column box of V (columns 8-63 are
  // the TMA's zero fill, never read): the PV wgmma reads [V | V^c] as N = D + 8 columns, one wgmma
  // per k-step. (A K-major m64n8 wgmma of its own cost 4 wgmmas and their descriptors per tile.)
  static constexpr int kVc = kCols ? kVHalf : 0;
  static constexpr int kStage = kK + kV + kVc;  // a multiple of 1024 (swizzle atoms)
  // How an alarmed tile is corrected. d=64 (B25): the warp notes its first alarmed tile and the
  // record of its first pass (shared memory, one per consumer thread) and goes on; the block is
  // recomputed (the second attempt, as for a failed final check), and the tile's recomputation is
  // compared with the record: data that changed was a fault. No vote and no recomputation inside
  // the tile loop (the warpgroup vote per tile, before, cost 3-5 %: runs 41a-b). d=128: the warp
  // recomputes its rows of the tile alone, with mma.sync, out of line (redo_tile; as fast as B25
  // there, run 41b, and a fault costs a tile instead of a block).
  static constexpr bool kWarpRedo = D == 128;
  static constexpr int kAlarmRecs = kProtect && !kWarpRedo ? kCons * 128 : 0;
  static constexpr size_t kSmem = 1024 + kQ + (size_t)kStages * kStage + 64 * 8 + kAlarmRecs * sizeof(Alarm1<1>);
  static constexpr int kN = kBlockN + (kCols ? 8 : 0);  // S columns per wgmma
};

// O += P V and O^c += P V^c of one key tile (P in registers; dv: the slot's [V | V^c] descriptor,
// N-major), asynchronous.
template <typename T, int D, bool kProtect>
__device__ __forceinline__ void issue_pv(State<D, 1>& st, const uint32_t (&pa)[1][4][4], uint64_t dv) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if constexpr (Lay<D, kProtect>::kCols)
      wgmma_rs_cs<T, D + 8>(&st.o[0][0][0], &st.oc[0][0], pa[0][kk], desc_add(dv, kk * 2048));
    else wgmma_rs<T, D, 1>(&st.o[0][0][0], pa[0][kk], desc_add(dv, kk * 2048));
  }
}

// The warp's S and S^c of one key tile recomputed with mma.sync from the TMA tiles in shared memory
// (128-byte swizzle: 16-byte chunk c of row r sits at chunk c ^ (r % 8); d = 128 in two 64-column
// halves, q_half / k_half bytes apart). sq: the warp's 16 query rows; sk: the slot's K rows, its 8
// checksum rows behind them. A warp's m16n8 fragments are its share of the wgmma accumulator, so
// s and sc come out in the layout the loop holds.
template <typename T, int D>
__device__ __forceinline__ void qk_warp(float (&s)[1][8][4], float (&sc)[1][4], uint32_t sq, uint32_t sk, int q_half,
                                        int k_half, int lane) {
  const int r8 = lane & 7, hi8 = (lane >> 3) & 1, hi16 = lane >> 4;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) sc[0][e] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int c0 = 2 * (ks & 3);
    const uint32_t q = sq + (ks >> 2) * q_half, k = sk + (ks >> 2) * k_half;
    uint32_t a[4];  // rows r8 (+8), chunks c0 (+1): the m16n8k16 A fragment
    ldsm_x4(a, q + (r8 + 8 * hi8) * 128 + (((c0 + hi16) ^ r8) << 4));
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];  // keys 16 np + r8 (+8), chunks c0 (+1): two n8 B fragments
      ldsm_x4(b, k + (16 * np + r8 + 8 * hi16) * 128 + (((c0 + hi8) ^ r8) << 4));
      Elem<T>::mma(s[0][2 * np], a, b[0], b[1]);
      Elem<T>::mma(s[0][2 * np + 1], a, b[2], b[3]);
    }
    uint32_t bc[2];
    ldsm_x2(bc, k + (kBlockN + r8) * 128 + (((c0 + hi8) ^ r8) << 4));
    Elem<T>::mma(sc[0], a, bc[0], bc[1]);
  }
}

// What an alarmed tile's cold path reads and writes, in local memory (the loop's registers stay as
// they are).
struct Redo {
  float s[1][8][4];  // out: the recomputed P
  TileOut<1> to;     // in: the first pass; out: the recomputation
  float m_old[2], qtol[2];
  Ctx cx;
};

// An alarmed tile of one warp, out of line: S recomputed (qk_warp), softmax and checks again. A row
// counts as a fault if its first pass failed a check (in any lane of its quad) and the recomputation
// passes every check; a row that fails twice holds data the checks cannot take (an underflowed P),
// which costs the recomputation and no count. Returns whether the recomputed S is not finite (inputs).
template <typename T, int D>
static __device__ __noinline__ bool redo_tile(Redo& r, const Params& p, uint32_t sq, uint32_t sk, int q_half,
                                              int k_half, bool masked, bool count) {
  const int lane = r.cx.lane;
  bool bad1[2];
  const uint32_t q1 = quad_snvr(r.to);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) bad1[rr] = row_bad(q1, rr) || r.to.grpbad[rr];
  float sc[1][4];
  qk_warp<T, D>(r.s, sc, sq, sk, q_half, k_half, lane);
  fence_proxy_async_smem();  // the slot's ldmatrix reads ordered before its TMA refill (cold path)
  const bool nonfinite = any_nonfinite(r.s, sc);
  if (masked) {
    softmax_tile<T, D, true, true>(r.s, sc, r.m_old, r.qtol, r.to, r.cx, false);
    check_tile<true, true>(r.s, sc, r.qtol, r.to, r.cx);
  } else {
    softmax_tile<T, D, true, false>(r.s, sc, r.m_old, r.qtol, r.to, r.cx, false);
    check_tile<true, false>(r.s, sc, r.qtol, r.to, r.cx);
  }
  unsigned faults = 0;
  const uint32_t q2 = quad_snvr(r.to);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const bool was = quad_any(bad1[rr]), is = quad_any(row_bad(q2, rr) || r.to.grpbad[rr]);
    if (was && !is && (lane & 3) == 0) ++faults;
  }
  record_tile_faults(faults, lane, p.policy, count, p.counters, p.alarms);
  return nonfinite;
}

struct Ring {
  uint8_t* base;   // slot s at base + s * kStage
  uint64_t* kfull;
  uint64_t* vfull;
  uint64_t* empty;
};

// kPad builds (a mask with one row per (batch, head), mc_sq == 0): the mask's one map entry per
// (batch, head) (Params::mask_map), read once, 16 bytes. (Read field by field, the consumers'
// bounds below made a chain of dependent loads before their first tile: run 52c.)
__device__ __forceinline__ int4 pad_entry(const Params& p, int b, int h) {
  return __ldg(reinterpret_cast<const int4*>(map_entry(p, b, h, 0)));
}

// The first key tile the CTA whose rows start at i0 visits (the ring's first), from its map entry
// e: the first tile with a live key (a left-padded sequence's leading tiles are all -inf), at most
// the first consumer warpgroup's last tile (tiles_for: its n is the CTA's least; a row masked whole
// still visits one); 0 where a fault is injected.
__device__ __forceinline__ int first_tile(const Params& p, const int4& e, int i0) {
  if (p.n_inj > 0 || e.z == 0) return 0;
  int n0 = min(p.n_tiles, max(e.x, 1));
  if (p.causal) n0 = min(n0, (min(i0 + 64, p.Sq) - 1) / kBlockN + 1);
  return max(0, min(p.n_tiles - e.z, n0 - 1));
}

// The masked tiles of the warp whose rows start at wrow0, visiting [t0, n): t < (the return value)
// or t >= mfrom. masked_from's bound, or, where the mask's masked tiles [nz_from, nz_end) end before
// the visited ones do and fewer of them lie in [t0, nz_end) than in [nz_from, n) (a left-padded
// sequence: its first live tile alone), nz_end below and the diagonal / partial tile above. Every
// visited tile where the mask masks anything lies in [nz_from, nz_end), so either takes it masked.
__device__ __forceinline__ int pad_masked_bounds(const Params& p, const int4& e, int wrow0, int t0, int n,
                                                 int& mfrom) {
  int from = p.n_tiles, to = 0;
  if (p.Sk % kBlockN != 0) from = p.n_tiles - 1;
  if (p.causal) from = min(from, wrow0 / kBlockN);
  if (e.y != 0) {
    const int nz_from = p.n_tiles - e.y;
    if (e.w - t0 < n - nz_from) to = e.w;
    else from = min(from, nz_from);
  }
  mfrom = from;
  return to;
}

// A consumer warpgroup's pass over its key tiles t0 ... n - 1 (ring positions pos0 ...). kHooks: the instantiation
// that applies fault injections (first attempt of a warpgroup a fault targets); the other carries none.
// a1, alarm_t: this thread's alarm record and the warp's first alarmed tile (-1: none): written on
// the first attempt, compared with the tile's recomputation on the second.
template <typename T, int D, bool kProtect, bool kHooks>
__device__ __forceinline__ void consume(State<D, 1>& st, const Params& p, Ctx cx, uint32_t sq, const Ring& ring,
                                        int t0, int n, int mfrom, int mto, int pos0, bool first, bool& nonfinite_in,
                                        Alarm1<1>* a1, int& alarm_t) {
  using L = Lay<D, kProtect>;
  constexpr int S = L::kStages;
  const int lane = cx.lane, tq = lane & 3;
  const int64_t tile_base = (int64_t)(cx.b * p.Hk + cx.h / (p.Hq / p.Hk)) * p.n_tiles;
  const uint32_t ring0 = smem_u32(ring.base);
  // Descriptors of slot 0 (per tile: + the slot's offset + the k-step's), built once.
  const uint64_t dq = desc_k_sw128(sq), dk = desc_k_sw128(ring0), dv = desc_mn_sw128(ring0 + L::kK, L::kVHalf);
  int slot = pos0 % S;  // ring position of tile t: slot and phase parity, advanced with t
  uint32_t par = (uint32_t)((pos0 / S) & 1);

  float acc[L::kN / 2];
  uint32_t pa[1][4][4];  // P of the tile whose PV is next
  bool have_p = false, sticky = false;
  // The tile to compare on the second attempt (warp-uniform through the shuffle: a uniform register).
  const int redo_t = __shfl_sync(kFull, first ? -1 : alarm_t, 0);
  int p_slot = 0;  // ring position of the tile whose PV is next
  uint32_t p_par = 0;
  // Sum of ||k|| over the lane's key group, advanced with t (a pointer rebuilt from t at every tile
  // cost a spilled 64-bit base and its reload).
  const float* kn = kProtect ? p.kn + (tile_base + t0) * 4 + tq : nullptr;

  for (int t = t0; t < n;) {
    const uint64_t dks = desc_add(dk, slot * L::kStage);
    mbar_wait(&ring.kfull[slot], par);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<T, L::kN>(acc, desc_add(dq, (kk / 4) * L::kBM * 128 + (kk % 4) * 32),
                         desc_add(dks, (kk / 4) * L::kKHalf + (kk % 4) * 32), kk > 0);
    wgmma_commit();
    const bool pv_flight = have_p;
    if (have_p) {  // O += P(t-1) V(t-1), on the tensor cores while tile t's softmax runs
      mbar_wait(&ring.vfull[p_slot], p_par);
      wgmma_fence();  // here too: a fence ptxas would insert inside this branch serialises every wgmma
      issue_pv<T, D, kProtect>(st, pa, desc_add(dv, p_slot * L::kStage));
      wgmma_commit();
      have_p = false;
      wgmma_wait<1>();
    } else {
      wgmma_wait<0>();
    }
    reg_fence<L::kN / 2>(acc);  // reads of S stay below the wait

    float s[1][8][4], sc[1][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = acc[4 * nt + e];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (L::kCols) sc[0][e] = acc[32 + e];  // the checksum columns
      else sc[0][e] = 0.f;
    }

    cx.t = t;
    cx.j0 = t * kBlockN;
    cx.A = kProtect ? __ldg(kn) : 0.f;
    if constexpr (kProtect) {
      if (kHooks)
        for_recs(cx, kScore, [&](int r, const InjRec& rec) {
          inj_frag<8>(s, rec.row - cx.wrow0, rec.col, rec, cx.inj_log + 2 * r, lane);
        });
    }
    TileOut<1> to;
    const bool masked = (t >= mfrom) | (t < mto);  // (one predicate of the two warp-uniform bounds)
    if (masked) {
      softmax_tile<T, D, kProtect, true>(s, sc, st.m, st.qtol, to, cx, kHooks);
      check_tile<kProtect, true>(s, sc, st.qtol, to, cx);
    } else {
      softmax_tile<T, D, kProtect, false>(s, sc, st.m, st.qtol, to, cx, kHooks);
      check_tile<kProtect, false>(s, sc, st.qtol, to, cx);
    }
    if constexpr (kProtect && kAbl >= 1 && kAbl < 3) sticky |= tile_alarm(to);  // measurement builds
    if constexpr (kProtect && kAbl < 1 && !L::kWarpRedo) {
      // (__any_sync of a value already equal on every lane: it tells the compiler so, and the branch
      // stays a uniform one.)
      if (__any_sync(kFull, tile_alarm(to)) || t == redo_t) {  // rare
        if (first) {
          if (alarm_t < 0) {  // the warp's first alarm: the block is recomputed, and this tile compared
            *a1 = alarm_record(to);
            alarm_t = t;
          }
        } else if (t == redo_t) {
          nonfinite_in |= any_nonfinite(s, sc);  // inputs repeat, a fault does not
          alarm_outcome(*a1, to, lane, p.policy, true, p.counters, p.alarms);
        }
      }
    }
    if constexpr (kProtect && kAbl < 1 && L::kWarpRedo) {
      if (__any_sync(kFull, tile_alarm(to))) {  // rare: the warp recomputes its rows of the tile
        Redo r;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) r.m_old[rr] = st.m[rr], r.qtol[rr] = st.qtol[rr];
        r.to = to;
        r.cx = cx;
        nonfinite_in |= redo_tile<T, D>(r, p, sq + 16 * (cx.w & 3) * 128, ring0 + slot * L::kStage, L::kBM * 128,
                                        L::kKHalf, masked, first);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[0][nt][e] = r.s[0][nt][e];
        to = r.to;
      }
    }
    wgmma_wait<0>();
    reg_fence<D / 2>(&st.o[0][0][0]);  // and so do the rescale and hooks of O
    if constexpr (kProtect) reg_fence<4>(&st.oc[0][0]);
    if (pv_flight) {  // PV(t-1) done: its slot is free, and its injection hook applies now
      __syncwarp();
      if (lane == 0) mbar_arrive(&ring.empty[p_slot]);
      Ctx cp = cx;
      cp.t = t - 1;
      pv_hooks<D, kProtect, kHooks>(st, cp);
    }

    online_update<D, kProtect, kHooks, 1, true>(st, to, cx);
    // P packed only now that PV(t-1) no longer reads pa: packed during the softmax, it needed its
    // own registers and ~20 moves per tile into pa.
    pack_p<T>(s, pa);
    p_hooks<T, kProtect, kHooks>(pa, cx);
    have_p = true;
    p_slot = slot;
    p_par = par;
    if (++slot == S) {
      slot = 0;
      par ^= 1u;
    }
    ++t;
    if constexpr (kProtect) kn += 4;
  }
  if (have_p) {
    mbar_wait(&ring.vfull[p_slot], p_par);
    wgmma_fence();
    issue_pv<T, D, kProtect>(st, pa, desc_add(dv, p_slot * L::kStage));
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence<D / 2>(&st.o[0][0][0]);
    if constexpr (kProtect) reg_fence<4>(&st.oc[0][0]);
    __syncwarp();
    if (lane == 0) mbar_arrive(&ring.empty[p_slot]);
    cx.t = n - 1;
    pv_hooks<D, kProtect, kHooks>(st, cx);
  }
  nonfinite_in |= sticky;  // (measurement builds: keeps their checks' verdict live)
}

// kPad: the build for a mask with one row per (batch, head) (mc_sq == 0: a padding mask), which starts
// at the first live tile and bounds the masked tiles from below too (first_tile, pad_masked_bounds);
// the other build is the kernel without either (spill-free at d=64: ptxas counts 8-16 bytes of
// spills in a build that holds t0 and mto for every call).
// A measurement build (runs 52c-d): EFTA_PAD=0 never takes the kPad build.
#ifndef EFTA_PAD
#define EFTA_PAD 1
#endif
// Q's TMA is issued by the thread that initialises the barriers, before the CTA's first barrier and
// the role split: Q lands ~0.3 us sooner (runs 59b-c). -DEFTA_Q_EARLY=0: by the producer after them,
// as before, for the A/B.
#ifndef EFTA_Q_EARLY
#define EFTA_Q_EARLY 1
#endif

template <typename T, int D, bool kProtect, bool kPad>
__global__ void __launch_bounds__(Lay<D, kProtect>::kThreadsH, 1)
    attn_fwd_sm90(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                  const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmKc,
                  const __grid_constant__ CUtensorMap tmVc, const __grid_constant__ Params p) {
  using L = Lay<D, kProtect>;
  constexpr int S = L::kStages;
  extern __shared__ uint8_t smem_raw[];
  // (Aligned through an integer cast, not sm90::align_1024 as the GEMM kernels: the tile loop reaches
  // shared memory through 32-bit descriptors anyway, and the declared alignment moved the d=64 loop's
  // schedule, +2-3 % protected: NOTES_attention.md, run 47c.)
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sQ = base;
  Ring ring;
  ring.base = base + L::kQ;
  uint64_t* bars = reinterpret_cast<uint64_t*>(ring.base + S * L::kStage);
  Alarm1<1>* alarm_recs = reinterpret_cast<Alarm1<1>*>(ring.base + S * L::kStage + 64 * 8);  // d=64: one per consumer thread
  uint64_t* qfull = bars;
  ring.kfull = bars + 1;
  ring.vfull = ring.kfull + S;
  ring.empty = ring.vfull + S;
  // Phase timestamps (diagnostic build only, benchmarks/prefill_phases.py): 0 entry, 1 set-up done,
  // 2 Q issued, 3 the prepass waited (protected), 4 the first attempt's loads issued (thread 0, the
  // producer); 5 Q landed, 6 ready to consume (||q||, the prepass waited), 7 tile loop done, 8 block
  // finished (normalised, checked, stored), 9 the attempts done (the vote passed), 10 end (thread 128:
  // the first consumer warpgroup). The slot: the last of the 64 barrier words (13 are barriers).
  phase_stamps::SlotStamper stamp;
  stamp.begin(reinterpret_cast<unsigned*>(bars + 63));
  constexpr int kStampC = 128;

  // The warpgroup index through a shuffle: the compiler then knows it is warp-uniform, and keeps
  // what derives from it (shared-memory addresses, wgmma descriptors) in uniform registers.
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), lane = tid & 31, w = tid >> 5;
  constexpr int kBM = L::kBM, kCons = L::kCons;
  const int nqb = (p.Sq + kBM - 1) / kBM;
  const int qb = p.causal ? nqb - 1 - (int)blockIdx.x : (int)blockIdx.x;  // heavy causal blocks first
  const int h = blockIdx.y, b = blockIdx.z, hk = h / (p.Hq / p.Hk), i0 = qb * kBM;
  const int n_cta = tiles_for(p, b, h, i0, kBM);  // the most any consumer warpgroup visits

  if (tid == 0) {
    mbar_init(qfull, 1);
    for (int s = 0; s < S; ++s) {
      mbar_init(&ring.kfull[s], 1);
      mbar_init(&ring.vfull[s], 1);
      mbar_init(&ring.empty[s], 4 * kCons);  // one arrival per consumer warp
    }
    fence_barrier_init();
    if constexpr (EFTA_Q_EARLY) {
      mbar_expect_tx(qfull, L::kQ);
#pragma unroll
      for (int hh = 0; hh < L::kHalves; ++hh) tma_load_4d(sQ + hh * kBM * 128, &tmQ, qfull, hh * 64, i0, h, b);
    }
  }
  __syncthreads();
  stamp.mark(1);

  const int64_t tile_base = (int64_t)(b * p.Hk + hk) * p.n_tiles;
  // The two roles share no code after their setmaxnreg (ptxas then gives each its own register
  // budget): each runs its own attempt loop, and they meet only at the barrier-0 votes.
  if (wg == 0) {
    if constexpr (kCons == 3) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    // The first tile any consumer warpgroup visits (< n_cta), found by each role after its
    // setmaxnreg, so that nothing more is held through the role split.
    const int t0 = kPad ? first_tile(p, pad_entry(p, b, h), i0) : 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool first = attempt == 0;
      const int pos0 = attempt * (n_cta - t0);  // ring position of tile t0 in this attempt
      // ------------------------------------------------------------ producer
      if (tid == 0) {
        if (first) {
          tma_prefetch_desc(&tmK);
          tma_prefetch_desc(&tmV);
          if constexpr (!EFTA_Q_EARLY) {
            mbar_expect_tx(qfull, L::kQ);
#pragma unroll
            for (int hh = 0; hh < L::kHalves; ++hh) tma_load_4d(sQ + hh * kBM * 128, &tmQ, qfull, hh * 64, i0, h, b);
          }
          stamp.mark(2);
          if constexpr (kProtect) grid_dep_wait();  // K^c, V^c: the prepass's
          stamp.mark(3);
        }
        for (int t = t0; t < n_cta; ++t) {
          const int pos = pos0 + t - t0, slot = pos % S;
          if (pos >= S) mbar_wait(&ring.empty[slot], (uint32_t)(((pos / S) - 1) & 1));
          uint8_t* st = ring.base + slot * L::kStage;
          mbar_expect_tx(&ring.kfull[slot], L::kK);
#pragma unroll
          for (int hh = 0; hh < L::kHalves; ++hh) {
            tma_load_4d(st + hh * L::kKHalf, &tmK, &ring.kfull[slot], hh * 64, t * kBlockN, hk, b);
            if constexpr (L::kCols)
              tma_load_2d(st + hh * L::kKHalf + kBlockN * 128, &tmKc, &ring.kfull[slot], hh * 64,
                          (int)((tile_base + t) * 8));
          }
          mbar_expect_tx(&ring.vfull[slot], L::kV + L::kVc);
#pragma unroll
          for (int hh = 0; hh < L::kHalves; ++hh)
            tma_load_4d(st + L::kK + hh * L::kVHalf, &tmV, &ring.vfull[slot], hh * 64, t * kBlockN, hk, b);
          if constexpr (L::kCols)
            tma_load_2d(st + L::kK + L::kV, &tmVc, &ring.vfull[slot], 0, (int)((tile_base + t) * kBlockN));
        }
        if (first) stamp.mark(4);
      }
      __syncwarp();
      if constexpr (!kProtect) break;
      if (!first || !__shfl_sync(kFull, __syncthreads_or(0), 0)) break;  // the consumers decide
    }
    if constexpr (kProtect) report_call(p, false);
    return;
  }
  if constexpr (kCons == 3) asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n" ::: "memory");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int4 pe = kPad ? pad_entry(p, b, h) : int4{0, 0, 0, 0};
  const int t0 = kPad ? __shfl_sync(kFull, first_tile(p, pe, i0), 0) : 0;  // warp-uniform: a uniform register
  bool nonfinite_in = false;
  uint32_t redo = 0u;
  int alarm_t = -1;  // the warp's first alarmed tile (B25)
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool first = attempt == 0;
    const int pos0 = attempt * (n_cta - t0);
    bool rerun = false;
    // ------------------------------------------------------------ consumers
    const int c = wg - 1, wi = w & 3, row0 = i0 + 64 * c + 16 * wi;
    bool injected;  // a fault targets this warpgroup's rows
    const int n = tiles_for(p, b, h, i0 + 64 * c, 64, &injected);
    State<D, 1> st;
    st.reset();
    if (first) mbar_wait(qfull, 0);
    if (first) stamp.mark(5, kStampC);
    const uint32_t sq = smem_u32(sQ) + c * 64 * 128;
    if constexpr (kProtect) {
      // The GEMM-I threshold factor of the lane's two rows (State::qtol: ||q||, from the swizzled Q
      // tile, times scale log2(e) C_GEMM).
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = 64 * c + 16 * wi + 8 * rr + (lane >> 2);
        float a = 0.f;
#pragma unroll
        for (int hh = 0; hh < L::kHalves; ++hh)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int ch = (lane & 3) + 4 * j;
            const uint4 v = *reinterpret_cast<const uint4*>(sQ + hh * kBM * 128 + r * 128 + ((ch ^ (r & 7)) << 4));
            const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              const float x = Elem<T>::to_f(e[i]);
              a += x * x;
            }
          }
        st.qtol[rr] = p.scale * kLog2e * p.c_gemm * sqrtf(quad_sum(a));
      }
    }
    if constexpr (kProtect)
      if (first) grid_dep_wait();  // the key norms: the prepass's
    const Ctx cx = make_ctx(p, lane, w - 4, b, h, row0, 16);
    Alarm1<1>* a1 = L::kAlarmRecs ? alarm_recs + (tid - 128) : nullptr;
    // The first masked tile, warp-uniform; through a shuffle the compiler knows it and keeps it in a
    // uniform register, so the tile loop's masked/unmasked branch is a uniform one (run 40b: d=64
    // -7..-8 % protected, -3..-4 % unprotected; without it the d=64 protected kernel spilled).
    int mfrom = 0, mto = 0;
    if constexpr (kPad) mto = pad_masked_bounds(p, pe, row0, t0, n, mfrom);
    else mfrom = masked_from(p, b, h, row0);
    mfrom = __shfl_sync(kFull, mfrom, 0);
    mto = __shfl_sync(kFull, mto, 0);
    if (first) stamp.mark(6, kStampC);
    if (kProtect && first && injected)
      consume<T, D, kProtect, kProtect>(st, p, cx, sq, ring, t0, n, mfrom, mto, pos0, first, nonfinite_in, a1,
                                        alarm_t);
    else
      consume<T, D, kProtect, false>(st, p, cx, sq, ring, t0, n, mfrom, mto, pos0, first, nonfinite_in, a1,
                                     alarm_t);
    if (first) stamp.mark(7, kStampC);
    // Tiles past this warpgroup's diagonal: nothing to compute, but their slots must be released.
    for (int t = kPad ? max(n, t0) : n; t < n_cta; ++t) {
      const int slot = (pos0 + t - t0) % S;
      const uint32_t par = (uint32_t)(((pos0 + t - t0) / S) & 1);
      mbar_wait(&ring.kfull[slot], par);
      mbar_wait(&ring.vfull[slot], par);
      __syncwarp();
      if (lane == 0) mbar_arrive(&ring.empty[slot]);
    }
    T* go = reinterpret_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh;
    // A warp whose tile alarmed holds data the block's recomputation replaces: its end checks judge
    // nothing on this attempt (they would count the same fault again).
    finish_block<T, D, kProtect, 1>(st, p, go, row0, lane, first, redo, rerun, nonfinite_in, alarm_t >= 0);
    if (first) stamp.mark(8, kStampC);
    if constexpr (!kProtect) break;
    // A second pass of the whole block (no injection, no counts): the correction of a failed final
    // check, and policy "recompute" after an uncorrectable fault.
    // (the vote through a shuffle: the compiler cannot tell that __syncthreads_or answers every
    // thread alike, and without it treats the attempt loop as divergent: the consumer loop's
    // descriptors then left the uniform registers, ~50 more instructions per tile: NOTES_attention.md B5.)
    if (!first || !__shfl_sync(kFull, __syncthreads_or(rerun), 0)) break;
  }
  stamp.mark(9, kStampC);
  if constexpr (kProtect) report_call(p, nonfinite_in);
  stamp.mark(10, kStampC);
}

template <typename T, int D, bool kProtect, bool kPad>
cudaError_t launch_build(const Params& p, const Maps& m, cudaStream_t stream) {
  using L = Lay<D, kProtect>;
  constexpr auto kern = &attn_fwd_sm90<T, D, kProtect, kPad>;
  if (cudaError_t e = sm90::allow_smem<kern>(L::kSmem)) return e;
  const dim3 grid((p.Sq + L::kBM - 1) / L::kBM, p.Hq, p.B);
  // Protected: launched while the prepass finishes (programmatic dependent launch); its threads wait
  // for the prepass where they first read what it writes.
  return sm90::launch_ex(kern, grid, L::kThreadsH, L::kSmem, stream, 1, kProtect, m.q, m.k, m.v, m.kc, m.vc, p);
}

template <typename T, int D, bool kProtect>
cudaError_t launch(const Params& p, const Maps& m, cudaStream_t stream) {
  if constexpr (kProtect && kAbl < 5) launch_prepass<T, D>(p, stream);
  const bool pad = EFTA_PAD && p.mask_map != nullptr && p.mc_sq == 0;
  return pad ? launch_build<T, D, kProtect, true>(p, m, stream) : launch_build<T, D, kProtect, false>(p, m, stream);
}

}  // namespace h90
}  // namespace efta

// Global ABFT linear y = x W^T + b for compute-bound shapes (Hopper: TMA + wgmma, persistent).
//
// CTA = 3 warpgroups. WG0: warp 0 lane 0 issues TMA loads into a 4-stage ring (6 at BN = 128);
// warps 1-3 verify (protected kernel). WG1/WG2 run m64nBNk16 wgmma on a 128xBN tile (BN = 256; 192
// where 256-wide tiles quantise badly on the SMs; 128 where few rows leave SMs idle: Args.bn);
// while their wgmmas run they also build the x-side of the check from the A tiles in shared memory
// on every T_N-th k-step of the tile (x . sum_n W[n], sum x, max x, min x per row: no extra launch,
// no extra pass over x). The epilogue adds the bias to the fp32 accumulators, folds the output row
// sums (plain and position-weighted) into per-row fp64 workspace sums, rounds and stores (16-byte
// stores through a staging buffer), then hands the tile to the verifier warps and goes on with the
// next tile. Warp 1 takes the M-tile's ticket; in the CTA holding the last ticket of an M-tile,
// warps 1-3 verify its rows against V-ABFT thresholds and reset what they read for the next call. A
// flagged row's single fault is located with the weighted checksum, recomputed and rechecked by the
// consumers once their tiles are done (while the verifiers finish the CTA's last M-tiles): none of
// this is on the consumers' tile path. Fault injection (tests, benchmarks) is a build of its own
// (INJECT). Optional 2-CTA clusters multicast the W half-tiles (args.cluster = 2). Where the tiles
// leave SMs idle, each tile's K is split over consecutive units (args.split): the last split adds
// the others' fp32 partial tiles (a self-cleaning workspace, args.part) and finishes the tile as
// above. Where the last of several waves is part-full, only its tiles are split (args.split_from),
// shared out over the SMs the wave would leave idle.
//
// Tile-local check (LOCAL, Args.local; 192- and 128-wide tiles): each tile checks itself, with no
// workspace, ticket or verifier. W carries 8 checksum rows per N-tile (offline: the tile's column
// sum and position-weighted sum, each split hi/mid/lo into three 16-bit rows for fp32 accuracy,
// and a row of ones), loaded right behind the tile's W rows, so one m64n(BN+8)k16 wgmma per k16
// computes the tile and x . checksums (+4.2 % / +6.3 % tensor work) on fp32 accumulators. The
// consumers load A with ldmatrix and issue the wgmma with A from registers, and take x's max / min
// per row from those fragments (FragRange): x is read from shared memory once (NOTES_gemm.md,
// session 31). The epilogue compares each row's output sum over the tile with its checksum
// against the V-ABFT threshold of BN terms, in registers: a flagged row is listed
// in shared memory, and its fault located by the weighted sum, the element recomputed, rechecked
// and stored (NOTES_gemm.md, runs 24-25) by WG0's idle warp 1 while the consumers go on, or, for
// the CTA's last tile, by the warp after its tile loop (NOTES_gemm.md session 54).
//
// Groups (Args.groups): sibling weights over one x (q/k/v, gate/up) as one call, y's columns the
// members' outputs side by side; each member read where it is through its own TMA descriptor
// (WMaps), member boundaries on whole tiles (NOTES_gemm.md, "Sibling groups").
#include <type_traits>

#include "ft_common.cuh"
#include "ft_host.cuh"
#include "wgmma_ops.cuh"

// Diagnostics only (benchmarks/ablate_global.sh): bits that drop parts of the protection to time
// them; 0 in every build the package makes. 1: no verification (tickets only; tile-local check:
// no check), 2: no x statistics in the k-loop (tile-local: no max / min), 4: no output row sums,
// 8: no correction (flagged rows only counted), 16: the tile-local check's wgmma without its 8
// checksum columns (n192 / n128; with 1), 32: the tile-local check without its end-of-call report of
// non-finite inputs (every CTA's returning atomic on one word). Earlier bits, measured and removed (NOTES_gemm.md):
// tickets by one acq_rel atomic (8), the weighted dot out of the statistics (16, how they are
// since run 20), proxies of a tile-local check (32-2048, runs 18a-c: commit 2052c06).
#ifndef FTG_ABLATE
#define FTG_ABLATE 0
#endif
// The tile-local check's fixer warp (fix_handed_over); 0 builds the consumers correcting every
// flagged row after their tile loop, for the A/B (NOTES_gemm.md session 54).
#ifndef FTG_FIXER
#define FTG_FIXER 1
#endif

namespace ftg {
namespace glb {

constexpr int BM = 128, BN_MAX = 256, BK = 64, STAGES_MAX = 6, THREADS = 384, GROUP_M = 8;
constexpr int A_BYTES = BM * BK * 2;
// A stage's W sums in shared memory: k 0-31 at float 0, k 32-63 at float WC_HALF (144 B on: the
// two halves of a row's statistics threads read them at the same time, and 128 B apart they fell
// in the same banks, two wavefronts per load).
constexpr int WC_HALF = BK / 2 + 4, WC_PITCH = WC_HALF + BK / 2;
// The output row sums weigh column c of a tile by (c + 1) / W_DEN at every tile width: exact in
// fp32, at most 1 (a huge faulty value cannot overflow the weighted sum).
constexpr int W_DEN = 256;

// Epilogue staging: each consumer warp stages 16 rows x 64 columns (rows padded to 144 B: the
// fragment writes and the 16-byte row reads are both bank-conflict free), then stores whole rows.
constexpr int STG_PITCH = 144, STG_WARP = 16 * STG_PITCH;

// A warp's 16 staged rows of a 64-column segment into y where N % 8 != 0 (a row's start is not
// 16-byte aligned: GPT-2's 50257-wide LM head). Per row, chunk p < 7 of a lane stores the 8
// elements from the row's first 16-byte boundary on (s = elements before it), gathered from the
// staging buffer; chunk 7 stores the s head and 8 - s tail elements one by one. (One store per
// element, as before, cost GPT-2's LM head ~0.45 ms more: NOTES.md, session 22.) Out of line:
// inlined, it was no faster and the aligned kernels spilled (Llama-1B's GEMMs +5 %).
template <typename T>
static __device__ __noinline__ void store_unaligned_rows(T* yb, const uint8_t* stg, int64_t lo, int M, int N,
                                                     int64_t ldy, int64_t row_w, int64_t col0, int lane) {
  static_assert(sizeof(T) == 2, "16-bit outputs");
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int chunk = lane + 32 * i, rr = chunk >> 3, part = chunk & 7;
    const int64_t gm = row_w + rr;
    if (gm < lo || gm >= M) continue;  // rows [lo, M): the tile's own
    T* row = yb + gm * ldy + col0;  // the segment's column 0
    const uint16_t* src = reinterpret_cast<const uint16_t*>(stg + rr * STG_PITCH);
    const int s = (int)((8 - ((reinterpret_cast<uintptr_t>(row) / sizeof(T)) & 7)) & 7);
    const int64_t left = N - col0;  // columns of this segment inside y
    if (part < 7 || s == 0) {
      const int c0 = s + 8 * part;
      if (c0 + 8 <= left) {
        uint4 v;
        v.x = src[c0] | (uint32_t)src[c0 + 1] << 16;
        v.y = src[c0 + 2] | (uint32_t)src[c0 + 3] << 16;
        v.z = src[c0 + 4] | (uint32_t)src[c0 + 5] << 16;
        v.w = src[c0 + 6] | (uint32_t)src[c0 + 7] << 16;
        *reinterpret_cast<uint4*>(row + c0) = v;
      } else {
        for (int q = c0; q < c0 + 8 && q < left; ++q) reinterpret_cast<uint16_t*>(row)[q] = src[q];
      }
    } else {
      for (int q = 0; q < s && q < left; ++q) reinterpret_cast<uint16_t*>(row)[q] = src[q];
      for (int q = s + 56; q < 64 && q < left; ++q) reinterpret_cast<uint16_t*>(row)[q] = src[q];
    }
  }
}

// A flagged row waiting for its correction: where, and what its check found.
struct FixJob {
  double s2, c1;
  float d1, thr;
  int b, m;
};
// A tile row the tile-local check flagged, waiting for its warp's correction after the tile loop.
struct TileFix {
  int b, m, n0;
  float c1, s2, c2, d1, thr;
};
static_assert(sizeof(TileFix) <= sizeof(FixJob), "TileFix shares FixJob's room");
// Corrections one CTA holds (a row past them is reported uncorrectable): single faults are rare.
// The tile-local check: FIX_WARP per consumer warp.
constexpr int FIX_CAP = 32, FIX_WARP = FIX_CAP / 8;
// The consumers' two warpgroups correct (named barrier 1); the verifier warps hand them the rows.
constexpr int FIX_THREADS = 256, FIX_WARPS = FIX_THREADS / 32, FIX_BAR = 1, VERIFIER_WARPS = 3;

struct Smem {
  uint64_t full[STAGES_MAX], empty[STAGES_MAX];
  uint64_t epi_full, epi_empty;    // consumers -> verifier: a tile's sums and stores are out; taken
  float wc[STAGES_MAX][WC_PITCH];  // sum_n W[n] over a stage's k (statistics k-steps), halves WC_HALF apart
  float bias[2][BN_MAX];           // the tile's bias (by tile parity: one warpgroup may run a tile ahead)
  union {
    FixJob fix[FIX_CAP];           // flagged rows, corrected by the consumers after their last tile
    TileFix tfix[FIX_CAP];         // tile-local check: [consumer warp][FIX_WARP] flagged tile rows
  };
  int fix_ready[FIX_CAP];          // slot written (release: verifier warp, acquire: consumer thread 0);
                                   // tile-local check: kFixerRow / kOwnRow (release: the writing lane)
  int nfix;                        // rows flagged so far (slots taken atomically; past FIX_CAP: lost)
  int fix_done;                    // verifier warps past their loops (release adds)
  int fix_next;                    // consumer thread 0 -> the others: the slot to correct next, or -1
  int last[2];                     // by tile parity: this CTA took the M-tile's last ticket
  int pos[FIX_WARPS];              // the correction's located positions, per warp
  double red[FIX_WARPS];           // the correction's group sums, per warp
  int bad;                         // tile-local check: a row with non-finite inputs (reported once per CTA)
  int fix_fin;                     // tile-local check: consumer warps past their tile loops (release adds)
};
// The ring and shared memory of a BN-wide tile. The 128-wide tile serves few-row (bandwidth-bound)
// calls: its smaller stages leave room for 6, so more loads are in flight per SM (NOTES_gemm.md
// run 23); the wider tiles have room for 4.
template <int BN, bool LOCAL = false>
struct Tiles {
  // LOCAL: the tile's 8 checksum rows of W right behind its BN rows (one B operand of BN + 8 rows).
  static constexpr int B_BYTES = BN * BK * 2, CS_BYTES = LOCAL ? 8 * BK * 2 : 0;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES + CS_BYTES, NW = LOCAL ? BN + 8 : BN;
  static constexpr int STAGES = BN == 128 ? 6 : 4;
  static_assert(STAGES <= STAGES_MAX, "Smem holds STAGES_MAX ring barriers");
  static constexpr size_t SMEM_BYTES = 1024 + (size_t)STAGES * STAGE_BYTES + 8 * STG_WARP + sizeof(Smem);
};

// Workspace: fp64 s1, s2, c1, sx [R] | fp32 max, min [R] | u64 non-finite reports | int ticket [batch*T_M].
constexpr int WS_F64 = 4;
struct Ws {  // the arrays, from the base and the row capacity
  double* d;
  int64_t rows;
  __device__ Ws(void* base, int64_t rows_) : d(static_cast<double*>(base)), rows(rows_) {}
  __device__ double* s1() const { return d; }
  __device__ double* s2() const { return d + rows; }
  __device__ double* c1() const { return d + 2 * rows; }
  __device__ double* sx() const { return d + 3 * rows; }
  __device__ float* mx() const { return reinterpret_cast<float*>(d + WS_F64 * rows); }
  __device__ float* mn() const { return mx() + rows; }
  __device__ unsigned long long* reports() const {  // 8-byte aligned: 40 bytes per row before it
    return reinterpret_cast<unsigned long long*>(mn() + rows);
  }
  __device__ int* ticket() const { return reinterpret_cast<int*>(reports() + 1); }
};

// Split-K workspace (Args.part): int flags [tiles] (zero between calls), then per tile the fp32
// partials of its first splits - 1 splits, BN / 8 float4 x 256 consumer threads each (slots of the
// 256-wide tile's size at both widths).
struct SplitWs {
  static constexpr int64_t SLOT_F4 = BN_MAX / 8 * 256;  // float4s of one partial tile (x's range fits: BN + 8 <= 256)
  // ints before the slots: the flags, rounded up to 16 bytes
  __host__ __device__ static constexpr int64_t flag_ints(int64_t tiles) { return (tiles + 3) & ~3ll; }
  __host__ __device__ static constexpr int64_t bytes(int64_t tiles, int64_t splits) {
    return flag_ints(tiles) * 4 + tiles * (splits - 1) * SLOT_F4 * 16;
  }
  int* flags;
  float4* slots;
  int splits;
  __device__ SplitWs(void* base, int64_t tiles, int splits_)
      : flags(static_cast<int*>(base)), slots(reinterpret_cast<float4*>(static_cast<int*>(base) + flag_ints(tiles))),
        splits(splits_) {}
  __device__ int* flag(int tile) const { return flags + tile; }
  __device__ float4* slot(int tile, int s) const { return slots + ((int64_t)tile * (splits - 1) + s) * SLOT_F4; }
};

// A zero the compiler cannot see through (keeps a computation inside the loop it is written in).
__device__ __forceinline__ int opaque_zero() {
  int z;
  asm volatile("mov.u32 %0, 0;" : "=r"(z));
  return z;
}

// Diagnostic build only (-DFTG_FIX_STAMPS, benchmarks/correction_stamps.py): thread stamps of the
// global timer, 8 doubles per CTA after the per-row (row check: 3 per row) or per-tile-row (tile
// check: 3 per row and N-tile) diagnostics in Args.dbg: 0 start, 1 the last correction's start,
// 2 the corrections done, 3 rows corrected, 4 consumers' end (of their tiles), 5 verifiers' end
// (row check), 6 / 7 the last correction's location (row check: its weighted dot) / located
// element's dot done.
#ifdef FTG_FIX_STAMPS
__device__ __forceinline__ void fix_stamp(const Args& a, int i, double v = -1.0) {
  if (a.dbg == nullptr) return;
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  const int64_t rows = (int64_t)a.batch * a.M * (a.local ? cdiv(a.N, a.bn) : 1);
  a.dbg[3 * rows + 8 * blockIdx.x + i] = v >= 0.0 ? v : (double)t;
}
#else
__device__ __forceinline__ void fix_stamp(const Args&, int, double = -1.0) {}
#endif

// Release a ring slot: the W half-tiles are multicast, so a slot is free for the producers of
// every CTA of the cluster only once all of their consumers are done with it.
// CLUSTER: a compile-time choice (the mainloop is instantiated for both): with a runtime test,
// ptxas predicated the cluster arrive and its release fences (MEMBAR.ALL.GPU, ERRBAR, CGAERRBAR),
// which then issued, and stalled, at every k-step of the unclustered kernel (ncu, run 20f).
template <bool CLUSTER>
__device__ __forceinline__ void release_slot(Smem& sm, int slot, uint32_t rank) {
  mbar_arrive(&sm.empty[slot]);
  if constexpr (CLUSTER) mbar_arrive_cluster(&sm.empty[slot], rank ^ 1u);
}

// The columns of k-step ks inside K: BK but on K's last k-step. In 32 bits, taken before the k-loop:
// 64-bit arithmetic there took uniform registers the loop ran short of, and its step counter went to
// the vector datapath (+6 instructions a k-step, NOTES_gemm.md session 55).
struct KCols {
  int whole, last;  // K's whole k-steps, its last one's columns
  __device__ explicit KCols(int64_t K) : whole((int)(K / BK)), last((int)(K % BK)) {}
  __device__ int operator()(int ks) const { return ks < whole ? BK : last; }
};

// The tile-local check's x range, from the consumers' own A fragments (mainloop_local): a thread
// holds rows g = lane / 4 and g + 8 of its warp's 16 and, of each k16, columns 2 q, 2 q + 1 and
// 2 q + 8, 2 q + 9 (q = lane % 4): the wgmma A layout, as ldmatrix.x4 loads it.
template <typename T>
struct FragRange {
  uint32_t mx[2], mn[2];  // packed pairs, rows g and g + 8

  __device__ void reset() { mx[0] = mx[1] = kNegInf2<T>; mn[0] = mn[1] = kPosInf2<T>; }
  // One k-step's fragments. Columns past K (the TMA's zero fill on K's last k-step) count as well:
  // zeros can only widen the range to 0 (max >= 0 >= min), which widens the threshold's variance
  // bound (mx - mu)(mu - mn): looser for a row of one sign, never tighter. No selects: three-input
  // min / max over the fragments as they are (NOTES_gemm.md session 56).
  __device__ __forceinline__ void step(const uint32_t (&a)[BK / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      mx[0] = hmax2<T>(mx[0], hmax2<T>(a[kk][0], a[kk][2])); mn[0] = hmin2<T>(mn[0], hmin2<T>(a[kk][0], a[kk][2]));
      mx[1] = hmax2<T>(mx[1], hmax2<T>(a[kk][1], a[kk][3])); mn[1] = hmin2<T>(mn[1], hmin2<T>(a[kk][1], a[kk][3]));
    }
  }
  // Another split's range of the same rows (split K), as stored: max g, min g, max g + 8, min g + 8.
  __device__ void fold(const float4& o) {
    mx[0] = hmax2<T>(mx[0], __float_as_uint(o.x)); mn[0] = hmin2<T>(mn[0], __float_as_uint(o.y));
    mx[1] = hmax2<T>(mx[1], __float_as_uint(o.z)); mn[1] = hmin2<T>(mn[1], __float_as_uint(o.w));
  }
  __device__ float4 stored() const {
    return make_float4(__uint_as_float(mx[0]), __uint_as_float(mn[0]), __uint_as_float(mx[1]), __uint_as_float(mn[1]));
  }
  // Row g + 8 h's max and min over K: both halves of the pairs, then the quad's four threads.
  __device__ void joined(int h, float& x, float& n) const {
    const float2 a = Elem<T>::unpack(h ? mx[1] : mx[0]), b = Elem<T>::unpack(h ? mn[1] : mn[0]);
    x = fmaxf(a.x, a.y); n = fminf(b.x, b.y);
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
      n = fminf(n, __shfl_xor_sync(0xffffffffu, n, o));
    }
  }
};

// x-side of the row check for one row of a tile: sum x, max x, min x for the V-ABFT threshold and
// x . sum_n W[n] (the check), built while the wgmmas run (the warps would only wait otherwise):
// thread (row, half) covers 4 of the 8 16-byte chunks of a statistics k-step. The statistics
// k-steps of a tile are every T_N-th one from its N-tile index, so the T_N tiles of an M-tile cover
// K once between them. (x . sum_n (n+1) W[n], which locates a fault, is taken by the correction
// itself: in this loop it doubled the statistics' shared-memory reads, the port a statistics k-step
// overfills: NOTES_gemm.md, run 20.)
template <typename T>
struct XStats {
  uint32_t mx, mn;  // packed pairs
  float sum, dot;
  int row, half;    // row of the 128-row tile, which 4 chunks

  __device__ void reset() { sum = 0.f; dot = 0.f; mx = kNegInf2<T>; mn = kPosInf2<T>; }
  // r: the k-step's columns inside K (BK but on K's last k-step).
  __device__ __forceinline__ void step(uint32_t a_tile, uint32_t wc, int r) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int ch = 4 * half + j;
      const bool in_k = ch * 8 < r;
      // Past K (zero fill) a real chunk of the row instead, without a branch (a branch here makes
      // ptxas serialise the wgmmas in flight, C7518): its sums are dropped below. 128-byte swizzle:
      // chunk c of row r sits at chunk c ^ (r % 8) (conflict-free: see NOTES).
      const uint4 v = lds128(a_tile + row * 128 + (((in_k ? ch : 0) ^ (row & 7)) << 4));
      // (the W sums past K are whatever the slot held: dropped by the selects below)
      const uint32_t wj = wc + 4 * (half * WC_HALF + 8 * j);
      const float4 w0 = lds128f(wj), w1 = lds128f(wj + 16);
      const float2 f0 = Elem<T>::unpack(v.x), f1 = Elem<T>::unpack(v.y), f2 = Elem<T>::unpack(v.z),
                   f3 = Elem<T>::unpack(v.w);
      const float sj = ((f0.x + f0.y) + (f1.x + f1.y)) + ((f2.x + f2.y) + (f3.x + f3.y));
      float d = f0.x * w0.x;
      d = fmaf(f0.y, w0.y, d); d = fmaf(f1.x, w0.z, d); d = fmaf(f1.y, w0.w, d);
      d = fmaf(f2.x, w1.x, d); d = fmaf(f2.y, w1.y, d); d = fmaf(f3.x, w1.z, d); d = fmaf(f3.y, w1.w, d);
      sum += in_k ? sj : 0.f;
      dot += in_k ? d : 0.f;
      mx = hmax2<T>(mx, hmax2<T>(hmax2<T>(v.x, v.y), hmax2<T>(v.z, v.w)));
      mn = hmin2<T>(mn, hmin2<T>(hmin2<T>(v.x, v.y), hmin2<T>(v.z, v.w)));
    }
  }

  // Joins the two halves of the row (lanes 2i, 2i+1) and adds them to the row's workspace entries.
  __device__ void flush(const Ws& ws, int64_t flat_row, bool in_range) {
    float s = sum, d = dot;
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    d += __shfl_xor_sync(0xffffffffu, d, 1);
    const float2 a = Elem<T>::unpack(mx), b = Elem<T>::unpack(mn);
    float x = fmaxf(a.x, a.y), n = fminf(b.x, b.y);
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    n = fminf(n, __shfl_xor_sync(0xffffffffu, n, 1));
    if (half == 0 && in_range) {
      atomicAdd(ws.c1() + flat_row, (double)d);
      atomicAdd(ws.sx() + flat_row, (double)s);
      atomic_max_f32(ws.mx() + flat_row, x);
      atomic_min_f32(ws.mn() + flat_row, n);
    }
  }
};

// The pipelined k-loop of one consumer warpgroup over the nk k-steps of a tile; with PROTECT the
// x statistics of the k-steps ks = stats_nt (mod tn_n) are taken while the wgmmas run (a counter,
// not a modulo: the integer division sat between the stage's arrival and the wgmma issue).
template <typename T, bool PROTECT, int BN, bool CLUSTER>
__device__ __forceinline__ void mainloop(float* acc, Smem& sm, uint8_t* base, int kb, int ke, int& it, int wgc,
                                         int lane, uint32_t rank, XStats<T>& xs, int stats_ks,
                                         int tn_n, int64_t K) {
  using TL = Tiles<BN, false>;
  const int nk = ke - kb;
  const KCols kcols(K);
  for (int ks = kb; ks < ke; ++ks, ++it) {
    const int slot = it % TL::STAGES;
    mbar_wait(&sm.full[slot], (it / TL::STAGES) & 1);
    uint8_t* stage = base + slot * TL::STAGE_BYTES;
    const uint64_t da = desc_k_sw128(smem_u32(stage) + wgc * 64 * 128), db = desc_k_sw128(smem_u32(stage + A_BYTES));
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_ss<T, BN>(acc, da + 2 * kk, db + 2 * kk, (ks - kb | kk) != 0);
    wgmma_commit();
    // The statistics read the slot through the generic proxy: fenced before its release
    // (fence_proxy_async_smem), and the warp's lanes meet before lane 0 releases it.
    if constexpr (PROTECT && !(FTG_ABLATE & 2)) {
      if (ks == stats_ks) {
        xs.step(smem_u32(stage), smem_u32(&sm.wc[slot][0]), kcols(ks));
        fence_proxy_async_smem();
        stats_ks += tn_n;
      }
    }
    wgmma_wait<1>();
    if constexpr (PROTECT) __syncwarp();
    if (ks > kb && lane == 0) release_slot<CLUSTER>(sm, (it - 1) % TL::STAGES, rank);
  }
  // The last stage is released once its wgmma retired. The wait is unconditional: under a branch
  // (nk > 0) ptxas serialises every wgmma of the loop once the statistics share it (C7518).
  wgmma_wait<0>();
  if constexpr (PROTECT) __syncwarp();
  if (nk > 0 && lane == 0) release_slot<CLUSTER>(sm, (it - 1) % TL::STAGES, rank);
}

// The tile-local check's k-loop: the wgmma covers the tile's checksum rows too (N = BN + 8), and A
// comes through ldmatrix into registers (the wgmma's A from registers), where FragRange takes x's
// range: x is read from shared memory once, as in the unprotected kernel. (Warps of the producer
// warpgroup reading the A tiles for the range cost 1-10 %: NOTES_gemm.md, run 31b.) The k-steps go in
// pairs with two fragment buffers, so a step's loads do not overwrite the registers its predecessor's
// wgmmas, still in flight, read. ldmatrix reads a slot through the generic proxy: fenced before its
// release, and the warp's lanes meet before lane 0 releases it.
template <typename T, int BN, bool CLUSTER>
__device__ __forceinline__ void mainloop_local(float* acc, Smem& sm, uint8_t* base, int kb, int ke, int& it, int wgc,
                                               int wi, int lane, uint32_t rank, FragRange<T>& fr) {
  using TL = Tiles<BN, true>;
  constexpr int N = (FTG_ABLATE & 16) ? BN : TL::NW;
  const int r8 = lane & 7;
  // This lane's ldmatrix address in a stage: matrices 0 / 1 are rows 0-7 / 8-15 of the warp's 16 at
  // chunk 2 kk, 2 / 3 the same rows one chunk on. 128-byte swizzle: chunk c of row r sits at chunk
  // c ^ (r % 8); 2 kk + (lane >> 4) = 2 kk | (lane >> 4), so k16 kk's address is k16 0's ^ 32 kk.
  const uint32_t a_lane = (uint32_t)(wgc * 64 + wi * 16 + r8 + 8 * ((lane >> 3) & 1)) * 128 + (((lane >> 4) ^ r8) << 4);
  auto step = [&](int ks, uint32_t (&a)[BK / 16][4]) {
    const int slot = it % TL::STAGES;
    mbar_wait(&sm.full[slot], (it / TL::STAGES) & 1);
    const uint32_t stage = smem_u32(base + slot * TL::STAGE_BYTES);
    const uint64_t db = desc_k_sw128(stage + A_BYTES);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) ldsm_x4(a[kk], (stage + a_lane) ^ (32 * kk));
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_rs<T, N, 0>(acc, a[kk], db + 2 * kk);
    wgmma_commit();
    wgmma_wait<1>();
    __syncwarp();
    if (ks > kb && lane == 0) release_slot<CLUSTER>(sm, (it - 1) % TL::STAGES, rank);
    // After the previous slot's release, off its path (where W streams, each slot's hold time
    // bounds the bytes in flight: NOTES_gemm.md, runs 37c-d): this slot's reads fenced before its
    // own release, one step on, and the range.
    fence_proxy_async_smem();
    if constexpr (!(FTG_ABLATE & 2)) fr.step(a);
    ++it;
  };
  uint32_t a0[BK / 16][4], a1[BK / 16][4];
  int ks = kb;
  for (; ks + 1 < ke; ks += 2) {
    step(ks, a0);
    step(ks + 1, a1);
  }
  if (ks < ke) step(ks, a0);
  wgmma_wait<0>();
  __syncwarp();  // (the last slot's reads were fenced in its step)
  if (ke > kb && lane == 0) release_slot<CLUSTER>(sm, (it - 1) % TL::STAGES, rank);
}

// W's loads under an L2 evict-first policy? With at most two M-tiles (few rows: the call streams W,
// bandwidth-bound) the M-tiles of an N-tile are consecutive units, run at once, so W's lines are
// dead after their first reads and may leave L2 first (the thread kernels' policy: NOTES_gemm.md,
// runs 35d and 46a). With more, later M-tile groups read W again through L2: the plain load (an
// explicit evict-normal policy cost 5-20 % there, run 46f). -DFTG_GLOBAL_DEFAULT_L2: never, for the A/B.
__device__ __forceinline__ bool w_evict_first(int tm_n) {
#ifdef FTG_GLOBAL_DEFAULT_L2
  return false;
#else
  return tm_n <= 2;
#endif
}

// Units of a call of `tiles` cluster tiles: those from `split_from` on are split K-wise into `split`
// consecutive units each (split_from 0: every tile, where the tiles leave SMs idle; the first tile
// of the last wave: the last wave's tiles shared out over its idle SMs), the others are one unit.
__host__ __device__ inline int split_units(int tiles, int split, int split_from) {
  return split_from + (tiles - split_from) * split;
}

// A unit of work: tile (b, mt, nt), K split s of its ns over k-steps [kb, ke), id: the tile's index
// among the split tiles' CTA tiles (its partial slots and flag when K is split).
struct TileCoord { int b, mt, nt, s, ns, kb, ke, id; };
// The tile's first own row: a shifted tile's rows [Grid::row0, lo_row) belong to the previous M-tile.
__device__ __forceinline__ int64_t lo_row(const TileCoord& c) { return (int64_t)c.mt * BM; }
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

// The persistent schedule: the problem in tiles and this CTA's share of them. Each role builds its
// own after the register split, from an opaque zero: values computed once before the split were
// spilled for WG0's small register budget and the consumers reloaded them from L2 (the
// shared-memory carve-out leaves L1 little room) inside the k-loop and the epilogue.
struct Grid {
  int64_t M, N, K;
  int cl, tm_n, tn_n, nk, tm_c, splits, tail0, total, cid, ncl;
  uint32_t rank;
  __device__ Grid(const Args& a, int zero, int bn) {
    M = a.M + zero; N = a.N + zero; K = a.K + zero;
    cl = a.cluster + zero;  // CTAs of a cluster take adjacent M-tiles of one N-tile
    rank = cl > 1 ? cluster_rank() : 0u;
    tm_n = cdiv(M, BM); tn_n = cdiv(N, (int64_t)bn); nk = cdiv(K, BK);
    tm_c = cdiv(tm_n, cl);  // M-tiles in units of clusters
    splits = a.split + zero;  // K splits per split tile (units: a tile's splits are consecutive)
    tail0 = a.split_from + zero;  // cluster tiles before it run whole (0: every tile is split)
    total = split_units((int)a.batch * tm_c * tn_n, splits, tail0);
    cid = blockIdx.x / cl; ncl = gridDim.x / cl;
  }
  // The first row of x that M-tile mt's A box loads. A partial last M-tile loads the last BM rows
  // of x instead of rows past M: TMA fills out-of-bounds rows slowly, ~3 ns a row and stage (129
  // rows of x took 32 us at 4096^2 against 21 for 256; runs 46d-e). Its first
  // mt * BM - r0 rows are the previous tile's: computed again and masked (lo_row) wherever rows
  // leave the tile. -DFTG_NO_XSHIFT: the box at mt * BM always, for the A/B.
  __device__ int row0(int mt) const {
    const int64_t r = (int64_t)mt * BM;
#ifdef FTG_NO_XSHIFT
    return (int)r;
#else
    return (r < M && r + BM > M && M >= BM) ? (int)(M - BM) : (int)r;
#endif
  }
  // A cluster unit -> this CTA's unit (its M-tile may lie past M: it still feeds the multicast).
  __device__ TileCoord tile(int u) const {
    const bool whole = u < tail0;
    const int t = whole ? u : tail0 + (u - tail0) / splits;
    TileCoord c = tile_coord(t, tm_c, tn_n);
    c.mt = c.mt * cl + (int)rank;
    c.ns = whole ? 1 : splits;
    c.s = whole ? 0 : u - tail0 - (t - tail0) * splits;
    c.kb = c.s * nk / c.ns;
    c.ke = (c.s + 1) * nk / c.ns;
    c.id = (t - tail0) * cl + (int)rank;
    return c;
  }
  // The first statistics k-step of unit c: the tile's are ks = nt (mod tn_n) (see mainloop).
  __device__ int first_stats_ks(const TileCoord& c) const { return c.kb + ((c.nt - c.kb) % tn_n + tn_n) % tn_n; }
};

template <typename T>
__device__ __forceinline__ float bias_at(const Args& a, int64_t n) {
  return (a.bias && n < a.N) ? Elem<T>::to_f(static_cast<const T*>(a.bias)[n]) : 0.f;
}

// W's row of output column n (of batch b): in a group (Args.groups), of the member holding n.
template <typename T>
__device__ const T* w_row(const Args& a, int64_t b, int64_t n) {
  const int j = a.member_of(n);
  return static_cast<const T*>(j ? a.gw[j - 1] : a.w) + b * a.w_bstride + (n - a.member_col0(j)) * a.w_rstride;
}

// W's TMA descriptors: one per member of a group (Args.groups; [0] alone otherwise).
struct WMaps {
  CUtensorMap m[kMaxGroup];
};

// Sum over the correction's FIX_THREADS threads, the same value in every thread (one order).
__device__ __forceinline__ double group_sum(double v, int idx, double* red) {
  v = warp_sum(v);
  if (idx % 32 == 0) red[idx / 32] = v;
  named_bar_sync(FIX_BAR, FIX_THREADS);
  double s = 0.0;
#pragma unroll
  for (int w = 0; w < FIX_WARPS; ++w) s += red[w];
  named_bar_sync(FIX_BAR, FIX_THREADS);
  return s;
}

// Locate, correct and recheck one flagged row; the consumers' FIX_THREADS threads (idx) after
// their last tile (rare path). The dots are batched: 2 chunks per thread in flight, one round trip
// per 4096 of K (the located element's W row waits for the weighted dot's position). Wider
// batches were slower: this code runs once per call from a cold instruction cache, ~60 ns per
// 128-byte line, and 8 chunks per thread made it 3x longer.
// True when the row passes its recheck after the correction.
template <typename T>
__device__ bool fixup_row(const Args& a, const FixJob& j, int idx, Smem& sm) {
  constexpr int NB = 2;  // chunks per thread and batch (NOTES_gemm.md, run 22b)
  double* red = sm.red;
  const int64_t N = a.N, K = a.K, row = (int64_t)j.b * a.M + j.m;
  T* yrow = static_cast<T*>(a.y) + row * a.ldy;
  const T* xrow = static_cast<const T*>(a.x) + j.b * a.x_bstride + j.m * a.x_rstride;
  const float u = Elem<T>::kUnitRoundoff, d1 = j.d1;
  int p = -1;
  if (isfinite(d1)) {
    // x . sum_n (n+1) W[n], the weighted check (in fp64: the ratio divides a difference of large sums)
    const float* wsum2 = a.wsum + (int64_t)j.b * 2 * K + K;
    const double c2 =
        group_sum(batched_dot_f64<T, NB>(xrow, wsum2, K, idx, FIX_THREADS), idx, red) + (a.bias ? a.bstats[1] : 0.0);
    if (idx == 0) fix_stamp(a, 6);
    const double ratio = (j.s2 - c2) / (double)d1;
    const double near = rint(ratio);
    if (isfinite(ratio) && fabs(ratio - near) < 0.3 && near >= 1 && near <= (double)N) p = (int)near - 1;
  } else {  // a non-finite element: found by value when it is the only one
    double cnt = 0.0;
    int pos = -1;
    for (int64_t n = idx; n < N; n += FIX_THREADS)
      if (!isfinite(Elem<T>::to_f(__ldcg(yrow + n)))) { cnt += 1.0; pos = (int)n; }
#pragma unroll
    for (int o = 16; o; o >>= 1) pos = max(pos, __shfl_xor_sync(0xffffffffu, pos, o));
    if (idx % 32 == 0) sm.pos[idx / 32] = pos;
    if (group_sum(cnt, idx, red) == 1.0) {  // (its barriers publish pos[] too)
#pragma unroll
      for (int w = 0; w < FIX_WARPS; ++w) p = max(p, sm.pos[w]);
    }
  }
  bool ok = false;
  if (p >= 0) {
    // The stored element's load goes out with the dot's: one round trip for both, not two in turn.
    const float yold = Elem<T>::to_f(__ldcg(yrow + p));
    const float t =
        (float)group_sum(batched_dot<T, NB>(xrow, w_row<T>(a, j.b, p), K, idx, FIX_THREADS), idx, red) + bias_at<T>(a, p);
    if (idx == 0) fix_stamp(a, 7);
    if (isfinite(d1) && isfinite(yold)) {
      // The faulty fp32 value is gone (stored rounded): allow its rounding error in the recheck.
      ok = !exceeds(d1 - (yold - t), j.thr + u * fabsf(yold));
    } else {  // non-finite sum or stored element: recheck the stored row with the correction in
      float sv = 0.f, sa = 0.f;
      for (int64_t n = idx; n < N; n += FIX_THREADS) {
        const float v = (n == p) ? t : Elem<T>::to_f(__ldcg(yrow + n));
        sv += v; sa += fabsf(v);
      }
      const double ss = group_sum(sv, idx, red), sas = group_sum(sa, idx, red);
      ok = !exceeds((float)(ss - j.c1), j.thr + u * (float)sas);
    }
    if (idx == 0) yrow[p] = Elem<T>::from_f(t);
  }
  if (!ok && a.policy == kRecompute) {  // the whole row, one element per warp at a time
    for (int64_t n = idx / 32; n < N; n += FIX_WARPS) {
      const float t = warp_dot(xrow, w_row<T>(a, j.b, n), K, idx % 32) + bias_at<T>(a, n);
      if (idx % 32 == 0) yrow[n] = Elem<T>::from_f(t);
    }
  }
  named_bar_sync(FIX_BAR, FIX_THREADS);  // the next row's sums may reuse red[] once every thread read it
  return ok;
}

// Tile-local check: one flagged row of a tile, by its warp (every lane, the same arguments) after
// the warp's last tile, or by the fixer warp (FIXER: a copy of its own; rare path, out of line: its
// registers stay off the consumers' loop).
// The fault is located by the weighted sum (or, where the sum is not finite, as the tile row's
// only non-finite stored element), the element recomputed and rechecked against what was stored
// (allowing the stored value's rounding: its fp32 value is gone), then stored. True when
// corrected; under policy recompute an uncorrectable tile row is recomputed whole.
template <typename T, int FIXER>
__device__ __noinline__ bool fix_tile_row(const Args& a, int b, int64_t m, int64_t n0, int cols, float c1, float s2,
                                          float c2, float d1, float thr, int lane) {
  const int64_t K = a.K;
  T* yrow = static_cast<T*>(a.y) + ((int64_t)b * a.M + m) * a.ldy + n0;
  const T* xrow = static_cast<const T*>(a.x) + b * a.x_bstride + m * a.x_rstride;
  const T* W = w_row<T>(a, b, n0);  // (a tile lies in one member of a group)
  const float u = Elem<T>::kUnitRoundoff;
  int p = -1;
  if (isfinite(d1)) {
    const float ratio = (s2 - c2) / d1 * (float)W_DEN;  // p + 1 for a single fault
    const float near = rintf(ratio);
    if (isfinite(ratio) && fabsf(ratio - near) < 0.3f && near >= 1.f && near <= (float)cols) p = (int)near - 1;
  } else {
    int cnt = 0, pos = -1;
    for (int c = lane; c < cols; c += 32)
      if (!isfinite(Elem<T>::to_f(__ldcg(yrow + c)))) { ++cnt; pos = c; }
    cnt = warp_sum(cnt);
#pragma unroll
    for (int o = 16; o; o >>= 1) pos = max(pos, __shfl_xor_sync(0xffffffffu, pos, o));
    if (cnt == 1) p = pos;
  }
  bool ok = false;
  if (lane == 0) fix_stamp(a, 6);
  if (p >= 0) {
    const float yold = Elem<T>::to_f(__ldcg(yrow + p));
    const float t = warp_dot(xrow, W + p * a.w_rstride, K, lane) + bias_at<T>(a, n0 + p);
    if (lane == 0) fix_stamp(a, 7);
    if (isfinite(d1) && isfinite(yold)) {
      ok = !exceeds(d1 - (yold - t), thr + u * fabsf(yold));
    } else {  // recheck the stored tile row with the correction in
      float sv = 0.f, sa = 0.f;
      for (int c = lane; c < cols; c += 32) {
        const float v = c == p ? t : Elem<T>::to_f(__ldcg(yrow + c));
        sv += v; sa += fabsf(v);
      }
      sv = warp_sum(sv); sa = warp_sum(sa);
      ok = !exceeds(sv - c1, thr + u * sa);
    }
    if (ok && lane == 0) yrow[p] = Elem<T>::from_f(t);
  }
  if (!ok && a.policy == kRecompute) {
    for (int c = 0; c < cols; ++c) {
      const float t = warp_dot(xrow, W + c * a.w_rstride, K, lane) + bias_at<T>(a, n0 + c);
      if (lane == 0) yrow[c] = Elem<T>::from_f(t);
    }
  }
  return ok;
}

// The consumers' thread 0: the next flagged slot f to correct, as soon as a verifier warp wrote it,
// or -1 once every verifier warp is done and no row took slot f. Slots fill in order of their
// atomic, not of their writes: slot f is waited for even if a later one is ready.
__device__ int next_fix(Smem& sm, int f) {
  if (f >= FIX_CAP) return -1;
  while (true) {
    const bool done = ld_acquire_cta(&sm.fix_done) == VERIFIER_WARPS;  // every slot written before
    if (ld_acquire_cta(&sm.fix_ready[f])) return f;
    if (done) return -1;
    __nanosleep(128);
  }
}

// The consumers (FIX_THREADS) correct the CTA's flagged rows after their last tile: rows of the
// M-tiles verified earlier at once, while the verifier warps finish the last ones (a correction
// waiting for the whole list was the kernel's tail: ~3 us plus ~1 us per 1000 of K at 128
// threads, NOTES_gemm.md run 21). Telemetry: the corrected and the uncorrectable rows.
template <typename T>
__device__ void correct_flagged(const Args& a, Smem& sm, int ct) {
  int ncorr = 0, nunc = 0;
  for (int f = 0;; ++f) {
    if (ct == 0) sm.fix_next = next_fix(sm, f);
    named_bar_sync(FIX_BAR, FIX_THREADS);  // fix_next, and (acquired by thread 0) the slot's job
    if (sm.fix_next < 0) break;  // (rewritten only after fixup_row's barriers: every thread read it)
    if (ct == 0) fix_stamp(a, 1);
    if (fixup_row<T>(a, sm.fix[f], ct, sm)) ++ncorr;
    else ++nunc;
  }
  if (ct == 0) {
    fix_stamp(a, 2);
    fix_stamp(a, 3, (double)(ncorr + nunc));
    if (ncorr + nunc) add_outcomes(a, 0, ncorr, nunc);
  }
}

// Verify the rows of M-tile (b, mt) once every N-tile's sums are in (the verifier warps of the CTA
// holding the last ticket: warp vw of the three takes the 32-row groups vw and vw + 3, so a row's
// loads wait one round trip instead of four in turn: the last M-tiles' verification is the
// kernel's tail); resets the rows' workspace for the next call. Flagged rows (policies that
// correct) take a slot of the CTA's fix list, corrected by the consumers (correct_flagged; in this
// loop, the correction's registers made ptxas spill the verifier's hot values). Rows past the
// list's room are counted uncorrectable. Returns whether a row had non-finite inputs.
template <typename T>
__device__ bool verify_rows(const Args& args, const Ws& ws, int b, int mt, int lane, int vw, Smem& sm) {
  const int64_t M = args.M, N = args.N, K = args.K;
  int ndet = 0, lost = 0;
  bool invalid = false;
  const bool fix = args.policy == kCorrect || args.policy == kRecompute;
#pragma unroll 1
  for (int i = vw; i < BM / 32; i += 3) {
    const int64_t m = (int64_t)mt * BM + lane + 32 * i;
    bool flagged = false;
    float d1 = 0.f, thr = 0.f;
    double s2 = 0.0, c1 = 0.0;
    if (m < M) {
      const int64_t row = b * M + m;
      const double s1 = __ldcg(ws.s1() + row), sx = __ldcg(ws.sx() + row);
      s2 = __ldcg(ws.s2() + row);
      c1 = __ldcg(ws.c1() + row);
      const float mx = __ldcg(ws.mx() + row), mn = __ldcg(ws.mn() + row);
      ws.s1()[row] = 0.0; ws.s2()[row] = 0.0; ws.c1()[row] = 0.0; ws.sx()[row] = 0.0;
      ws.mx()[row] = -INFINITY; ws.mn()[row] = INFINITY;
      if (args.bias) c1 += args.bstats[0];
      const bool valid = isfinite(sx) && isfinite(c1) && *args.wfinite;
      if (!valid) {
        invalid = true;
      } else {
        const float mu = (float)(sx / (double)K);
        const float var = fmaxf(0.f, (mx - mu) * (mu - mn));
        thr = vabft_threshold(mu, var, (float)N, args.wstats + 3 * b, args.e, args.c_sigma);
        if (args.bias) thr += args.e * (float)args.bstats[2];
        d1 = (float)(s1 - c1);
        flagged = exceeds(d1, thr);
      }
      if (args.dbg) {
        args.dbg[3 * row] = s1; args.dbg[3 * row + 1] = c1; args.dbg[3 * row + 2] = valid ? thr : -1.0;
      }
    }
    ndet += __popc(__ballot_sync(0xffffffffu, flagged));
    if (fix && flagged) {
      const int slot = atomicAdd(&sm.nfix, 1);
      if (slot < FIX_CAP) {
        sm.fix[slot] = FixJob{s2, c1, d1, thr, b, (int)m};
        st_release_cta(&sm.fix_ready[slot], 1);
      } else {
        ++lost;
      }
    }
  }
  lost = warp_sum(lost);
  if (lane == 0) add_outcomes(args, ndet, 0, lost);
  return __any_sync(0xffffffffu, invalid);
}

// Tile-local check: a listed row (Smem::tfix) is corrected by its consumer warp after the tile
// loop where it was flagged in the CTA's last unit (kOwnRow), otherwise by WG0's fixer warp while
// the consumers go on (kFixerRow, fix_handed_over), so a fault found before a CTA's last tile no
// longer lands on the call's tail (NOTES_gemm.md session 54). The entry's word in Smem::fix_ready,
// stored with release by the lane that wrote the entry after the tile's stores, says which.
constexpr int kFixerRow = 1, kOwnRow = 2;

// The listed rows of `list` (n of them in the list, `lost` more past it: uncorrectable) whose
// word in `ready` is `whose`, corrected one after another by the calling warp and counted by lane
// 0. Correcting inside the tile loop (the loops and the call right after the tile's store) cost
// the whole loop its uniform datapath: descriptors and barrier addresses in vector registers, R2UR
// before every wgmma, the x range interleaved with the wgmma issue: 3-15 % at every shape
// (NOTES_gemm.md run 25). FIXER: the fixer warp's own copy, compiled for WG0's 24 registers.
template <typename T, int BN, int FIXER>
__device__ void fix_listed(const Args& args, const TileFix* list, const int* ready, int whose, int n, int lost,
                           int lane) {
  int ncorr = 0, nunc = lost;
  for (int i = 0; i < n; ++i) {
    if (ready[i] != whose) continue;
    const TileFix f = list[i];
    const int cols = (int)min((int64_t)BN, args.N - f.n0);
    if (lane == 0) fix_stamp(args, 1);
    fix_tile_row<T, FIXER>(args, f.b, f.m, f.n0, cols, f.c1, f.s2, f.c2, f.d1, f.thr, lane) ? ++ncorr : ++nunc;
  }
  if (lane == 0 && ncorr + nunc) {
    fix_stamp(args, 2);
    fix_stamp(args, 3, (double)(ncorr + nunc));
    add_outcomes(args, 0, ncorr, nunc);
  }
}

// The fixer warp (WG0's warp 1; tile-local check, correcting policies): each lane watches one list
// entry's word (FIX_CAP = 32), and the warp corrects the kFixerRow entries as they appear, until
// every consumer warp is past its tile loop. It polls with a short sleep: a warp that wakes a few
// times a microsecond takes no measurable issue slots, and its last wake-up follows the consumers'
// loops within ~0.2 us, under their end-of-call report. In a CTA of one unit it finds nothing to
// do (testing for that took the schedule's values, and ptxas then spilled the producer's loop in
// the same 24 registers: NOTES_gemm.md session 54). Out of line, for the same reason.
template <typename T, int BN>
__device__ __noinline__ void fix_handed_over(const Args& args, Smem& sm, int lane) {
  static_assert(FIX_CAP == 32, "a lane per list entry");
  if (args.policy != kCorrect && args.policy != kRecompute) return;
  unsigned taken = 0;
  while (true) {
    const bool fin = ld_acquire_cta(&sm.fix_fin) == FIX_WARPS;  // every entry's word stored before
    unsigned todo = __ballot_sync(0xffffffffu, ld_acquire_cta(&sm.fix_ready[lane]) == kFixerRow) & ~taken;
    taken |= todo;
    if (todo) __syncwarp();  // what the entries' lanes acquired, to the whole warp
    while (todo) {
      const int i = __ffs(todo) - 1;
      todo &= todo - 1;
      fix_listed<T, BN, 1>(args, sm.tfix + i, sm.fix_ready + i, kFixerRow, 1, 0, lane);
    }
    if (fin) return;
    __nanosleep(128);
  }
}

// Tile-local check: what a tile's check needs besides its accumulators, loaded when the tile
// starts and used a mainloop later (loaded in the check, the loads' latency and a division's
// slow-path call sat on the epilogue's chain while both consumer warpgroups, so the tensor cores,
// waited for it: NOTES_gemm.md run 25).
struct TileTerms {
  float2 btile;    // the bias's tile sums (plain, weighted), zero without bias
  float wst[3];    // the batch's W statistics (vabft_threshold)
  float bias_thr;  // the bias's threshold term
  float inv_k;     // 1 / K (x's mean)
  int wfin;        // W is finite
  __device__ TileTerms() {}  // (the row check: unused)
  __device__ TileTerms(const Args& a, const TileCoord& c, int64_t K) {
    btile = a.btile ? __ldg(reinterpret_cast<const float2*>(a.btile) + (int64_t)c.nt) : make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < 3; ++i) wst[i] = __ldg(a.wstats + 3 * c.b + i);
    bias_thr = a.bias ? a.e * (float)__ldg(a.bstats + 2) : 0.f;
    inv_k = 1.f / (float)K;
    wfin = __ldg(a.wfinite);
  }
};

// This thread's output row sums over a tile (rows r_lo: a, r_hi: b), plain (s1) and, WEIGHTED,
// weighted by the tile-local position / W_DEN (s2; weights <= 1: a huge faulty value cannot
// overflow it). Column 8 j + 2 q + e weighs (8 j + 2 q + e + 1) / 256 = j / 32 + (2 q + 1) / 256 +
// e / 256: summed as three parts with constant coefficients (per-lane weight tables were hoisted
// out of the tile loop by ptxas and spilled). Not yet quad-reduced.
template <int BN, bool WEIGHTED>
__device__ __forceinline__ void row_sums(const float* acc, int q, float& s1a, float& s1b, float& s2a, float& s2b) {
  float ta = 0.f, tb = 0.f, ua = 0.f, ub = 0.f;
  s1a = s1b = 0.f;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const float pa = acc[4 * j] + acc[4 * j + 1], pb = acc[4 * j + 2] + acc[4 * j + 3];
    s1a += pa; s1b += pb;
    if constexpr (WEIGHTED) {
      ta = fmaf((float)j * (1.f / 32), pa, ta); tb = fmaf((float)j * (1.f / 32), pb, tb);
      ua += acc[4 * j + 1]; ub += acc[4 * j + 3];
    }
  }
  static_assert(W_DEN == 256, "the weights' parts above: 8 j / W_DEN = j / 32");
  const float wq = (float)(2 * q + 1) * (1.f / W_DEN);
  s2a = WEIGHTED ? ta + fmaf(wq, s1a, ua * (1.f / W_DEN)) : 0.f;
  s2b = WEIGHTED ? tb + fmaf(wq, s1b, ub * (1.f / W_DEN)) : 0.f;
}

// Tile-local check of one warp's 16 rows of a tile, after its store: each row's output sum over
// the tile (s1, quad-reduced; acc: the tile's accumulators, from which a warp with a flagged row
// takes the weighted sums s2 for the correction) against the checksum columns (cs: the last n8
// block of the accumulators; this thread holds columns 2q, 2q + 1 of rows r_lo
// (cs[0], cs[1]) and r_hi (cs[2], cs[3]): 0-2 the hi / mid / lo parts of x . sum W, 3-5 of the
// weighted sum, 6 sum x), with the V-ABFT threshold of BN terms from x's mean and range (xmx,
// xmn: rows r_lo, r_hi). Flagged rows are counted by lane 0 and, under the policies that correct,
// listed (the warp's `list`, `nfix` rows so far) for their correction: by the fixer warp where the
// tile is not the CTA's last unit (hand_over), otherwise by the warp after its tile loop (kFixerRow
// / kOwnRow, fix_listed); rows with non-finite inputs mark the CTA (sm.bad).
template <typename T, int BN>
__device__ __forceinline__ void check_tile_rows(const Args& args, const float* acc, const float (&xmx)[2],
                                                const float (&xmn)[2], Smem& sm, const TileCoord& c, int64_t M,
                                                int tn_n, int64_t row_w, int lane, float s1a, float s1b,
                                                const TileTerms& tt, TileFix* list, int& nfix, bool hand_over) {
  const int q = lane % 4;
  const float* cs = acc + BN / 2;
  float c1a = q == 0 ? cs[0] + cs[1] : (q == 1 ? cs[0] : 0.f), c1b = q == 0 ? cs[2] + cs[3] : (q == 1 ? cs[2] : 0.f);
  float c2a = q == 1 ? cs[1] : (q == 2 ? cs[0] + cs[1] : 0.f), c2b = q == 1 ? cs[3] : (q == 2 ? cs[2] + cs[3] : 0.f);
  float sxa = q == 3 ? cs[0] : 0.f, sxb = q == 3 ? cs[2] : 0.f;
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    c1a += __shfl_xor_sync(0xffffffffu, c1a, o); c1b += __shfl_xor_sync(0xffffffffu, c1b, o);
    c2a += __shfl_xor_sync(0xffffffffu, c2a, o); c2b += __shfl_xor_sync(0xffffffffu, c2b, o);
    sxa += __shfl_xor_sync(0xffffffffu, sxa, o); sxb += __shfl_xor_sync(0xffffffffu, sxb, o);
  }
  const int64_t n0 = (int64_t)c.nt * BN;
  // one row: its check (c1, c2 scaled back, the bias's tile sums in), threshold and verdict
  auto row_check = [&](int h, float s1, float& c1, float& c2, float sx, float& d1, float& thr) {
    c1 = fmaf(c1, args.lscale_inv, tt.btile.x);
    c2 = fmaf(c2, args.lscale_inv, tt.btile.y);
    const float mu = sx * tt.inv_k, mx = xmx[h], mn = xmn[h];
    const float var = fmaxf(0.f, (mx - mu) * (mu - mn));
    thr = vabft_threshold(mu, var, (float)BN, tt.wst, args.e, args.c_sigma) + tt.bias_thr;
    d1 = s1 - c1;
    const int64_t m = row_w + lane / 4 + 8 * h;
    const bool mine = m >= lo_row(c) && m < M;  // (a shifted tile's first rows are the previous tile's)
    const bool valid = isfinite(sx) && isfinite(c1) && tt.wfin;
    if (mine && !valid) sm.bad = 1;
    if (args.dbg && q == 0 && mine) {
      double* d = args.dbg + 3 * (((int64_t)c.b * M + m) * tn_n + c.nt);
      d[0] = s1; d[1] = c1; d[2] = valid ? thr : -1.0;
    }
    return mine && valid && exceeds(d1, thr);
  };
  float d1a, d1b, ta, tb;
  const bool fa = row_check(0, s1a, c1a, c2a, sxa, d1a, ta);
  const bool fb = row_check(1, s1b, c1b, c2b, sxb, d1b, tb);
  const unsigned flag_a = __ballot_sync(0xffffffffu, fa && q == 0), flag_b = __ballot_sync(0xffffffffu, fb && q == 0);
  if (!(flag_a | flag_b)) return;
  if (lane == 0) add_outcomes(args, __popc(flag_a) + __popc(flag_b), 0, 0);
  if (args.policy != kCorrect && args.policy != kRecompute) return;
  // The weighted row sums, for the flagged rows' correction (the whole warp: the flags are ballots).
  float s2a, s2b;
  {
    float s1x, s1y;
    row_sums<BN, true>(acc, q, s1x, s1y, s2a, s2b);
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      s2a += __shfl_xor_sync(0xffffffffu, s2a, o); s2b += __shfl_xor_sync(0xffffffffu, s2b, o);
    }
  }
  // each flagged row's quad leader writes its entry (in lane order), past FIX_WARP only counted
  const unsigned before = (1u << lane) - 1u;
  const int ia = nfix + __popc(flag_a & before), ib = nfix + __popc(flag_a) + __popc(flag_b & before);
  // (the tile's stores of every lane are ordered before this by the epilogue's last __syncwarp)
  int* ready = sm.fix_ready + (list - sm.tfix);
  const int whose = FTG_FIXER && hand_over ? kFixerRow : kOwnRow;
  if (fa && q == 0 && ia < FIX_WARP) {
    list[ia] = TileFix{c.b, (int)(row_w + lane / 4), (int)n0, c1a, s2a, c2a, d1a, ta};
    st_release_cta(ready + ia, whose);
  }
  if (fb && q == 0 && ib < FIX_WARP) {
    list[ib] = TileFix{c.b, (int)(row_w + lane / 4 + 8), (int)n0, c1b, s2b, c2b, d1b, tb};
    st_release_cta(ready + ib, whose);
  }
  nfix += __popc(flag_a) + __popc(flag_b);
}

// Fault injection into the finished tile (no wgmma in flight: ptxas keeps the pipeline async).
// "output" faults hit the final fp32 value. An accumulator fault "after k-step t" changes the
// final value by corrupt(v_t) - v_t, v_t = the partial sum over the first 64(t+1) k (recomputed
// by the owner's warp, fp32, no bias): the same element ends up with the same error.
template <typename T, int BN>
__device__ void inject_tile(float* acc, const Args& a, const Injection& inj, const TileCoord& c, int64_t r_lo,
                            int lane) {
  const int64_t M = a.M, ib = inj.row / M, im = inj.row % M;
  const int64_t warp_row0 = r_lo - lane / 4;  // first row of this warp's 16
  if (ib != c.b || inj.col / BN != c.nt || im < warp_row0 || im >= warp_row0 + 16 || im < lo_row(c)) return;
  const int lr = (int)(im - warp_row0), lc = inj.col % BN;
  const bool owner = lane == (lr % 8) * 4 + (lc % 8) / 2;
  const int idx = 4 * (lc / 8) + 2 * (lr / 8) + (lc % 2);
  float v = 0.f;
#pragma unroll
  for (int r = 0; r < BN / 2; ++r) v = (r == idx) ? acc[r] : v;
  float after;
  if (inj.step >= 0) {
    const T* xr = static_cast<const T*>(a.x) + c.b * a.x_bstride + im * a.x_rstride;
    const T* wr = w_row<T>(a, c.b, inj.col);
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
    for (int r = 0; r < BN / 2; ++r) acc[r] = (r == idx) ? after : acc[r];
  }
}

template <typename T, bool PROTECT, bool INJECT, int BN, bool LOCAL>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_global_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ WMaps tmW,
                       const __grid_constant__ CUtensorMap tmC, const __grid_constant__ Args args) {
  static_assert(!LOCAL || (PROTECT && BN + 8 <= 256), "the tile-local check: protected, BN + 8 <= 256");
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* base = sm90::align_1024(smem_raw);
  using TL = Tiles<BN, LOCAL>;
  uint8_t* staging = base + TL::STAGES * TL::STAGE_BYTES;
  Smem& sm = *reinterpret_cast<Smem*>(staging + 8 * STG_WARP);

  const int tid = threadIdx.x, wg = tid / 128;
  if (tid == 0) {
    // a slot is released by the consumer warps of the cluster
    for (int s = 0; s < TL::STAGES; ++s) {
      mbar_init(&sm.full[s], 1);
      mbar_init(&sm.empty[s], 8 * args.cluster);
    }
    mbar_init(&sm.epi_full, 256);  // every consumer thread: its stores and atomics are out
    mbar_init(&sm.epi_empty, 1);   // the verifier has taken the tile's ticket
    sm.nfix = 0;
    sm.fix_done = 0;
    sm.bad = 0;
    sm.fix_fin = 0;
    for (int f = 0; f < FIX_CAP; ++f) sm.fix_ready[f] = 0;
    fence_barrier_init();
    tma_prefetch_desc(&tmA);
    for (int j = 0; j < args.groups; ++j) tma_prefetch_desc(&tmW.m[j]);
  }
  if (args.cluster > 1) cluster_sync();  // barriers initialised before any peer multicasts or arrives
  else __syncthreads();
  // Programmatic dependent launch (Args.pdl): the next kernel of the stream may launch now (its CTAs
  // get SMs as this grid's leave: its set-up overlaps this grid's tail, the last M-tiles'
  // verification), and this grid's set-up above overlapped the previous kernel's end. Nothing
  // before the wait touches global memory (the workspace is the previous call's until then).
  grid_dep_launch_dependents();
  grid_dep_wait();
  if (tid == 0) fix_stamp(args, 0);
  if (PROTECT && tid == 0 && blockIdx.x == 0) atomicAdd(reinterpret_cast<unsigned long long*>(args.counters + kChecks), 1ull);

  if (wg == 0) {
    // Register split: 72 for the producer/verifier warpgroup (at 56 the verifier spilled its
    // loop's values), 216 for the consumers (one value spilled per tile; at 208 ten). Keep slack
    // in the 64K file: with 64/224 (exactly 65536) the consumers' setmaxnreg.inc never returned.
    // The tile-local check: WG0 only issues the loads (24), the consumers hold two A fragments (240:
    // 1-4.5 points less protection cost than 40 / 232, run 38a, NOTES_gemm.md session 32). The
    // unprotected kernel has no verifiers: 40 / 232 (2-4 % faster than 72 / 216, run 62e).
    if constexpr (LOCAL) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    else if constexpr (!PROTECT) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 72;\n" ::: "memory");
    const Grid g(args, opaque_zero(), BN);
    const int warp = tid / 32, lane = tid % 32;
    if (warp == 0) {
      if (lane == 0) {  // ------------------------------------------- TMA producer
        int it = 0;
        const uint16_t mask = (uint16_t)((1u << g.cl) - 1u);
        const bool wfirst = w_evict_first(g.tm_n);
        const uint64_t wpol = l2_evict_first();
        for (int t = g.cid; t < g.total; t += g.ncl) {
          const TileCoord c = g.tile(t);
          int stats_ks = g.first_stats_ks(c);  // the consumers' statistics k-steps (mainloop)
          // W's rows of the tile: in a group, those of the member holding its columns
          const int member = args.member_of((int64_t)c.nt * BN);
          const int wrow = c.nt * BN - (int)args.member_col0(member);
          const CUtensorMap* tmB = &tmW.m[member];
          const int xrow = g.row0(c.mt);  // the tile's first row of x (a partial last tile: shifted)
          for (int ks = c.kb; ks < c.ke; ++ks, ++it) {
            const int slot = it % TL::STAGES;
            mbar_wait(&sm.empty[slot], ((it / TL::STAGES) & 1) ^ 1);
            // The consumers' statistics k-steps of this tile also need sum_n W[n] over the step's k
            // (its two halves apart: WC_HALF; K % 8 == 0, so both copies are whole 16-byte units).
            uint32_t wc_bytes = 0;
            if (PROTECT && !LOCAL && ks == stats_ks) {
              wc_bytes = 4u * (uint32_t)(g.K - ks * BK < BK ? g.K - ks * BK : BK);
              stats_ks += g.tn_n;
            }
            mbar_expect_tx(&sm.full[slot], TL::STAGE_BYTES + wc_bytes);
            if (wc_bytes) {
              const float* src = args.wsum + (int64_t)c.b * 2 * g.K + ks * BK;
              constexpr uint32_t kHalfBytes = BK / 2 * 4;
              const uint32_t lo = wc_bytes < kHalfBytes ? wc_bytes : kHalfBytes;
              bulk_load(sm.wc[slot], src, lo, &sm.full[slot]);
              if (wc_bytes > lo) bulk_load(sm.wc[slot] + WC_HALF, src + BK / 2, wc_bytes - lo, &sm.full[slot]);
            }
            uint8_t* st = base + slot * TL::STAGE_BYTES;
            tma_load_3d(st, &tmA, &sm.full[slot], ks * BK, xrow, c.b);
            if (g.cl > 1) {  // my half of the W tile, to every CTA of the cluster
              tma_load_3d_mc(st + A_BYTES + g.rank * (TL::B_BYTES / 2), tmB, &sm.full[slot], ks * BK,
                             wrow + (int)g.rank * (BN / 2), c.b, mask);
            } else {
              if (wfirst) {
                tma_load_3d_hint(st + A_BYTES, tmB, &sm.full[slot], ks * BK, wrow, c.b, wpol);
                tma_load_3d_hint(st + A_BYTES + TL::B_BYTES / 2, tmB, &sm.full[slot], ks * BK, wrow + BN / 2, c.b, wpol);
              } else {
                tma_load_3d(st + A_BYTES, tmB, &sm.full[slot], ks * BK, wrow, c.b);
                tma_load_3d(st + A_BYTES + TL::B_BYTES / 2, tmB, &sm.full[slot], ks * BK, wrow + BN / 2, c.b);
              }
            }
            // the tile's checksum rows, right behind its W rows (each CTA of a cluster its own copy)
            if constexpr (LOCAL) tma_load_3d(st + A_BYTES + TL::B_BYTES, &tmC, &sm.full[slot], ks * BK, c.nt * 8, c.b);
          }
        }
      }
    } else if (PROTECT && !LOCAL) {  // ---------------------------------- verifiers (warps 1-3)
      const Ws ws(args.ws, args.ws_rows);
      int seq = 0;
      for (int t = g.cid; t < g.total; t += g.ncl) {
        const TileCoord c = g.tile(t);
        if (c.s != c.ns - 1) continue;  // only a tile's last split hands it over
        mbar_wait(&sm.epi_full, seq & 1);
        if (warp == 1 && lane == 0) {
          bool last = false;
          if (c.mt < g.tm_n) {  // (a cluster's spare tile past M has nothing to verify)
            // The barrier ordered the consumers' stores and atomics before this point (CTA scope);
            // this fence, cumulative over them, publishes them before the ticket (NOTES_gemm.md).
            fence_acq_rel_gpu();
            last = atomicAdd(ws.ticket() + c.b * g.tm_n + c.mt, 1) == g.tn_n - 1;
          }
          sm.last[seq & 1] = last;
        }
        // The ticket's answer, to the three warps (by parity: warp 1 may write the next tile's
        // before the others read this one's). Only then may the consumers hand over the next
        // tile: none of the three can be two phases of epi_full behind.
        named_bar_sync(3, 96);
        if (warp == 1 && lane == 0) mbar_arrive(&sm.epi_empty);
        if (sm.last[seq & 1] && !(FTG_ABLATE & 1)) {
          fence_acq_rel_gpu();
          const bool invalid = named_bar_or(3, 96, verify_rows<T>(args, ws, c.b, c.mt, lane, warp - 1, sm));
          if (warp == 1 && lane == 0) {
            ws.ticket()[c.b * g.tm_n + c.mt] = 0;
            count_nonfinite_once(args, invalid, (int)args.batch * g.tm_n, ws.reports());
          }
        }
        ++seq;
      }
      // This warp's slots are written (its lanes' release stores, ordered before lane 0's add by
      // the warp barrier): the consumers stop waiting for rows once all three warps are here.
      __syncwarp();
      if (lane == 0) red_add_release_cta(&sm.fix_done, 1);
      if (tid == 32) fix_stamp(args, 5);
    }
  } else {
  // ------------------------------------------------------------ consumers (WG1, WG2)
  if constexpr (LOCAL) asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  else if constexpr (!PROTECT) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 216;\n" ::: "memory");
  const Grid g(args, opaque_zero(), BN);
  const int ctid = (int)threadIdx.x + opaque_zero(), warp = ctid / 32, lane = ctid % 32;
  const int wgc = warp / 4 - 1, wi = warp % 4, ct = ctid - 128;
  uint8_t* stg = staging + (wgc * 4 + wi) * STG_WARP;
  float acc[TL::NW / 2];
  XStats<T> xs;
  FragRange<T> fr;  // tile-local check: x's range of this thread's rows
  xs.row = ct / 2;  // rows 0-63 in WG1, 64-127 in WG2 (the rows of its wgmmas)
  xs.half = ct & 1;
  int it = 0, seq = -1;  // seq: this CTA's count of tiles handed over (the hand-over barriers' phase)
  int nfix = 0;  // tile-local check: rows this warp flagged (listed for its correction after the loop)
  // This thread's x statistics of unit c into the workspace, where the unit took some.
  auto flush_stats = [&](const TileCoord& c, int stats_ks, const Ws& ws) {
    const int64_t xm = (int64_t)g.row0(c.mt) + xs.row;
    if (stats_ks < c.ke && !(FTG_ABLATE & 2)) xs.flush(ws, c.b * g.M + xm, xm >= lo_row(c) && xm < g.M);
  };
  for (int t = g.cid; t < g.total; t += g.ncl) {
    const TileCoord c = g.tile(t);
    // Fresh accumulators: ends the previous tile's live range (wgmma's "+f" operands would
    // otherwise keep 128 registers alive through the verification code).
#pragma unroll
    for (int r = 0; r < TL::NW / 2; ++r) acc[r] = 0.f;
    if constexpr (PROTECT && !LOCAL) xs.reset();
    if constexpr (LOCAL) fr.reset();
    // This tile's bias, one column per consumer thread (those past BN: unused), loaded now, used a
    // mainloop later (a load per output pair in the epilogue waited its whole latency there).
    const float bias_v = args.bias ? bias_at<T>(args, (int64_t)c.nt * BN + ct) : 0.f;
    const TileTerms tt = LOCAL ? TileTerms(args, c, g.K) : TileTerms();
    const int stats_ks = g.first_stats_ks(c);
    if constexpr (LOCAL) {
      if (g.cl > 1) mainloop_local<T, BN, true>(acc, sm, base, c.kb, c.ke, it, wgc, wi, lane, g.rank, fr);
      else mainloop_local<T, BN, false>(acc, sm, base, c.kb, c.ke, it, wgc, wi, lane, g.rank, fr);
    } else {
      if (g.cl > 1) mainloop<T, PROTECT, BN, true>(acc, sm, base, c.kb, c.ke, it, wgc, lane, g.rank, xs, stats_ks, g.tn_n, g.K);
      else mainloop<T, PROTECT, BN, false>(acc, sm, base, c.kb, c.ke, it, wgc, lane, g.rank, xs, stats_ks, g.tn_n, g.K);
    }
    if (c.ns > 1) {
      // K split over consecutive units: the first splits leave their fp32 partial tile in the
      // workspace (float4 i of consumer thread ct at [i][ct]: coalesced) and count in on the
      // tile's flag; the last split waits for them (they are earlier units, each CTA takes its
      // units in order: no cycle), adds them and goes on as an unsplit tile. The flag is reset
      // for the next call. x statistics are flushed by every split that took some.
      SplitWs sw(args.part, args.part_tiles, g.splits);
      if (c.s < c.ns - 1) {
        float4* dst = sw.slot(c.id, c.s);
#pragma unroll
        for (int i = 0; i < TL::NW / 8; ++i)
          __stcg(dst + i * 256 + ct, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
        if constexpr (LOCAL)  // x's range over this split's K, after the checksum columns
          __stcg(dst + TL::NW / 8 * 256 + ct, fr.stored());
        else if constexpr (PROTECT) flush_stats(c, stats_ks, Ws(args.ws, args.ws_rows + opaque_zero()));
        named_bar_sync(1, 256);  // every consumer's partial and statistics are out (CTA scope)
        if (ct == 0) {
          __threadfence();  // cumulative over them (as the verifier's ticket)
          atomicAdd(sw.flag(c.id), 1);
        }
        continue;
      }
      if (ct == 0) {
        while (ld_acquire_gpu(sw.flag(c.id)) != c.ns - 1) __nanosleep(64);
        *sw.flag(c.id) = 0;
      }
      named_bar_sync(1, 256);
      for (int sp = 0; sp < c.ns - 1; ++sp) {
        const float4* src = sw.slot(c.id, sp);
#pragma unroll
        for (int i = 0; i < TL::NW / 8; ++i) {
          const float4 v = __ldcg(src + i * 256 + ct);
          acc[4 * i] += v.x; acc[4 * i + 1] += v.y; acc[4 * i + 2] += v.z; acc[4 * i + 3] += v.w;
        }
        if constexpr (LOCAL) fr.fold(__ldcg(src + TL::NW / 8 * 256 + ct));
      }
    }
    ++seq;

    // ---------------------------------------------------------- epilogue
    const int64_t row_w = (int64_t)g.row0(c.mt) + wgc * 64 + wi * 16;  // this warp's first row
    const int64_t r_lo = row_w + lane / 4, r_hi = r_lo + 8, lo = lo_row(c);
    const int q = lane % 4;  // this thread's columns: 8 j + 2 q, +1
    if (args.bias) {
      float* bias_s = sm.bias[seq & 1];
      bias_s[ct] = bias_v;
      named_bar_sync(1, 256);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const float2 bv = *reinterpret_cast<const float2*>(bias_s + 8 * j + 2 * q);
        acc[4 * j] += bv.x; acc[4 * j + 1] += bv.y; acc[4 * j + 2] += bv.x; acc[4 * j + 3] += bv.y;
      }
    }
    if constexpr (INJECT) {  // a build of its own: its registers made ptxas spill the hot values
      for (int i = 0; i < args.n_inj; ++i) inject_tile<T, BN>(acc, args, args.inj[i], c, r_lo, lane);
    }
    // Output row sums (row_sums): the tile-local check takes the weighted one (s2, which locates a
    // faulty column) only for a warp with a flagged row (check_tile_rows), the row check always (its
    // verifier needs both).
    float s1a = 0.f, s1b = 0.f, s2a = 0.f, s2b = 0.f;
    if constexpr (PROTECT && !(FTG_ABLATE & 4)) row_sums<BN, !LOCAL>(acc, q, s1a, s1b, s2a, s2b);
    // Round and store through the warp's staging buffer: 16-byte stores of whole row segments.
    // y's row stride, read per tile (opaque: kept live across the tile loop, it took a register the
    // epilogue then spilled); the warp's rows of the tile from one pointer and 32-bit offsets (the
    // launcher keeps 16 rows under 2^31 elements): fewer 64-bit addresses live at once.
    const int ldy = (int)args.ldy + opaque_zero();
    T* yw = static_cast<T*>(args.y) + ((int64_t)c.b * g.M + row_w) * ldy + (int64_t)c.nt * BN;
    const int rows_in = (int)min((int64_t)16, g.M - row_w), rows_skip = (int)max((int64_t)0, lo - row_w);
    const int cols_in = (int)min((int64_t)BN, g.N - (int64_t)c.nt * BN);
    const bool vec = (ldy % 8) == 0;  // 16-byte rows (padded ones: a chunk past N lands in the padding)
#pragma unroll
    for (int cc = 0; cc < BN / 64; ++cc) {
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const int j = 8 * cc + jj, col = jj * 8 + 2 * q;
        *reinterpret_cast<uint32_t*>(stg + (lane / 4) * STG_PITCH + col * 2) =
            Elem<T>::pack(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<uint32_t*>(stg + (lane / 4 + 8) * STG_PITCH + col * 2) =
            Elem<T>::pack(acc[4 * j + 2], acc[4 * j + 3]);
      }
      __syncwarp();
      if (vec) {  // a chunk (8 columns from a multiple of 8) is whole, past N, or ends in row padding
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int chunk = lane + 32 * i, rr = chunk >> 3, col = cc * 64 + (chunk & 7) * 8;
          if (rr >= rows_skip && rr < rows_in && col < cols_in)
            *reinterpret_cast<uint4*>(yw + (rr * ldy + col)) =
                *reinterpret_cast<const uint4*>(stg + rr * STG_PITCH + (chunk & 7) * 16);
        }
      } else {
        store_unaligned_rows(static_cast<T*>(args.y) + (int64_t)c.b * g.M * ldy, stg, lo, g.M, g.N, ldy, row_w,
                             (int64_t)c.nt * BN + cc * 64, lane);
      }
      __syncwarp();
    }
    if constexpr (!PROTECT) continue;
    else {
#pragma unroll
      for (int o = 1; o < 4; o <<= 1) {
        s1a += __shfl_xor_sync(0xffffffffu, s1a, o); s1b += __shfl_xor_sync(0xffffffffu, s1b, o);
        if constexpr (!LOCAL) {
          s2a += __shfl_xor_sync(0xffffffffu, s2a, o); s2b += __shfl_xor_sync(0xffffffffu, s2b, o);
        }
      }
      if constexpr (LOCAL) {
        if (FTG_ABLATE & 1) continue;
        float xmx[2], xmn[2];
        fr.joined(0, xmx[0], xmn[0]);
        fr.joined(1, xmx[1], xmn[1]);
        check_tile_rows<T, BN>(args, acc, xmx, xmn, sm, c, g.M, g.tn_n, row_w, lane, s1a, s1b, tt,
                               sm.tfix + (wgc * 4 + wi) * FIX_WARP, nfix, t + g.ncl < g.total);
        continue;
      }
      // rows through an opaque zero: the workspace pointers are then built here, per tile; hoisted
      // out of the tile loop (loop-invariant) they were spilled across the mainloop and their
      // reloads went to L2 (the carve-out leaves L1 little room) on every tile.
      const Ws ws(args.ws, args.ws_rows + opaque_zero());
      if (lane % 4 == 0 && !(FTG_ABLATE & 4)) {
        const double off = (double)c.nt * BN;  // global weight = off + local weight
        if (r_lo >= lo && r_lo < g.M) {
          atomicAdd(ws.s1() + c.b * g.M + r_lo, (double)s1a);
          atomicAdd(ws.s2() + c.b * g.M + r_lo, W_DEN * (double)s2a + off * (double)s1a);
        }
        if (r_hi >= lo && r_hi < g.M) {
          atomicAdd(ws.s1() + c.b * g.M + r_hi, (double)s1b);
          atomicAdd(ws.s2() + c.b * g.M + r_hi, W_DEN * (double)s2b + off * (double)s1b);
        }
      }
      flush_stats(c, stats_ks, ws);
      // Hand the tile to the verifier (once it took the previous one: the barrier's phases must
      // not run two ahead of it) and go on: its fence and ticket are off this path.
      if (seq > 0) mbar_wait(&sm.epi_empty, (seq - 1) & 1);
      mbar_arrive(&sm.epi_full);
    }
  }
  if (ct == 0) fix_stamp(args, 4);
  if constexpr (PROTECT && LOCAL) {
    __syncwarp();  // the warp's list entries (and its stored tiles) to every lane
    if (lane == 0) red_add_release_cta(&sm.fix_fin, 1);  // the fixer warp may stop
    if (nfix) {  // the rows the warp did not hand over: its last unit's, and those past its list
      const int w = wgc * 4 + wi;
      fix_listed<T, BN, 0>(args, sm.tfix + w * FIX_WARP, sm.fix_ready + w * FIX_WARP, kOwnRow, min(nfix, FIX_WARP),
                           max(nfix - FIX_WARP, 0), lane);
    }
    // non-finite inputs: once per call, each CTA reporting once
    if constexpr (!(FTG_ABLATE & 32)) {
      named_bar_sync(1, 256);
      if (ct == 0) count_nonfinite_once(args, sm.bad != 0, (int)gridDim.x, Ws(args.ws, args.ws_rows).reports());
    }
  } else if constexpr (PROTECT) {
    if (!(FTG_ABLATE & 8)) correct_flagged<T>(args, sm, ct);
  }
  }
  // The fixer (WG0's warp 1, idle in the tile-local kernel) at the kernel's end, its own call: in WG0's
  // branch, values it shared with the producer's schedule made ptxas spill the producer's loop.
  if (PROTECT && LOCAL && FTG_FIXER && tid / 32 == 1) fix_handed_over<T, BN>(args, sm, tid % 32);
  if (args.cluster > 1) cluster_sync();  // peers may still arrive on this CTA's barriers until here
}

template <typename T, bool PROTECT, bool INJECT, int BN, bool LOCAL = false>
int launch(const Args* a, const CUtensorMap& ta, const WMaps& tb, const CUtensorMap& tc) {
  constexpr auto kern = &gemm_global_kernel<T, PROTECT, INJECT, BN, LOCAL>;
  constexpr size_t SMEM_BYTES = Tiles<BN, LOCAL>::SMEM_BYTES;
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA");
  if (cudaError_t e = sm90::allow_smem<kern>(SMEM_BYTES)) return e;
  const int cl = a->cluster;
  const int total = split_units((int)a->batch * cdiv(cdiv(a->M, BM), cl) * cdiv(a->N, BN), a->split, a->split_from);
  const int clusters = total < a->num_sms / cl ? total : a->num_sms / cl;
  return launch_split(kern, dim3((unsigned)(clusters * cl)), THREADS, SMEM_BYTES, a->stream, cl, a->pdl != 0, ta, tb, tc,
                      *a);
}

// The build (plain, protected, protected with injection; the protection's check per row or per
// tile) and element type of a call, at width BN.
template <typename T, int BN>
int launch_type(const Args* a, const CUtensorMap& ta, const WMaps& tb, const CUtensorMap& tc) {
  const bool prot = a->protect != 0, inj = prot && a->n_inj > 0;
  if (!prot) return launch<T, false, false, BN>(a, ta, tb, tc);
  if constexpr (BN + 8 <= 256) {
    if (a->local) return inj ? launch<T, true, true, BN, true>(a, ta, tb, tc) : launch<T, true, false, BN, true>(a, ta, tb, tc);
  }
  return inj ? launch<T, true, true, BN>(a, ta, tb, tc) : launch<T, true, false, BN>(a, ta, tb, tc);
}
template <int BN>
int launch_width(const Args* a, const CUtensorMap& ta, const WMaps& tb, const CUtensorMap& tc) {
  return a->dtype == 0 ? launch_type<__nv_bfloat16, BN>(a, ta, tb, tc) : launch_type<__half, BN>(a, ta, tb, tc);
}

}  // namespace glb
}  // namespace ftg

extern "C" int ft_gemm_global(const ftg::Args* a) {
  using namespace ftg;
  if (a->K % 8 || a->M < 1 || a->N < 1 || a->batch < 1 || (a->cluster != 1 && a->cluster != 2)) return FTG_ERR_ARGS;
  // y's rows: N apart, or padded to 16 bytes; the epilogue's 32-bit offsets span 16 rows
  if ((a->ldy != a->N && (a->ldy < a->N || a->ldy % 8)) || a->ldy >= (1 << 27)) return FTG_ERR_ARGS;
  if (a->split < 1 || a->split > ftg::cdiv(a->K, (int64_t)glb::BK) || (a->split > 1 && !a->part)) return FTG_ERR_ARGS;
  const int bn = a->bn ? a->bn : 256;
  if (bn != 256 && bn != 192 && bn != 128) return FTG_ERR_ARGS;
  const int64_t cluster_tiles = a->batch * ftg::cdiv(ftg::cdiv(a->M, glb::BM), a->cluster) * ftg::cdiv(a->N, bn);
  if (a->split_from < 0 || a->split_from > cluster_tiles || (a->split_from > 0 && a->split == 1)) return FTG_ERR_ARGS;
  const bool local = a->protect && a->local;  // the tile-local check: 192 or 128 wide, its checksum rows
  if (local && (bn == 256 || !a->lsum)) return FTG_ERR_ARGS;
  if (a->groups < 1 || a->groups > kMaxGroup || (a->groups > 1 && a->batch != 1)) return FTG_ERR_ARGS;
  for (int j = 0; j + 1 < a->groups; ++j)  // members' columns: ascending, whole tiles, inside N
    if (a->gcol[j] % bn || a->gcol[j] <= a->member_col0(j) || a->gcol[j] >= a->N || !a->gw[j])
      return FTG_ERR_ARGS;
  CUtensorMap ta, tc;
  glb::WMaps tb;
  if (!make_tmap(&ta, a->x, a->batch, a->M, a->K, a->x_rstride, a->x_bstride, glb::BM)) return FTG_ERR_TMAP;
  for (int j = 0; j < a->groups; ++j) {  // member j: its rows [col0, col1) of y's columns
    const int64_t col0 = a->member_col0(j), col1 = j + 1 < a->groups ? a->member_col0(j + 1) : a->N;
    if (!make_tmap(&tb.m[j], j ? a->gw[j - 1] : a->w, a->batch, col1 - col0, a->K, a->w_rstride, a->w_bstride,
                   bn / 2))
      return FTG_ERR_TMAP;
  }
  for (int j = a->groups; j < kMaxGroup; ++j) tb.m[j] = tb.m[0];  // unread
  if (local) {  // [batch, 8 T_N, K]: 8 checksum rows per N-tile
    const int64_t rows = 8 * (int64_t)ftg::cdiv(a->N, bn);
    if (!make_tmap(&tc, a->lsum, a->batch, rows, a->K, a->K, rows * a->K, 8)) return FTG_ERR_TMAP;
  } else {
    tc = tb.m[0];  // unread
  }
  return bn == 256 ? glb::launch_width<256>(a, ta, tb, tc)
         : bn == 192 ? glb::launch_width<192>(a, ta, tb, tc)
                     : glb::launch_width<128>(a, ta, tb, tc);
}

// Bytes of the global scheme's workspace for `rows` output rows in `mtiles` 128-row tiles.
extern "C" long long ft_gemm_global_ws_bytes(long long rows, long long mtiles) {
  return rows * (ftg::glb::WS_F64 * 8 + 2 * 4) + 8 + mtiles * 4;
}
// Bytes of the split-K workspace for `tiles` tiles split `splits` ways at most (zeroed once: the
// flags are reset by the kernel; Args.part_tiles = tiles).
extern "C" long long ft_gemm_global_split_bytes(long long tiles, long long splits) {
  return ftg::glb::SplitWs::bytes(tiles, splits);
}
// Byte offset of the fp32 max / min rows (the launcher initialises them to -inf / +inf).
extern "C" long long ft_gemm_global_ws_extrema_offset(long long rows) { return rows * ftg::glb::WS_F64 * 8; }

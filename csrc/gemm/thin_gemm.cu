// Thread-scheme linear y = x W^T + b for up to 128 rows of x (bandwidth-bound: W's bytes decide),
// computed transposed on Hopper tensor cores: D = W x^T, W as the wgmma's A (64 rows per
// warpgroup), x as its B (N = the call's rows padded to 32 / 64 / 128). A 128-row tile of W per
// CTA is streamed by TMA through a ring; x's tile rides along (from L2). Where the tiles leave SMs
// idle, K is split over a cluster of 2-4 CTAs that reduce their partial tiles through DSMEM,
// each CTA finishing a slice of the tile's rows (NOTES_gemm.md, session 37).
//
// Protection (one-sided, on x): 8 checksum rows ride behind x's rows in the B tile, so the same
// wgmma computes D[n, c] = W[n] . xc_c with xc = (sum_m x[m], sum_m (m + 1) x[m]) / (256, 65536),
// each split into 16-bit parts exact to fp32 (bf16 hi + mid + lo, fp16 hi + 2^-11-scaled mid).
// Each output column n (a row of W) is then checked over the call's rows: sum_m y[m, n] against
// the checksum columns, by the thread or warp that holds the row's final values, with the V-ABFT
// threshold of M terms from W[n]'s statistics (offline) and x's per-k statistics over its rows
// (the x-side pass). A single fault is located by the weighted checksum, recomputed and rechecked.
// The x-side pass (thin_xsum_kernel) reads x once and writes the checksum rows and statistics;
// it lets the GEMM launch at once (programmatic dependent launch), whose CTAs then wait for it
// before they read W or x.
// Up to 32 rows (x padded to 32) need no pass: every element of D is computed twice, from the same
// operands in shared memory, and the two agree bit for bit. Up to 16 rows the wgmma's N padding
// holds the replica (TMA loads x's box a second time, 16 rows further: another column of the
// accumulators); at 17-32 rows each consumer warpgroup also multiplies the other's 64 rows of W
// with x into a second accumulator set (one more wgmma, no extra loads). The check compares the copies
// exactly (no threshold, no statistics of x); a mismatch locates its element, which is recomputed
// to choose the intact copy. At these row counts the 8 checksum rows cost as much of the wgmma as
// x's rows and their pass 1-3 us a call (NOTES.md, session 65).
#include <type_traits>

#include "ft_common.cuh"
#include "ft_host.cuh"
#include "phase_stamps.cuh"
#include "wgmma_ops.cuh"

// Diagnostics only (benchmarks/ablate_thin.sh): bits that drop parts of the protection to time
// them; 0 in every build the package makes. 1: no column checks in the epilogue (the checksum
// columns are still computed), 2: no x-side pass (the checksum rows are whatever the buffer holds),
// 4: checks without the correction path (alarms only counted; fix_row / recompute_row not built),
// 8: no checksum-row loads in the k-loop (the slot's rows stay stale), 16: the k-loop's wgmma over
// x's rows only (N = NX; the checksum columns stay zero): 8 and 16 split the k-loop's share.
#ifndef FTG_THIN_ABLATE
#define FTG_THIN_ABLATE 0
#endif
// The widest padding of x's rows (32, 64, 128) whose split-1 calls take the epilogue from
// registers: at 128 its 2-byte stores of y (64 a thread) cost more than the staged 16-byte ones
// (run 70a, +3 %). For the A/Bs: 32 builds session 61's kernel (decode rows only), 0 every call
// through the partial tile.
#ifndef FTG_THIN_REG_EPILOGUE_NX
#define FTG_THIN_REG_EPILOGUE_NX 64
#endif
// x's replica instead of the pass at few rows (see above). -DFTG_THIN_REPLICA=0: the pass at every
// row count, for the A/B.
#ifndef FTG_THIN_REPLICA
#define FTG_THIN_REPLICA 1
#endif
// The widest padding of x's rows (32, 64) that can be checked against replicas: at 32 every
// protected call is; at 64 those the host asks for (protect = 2, gemm.thin_replica: the crossed
// replica, twice the tensor work of x's rows against the checksum rows' 1 / 8 more and the pass;
// runs 75f-g, tested on the host's per-call choice in run 76a). -DFTG_THIN_REPLICA_NX=32 builds the
// library without it (every call at 33-64 rows is then checked against checksum rows).
#ifndef FTG_THIN_REPLICA_NX
#define FTG_THIN_REPLICA_NX 64
#endif
#ifndef FTG_THIN_REP_LOAD
#define FTG_THIN_REP_LOAD 1
#endif

// Behind the x-side pass, at most this many stages of W before the dependency wait: the next
// call's CTAs issue them as they land, and the pass's loads of x wait behind that burst (~3 us for
// an L2 hit while W streams at the memory's rate). Runs 72b-c: 4 instead of the whole ring (8) took
// 2.5-4 % off the protected calls at 64 / 128 x 4096^2 (K split 3), the rest level.
// -DFTG_THIN_PRE_PROT=8: as before, for the A/B.
#ifndef FTG_THIN_PRE_PROT
#define FTG_THIN_PRE_PROT 4
#endif

namespace ftg {
namespace thin {

constexpr int BK = 64, BW = 128, THREADS = 384, MAX_STAGES = 12, CHUNK = 64;
// The partial tile's pitch in floats, a column of D (x's row) a line: 16-byte aligned lines, and
// % 32 == 4, so a warp's accumulator stores (8 rows x 4 column pairs) meet no bank conflict.
constexpr int PN = BW + 4;
constexpr int W_BYTES = BW * BK * 2;
// y's columns are weighed (m + 1) / W_DEN and the checksum rows scaled by 1 / SCALE (fp16's range).
constexpr float W_DEN = 256.f, SCALE = 256.f;

// W's loads: each element of W is read by one CTA once (x's rows all lie in one tile), so its lines
// may leave L2 first and x's, which every CTA reads, stay (the streaming kernel's policy: 8-13 %
// there on an H200, run 35d; 1-3 % here, run 46g). -DFTG_THIN_DEFAULT_L2: the plain load, for the
// A/B (benchmarks/gemm_ab.py).
__device__ __forceinline__ void load_w(void* dst, const CUtensorMap* map, uint64_t* bar, int k, int row, int b) {
#ifdef FTG_THIN_DEFAULT_L2
  tma_load_3d(dst, map, bar, k, row, b);
#else
  tma_load_3d_hint(dst, map, bar, k, row, b, l2_evict_first());
#endif
}

// Rows of x's TMA box: the call's rows rounded up to 8 (a swizzle atom), not all NX. TMA fills
// out-of-bounds rows slowly (~3 ns a row and stage: NOTES_gemm.md, runs 46e and 46h);
// the slot's rows past the box keep whatever they held: they only reach columns of D past M, which
// nothing stores or checks (a box of exactly M rows below 8 was no faster: run 72e).
// -DFTG_THIN_FULL_XBOX: all NX rows, for the A/B.
__host__ __device__ constexpr int x_box_rows(int64_t M, int nx) {
#ifdef FTG_THIN_FULL_XBOX
  return nx;
#else
  return M >= nx ? nx : (int)((M + 7) / 8 * 8);
#endif
}

// Whether calls with x padded to nx rows can be checked against a replica of x (no checksum rows, no
// pass; see the top of the file).
__host__ __device__ constexpr bool replica_capable(int nx) { return FTG_THIN_REPLICA && nx <= FTG_THIN_REPLICA_NX; }
// Whether a call is: `protect` 0 off, 1 on (replicas at 32 rows of padding, else checksum rows), 2 on
// with replicas wherever the padding allows (the host's per-call choice at 64).
__host__ __device__ constexpr bool replica_of(int nx, int protect) {
  return protect != 0 && replica_capable(nx) && (nx == 32 || protect == 2);
}
// The replica loaded NX / 2 rows after x's in the B tile (x's box fits half of it), the wgmma then
// N = NX; otherwise the crossed replica of the second accumulator set (`acc2`, see the kernel).
// -DFTG_THIN_REP_LOAD=0: the crossed replica at every row count, for the A/B (run 75a: 0.8-1.2 us
// slower at 12-16 rows).
__host__ __device__ constexpr bool loaded_replica(int64_t M, int nx) {
  return FTG_THIN_REP_LOAD && 2 * x_box_rows(M, nx) <= nx;
}

template <int NX, bool PROT, bool REPL> struct Cfg {
  static constexpr bool REP = PROT && REPL;  // replica checks, not checksum rows
  // wgmma N: x's rows (+ 8 checksum rows; a replica lies in x's NX rows or in acc2, so a stage
  // replica-checked is the unprotected kernel's size and its ring as deep)
  static constexpr int NC = NX + (PROT && !REP ? 8 : 0);
  static constexpr int X_BYTES = NC * 128;         // multiple of 1024 (8-row swizzle atoms)
  static constexpr int STAGE = W_BYTES + X_BYTES;
  static constexpr int PC = NC + (REP ? NX : 0);   // the partial tile's columns: + the crossed replica
  static constexpr int P_BYTES = PC * PN * 4;      // the partial tile, column-major
  static constexpr int NQ = (NC + 31) / 32;        // 32-column groups of a row in the epilogue
};
// Phase timestamps (diagnostic build, -DPHASE_STAMPS; benchmarks/thin_phases.py), recorded by
// the producer thread (P) or the first consumer thread (C): 0 entry, 1 set-up done (P), 2 the
// x-side pass waited for (P), 3 every load issued (P), 4 the first stage landed (C), 5 its loop done
// (C), 6 every loop done (P), 7 partial tiles published (P), 8 its rows reduced and stored (P),
// 9 the column checks done (P, protected), 10 the corrections done (P), 11 reported (P).
constexpr int STAMP_C = 128;  // the first consumer thread
struct Ctrl {
  uint64_t full[MAX_STAGES], empty[MAX_STAGES];
  float bpart[3][3];  // x's statistics over K (V-ABFT's B statistics), three warps' shares
  float rbias[BW];    // the bias of the CTA's rows of D (columns of y)
  float2 rstat[BW];   // their W statistics (mean, extrema variance)
  int wfin, ndet, ncorr, nunc;
  int nonfin;           // replica checks: a non-finite value in both copies (non-finite inputs)
  int nfix;             // alarmed rows of D to correct, and which (their index in the CTA's slice)
  uint8_t fixrow[BW];
  unsigned stamp_slot;  // the diagnostic build's record slot (last: the other fields keep their offsets)
};
// A cluster of `split` CTAs finishes the tile's rows in slices: CTA r takes rows [slice0(r),
// slice0(r + 1)), multiples of 8; even for split 1, 2, 4, 40 / 40 / 48 for 3.
__host__ __device__ constexpr int slice0(int rank, int split) { return 8 * (BW / 8 * rank / split); }
template <int NX, bool PROT, bool REPL> size_t smem_bytes(int stages, int /*split: the same at every split*/) {
  using C = Cfg<NX, PROT, REPL>;
  const size_t ring = (size_t)stages * C::STAGE, epi = C::P_BYTES;
  return 1024 + (ring > epi ? ring : epi) + sizeof(Ctrl);
}

// ---------------------------------------------------------------- the x-side pass
// One CTA per 64-wide chunk of K: per column k, the sums over x's rows (plain and weighted) as
// checksum rows, and the chunk's V-ABFT statistics of x^T (sum_k |mu_k|, sum_k var_k, sum_k mu_k^2
// with mu_k, var_k the mean and extrema variance of x[:, k] over the M rows).
template <typename T>
__global__ void __launch_bounds__(256) thin_xsum_kernel(const __grid_constant__ Args args) {
  __shared__ float red[8][4][64];
  __shared__ float cst[2][3];
#ifdef FTG_THIN_LATE_LAUNCH
  grid_dep_wait();  // x may be the previous kernel's output
  // Lets the GEMM launch: everything before this pass is complete, so it may read W before it waits.
  grid_dep_launch_dependents();
#else
  // The GEMM launches at once: its CTAs take the SMs while the kernel before this pass finishes,
  // and read W only once this pass is complete (which implies everything before it). Launched
  // after the pass's wait instead, the GEMM's CTAs entered ~4.7 us after the previous kernel's
  // last CTA (NOTES_gemm.md, run 47d); -DFTG_THIN_LATE_LAUNCH builds that order, for the A/B.
  grid_dep_launch_dependents();
  grid_dep_wait();  // x may be the previous kernel's output
#endif
  const int c = blockIdx.x, b = blockIdx.y, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t M = args.M, K = args.K;
  const T* X = static_cast<const T*>(args.x) + (int64_t)b * args.x_bstride;
  const int64_t k = (int64_t)c * CHUNK + 2 * lane;  // the lane's two columns (K % 8 == 0)
  float sp[2] = {0.f, 0.f}, sw[2] = {0.f, 0.f}, mx[2] = {-INFINITY, -INFINITY}, mn[2] = {INFINITY, INFINITY};
  if (k < K) {
#pragma unroll 8  // one round trip for up to 64 rows
    for (int64_t m = warp; m < M; m += 8) {
      const float2 v = Elem<T>::unpack(__ldg(reinterpret_cast<const uint32_t*>(X + m * args.x_rstride + k)));
      const float wm = (float)(m + 1);
      sp[0] += v.x; sp[1] += v.y;
      sw[0] = fmaf(wm, v.x, sw[0]); sw[1] = fmaf(wm, v.y, sw[1]);
      mx[0] = fmaxf(mx[0], v.x); mx[1] = fmaxf(mx[1], v.y);
      mn[0] = fminf(mn[0], v.x); mn[1] = fminf(mn[1], v.y);
    }
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    red[warp][0][2 * lane + e] = sp[e]; red[warp][1][2 * lane + e] = sw[e];
    red[warp][2][2 * lane + e] = mx[e]; red[warp][3][2 * lane + e] = mn[e];
  }
  __syncthreads();
  if (tid < CHUNK) {  // column kk of the chunk, warps summed in order
    const int64_t kk = (int64_t)c * CHUNK + tid;
    float p = 0.f, w = 0.f, hi = -INFINITY, lo = INFINITY;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      p += red[i][0][tid]; w += red[i][1][tid];
      hi = fmaxf(hi, red[i][2][tid]); lo = fminf(lo, red[i][3][tid]);
    }
    float amu = 0.f, var = 0.f, mu2 = 0.f;
    if (kk < K) {
      const float mu = p / (float)M;
      amu = fabsf(mu);
      var = fmaxf(0.f, (hi - mu) * (mu - lo));
      if (p != p) var = p;  // a NaN in the column: fmaxf / fminf dropped it, the sum did not
      mu2 = mu * mu;
      T* xs = static_cast<T*>(args.xsum) + (int64_t)b * 8 * K + kk;
      const float v[2] = {p * (1.f / SCALE), w * (1.f / (SCALE * W_DEN))};
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const T h = Elem<T>::from_f(v[s]);
        const float r = v[s] - Elem<T>::to_f(h);
        if constexpr (std::is_same<T, __nv_bfloat16>::value) {
          const T md = Elem<T>::from_f(r);
          xs[(3 * s) * K] = h; xs[(3 * s + 1) * K] = md;
          xs[(3 * s + 2) * K] = Elem<T>::from_f(r - Elem<T>::to_f(md));
        } else {  // fp16: the residual scaled out of the subnormal range
          xs[(3 * s) * K] = h; xs[(3 * s + 1) * K] = Elem<T>::from_f(r * 2048.f);
          xs[(3 * s + 2) * K] = Elem<T>::from_f(0.f);
        }
      }
      xs[6 * K] = Elem<T>::from_f(0.f);
      xs[7 * K] = Elem<T>::from_f(0.f);
    }
    amu = warp_sum(amu); var = warp_sum(var); mu2 = warp_sum(mu2);
    if (lane == 0) { cst[warp][0] = amu; cst[warp][1] = var; cst[warp][2] = mu2; }
  }
  __syncthreads();
  if (tid < 3) args.xstat[((int64_t)b * gridDim.x + c) * 4 + tid] = cst[0][tid] + cst[1][tid];
}

// ---------------------------------------------------------------- the GEMM
template <int NC>
__device__ __forceinline__ void inject_acc(float (&acc)[NC / 2], int idx, const Injection& inj, float* log) {
#pragma unroll
  for (int i = 0; i < NC / 2; ++i)
    if (i == idx) acc[i] = inject_one(acc[i], inj, log);
}

// The injecting build's output-stage fault `inj` (on a final fp32 value): the row of x it hits in
// batch b's column n of y, or -1 where it hits elsewhere.
__device__ __forceinline__ int output_fault_row(const Injection& inj, int64_t M, int b, int64_t n) {
  return inj.step == -1 && inj.row / M == b && inj.col == n ? (int)(inj.row % M) : -1;
}

// Rare: the fault of row n (a column of y) located at x row p and recomputed; true when the row's
// sum then passes its check. v: the lane's values of the row (columns lane + 32 q).
template <typename T, int NQ>
static __device__ __noinline__ bool fix_row(float (&v)[NQ], const Args& args, int b, int64_t n, float bn, int p,
                                            float cp, float thr, int lane) {
  const T* W = static_cast<const T*>(args.w) + (int64_t)b * args.w_bstride + n * args.w_rstride;
  const T* X = static_cast<const T*>(args.x) + (int64_t)b * args.x_bstride;
  const float t = warp_dot(X + (int64_t)p * args.x_rstride, W, args.K, lane) + bn;
  float s = 0.f;
#pragma unroll
  for (int q = 0; q < NQ; ++q) {
    const int m = 32 * q + lane;
    if (m == p) v[q] = t;
    if (m < args.M) s += v[q];
  }
  return !exceeds(warp_sum(s) - cp, thr);
}
// Rare: every element of row n recomputed (policy "recompute", an uncorrectable row).
template <typename T, int NQ>
static __device__ __noinline__ void recompute_row(float (&v)[NQ], const Args& args, int b, int64_t n, float bn,
                                                  int lane) {
  const T* W = static_cast<const T*>(args.w) + (int64_t)b * args.w_bstride + n * args.w_rstride;
  const T* X = static_cast<const T*>(args.x) + (int64_t)b * args.x_bstride;
  for (int m = 0; m < args.M; ++m) {
    const float t = warp_dot(X + (int64_t)m * args.x_rstride, W, args.K, lane) + bn;
#pragma unroll
    for (int q = 0; q < NQ; ++q)
      if (32 * q + lane == m) v[q] = t;
  }
}

// Rare, replica checks: row n of D's elements whose two copies differ (v, the lane's values of the
// row at columns lane + 32 q; their copies `roff` columns on), each recomputed and the copy nearer
// the recomputed value kept (the intact one: a single fault moves only its own copy).
template <typename T, int NQ>
static __device__ __noinline__ void fix_replicas(float (&v)[NQ], const float* part, int roff, int nl,
                                                 const Args& args, int b, int64_t n, float bn, int lane) {
  const T* W = static_cast<const T*>(args.w) + (int64_t)b * args.w_bstride + n * args.w_rstride;
  const T* X = static_cast<const T*>(args.x) + (int64_t)b * args.x_bstride;
#pragma unroll
  for (int q = 0; q < NQ; ++q) {
    const int m = 32 * q + lane;
    const float r = m < args.M ? part[(m + roff) * PN + nl] : 0.f;
    unsigned bad = __ballot_sync(0xffffffffu, m < args.M && !same(v[q], r));
    while (bad) {
      const int l = __ffs(bad) - 1;
      bad &= bad - 1;
      const float t = warp_dot(X + (int64_t)(32 * q + l) * args.x_rstride, W, args.K, lane) + bn;
      if (lane == l) v[q] = nearer_copy(v[q], r, t);
    }
  }
}

// A row of D's check terms: its sums over x's rows as its six checksum columns give them (`chk`;
// plain cp, weighted cwt, the bias's share included) and the V-ABFT threshold of M terms.
struct ColumnCheck {
  float cp, cwt, thr;
};
template <typename T>
__device__ __forceinline__ ColumnCheck column_check_of(const float (&chk)[6], float bn, float2 ws, int M,
                                                      const float (&bst)[3], const Args& args) {
  constexpr float MIDS = std::is_same<T, __half>::value ? 1.f / 2048.f : 1.f;
  const float fm = (float)M;
  ColumnCheck k;
  k.cp = SCALE * (chk[0] + chk[1] * MIDS + chk[2]) + fm * bn;
  k.cwt = SCALE * (chk[3] + chk[4] * MIDS + chk[5]) + bn * (fm * (fm + 1.f) * 0.5f / W_DEN);
  k.thr = vabft_threshold(ws.x, ws.y, fm, bst, args.e, args.c_sigma) + args.e * fabsf(bn) * fm;
  return k;
}

// The epilogue from the accumulators (split 1, x padded to <= FTG_THIN_REG_EPILOGUE_NX; see the
// kernel). The thread's rows of D (columns of y) are n = tile BW + nl0 + 8 h, its columns of D
// c = 8 j + 2 (lane % 4) + e: x's row c below NX, the checksum columns from NX on. It adds the
// bias, stores its values of y from the registers and checks its two rows of D over x's rows with
// quad shuffles, or (replica checks) each value against its replica, which the same thread holds:
// the loaded one (`dup` false) NX / 2 columns on, in v 4 (NX / 16) registers further; the crossed
// one in acc2 at the same column (traded between the warpgroups before this). True where a row
// fails its check (the kernel then takes the partial-tile path, which checks again, counts and
// corrects). `nonfin`: set where both copies of a value are non-finite (replica checks: the
// inputs' report).
template <typename T, int NX, bool PROT, bool INJ, bool REPL>
__device__ __forceinline__ bool epilogue_from_registers(const float (&acc)[Cfg<NX, PROT, REPL>::NC / 2],
                                                       const float (&acc2)[Cfg<NX, PROT, REPL>::REP ? NX / 2 : 1],
                                                       const Ctrl& sm, const Args& args, int tile, int b, int nl0,
                                                       int lane, bool invalid, const float (&bst)[3], bool dup,
                                                       bool& nonfin) {
  const int c4 = lane % 4;
  const int64_t M = args.M, N = args.N;
  T* yb = static_cast<T*>(args.y) + (int64_t)b * M * args.ldy;
  bool flag = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int nl = nl0 + 8 * h;
    const int64_t n = (int64_t)tile * BW + nl;
    const float bn = sm.rbias[nl];
    float v[NX / 4];  // x's rows 8 (i / 2) + 2 c4 + i % 2
#pragma unroll
    for (int i = 0; i < NX / 4; ++i) v[i] = acc[4 * (i / 2) + 2 * h + i % 2] + bn;
    if constexpr (INJ) {  // output-stage faults (final fp32 values), as the reduce's
      for (int qi = 0; qi < args.n_inj; ++qi) {
        const Injection& inj = args.inj[qi];
        const int m = output_fault_row(inj, M, b, n);
        if (m < 0) continue;
#pragma unroll
        for (int i = 0; i < NX / 4; ++i)
          if (8 * (i / 2) + 2 * c4 + i % 2 == m) v[i] = inject_one(v[i], inj, args.inj_log);
      }
    }
    float sp = 0.f;
#pragma unroll
    for (int i = 0; i < NX / 4; ++i) {
      const int m = 8 * (i / 2) + 2 * c4 + i % 2;
      if (m < M) {
        sp += v[i];
        if (n < N) yb[m * args.ldy + n] = Elem<T>::from_f(v[i]);
      }
    }
    if constexpr (PROT && !(FTG_THIN_ABLATE & 1)) {
      if constexpr (Cfg<NX, PROT, REPL>::REP) {
        auto compare = [&](float a, float r) {
          flag |= !same(a, r);
          nonfin |= !isfinite(a) && !isfinite(r);
        };
        if (dup) {
#pragma unroll
          for (int i = 0; i < NX / 4; ++i) {  // the crossed replica, traded: in acc2 as v in acc
            const int m = 8 * (i / 2) + 2 * c4 + i % 2;
            if (m < M && n < N) compare(v[i], acc2[4 * (i / 2) + 2 * h + i % 2] + bn);
          }
        } else {
#pragma unroll
          for (int i = 0; i < NX / 8; ++i) {  // x's rows below NX / 2; v[i + NX / 8] their copies
            const int m = 8 * (i / 2) + 2 * c4 + i % 2;
            if (m < M && n < N) compare(v[i], v[i + NX / 8]);
          }
        }
      } else {
        sp += __shfl_xor_sync(0xffffffffu, sp, 1);
        sp += __shfl_xor_sync(0xffffffffu, sp, 2);
        float chk[6];  // column NX + i: lane i / 2 of the quad, register e = i % 2
#pragma unroll
        for (int i = 0; i < 6; ++i)
          chk[i] = __shfl_sync(0xffffffffu, acc[4 * (NX / 8) + 2 * h + i % 2], (lane & ~3) | (i / 2));
        if (n < N && !invalid) {
          const ColumnCheck k = column_check_of<T>(chk, bn, sm.rstat[nl], (int)M, bst, args);
          flag |= exceeds(sp - k.cp, k.thr);
        }
      }
    }
  }
  return flag;
}

template <typename T, int NX, bool PROT, bool INJ, bool REPL>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_thin_kernel(const __grid_constant__ CUtensorMap tmW, const __grid_constant__ CUtensorMap tmX,
                     const __grid_constant__ CUtensorMap tmC, const __grid_constant__ Args args) {
  using C = Cfg<NX, PROT, REPL>;
  constexpr int NC = C::NC, NQ = C::NQ;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* base = sm90::align_1024(smem_raw);
  const int NS = args.stages, S = args.split;
  const int ring = NS * C::STAGE, epi = C::P_BYTES;
  Ctrl& sm = *reinterpret_cast<Ctrl*>(base + (ring > epi ? ring : epi));
  float* part = reinterpret_cast<float*>(base);  // aliases the ring after the k-loop

  const int tid = threadIdx.x, warp = __shfl_sync(0xffffffffu, tid / 32, 0), lane = tid % 32;
  const int rank = S > 1 ? (int)cluster_rank() : 0;
  const int tile = blockIdx.x / S, b = blockIdx.z;
  const int64_t M = args.M, N = args.N, K = args.K;
  const int nk = cdiv(K, BK);
  const int kb = (int)((int64_t)rank * nk / S), nloc = (int)((int64_t)(rank + 1) * nk / S) - kb;
  // Replica checks (C::REP): x's replica loaded into the B tile's padding, or the crossed replica of
  // acc2; a value's replica then sits `roff` columns on in the partial tile.
  const bool load_rep = C::REP && loaded_replica(M, NX), dup = C::REP && !load_rep;
  const int roff = load_rep ? NX / 2 : NC, pcols = dup ? C::PC : NC;

  phase_stamps::SlotStamper stamp;
  stamp.begin(&sm.stamp_slot);
  if (tid == 0) {
    for (int s = 0; s < NS; ++s) { mbar_init(&sm.full[s], 1); mbar_init(&sm.empty[s], 8); }
    sm.ndet = sm.ncorr = sm.nunc = sm.nfix = sm.nonfin = 0;
    fence_barrier_init();
    tma_prefetch_desc(&tmW);
    tma_prefetch_desc(&tmX);
    if (PROT) tma_prefetch_desc(&tmC);
  }
  __syncthreads();
  grid_dep_launch_dependents();
  stamp.mark(1);

  if (warp == 0) {  // ------------------------------------------------- TMA producer
    if (lane == 0) {
      // W's first stages before the dependency wait only where W is a parameter: otherwise it may be
      // the output of a kernel still in flight (the x-side pass lets this kernel launch before it
      // waits); behind the pass, at most FTG_THIN_PRE_PROT of them. For the A/Bs:
      // -DFTG_THIN_W_AFTER_WAIT never; -DFTG_THIN_LATE_LAUNCH the order before (the pass waited
      // first), protected only.
#if defined(FTG_THIN_LATE_LAUNCH)
      const int pre = PROT ? (nloc < NS ? nloc : NS) : 0;
#elif defined(FTG_THIN_W_AFTER_WAIT)
      const int pre = 0;
#else
      const int pre =
          args.w_static ? min(nloc, min(NS, PROT && !C::REP ? FTG_THIN_PRE_PROT : NS)) : 0;
#endif
      constexpr bool LOAD_C = PROT && !(FTG_THIN_ABLATE & 8);
      // checksum rows or x's replica
      const int xrows = x_box_rows(M, NX), c_rows = LOAD_C ? (C::REP ? (load_rep ? xrows : 0) : 8) : 0;
      const uint32_t stage_tx = W_BYTES + 128u * (uint32_t)(xrows + c_rows);
      for (int i = 0; i < pre; ++i) {
        mbar_expect_tx(&sm.full[i], stage_tx);
        load_w(base + i * C::STAGE, &tmW, &sm.full[i], (kb + i) * BK, tile * BW, b);
      }
      grid_dep_wait();
      stamp.mark(2);
      for (int i = 0, slot = 0, round = 0; i < nloc; ++i) {  // (slot, round) = (i % NS, i / NS)
        uint8_t* st = base + slot * C::STAGE;
        if (i >= pre) {
          if (round > 0) mbar_wait(&sm.empty[slot], (round - 1) & 1);
          mbar_expect_tx(&sm.full[slot], stage_tx);
          load_w(st, &tmW, &sm.full[slot], (kb + i) * BK, tile * BW, b);
        }
        tma_load_3d(st + W_BYTES, &tmX, &sm.full[slot], (kb + i) * BK, 0, b);
        if (LOAD_C && load_rep) tma_load_3d(st + W_BYTES + NX / 2 * 128, &tmX, &sm.full[slot], (kb + i) * BK, 0, b);
        else if (LOAD_C && !C::REP) tma_load_3d(st + W_BYTES + NX * 128, &tmC, &sm.full[slot], (kb + i) * BK, 0, b);
        if (++slot == NS) { slot = 0; ++round; }
      }
      stamp.mark(3);
    }
  } else {
    grid_dep_wait();
  }
  if (warp >= 1 && warp <= 3) {  // the epilogue's per-row constants, off its critical path
    const T* bias = static_cast<const T*>(args.bias);
    for (int r = tid - 32; r < slice0(rank + 1, S) - slice0(rank, S); r += 96) {
      const int64_t n = (int64_t)tile * BW + slice0(rank, S) + r;
      sm.rbias[r] = (bias && n < N) ? Elem<T>::to_f(bias[n]) : 0.f;
      if (PROT && !C::REP) sm.rstat[r] = n < N ? *reinterpret_cast<const float2*>(args.wrow + ((int64_t)b * N + n) * 2)
                                    : make_float2(0.f, 0.f);
    }
  }
  if (PROT && warp >= 1 && warp <= 3) {  // x's statistics over K and W's finiteness, for the checks
    float s[3] = {0.f, 0.f, 0.f};  // (replica checks need no statistics)
    if (!C::REP) {
      const int nch = cdiv(K, CHUNK);
      for (int c = tid - 32; c < nch; c += 96)
#pragma unroll
        for (int i = 0; i < 3; ++i) s[i] += args.xstat[((int64_t)b * nch + c) * 4 + i];
    }
#pragma unroll
    for (int i = 0; i < 3; ++i) s[i] = warp_sum(s[i]);
    if (lane < 3) sm.bpart[warp - 1][lane] = s[lane];  // summed in warp order after the k-loop
    if (tid == 32) sm.wfin = *args.wfinite;
  }

  float acc[NC / 2];
  // The crossed replica (dup): acc2 = the other warpgroup's 64 rows of W times x, from the same
  // stage (one more N = NX wgmma a k16 step), so row n's replica is computed by warpgroup 1 - cw's
  // thread of the same lane and warp % 4, in the same column: other warps and registers, another
  // moment. (x's halves swapped in acc2 instead, two N = NX / 2 wgmmas a k16 step, was 0.2-0.7 us
  // slower a call: run 75a.)
  float acc2[C::REP ? NX / 2 : 1];
  // The k-loop, compiled for the wgmma's N: MODE 0 NC (checksum columns), 1 NX (x's rows and the
  // loaded replica; the slot's columns stay zero), 2 NX and the crossed replica. Whole loops, not
  // a branch around the wgmma inside one: ptxas serialises wgmma behind a branch between
  // accumulator sets (C7519).
  auto k_loop = [&](auto mode) {
    constexpr int MODE = decltype(mode)::value, NW = MODE == 0 ? NC : NX;
    const int cw = warp / 4 - 1;
    for (int i = 0, slot = 0, round = 0, prev = NS - 1; i < nloc; ++i) {  // (slot, round) = (i % NS, i / NS)
      mbar_wait(&sm.full[slot], round & 1);
      if (i == 0) stamp.mark(4, STAMP_C);
      const uint32_t st = smem_u32(base + slot * C::STAGE);
      const uint64_t da = desc_k_sw128(st + cw * 64 * 128), db = desc_k_sw128(st + W_BYTES);
      const uint64_t dx = desc_k_sw128(st + (1 - cw) * 64 * 128);  // the other warpgroup's rows
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < BK / 16; ++ks) {
        wgmma_ss<T, NW>(acc, desc_add(da, 32 * ks), desc_add(db, 32 * ks), 1);
        if constexpr (MODE == 2) wgmma_ss<T, NX>(acc2, desc_add(dx, 32 * ks), desc_add(db, 32 * ks), 1);
      }
      wgmma_commit();
      if constexpr (INJ) {  // accumulator faults "after k-step" kb + i, on the register itself
        for (int q = 0; q < args.n_inj; ++q) {  // (warpgroup-uniform up to the owner lane)
          const Injection& inj = args.inj[q];
          if (inj.step != kb + i || inj.row / M != b || inj.col / BW != tile || (inj.col % BW) / 64 != cw) continue;
          wgmma_wait<0>();
          reg_fence<NC / 2>(acc);
          const int nl = inj.col % BW, m = (int)(inj.row % M);
          if ((nl % 64) / 16 == warp % 4 && lane == (nl % 8) * 4 + (m % 8) / 2)
            inject_acc<NC>(acc, 4 * (m / 8) + 2 * ((nl % 16) / 8) + (m % 2), inj, args.inj_log);
        }
      }
      wgmma_wait<1>();  // the previous stage's wgmmas are done: release its slot
      if (i > 0 && lane == 0) mbar_arrive(&sm.empty[prev]);
      prev = slot;
      if (++slot == NS) { slot = 0; ++round; }
    }
  };
  if (warp >= 4) {  // ----------------------------------------------- consumers: rows 64 cw ..
#pragma unroll
    for (int i = 0; i < NC / 2; ++i) acc[i] = 0.f;
    if constexpr (C::REP) {
#pragma unroll
      for (int i = 0; i < NX / 2; ++i) acc2[i] = 0.f;
      if (dup) k_loop(std::integral_constant<int, 2>{});
      else k_loop(std::integral_constant<int, 1>{});
    } else {
      if (FTG_THIN_ABLATE & 16) k_loop(std::integral_constant<int, 1>{});
      else k_loop(std::integral_constant<int, 0>{});
    }
    wgmma_wait<0>();
    reg_fence<NC / 2>(acc);
    if constexpr (C::REP) reg_fence<NX / 2>(acc2);
    stamp.mark(5, STAMP_C);
  }
  __syncthreads();  // the ring is consumed: the partial tile may overwrite it
  stamp.mark(6);
  bool invalid = false;
  float bst[3] = {0.f, 0.f, 0.f};
  if constexpr (PROT) {
#pragma unroll
    for (int i = 0; i < 3; ++i) bst[i] = sm.bpart[0][i] + sm.bpart[1][i] + sm.bpart[2][i];
    invalid = !(isfinite(bst[0]) && isfinite(bst[1]) && isfinite(bst[2])) || !sm.wfin;
  }
  // Split 1: each consumer thread checks and stores its own values (`epilogue_from_registers`).
  // The partial tile's row loop, column checks and staged stores took ~1.7 us a CTA at the end of
  // every decode call (run 68a) and more at 64 / 128 rows; a row failing its check (rare) sends
  // the CTA down that path, which checks again, counts and corrects (NOTES.md, sessions 61-62).
  bool through_part = true, traded = false;
  if constexpr (NX <= FTG_THIN_REG_EPILOGUE_NX) {
    if (S == 1) {
      bool flag = false, nonfin = false;
      if constexpr (C::REP) {
        if (dup && warp >= 4) {  // the crossed replica: trade acc2 for the other warpgroup's, the copy
          const int ct = tid - 128;  // of this thread's own values (through the ring, now free)
#pragma unroll
          for (int i = 0; i < NX / 2; ++i) part[i * 256 + ct] = acc2[i];
          named_bar_sync(1, 256);
#pragma unroll
          for (int i = 0; i < NX / 2; ++i) acc2[i] = part[i * 256 + (ct ^ 128)];
          traded = true;
        }
      }
      if (warp >= 4)
        flag = epilogue_from_registers<T, NX, PROT, INJ, REPL>(acc, acc2, sm, args, tile, b,
                                                         (warp / 4 - 1) * 64 + (warp % 4) * 16 + lane / 4, lane,
                                                         invalid, bst, dup, nonfin);
      if constexpr (PROT) {
        if (nonfin) sm.nonfin = 1;  // read by thread 0 after the barriers below
        through_part = __syncthreads_or(flag) != 0;
      } else {
        through_part = false;
#ifdef PHASE_STAMPS
        __syncthreads();  // the producer's end stamp after the consumers' stores
#endif
      }
    }
  }
  if (through_part) {
    if (warp >= 4) {  // D[n][c] -> part[c * PN + n]: a column of D (x's row c) is a run of the tile's rows
      const int cw = warp / 4 - 1, g = lane / 4, c4 = lane % 4;
      const int n0 = cw * 64 + (warp % 4) * 16 + g;
#pragma unroll
      for (int j = 0; j < NC / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) part[(8 * j + 2 * c4 + e) * PN + n0 + 8 * h] = acc[4 * j + 2 * h + e];
      if constexpr (C::REP) {
        if (dup) {  // the crossed replica from column NC on, at the other warpgroup's rows unless traded
          const int nr = traded ? n0 : n0 ^ 64;
#pragma unroll
          for (int j = 0; j < NX / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int e = 0; e < 2; ++e) part[(NC + 8 * j + 2 * c4 + e) * PN + nr + 8 * h] = acc2[4 * j + 2 * h + e];
        }
      }
    }
    if (S > 1) cluster_sync();  // every CTA's partial tile is in its shared memory
    else __syncthreads();
    stamp.mark(7);

    // ------------------------------------------------------------- the CTA's slice of rows: reduce, store, check
    const int R0 = slice0(rank, S), R = slice0(rank + 1, S) - R0;
    int ndet = 0, ncorr = 0, nunc = 0;
    T* yb = static_cast<T*>(args.y) + (int64_t)b * M * args.ldy;
    const int64_t y0 = (int64_t)tile * BW + R0;  // y's column of the slice's first row of D
    const bool vec = args.ldy % 4 == 0;
    // The slice summed over the cluster's partial tiles, four rows of D at a time (16 bytes of a
    // column: one load a source, DSMEM in a cluster). A column below NX is x's row c: bias added and
    // stored to y at once, 8 bytes a store; protected, the final values go back into this CTA's own
    // part (no other CTA reads its slice), the column checks' input (and the crossed replica's
    // columns from NC on, bias added alike). Compiled twice: without a
    // cluster (ONE: split 1) the slice and the sources are constants. (Row by row, a warp's lanes
    // over the columns and y staged through shared memory, this phase took 2-2.7 us a CTA at
    // splits 2-4, ~0.5 us a row: run 70a.)
    const int R0_ = R0, R_ = R, S_ = S;
    auto reduce = [&](auto one) {
      constexpr bool ONE = decltype(one)::value;
      const int R0 = ONE ? 0 : R0_, R = ONE ? BW : R_, S = ONE ? 1 : S_, R4 = R / 4;
      for (int i = tid; i < pcols * R4; i += THREADS) {
        const int c = i / R4, r = 4 * (i - c * R4);
        const uint32_t addr = smem_u32(part + c * PN + R0 + r);
        float4 v;
        if constexpr (ONE) {
          v = lds128f(addr);
        } else {
          float4 l[4];  // every source's load in flight before any is used
#pragma unroll
          for (int src = 0; src < 4; ++src)
            if (src < S) l[src] = ld_dsmem_f32x4(addr, src);
          v = l[0];
#pragma unroll
          for (int src = 1; src < 4; ++src)
            if (src < S) v.x += l[src].x, v.y += l[src].y, v.z += l[src].z, v.w += l[src].w;
        }
        float f[4] = {v.x, v.y, v.z, v.w};
        if (c >= NC) {  // the crossed replica's
#pragma unroll
          for (int e = 0; e < 4; ++e) f[e] += sm.rbias[r + e];
        }
        if (c < NX) {
#pragma unroll
          for (int e = 0; e < 4; ++e) f[e] += sm.rbias[r + e];
          if constexpr (INJ) {  // output-stage faults (final fp32 values)
            for (int qi = 0; qi < args.n_inj; ++qi)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                if (output_fault_row(args.inj[qi], M, b, y0 + r + e) == c) f[e] = inject_one(f[e], args.inj[qi], args.inj_log);
          }
          if (c < M) {
            T* dst = yb + c * args.ldy + y0 + r;
            if (vec && y0 + r + 4 <= N) {
              *reinterpret_cast<uint2*>(dst) = make_uint2(Elem<T>::pack(f[0], f[1]), Elem<T>::pack(f[2], f[3]));
            } else {
              for (int e = 0; e < 4 && y0 + r + e < N; ++e) dst[e] = Elem<T>::from_f(f[e]);
            }
          }
        }
        if constexpr (PROT) *reinterpret_cast<float4*>(part + c * PN + R0 + r) = make_float4(f[0], f[1], f[2], f[3]);
      }
    };
    if (S_ == 1) reduce(std::true_type{});
    else reduce(std::false_type{});
    stamp.mark(8);
    if (S > 1) cluster_arrive();  // this CTA's reads of the others' partial tiles are done
    if constexpr (PROT && !(FTG_THIN_ABLATE & 1)) {
      __syncthreads();  // the slice's final values are in part
      // The column checks: four threads a row of D (a column of y), each summing every fourth of
      // x's rows, joined by quad shuffles (4 R threads: whole warps), against its checksum columns;
      // replica checks: each comparing every fourth of the row's values with its copy.
      for (int i = tid; i < 4 * R; i += THREADS) {
        const int rr = i / 4, sub = i % 4, nl = R0 + rr;
        const int64_t n = (int64_t)tile * BW + nl;
        if constexpr (C::REP) {
          int bad = 0, nf = 0;
          for (int m = sub; m < M; m += 4) {
            const float a = part[m * PN + nl], r = part[(m + roff) * PN + nl];
            bad |= !same(a, r);
            nf |= !isfinite(a) && !isfinite(r);
          }
          bad |= __shfl_xor_sync(0xffffffffu, bad, 1);
          bad |= __shfl_xor_sync(0xffffffffu, bad, 2);
          if (n < N && nf) sm.nonfin = 1;
          if (sub == 0 && n < N && bad) {
            ++ndet;
            if (!(FTG_THIN_ABLATE & 4) && (args.policy == kCorrect || args.policy == kRecompute))
              sm.fixrow[atomicAdd(&sm.nfix, 1)] = rr;
          }
        } else {
          float sp = 0.f;
#pragma unroll 8
          for (int m = sub; m < M; m += 4) sp += part[m * PN + nl];
          sp += __shfl_xor_sync(0xffffffffu, sp, 1);
          sp += __shfl_xor_sync(0xffffffffu, sp, 2);
          if (sub == 0 && n < N && !invalid) {
            float chk[6];
#pragma unroll
            for (int j = 0; j < 6; ++j) chk[j] = part[(NX + j) * PN + nl];
            const ColumnCheck k = column_check_of<T>(chk, sm.rbias[rr], sm.rstat[rr], (int)M, bst, args);
            if (exceeds(sp - k.cp, k.thr)) {
              ++ndet;
              if (!(FTG_THIN_ABLATE & 4) && (args.policy == kCorrect || args.policy == kRecompute))
                sm.fixrow[atomicAdd(&sm.nfix, 1)] = rr;
            }
          }
        }
      }
      __syncthreads();
      stamp.mark(9);
      // Rare: each alarmed row's fault located and corrected by a warp (or the row recomputed), its
      // column of y stored again.
      for (int i = warp; !(FTG_THIN_ABLATE & 4) && i < sm.nfix; i += THREADS / 32) {
        const int rr = sm.fixrow[i], nl = R0 + rr;
        const int64_t n = (int64_t)tile * BW + nl;
        float v[NQ];
#pragma unroll
        for (int q = 0; q < NQ; ++q) v[q] = 32 * q + lane < NC ? part[(32 * q + lane) * PN + nl] : 0.f;
        const float bn = sm.rbias[rr];
        if constexpr (C::REP) {  // every differing element recomputed: any number of them corrected
          fix_replicas<T, NQ>(v, part, roff, nl, args, b, n, bn, lane);
          ncorr += lane == 0;
        } else {
          float chk[6];
#pragma unroll
          for (int j = 0; j < 6; ++j) chk[j] = part[(NX + j) * PN + nl];
          const ColumnCheck k = column_check_of<T>(chk, bn, sm.rstat[rr], (int)M, bst, args);
          // The faulty row of x: weighted over plain residual, or the only non-finite element.
          int p = -1;
          unsigned nf = 0;
#pragma unroll
          for (int q = 0; q < NQ; ++q) nf += __popc(__ballot_sync(0xffffffffu, 32 * q + lane < M && !isfinite(v[q])));
          if (nf == 0) {  // sums on values scaled by 2^-8: a huge faulty value cannot overflow them
            float p1 = 0.f, p2 = 0.f;
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
              const int m = 32 * q + lane;
              if (m < M) {
                p1 = fmaf(v[q], 1.f / 256.f, p1);
                p2 = fmaf((float)(m + 1) * (1.f / (256.f * W_DEN)), v[q], p2);
              }
            }
            p1 = warp_sum(p1) - k.cp * (1.f / 256.f);
            p2 = warp_sum(p2) - k.cwt * (1.f / 256.f);
            const float ratio = W_DEN * p2 / p1, near = rintf(ratio);
            if (isfinite(ratio) && fabsf(ratio - near) < 0.3f && near >= 1.f && near <= (float)M) p = (int)near - 1;
          } else if (nf == 1) {
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
              const unsigned bal = __ballot_sync(0xffffffffu, 32 * q + lane < M && !isfinite(v[q]));
              if (bal) p = 32 * q + __ffs(bal) - 1;
            }
          }
          const bool ok = p >= 0 && fix_row<T, NQ>(v, args, b, n, bn, p, k.cp, k.thr, lane);
          if (ok) {
            ++ncorr;
          } else {
            ++nunc;
            if (args.policy == kRecompute) recompute_row<T, NQ>(v, args, b, n, bn, lane);
          }
        }
#pragma unroll
        for (int q = 0; q < NQ; ++q) {
          const int m = 32 * q + lane;
          if (m < M && n < N) yb[m * args.ldy + n] = Elem<T>::from_f(v[q]);
        }
      }
      // ndet: per thread; ncorr, nunc: per warp (lane 0 counts)
      if (ndet) atomicAdd(&sm.ndet, ndet);
      if (lane == 0 && (ncorr | nunc)) { atomicAdd(&sm.ncorr, ncorr); atomicAdd(&sm.nunc, nunc); }
      __syncthreads();  // the counts are complete for thread 0's report
    }
    stamp.mark(10);
  }  // through_part
  if constexpr (PROT) {
    if (tid == 0) {
      add_outcomes(args, sm.ndet, sm.ncorr, sm.nunc);
      if (tile == 0 && rank == 0) {
        count_nonfinite_once(args, invalid || sm.nonfin, (int)args.batch, static_cast<unsigned long long*>(args.ws));
        if (b == 0) atomicAdd(reinterpret_cast<unsigned long long*>(args.counters + kChecks), 1ull);
      }
    }
  }
  stamp.mark(11);
  if (S > 1) cluster_wait();  // the others have read this CTA's partial tile
}

template <typename T, int NX, bool PROT, bool INJ, bool REPL>
int launch(const Args* a, const CUtensorMap& tw, const CUtensorMap& tx, const CUtensorMap& tc) {
  constexpr auto kern = &gemm_thin_kernel<T, NX, PROT, INJ, REPL>;
  const size_t smem = smem_bytes<NX, PROT, REPL>(a->stages, a->split);
  if (cudaError_t e = sm90::allow_smem<kern>(smem)) return e;
  const dim3 grid((unsigned)(cdiv(a->N, BW) * a->split), 1, (unsigned)a->batch);
  const bool pass = PROT && !Cfg<NX, PROT, REPL>::REP && !(FTG_THIN_ABLATE & 2);
  if (pass) {
    const dim3 pg((unsigned)cdiv(a->K, CHUNK), (unsigned)a->batch);
    if (int e = launch_split(&thin_xsum_kernel<T>, pg, 256, 0, a->stream, 1, a->pdl != 0, *a)) return e;
  }
  return launch_split(kern, grid, THREADS, smem, a->stream, a->split, pass || a->pdl != 0, tw, tx, tc, *a);
}
// f(PROT, REPL) as std::bool_constant for the kernel variant a call with x padded to NX rows and
// `protect` (see replica_of) runs: at NX = 32 no checksum-row variant where replicas can run, at 128
// no replica variant.
template <int NX, typename F>
auto with_variant(int protect, F f) {
  using std::false_type, std::true_type;
  if (!protect) return f(false_type{}, false_type{});
  if constexpr (NX == 32 && replica_capable(NX)) return f(true_type{}, true_type{});
  else if constexpr (replica_capable(NX))
    return replica_of(NX, protect) ? f(true_type{}, true_type{}) : f(true_type{}, false_type{});
  else return f(true_type{}, false_type{});
}
// How many clusters of `split` CTAs of this kernel the device holds at once, or a negative error.
template <int NX, bool PROT, bool REPL>
int max_clusters(int stages, int split) {
  constexpr auto kern = &gemm_thin_kernel<__nv_bfloat16, NX, PROT, false, REPL>;
  const size_t smem = smem_bytes<NX, PROT, REPL>(stages, split);
  if (cudaError_t e = sm90::allow_smem<kern>(smem)) return -(int)e;
  return sm90::max_active_clusters(kern, THREADS, smem, split);
}
template <typename T, int NX>
int dispatch_p(const Args* a, const CUtensorMap& tw, const CUtensorMap& tx, const CUtensorMap& tc) {
  return with_variant<NX>(a->protect, [&](auto prot, auto repl) {
    constexpr bool P = decltype(prot)::value, R = decltype(repl)::value;
    if constexpr (!P) return launch<T, NX, false, false, false>(a, tw, tx, tc);
    else return a->n_inj ? launch<T, NX, true, true, R>(a, tw, tx, tc) : launch<T, NX, true, false, R>(a, tw, tx, tc);
  });
}
// f(NX) as std::integral_constant for x padded to nx rows (32, 64, else 128).
template <typename F>
auto with_padding(int nx, F f) {
  if (nx == 32) return f(std::integral_constant<int, 32>{});
  if (nx == 64) return f(std::integral_constant<int, 64>{});
  return f(std::integral_constant<int, 128>{});
}
template <typename T>
int dispatch(const Args* a, const CUtensorMap& tw, const CUtensorMap& tx, const CUtensorMap& tc) {
  return with_padding(a->mtile, [&](auto nxc) { return dispatch_p<T, decltype(nxc)::value>(a, tw, tx, tc); });
}

}  // namespace thin
}  // namespace ftg

// Args.mtile: x's rows padded (32, 64, 128, >= M); split: CTAs per cluster along K (1-4);
// stages: ring depth; protect: 0, 1 or 2 (replicas where the padding allows: thin::replica_of);
// protected calls need ws (8 bytes, zero) and, unless replica-checked
// (ft_gemm_thin_replica_checked), wrow, xsum ([batch, 8, K]) and xstat.
extern "C" int ft_gemm_thin(const ftg::Args* a) {
  using namespace ftg;
  const int nx = a->mtile;
  if (a->K % 8 || a->M < 1 || a->M > nx || (nx != 32 && nx != 64 && nx != 128) || a->N < 1 || a->batch < 1 ||
      a->split < 1 || a->split > 4 || a->stages < 2 || a->stages > thin::MAX_STAGES || a->protect < 0 ||
      a->protect > 2 || (a->protect && !thin::replica_of(nx, a->protect) && (!a->wrow || !a->xsum || !a->xstat)))
    return FTG_ERR_ARGS;
  CUtensorMap tw, tx, tc;
  if (!make_tmap(&tw, a->w, a->batch, a->N, a->K, a->w_rstride, a->w_bstride, thin::BW) ||
      !make_tmap(&tx, a->x, a->batch, a->M, a->K, a->x_rstride, a->x_bstride, thin::x_box_rows(a->M, nx)))
    return FTG_ERR_TMAP;
  if (a->protect && !thin::replica_of(nx, a->protect)) {  // the pass's checksum rows (a replica of x: tx)
    if (!make_tmap(&tc, a->xsum, a->batch, 8, a->K, a->K, 8 * a->K, 8)) return FTG_ERR_TMAP;
  } else {
    tc = tx;
  }
  return a->dtype == 0 ? thin::dispatch<__nv_bfloat16>(a, tw, tx, tc) : thin::dispatch<__half>(a, tw, tx, tc);
}

// Whether this build checks a call with x padded to nx rows and `protect` (Args) against replicas
// (then the host passes no x-side buffer and no W row statistics).
extern "C" int ft_gemm_thin_replica_checked(int nx, int protect) { return ftg::thin::replica_of(nx, protect) ? 1 : 0; }

// Shared memory of a thin-kernel launch (the host's choice of ring depth); protect as in Args.
extern "C" long long ft_gemm_thin_smem(int nx, int protect, int stages, int split) {
  using namespace ftg::thin;
  return with_padding(nx, [&](auto nxc) -> long long {
    return with_variant<decltype(nxc)::value>(protect, [&](auto p, auto r) -> long long {
      return (long long)smem_bytes<decltype(nxc)::value, decltype(p)::value, decltype(r)::value>(stages, split);
    });
  });
}

// Clusters of `split` thin-kernel CTAs resident at once on the current device (the host's choice
// of split: a wave of clusters is this many), or a negative CUDA error.
extern "C" int ft_gemm_thin_max_clusters(int nx, int protect, int stages, int split) {
  using namespace ftg::thin;
  if (split < 1 || split > 4 || stages < 2 || stages > MAX_STAGES) return -1;
  return with_padding(nx, [&](auto nxc) {
    return with_variant<decltype(nxc)::value>(protect, [&](auto p, auto r) {
      return max_clusters<decltype(nxc)::value, decltype(p)::value, decltype(r)::value>(stages, split);
    });
  });
}

#ifdef PHASE_STAMPS
// Diagnostic build: the thin kernel's phase records (this file's own), as ft_gemm_stream_stamps.
extern "C" int ft_gemm_thin_stamps(void* out, int cap) { return phase_stamps::copy_records(out, cap); }
#endif

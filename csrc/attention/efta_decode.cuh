// EFTA for few query rows per KV head (decode): split-KV flash attention with the protection stages
// of the tile kernels (efta_kernel.cuh) rebuilt for its layout, two split kernels (fp32 FMAs, first
// below; tensor cores, decode_tc_split_kernel further down; "auto" picks per shape, as measured:
// cuda_attention.decode_impl) and a combine kernel that merges the splits under a check of its own.
//
// Why a second kernel (NOTES_attention.md, session 48): the tile kernels give each (query block, query
// head) one CTA, so one query row per step makes B x Hq CTAs that each stream the whole cache at
// 170-300 GB/s, and their checksum prepass reads the cache once more. Here
//  * one CTA holds every query row of a KV head's group (Sq x Hq/Hk <= 8 rows, run as R = 2, 4 or 8):
//    the cache is read once per KV head, not once per query head;
//  * the key tiles are cut into runs (splits), one CTA each, so that one step fills the GPU;
//  * the checksums are built in the CTA from the tiles already in shared memory (no prepass);
//  * the FMA kernel's products run in fp32, as the reference computes; its shared-memory loads and
//    latency bound it, and it wins only at head dim 64 with 2 rows (NOTES_attention.md, session 49).
//
// A CTA (128 threads) walks its split's 64-key tiles (the reference's tiles) through a cp.async ring.
// Scores: thread pair (j = tid / 2, half h) owns key j and computes its R scores over D/2 columns
// each. Protection per tile (see ftcompile/abft/efta.py for the reference semantics):
//  * GEMM-I: a left checksum over the CTA's rows, q^c = sum_r q_r, so s^c_j = q^c . k_j must equal
//    sum_r s_rj within c_gemm * sum_r ||q_r|| * ||k_j|| (one extra dot product per key);
//  * unified check (every row of key j alive): sum_r log2 P_rj against c2 s^c_j + sum_r (b_rj - m_r),
//    i.e. GEMM-I, the scale-and-mask FMA and EXP in one comparison (Algorithm 1, line 13); a key with
//    dead or masked rows checks GEMM-I on raw scores and EXP per element, and dead P must be 0;
//  * rowmax (SNVR): every score <= the new max, and some score equals it (or the max did not move);
//  * an alarm recomputes the tile (deterministic): counted only if the data changed; the
//    recomputation is what continues.
// PV: thread (column pair, key part) accumulates O over its part of the tile from the P in shared
// memory. Row checksums: the key's pair sums its V row (V^c_j = sum_c V_jc, and sum_c |V_jc| for the
// threshold) and multiplies them with its own P in registers, so a P changed between the check and
// the products shows; l sums the registers' P and l_mma the P the products read (bit-equal unless
// hit). At the end of the split: l in [1, keys], l == l_mma, |sum_c O - O^c| <= e_out sum P |V|; a
// failing row has the split recomputed and compared element by element (one element off: a single
// fault, corrected; more: uncorrectable, kept unless the policy recomputes), as the tile kernels do.
// Combine: each split's weight exp(m_s - M) is computed twice, by different warps, for O and for its
// checksum, and so is the normaliser; the merged row is checked against the merged checksum.
#pragma once
#include <type_traits>

#include "efta_common.cuh"
#include "phase_stamps.cuh"
#include "sm90_host.cuh"

namespace efta {
namespace dec {

constexpr int kThreads = 128;
constexpr float kDead2 = -80.f * kLog2e;  // the reference's DEAD in log2 units: P below counts as 0
// Per-element tolerance of log2 P against its argument, per unit of 1 + |x| + |score|: ex2.approx and
// lg2.approx err by ~2^-22 each, the argument's FMA by 2^-24 of |score|.
constexpr float kTolExp = 0x1p-19f;
constexpr float kTolL = 0x1p-12f;  // the row sum's SNVR range [1, keys], relative

template <typename T, int D, int R>
struct Cfg {
  static constexpr int kNch = D / 8;            // 16-byte chunks per row
  static constexpr int kHch = D / 16;           // chunks per half row (one thread of a key's pair)
  static constexpr int kKP = 256 / D;           // key parts of the PV products (threads per column pair)
  static constexpr int kKPL = kBlockN / kKP;    // keys per part
  static constexpr int kStages = D == 128 ? 2 : 3;  // (~72 / ~56 KB: 3 CTAs per SM)
  static constexpr int kRH = R / 2;             // rows per thread of a key's pair (rows h, h + 2, ...)
  static constexpr int kQS = D / 2 + 4;         // floats per half row of q (padded: halves in other banks)
  static constexpr int kNE = R * D / kThreads;  // elements of the split's O per thread at the end
  static constexpr int kRed = 5 * R;            // values one end-of-split reduction carries per thread
  static constexpr int kTile = kBlockN * D;     // elements of one K or V tile
  static constexpr int kOffQ = 0;
  static constexpr int kOffQc = kOffQ + R * 2 * kQS * 4;
  static constexpr int kOffP = kOffQc + 2 * kQS * 4;
  static constexpr int kOffMax = kOffP + R * kBlockN * 4;
  static constexpr int kOffRed = kOffMax + 4 * R * 4;
  static constexpr int kOffInt = kOffRed + 4 * kRed * 4;
  static constexpr int kOffFirst = kOffInt + 8 * 4;  // the first attempt's split output (R x D + 3 R)
  static constexpr int kOffStage = (kOffFirst + (R * D + 3 * R) * 4 + 127) / 128 * 128;
  static constexpr int kStageBytes = 2 * kTile * (int)sizeof(T);
  static constexpr int kSmem = kOffStage + kStages * kStageBytes;
  static_assert(kKP * R * D * 4 <= kStages * kStageBytes, "the end-of-split O exchange reuses the ring");
};

// floats per split in the workspace: O [R][D], then m (log2 units), l, O^c, sum P|V| per row.
template <int R, int D>
__host__ __device__ constexpr int part_floats() { return R * D + 4 * R; }

// Element offset of (row, 16-byte chunk) in a K or V tile: the chunk is XORed with 2 (row % 4) + (its
// half), so the 8 threads of a load phase (4 keys x 2 halves, one chunk each) and the 8 chunks one
// cp.async phase writes fall in 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (((row & 3) << 1) | ((chunk / (D / 16)) & 1))) << 3);
}

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const float2 a = Elem<T>::unpack(u.x), b = Elem<T>::unpack(u.y), c = Elem<T>::unpack(u.z),
               d = Elem<T>::unpack(u.w);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
}

// The CTA's rows: row rr is query i of head h (rows past the group's Sq x G are padding: q = 0, every
// key < Sk live, never stored).
struct Rows {
  int G, rb, total;
  __device__ __forceinline__ bool valid(int rr, int R) const { return rb * R + rr < total; }
  __device__ __forceinline__ int query(int rr, int R) const { return (rb * R + rr) / G; }
  __device__ __forceinline__ int head(int rr, int R, int hk) const { return hk * G + (rb * R + rr) % G; }
};

// Injection records of (stage, tile t) that hit this CTA: f(record, CTA row, its log).
template <int R, typename F>
__device__ __forceinline__ void for_recs(const Params& p, int stage, int t, int b, int hk, const Rows& rows, F f) {
  for (int i = 0; i < p.n_inj; ++i) {
    const InjRec& rec = p.inj[i];
    if (rec.stage != stage || rec.tile != t || rec.b != b || rec.h / rows.G != hk) continue;
    const int rr = rec.row * rows.G + rec.h % rows.G - rows.rb * R;
    if (rr >= 0 && rr < R) f(rec, rr, p.inj_log + 2 * i);
  }
}

// a[i] = corrupt(a[i]) with i a runtime index (unrolled: a stays in registers); log: before, after.
template <int N>
__device__ __forceinline__ void corrupt_at(float (&a)[N], int i, const InjRec& rec, float* log) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (k == i) {
      const float before = a[k];
      a[k] = corrupt(a[k], rec);
      if (log != nullptr) log[0] = before, log[1] = a[k];
    }
}

// acc[i] += x with i a runtime index (unrolled: acc stays in registers).
template <int N>
__device__ __forceinline__ void add_at(float (&acc)[N], int i, float x) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (k == i) acc[k] += x;
}

// Sum each of v[0..N) over the CTA; every thread gets the totals (buf: 4 x N floats of shared memory).
template <int N>
__device__ __forceinline__ void block_sum(float (&v)[N], float* buf) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int o = 16; o; o >>= 1) v[n] += __shfl_xor_sync(kFull, v[n], o);
  __syncthreads();  // buf's last readers are done
  if (lane == 0)
#pragma unroll
    for (int n = 0; n < N; ++n) buf[w * N + n] = v[n];
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) v[n] = (buf[n] + buf[N + n]) + (buf[2 * N + n] + buf[3 * N + n]);
}

// Whether an injection record hits this CTA's rows in key tiles [t_begin, t_end).
template <int R>
__device__ __forceinline__ bool split_injected(const Params& p, const Rows& rows, int b, int hk, int t_begin, int t_end) {
  bool hit = false;
  for (int i = 0; i < p.n_inj; ++i) {
    const InjRec& rec = p.inj[i];
    const int rr = rec.row * rows.G + rec.h % rows.G - rows.rb * R;
    hit |= rec.b == b && rec.h / rows.G == hk && rr >= 0 && rr < R && rec.tile >= t_begin && rec.tile < t_end;
  }
  return hit;
}

// The OR of each thread's bits over the CTA (buf: 4 ints of shared memory).
__device__ __forceinline__ unsigned cta_or(unsigned bits, int* buf) {
  const unsigned wb = __reduce_or_sync(kFull, bits);
  __syncthreads();  // buf's last readers are done
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = (int)wb;
  __syncthreads();
  return (unsigned)(buf[0] | buf[1] | buf[2] | buf[3]);
}

// The end of each attempt at a split, shared by the split kernels: the end-of-split checks on the
// CTA's totals, the first attempt kept where the split is to run again, the second compared with it
// and counted, and the split's partial result for the combine kernel.
template <int D, bool kProtect, int R, int NE>
struct SplitEnd {
  float fin_o[NE];  // this thread's elements of the split's O: (row e / D, column e % D), e = tid + 128 k
  float fin_l[R], fin_lm[R], fin_oc[R], fin_ab[R], fin_so[R];
  uint32_t redo_l = 0, redo_o = 0;  // rows the end-of-split checks sent to recomputation
  uint32_t reported = 0;  // rows whose fault this split counted and kept (detect, raise): the combine skips them
  uint32_t dig_first = 0;
  bool nf = false;      // non-finite inputs seen
  bool talarm = false;  // a tile check failed in the first attempt (the tensor-core kernel)

  // The split's O from its key parts' partials in shared memory (sO[part][row][column]): this
  // thread's elements into fin_o, their sums per row into red (the rest of red zeroed).
  template <int kParts, int NR>
  __device__ __forceinline__ void gather_o(const float* sO, float (&red)[NR]) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int n = 0; n < NR; ++n) red[n] = 0.f;
#pragma unroll
    for (int k = 0; k < NE; ++k) {
      const int e = tid + kThreads * k, r = e / D, c = e % D;
      float x = 0.f;
#pragma unroll
      for (int q = 0; q < kParts; ++q) x += sO[(q * R + r) * D + c];
      fin_o[k] = x;
      add_at(red, r, x);
    }
  }

  // After an attempt: red holds the CTA's totals per row (sum_c O, l, l_mma, O^c, sum P|V|), m the row
  // maxima, nf_rows the rows with a non-finite score. exact_l: l must equal l_mma bit for bit (else
  // to kTolL). split_bad: a tile check of this thread failed (the split is rerun, whatever the
  // policy); dig: this thread's digest of the attempt's scores, P and max. Returns whether the split
  // is to run again.
  __device__ bool attempt_done(const Params& p, const Rows& rows, bool first, const float (&red)[5 * R],
                               const float (&m)[R], unsigned nf_rows, int keys, bool exact_l, bool split_bad,
                               uint32_t dig, float* sFirst, float* sRed) {
    const int tid = threadIdx.x;
    const bool fix = p.policy == kCorrect || p.policy == kRecompute;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      fin_so[r] = red[r], fin_l[r] = red[R + r], fin_lm[r] = red[2 * R + r];
      fin_oc[r] = red[3 * R + r], fin_ab[r] = red[4 * R + r];
    }
    if constexpr (!kProtect) return false;
    // The end-of-split checks (uniform: every thread holds the CTA's totals), as bit operations
    // (&, not &&: the short circuits were ~30 branches on the split's last critical path).
    uint32_t bad_l = 0, bad_o = 0, nonfinite = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool live = rows.valid(r, R) & (m[r] != -INFINITY);  // not padding, some live key in the split
      // x - x is 0 where x is finite, NaN where not: one compare for the row's six values
      const float zero = ((m[r] - m[r]) + (fin_l[r] - fin_l[r])) + ((fin_lm[r] - fin_lm[r]) + (fin_oc[r] - fin_oc[r])) +
                         ((fin_ab[r] - fin_ab[r]) + (fin_so[r] - fin_so[r]));
      const bool finite = (zero == 0.f) & !((nf_rows >> r) & 1u);
      const bool agree = exact_l ? __float_as_uint(fin_l[r]) == __float_as_uint(fin_lm[r])
                                 : fabsf(fin_l[r] - fin_lm[r]) <= kTolL * fin_lm[r];
      const bool l_ok = (fin_l[r] >= 1.f - kTolL) & (fin_l[r] <= keys * (1.f + kTolL)) & agree;
      const bool o_ok = fabsf(fin_so[r] - fin_oc[r]) <= fmaf(p.e_out, fin_ab[r], 1e-30f);
      nonfinite |= (uint32_t)(live & !finite) << r;
      bad_l |= (uint32_t)(live & finite & !l_ok) << r;
      bad_o |= (uint32_t)(live & finite & l_ok & !o_ok) << r;
    }
    if (first) {
      talarm = __syncthreads_or(split_bad);
      if (tid == 0 && p.alarms != nullptr) {
        if (bad_l) atomicAdd(p.alarms + kRowsumAlarms, (unsigned long long)__popc(bad_l));
        if (bad_o) atomicAdd(p.alarms + kFinalAlarms, (unsigned long long)__popc(bad_o));
        if (talarm) atomicAdd(p.alarms + kTileAlarms, 1ull);
      }
      // A tile check failed: the split again, whatever the policy (deterministic: what changes
      // was a fault, the recomputation its correction; an alarm that repeats is the data's).
      if (!talarm) {
        // Non-finite rows: inputs where the recomputation repeats them (fix policies), else inputs.
        const uint32_t rerun = fix ? (bad_l | bad_o | nonfinite) : 0u;
        if (!fix) {
          if (tid == 0) bump(p.counters, kDetected, __popc(bad_l | bad_o));
          reported = bad_l | bad_o;
          nf |= nonfinite != 0;
        }
        if (!rerun) return false;
        redo_l = bad_l | nonfinite, redo_o = bad_o;
      }
      dig_first = dig;
#pragma unroll
      for (int k = 0; k < NE; ++k) sFirst[tid + kThreads * k] = fin_o[k];
      if (tid == 0)
#pragma unroll
        for (int r = 0; r < R; ++r)
          sFirst[R * D + r] = fin_l[r], sFirst[R * D + R + r] = m[r], sFirst[R * D + 2 * R + r] = fin_lm[r];
      return true;  // the split again, without injections
    }
    // Second attempt: compare with the first, element by element, per flagged row.
    float diff[R];
#pragma unroll
    for (int r = 0; r < R; ++r) diff[r] = 0.f;
#pragma unroll
    for (int k = 0; k < NE; ++k) {
      const bool differs = __float_as_uint(fin_o[k]) != __float_as_uint(sFirst[tid + kThreads * k]);
      add_at(diff, (tid + kThreads * k) / D, differs ? 1.f : 0.f);
    }
    block_sum<R>(diff, sRed);
    uint32_t keep_first = 0;
    bool any_moved = false;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      // (a fault in l_mma alone changes no output: the rerun's l_mma tells it)
      const bool moved_r = diff[r] > 0.f || __float_as_uint(fin_l[r]) != __float_as_uint(sFirst[R * D + r]) ||
                           __float_as_uint(m[r]) != __float_as_uint(sFirst[R * D + R + r]) ||
                           __float_as_uint(fin_lm[r]) != __float_as_uint(sFirst[R * D + 2 * R + r]);
      any_moved |= moved_r;
      if (talarm) continue;  // (below: the rerun stands, counted once)
      if ((redo_l >> r) & 1u) {
        if (!moved_r) nf |= (nonfinite >> r) & 1u;  // repeated: the inputs' (non-finite) or the check's
        else if (tid == 0) {
          bump(p.counters, kDetected);
          bump(p.counters, ((bad_l | bad_o) >> r) & 1u ? kUncorrectable : kCorrected);
        }
      } else if ((redo_o >> r) & 1u) {
        if (diff[r] > 0.f && tid == 0) {
          bump(p.counters, kDetected);
          bump(p.counters, diff[r] == 1.f ? kCorrected : kUncorrectable);
        }
        if (diff[r] > 1.f && p.policy != kRecompute) keep_first |= 1u << r;
        if (diff[r] > 1.f) reported |= 1u << r;  // uncorrectable, counted: the merged row fails too
      }
    }
    if (talarm) {
      any_moved = __syncthreads_or(any_moved || dig != dig_first);
      if (any_moved && tid == 0) {
        bump(p.counters, kDetected);
        if (fix) bump(p.counters, kCorrected);
        if (p.alarms != nullptr) atomicAdd(p.alarms + kTileFaults, 1ull);
      }
      nf |= !any_moved && nonfinite != 0;
    }
    if (keep_first)
#pragma unroll
      for (int k = 0; k < NE; ++k) {
        const int r = (tid + kThreads * k) / D;
        if ((keep_first >> r) & 1u) fin_o[k] = sFirst[tid + kThreads * k];
      }
    return false;
  }

  // The split's partial result (unnormalised O, max, row sum, checksum, magnitude) in the workspace.
  __device__ void write_partial(const Params& p, const float (&m)[R], unsigned nf_rows) const {
    const int tid = threadIdx.x;
    float* part = p.dec_ws + ((int64_t)(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * part_floats<R, D>();
#pragma unroll
    for (int k = 0; k < NE; ++k) part[tid + kThreads * k] = fin_o[k];
    if (tid < R) {
      float l = 0.f, mm = 0.f, oc = 0.f, ab = 0.f;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r == tid) l = fin_l[r], mm = m[r], oc = fin_oc[r], ab = fin_ab[r];
      if ((nf_rows >> tid) & 1u) l = __int_as_float(0x7fc00000);  // a non-finite score: the row is NaN, as SDPA's
      part[R * D + tid] = mm;
      part[R * D + R + tid] = l;
      part[R * D + 2 * R + tid] = oc;
      part[R * D + 3 * R + tid] = (reported >> tid) & 1u ? -ab : ab;  // (the sign: counted here already)
    }
    if (kProtect && tid == 0 && (nf || nf_rows)) atomicOr(p.nf_token + 2, 1);
  }
};

// One tile's scores, max, exponentials and checks for the thread's key (the pass; the tile step
// below runs it once, and again on an alarm).
template <int R>
struct TilePass {
  float m[R];    // the tile's new row max (log2 units)
  float P[R];
  uint32_t fp;   // fingerprint of the thread's scores, max and P (a recomputation compares it)
  bool bad;      // this thread's checks failed
  unsigned eq;   // rows whose max this key attains
  unsigned nf;   // rows with a non-finite score
};

__device__ __forceinline__ uint32_t mix(uint32_t h, float x) {
  return (h ^ __float_as_uint(x)) * 0x9E3779B1u + (h >> 15);
}

template <typename T, int D, bool kProtect, int R>
__global__ void __launch_bounds__(kThreads, R <= 4 ? 3 : 2) decode_split_kernel(const Params p) {
  using C = Cfg<T, D, R>;
  extern __shared__ __align__(128) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem + C::kOffQ);
  float* sQc = reinterpret_cast<float*>(smem + C::kOffQc);
  float* sP = reinterpret_cast<float*>(smem + C::kOffP);
  float* sMax = reinterpret_cast<float*>(smem + C::kOffMax);
  float* sRed = reinterpret_cast<float*>(smem + C::kOffRed);
  int* sInt = reinterpret_cast<int*>(smem + C::kOffInt);
  float* sFirst = reinterpret_cast<float*>(smem + C::kOffFirst);
  T* ring = reinterpret_cast<T*>(smem + C::kOffStage);

  // The combine kernel may launch now (R <= 4: its CTAs wait for this grid before reading, PDL).
  grid_dep_launch_dependents();
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int split = blockIdx.x, bh = blockIdx.z, b = bh / p.Hk, hk = bh % p.Hk;
  const Rows rows{p.Hq / p.Hk, (int)blockIdx.y, p.Sq * (p.Hq / p.Hk)};
  const int t_begin = split * p.dec_tps, t_end = min(t_begin + p.dec_tps, p.dec_visit);
  const int nt = t_end - t_begin;
  const T* gk = reinterpret_cast<const T*>(p.k) + b * p.k_sb + hk * p.k_sh;
  const T* gv = reinterpret_cast<const T*>(p.v) + b * p.v_sb + hk * p.v_sh;
  const float c2 = p.scale * kLog2e;
  const bool fix = p.policy == kCorrect || p.policy == kRecompute;

  // q rows as fp32 (halves padded apart), their checksum row and the sum of their norms.
  for (int e = tid; e < R * D; e += kThreads) {
    const int rr = e / D, d = e % D;
    float x = 0.f;
    if (rows.valid(rr, R)) {
      const T* gq = reinterpret_cast<const T*>(p.q) + b * p.q_sb + rows.head(rr, R, hk) * p.q_sh +
                    (int64_t)rows.query(rr, R) * p.q_ss;
      x = Elem<T>::to_f(gq[d]);
    }
    sQ[(rr * 2 + d / (D / 2)) * C::kQS + d % (D / 2)] = x;
  }
  __syncthreads();
  if (tid < D) {
    float c = 0.f;
#pragma unroll
    for (int rr = 0; rr < R; ++rr) c += sQ[(rr * 2 + tid / (D / 2)) * C::kQS + tid % (D / 2)];
    sQc[(tid / (D / 2)) * C::kQS + tid % (D / 2)] = c;
  }
  float qns = 0.f;  // sum_r ||q_r||
  if constexpr (kProtect) {
    float sq[R];
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      sq[rr] = 0.f;
      for (int d = lane; d < D; d += 32) {
        const float x = sQ[(rr * 2 + d / (D / 2)) * C::kQS + d % (D / 2)];
        sq[rr] = fmaf(x, x, sq[rr]);
      }
#pragma unroll
      for (int o = 16; o; o >>= 1) sq[rr] += __shfl_xor_sync(kFull, sq[rr], o);
    }
    // (every warp computed the same: no exchange needed)
#pragma unroll
    for (int rr = 0; rr < R; ++rr) qns += sqrtf(sq[rr]);
  }
  __syncthreads();

  const bool cta_inj = kProtect && split_injected<R>(p, rows, b, hk, t_begin, t_end);

  const int j = tid >> 1, hh = tid & 1;  // the key this thread's pair owns, and its half
  const int cp = tid % (D / 2), kp = tid / (D / 2), col = 2 * cp;  // PV: column pair, key part

  auto load_tile = [&](int t, int stg) {
    T* sK = ring + stg * 2 * C::kTile;
    T* sV = sK + C::kTile;
    const int j0 = t * kBlockN;
    for (int c = tid; c < kBlockN * C::kNch; c += kThreads) {
      const int row = c / C::kNch, ch = c % C::kNch, gr = j0 + row, cr = min(gr, p.Sk - 1);
      cp_async16(smem_u32(sK + swz<D>(row, ch)), gk + (int64_t)cr * p.k_ss + ch * 8, gr < p.Sk);
      cp_async16(smem_u32(sV + swz<D>(row, ch)), gv + (int64_t)cr * p.v_ss + ch * 8, gr < p.Sk);
    }
  };

  // One pass over a tile: scores, the row max (one CTA exchange), exponentials, checks; writes P to
  // shared memory (the thread's rows) and injects where `inject`.
  auto tile_pass = [&](const T* sK, const T* sV, int t, const float (&m_old)[R], bool inject, float& vs,
                       float& va) -> TilePass<R> {
    TilePass<R> tp;
    const int key = t * kBlockN + j;
    float cs = 0.f, kk = 0.f;
    float sc[R], st[R], bias[R];  // raw scores q_r . k_j; log2-domain arguments c2 s + b (-inf: not live)
#pragma unroll
    for (int r = 0; r < R; ++r) sc[r] = 0.f;
#pragma unroll
    for (int c = 0; c < C::kHch; ++c) {
      const int L = hh * C::kHch + c;
      float kf[8];
      unpack8<T>(*reinterpret_cast<const uint4*>(sK + swz<D>(j, L)), kf);
      const float* qc = sQc + hh * C::kQS + c * 8;
      const float4 qa = *reinterpret_cast<const float4*>(qc), qb = *reinterpret_cast<const float4*>(qc + 4);
      if constexpr (kProtect) {
#pragma unroll
        for (int e = 0; e < 8; ++e) kk = fmaf(kf[e], kf[e], kk);
        cs = fmaf(qa.x, kf[0], cs); cs = fmaf(qa.y, kf[1], cs); cs = fmaf(qa.z, kf[2], cs); cs = fmaf(qa.w, kf[3], cs);
        cs = fmaf(qb.x, kf[4], cs); cs = fmaf(qb.y, kf[5], cs); cs = fmaf(qb.z, kf[6], cs); cs = fmaf(qb.w, kf[7], cs);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float* qr = sQ + (r * 2 + hh) * C::kQS + c * 8;
        const float4 a = *reinterpret_cast<const float4*>(qr), bq = *reinterpret_cast<const float4*>(qr + 4);
        float x = sc[r];
        x = fmaf(a.x, kf[0], x); x = fmaf(a.y, kf[1], x); x = fmaf(a.z, kf[2], x); x = fmaf(a.w, kf[3], x);
        x = fmaf(bq.x, kf[4], x); x = fmaf(bq.y, kf[5], x); x = fmaf(bq.z, kf[6], x); x = fmaf(bq.w, kf[7], x);
        sc[r] = x;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) sc[r] += __shfl_xor_sync(kFull, sc[r], 1);
    if constexpr (kProtect) {
      cs += __shfl_xor_sync(kFull, cs, 1);
      kk += __shfl_xor_sync(kFull, kk, 1);
      // V's row checksums for the PV check (the same pair, the same tile in shared memory).
      float a = 0.f, ab = 0.f;
#pragma unroll
      for (int c = 0; c < C::kHch; ++c) {
        float vf[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(sV + swz<D>(j, hh * C::kHch + c)), vf);
#pragma unroll
        for (int e = 0; e < 8; ++e) a += vf[e], ab += fabsf(vf[e]);
      }
      vs = a + __shfl_xor_sync(kFull, a, 1);
      va = ab + __shfl_xor_sync(kFull, ab, 1);
      if (inject)
        for_recs<R>(p, kScore, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
          if (rec.col == j) corrupt_at(sc, rr, rec, (rr & 1) == hh ? log : nullptr);
        });
    }

    // Live keys, mask and scale: the log2-domain arguments.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      bool live = key < p.Sk;
      float b2 = 0.f;
      if (rows.valid(r, R)) {
        const int i = rows.query(r, R);
        live &= !p.causal || key <= i;
        if (live && p.mask != nullptr) {
          const int64_t at = b * p.m_sb + rows.head(r, R, hk) * p.m_sh + (int64_t)i * p.m_sq + (int64_t)key * p.m_sk;
          if (p.mask_bool) {
            live = reinterpret_cast<const bool*>(p.mask)[at];
          } else {
            const float mv = reinterpret_cast<const float*>(p.mask)[at];
            live = mv != -INFINITY;
            b2 = live ? mv * kLog2e : 0.f;
          }
        }
      }
      bias[r] = b2;
      st[r] = live ? fmaf(sc[r], c2, b2) : -INFINITY;
    }

    // Row max of the tile: a warp butterfly over its 16 keys, then the 4 warps through shared memory.
    float wm[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      wm[r] = st[r];
#pragma unroll
      for (int o = 16; o > 1; o >>= 1) wm[r] = fmaxf(wm[r], __shfl_xor_sync(kFull, wm[r], o));
    }
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r) sMax[w * R + r] = wm[r];
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r)
      tp.m[r] = fmaxf(m_old[r], fmaxf(fmaxf(sMax[r], sMax[R + r]), fmaxf(sMax[2 * R + r], sMax[3 * R + r])));
    if (kProtect && inject)  // the max every thread uses, corrupted alike (one thread logs)
      for_recs<R>(p, kRowmax, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
        corrupt_at(tp.m, rr, rec, tid == 0 ? log : nullptr);
      });

    // Exponentials and the checks.
    tp.bad = false;
    tp.eq = 0;
    tp.nf = 0;
    bool all_alive = true;
    float slg = 0.f, sx = 0.f, tol = 0.f, ssum = 0.f, sb = 0.f, sm = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float x = st[r] - tp.m[r];
      const bool alive = x >= kDead2;  // false for -inf (masked) and NaN
      tp.P[r] = alive ? ex2(x) : 0.f;
      if constexpr (kProtect) {
        tp.nf |= (unsigned)!isfinite(sc[r]) << r;
        tp.bad |= st[r] > tp.m[r];
        tp.eq |= (unsigned)(st[r] == tp.m[r]) << r;
        all_alive &= alive;
        ssum += sc[r];
      }
    }
    if constexpr (kProtect) {
      if (inject)
        for_recs<R>(p, kExp, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
          if (rec.col == j && (rr & 1) == hh) corrupt_at(tp.P, rr, rec, log);
        });
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float x = st[r] - tp.m[r];
        if (x >= kDead2) {
          slg += lg2(tp.P[r]);
          sx += x;
          tol += 1.f + fabsf(x) + fabsf(st[r]) + fabsf(bias[r]);
          sb += bias[r];
          sm += tp.m[r];
        } else {
          tp.bad |= tp.P[r] != 0.f;  // dead or masked: exactly 0 unless hit
        }
      }
      const float gthr = p.c_gemm * qns * sqrtf(kk);
      if (all_alive)
        tp.bad |= !(fabsf(slg - (fmaf(c2, cs, sb) - sm)) <= fmaf(kTolExp, tol, c2 * gthr));
      else
        tp.bad |= !(fabsf(ssum - cs) <= gthr) || !(fabsf(slg - sx) <= kTolExp * tol);
      uint32_t h = 0x2545F491u;
#pragma unroll
      for (int r = 0; r < R; ++r) h = mix(mix(mix(h, sc[r]), tp.P[r]), tp.m[r]);
      tp.fp = h;
    }
    return tp;
  };

  // Running state. Rows of the key's pair: r = hh + 2 i.
  float m_old[R], o[R][2];
  float lp[C::kRH], lmp[C::kRH], ocp[C::kRH], abp[C::kRH];
  unsigned nf_rows = 0;  // rows that saw a non-finite score
  SplitEnd<D, kProtect, R, C::kNE> end;

  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool first = attempt == 0;
#pragma unroll
    for (int r = 0; r < R; ++r) m_old[r] = -INFINITY, o[r][0] = o[r][1] = 0.f;
#pragma unroll
    for (int i = 0; i < C::kRH; ++i) lp[i] = lmp[i] = ocp[i] = abp[i] = 0.f;
    nf_rows = 0;

#pragma unroll
    for (int s = 0; s < C::kStages - 1; ++s) {
      if (s < nt) load_tile(t_begin + s, s);
      cp_async_commit();
    }
    for (int it = 0; it < nt; ++it) {
      const int t = t_begin + it;
      cp_async_wait<C::kStages - 2>();
      __syncthreads();  // tile it landed for every thread; the previous tile's readers are done
      {
        const int nx = it + C::kStages - 1;
        if (nx < nt) load_tile(t_begin + nx, nx % C::kStages);
        cp_async_commit();
      }
      const T* sK = ring + (it % C::kStages) * 2 * C::kTile;
      const T* sV = sK + C::kTile;
      const bool inject = kProtect && first && cta_inj;

      float vs = 0.f, va = 0.f;
      TilePass<R> tp = tile_pass(sK, sV, t, m_old, inject, vs, va);
      bool alarm = false;
      if constexpr (kProtect) {
        const unsigned weq = __reduce_or_sync(kFull, tp.eq);
        if (lane == 0) sInt[w] = (int)weq;
        alarm = __syncthreads_or(tp.bad);
        const unsigned eq = (unsigned)(sInt[0] | sInt[1] | sInt[2] | sInt[3]);
#pragma unroll
        for (int r = 0; r < R; ++r) alarm |= !((eq >> r) & 1u) && tp.m[r] != m_old[r];
      }
      if (kProtect && alarm) {
        // Recompute the tile: deterministic, so data that changed was hit by a fault, and the
        // recomputation is the correction. An alarm that repeats is the data's (non-finite inputs,
        // or a check's edge), never counted.
        const TilePass<R> again = tile_pass(sK, sV, t, m_old, false, vs, va);
        const bool changed = again.fp != tp.fp;
        const bool any_changed = __syncthreads_or(changed);
        const bool any_nf = __syncthreads_or(again.nf);
        if (tid == 0) {
          if (any_changed) {
            bump(p.counters, kDetected);
            if (fix) bump(p.counters, kCorrected);
          }
          if (p.alarms != nullptr) {
            atomicAdd(p.alarms + kTileAlarms, 1ull);
            if (any_changed) atomicAdd(p.alarms + kTileFaults, 1ull);
          }
        }
        end.nf |= !any_changed && any_nf;
        tp = again;
      }
      nf_rows |= tp.nf;

      // P as the products consume it (the thread's rows), then the online-softmax update.
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if ((r & 1) != hh) continue;  // (compile-time indices: the arrays stay in registers)
        float pc = tp.P[r];
        if (inject)
          for_recs<R>(p, kPMma, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
            if (rr == r && rec.col == j) {
              float one[1] = {pc};
              corrupt_at(one, 0, rec, log);
              pc = one[0];
            }
          });
        sP[r * kBlockN + j] = pc;
      }
      float alpha[R];
      bool moved = false;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        alpha[r] = tp.m[r] == m_old[r] ? 1.f : (m_old[r] == -INFINITY ? 0.f : ex2(m_old[r] - tp.m[r]));
        moved |= tp.m[r] != m_old[r];
        m_old[r] = tp.m[r];
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if ((r & 1) != hh) continue;
        const int i = r >> 1;
        lp[i] = fmaf(alpha[r], lp[i], tp.P[r]);
        if constexpr (kProtect) {
          lmp[i] = fmaf(alpha[r], lmp[i], sP[r * kBlockN + j]);  // own write: visible to this thread
          ocp[i] = fmaf(tp.P[r], vs, alpha[r] * ocp[i]);
          abp[i] = fmaf(tp.P[r], va, alpha[r] * abp[i]);
        }
      }
      if (inject && j == 0) {
        for_recs<R>(p, kRowsum, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
          if ((rr & 1) == hh) corrupt_at(lp, rr >> 1, rec, log);
        });
        for_recs<R>(p, kRowsumMma, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
          if ((rr & 1) == hh) corrupt_at(lmp, rr >> 1, rec, log);
        });
      }
      __syncthreads();  // P of the tile visible to every thread

      // O = alpha O + P V over this thread's column pair and key part.
      if (moved)  // CTA-uniform: every thread holds the same maxima
#pragma unroll
        for (int r = 0; r < R; ++r) o[r][0] *= alpha[r], o[r][1] *= alpha[r];
      // The O injection hooks (rescale, pv): the element's column pair, key part 0.
      auto inject_o = [&](int stage) {
        if (inject && kp == 0)
          for_recs<R>(p, stage, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
            if (rec.col >> 1 == cp)
#pragma unroll
              for (int r = 0; r < R; ++r)
                if (r == rr) corrupt_at(o[r], rec.col & 1, rec, log);
          });
      };
      inject_o(kRescale);
      const int chunk = col >> 3, within = col & 7;
#pragma unroll
      for (int jj = 0; jj < C::kKPL; jj += 4) {
        const int k0 = kp * C::kKPL + jj;
        float2 v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          v[e] = Elem<T>::unpack(*reinterpret_cast<const uint32_t*>(sV + swz<D>(k0 + e, chunk) + within));
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float4 pr = *reinterpret_cast<const float4*>(sP + r * kBlockN + k0);
          o[r][0] = fmaf(pr.x, v[0].x, o[r][0]), o[r][1] = fmaf(pr.x, v[0].y, o[r][1]);
          o[r][0] = fmaf(pr.y, v[1].x, o[r][0]), o[r][1] = fmaf(pr.y, v[1].y, o[r][1]);
          o[r][0] = fmaf(pr.z, v[2].x, o[r][0]), o[r][1] = fmaf(pr.z, v[2].y, o[r][1]);
          o[r][0] = fmaf(pr.w, v[3].x, o[r][0]), o[r][1] = fmaf(pr.w, v[3].y, o[r][1]);
        }
      }
      inject_o(kPV);
    }
    cp_async_wait<0>();
    __syncthreads();  // the ring is free: it holds the key parts' O for the exchange

    // The split's O: the key parts summed; thread element e = tid + 128 k is (row e / D, column e % D).
    float* sO = reinterpret_cast<float*>(ring);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      sO[(kp * R + r) * D + col] = o[r][0];
      sO[(kp * R + r) * D + col + 1] = o[r][1];
    }
    __syncthreads();
    float red[C::kRed];  // per row: sum_c O, l, l_mma, O^c, sum P|V|
    end.template gather_o<C::kKP>(sO, red);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if ((r & 1) != hh) continue;
      const int i = r >> 1;
      red[R + r] = lp[i];
      if constexpr (kProtect) red[2 * R + r] = lmp[i], red[3 * R + r] = ocp[i], red[4 * R + r] = abp[i];
    }
    block_sum<C::kRed>(red, sRed);
    nf_rows = cta_or(nf_rows, sInt + 4);  // rows with a non-finite score anywhere in the CTA
    const int keys = min(t_end * kBlockN, p.Sk) - t_begin * kBlockN;
    if (!end.attempt_done(p, rows, first, red, m_old, nf_rows, keys, /*exact_l=*/true, false, 0u, sFirst, sRed)) break;
  }
  end.write_partial(p, m_old, nf_rows);
}

// The combine's merge of O: the splits' partial rows are read as float4 slots, kBatch splits' loads
// in flight at once (a loop over the splits one load at a time made the combine a chain of L2 round
// trips: ~10 us at 32 splits, NOTES_attention.md session 50); where a partial has fewer slots than
// the CTA has threads, kParts groups of threads take every kParts-th split and their sums are added
// in a fixed order (the merge must repeat bit for bit: its second attempt is compared with the first).
template <int R, int D>
struct CombineCfg {
  static constexpr int kNV = R * D / 4;                           // float4 slots of a partial's O
  static constexpr int kLanes = kNV < kThreads ? kNV : kThreads;  // threads per group
  static constexpr int kParts = kThreads / kLanes;                // groups (splits strided over them)
  static constexpr int kSlots = kNV / kLanes;                     // slots per thread
  static constexpr int kBatch = 16 / kSlots;                      // splits per batch of loads
  static_assert(kNV % kLanes == 0 && kThreads % kLanes == 0, "slots and threads divide");
  // floats before the merge's sums (weights [R][S], 5 R row values, block_sum's 4 R), 16-byte aligned
  __host__ __device__ static constexpr int acc_at(int S) { return (R * S + 9 * R + 3) / 4 * 4; }
  __host__ __device__ static constexpr size_t smem_bytes(int S) { return (acc_at(S) + kParts * R * D) * sizeof(float); }
};

// Merge the splits of (row block, b x KV head): one CTA for all its rows at once. Warp w computes
// O's split weights and normaliser for rows w, w + 4, and the checksum's for rows w + 1, w + 5 (mod
// 4): a fault in one weight moves O or its checksum, not both.
template <typename T, int D, bool kProtect, int R>
__global__ void __launch_bounds__(kThreads) decode_combine_kernel(const Params p) {
  using CC = CombineCfg<R, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int S = p.dec_splits;
  float* wO = reinterpret_cast<float*>(smem);  // [R][S] weights of O
  float* sL = wO + R * S;                       // [R] L_O; [R..2R) L_C; O^c; sum P|V|; reported
  float* sRed = sL + 5 * R;                     // block_sum's buffer (4 x R)
  float* sAcc = wO + CC::acc_at(S);             // [kParts][R x D] the groups' weighted sums of O
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int rb = blockIdx.x, bh = blockIdx.y, b = bh / p.Hk, hk = bh % p.Hk;
  const Rows rows{p.Hq / p.Hk, rb, p.Sq * (p.Hq / p.Hk)};
  constexpr int PF = part_floats<R, D>();
  constexpr int kNE = R * D / kThreads;  // elements per thread: (row e / D, column e % D), e = tid + 128 k
  const float* part0 = p.dec_ws + (int64_t)(bh * gridDim.x + rb) * S * PF;
  const bool fix = p.policy == kCorrect || p.policy == kRecompute;
  grid_dep_wait();  // launched while the splits ran (PDL, R <= 4): their partials, flags and counts first

  // Weights of row r (checksum: its sums too); a warp-wide computation in one pass over the splits'
  // row values (each lane's splits merged online, then the lanes'), so one round trip to L2 at
  // S <= 32; the weights of O, ex2(m_s - M), from the maxima kept in wO meanwhile.
  auto weights = [&](int r, bool checksum) {
    float M = -INFINITY, l = 0.f, oc = 0.f, ab = 0.f;
    bool rep = false;
#pragma unroll 2
    for (int s = lane; s < S; s += 32) {
      const float* ps = part0 + s * PF + R * D;
      const float m = ps[r], ls = ps[R + r];
      const float Mn = fmaxf(M, m);
      const float keep = M == -INFINITY ? 0.f : ex2(M - Mn), wt = m == -INFINITY ? 0.f : ex2(m - Mn);
      l = fmaf(wt, ls, l * keep);
      if (checksum) {
        const float ocs = ps[2 * R + r], abs_ = ps[3 * R + r];
        oc = fmaf(wt, ocs, oc * keep), ab = fmaf(wt, fabsf(abs_), ab * keep);
        rep |= signbit(abs_);
      } else {
        wO[r * S + s] = m;
      }
      M = Mn;
    }
    float Mw = M;
#pragma unroll
    for (int o = 16; o; o >>= 1) Mw = fmaxf(Mw, __shfl_xor_sync(kFull, Mw, o));
    const float f = M == -INFINITY ? 0.f : ex2(M - Mw);
    l *= f, oc *= f, ab *= f;
#pragma unroll
    for (int o = 16; o; o >>= 1) {
      l += __shfl_xor_sync(kFull, l, o);
      oc += __shfl_xor_sync(kFull, oc, o);
      ab += __shfl_xor_sync(kFull, ab, o);
    }
    rep = __any_sync(kFull, rep);
    if (!checksum)
      for (int s = lane; s < S; s += 32) {
        const float m = wO[r * S + s];
        wO[r * S + s] = m == -INFINITY ? 0.f : ex2(m - Mw);
      }
    if (lane == 0) {
      if (!checksum) sL[r] = l;
      else sL[R + r] = l, sL[2 * R + r] = oc, sL[3 * R + r] = ab, sL[4 * R + r] = rep ? 1.f : 0.f;
    }
  };

  // The merge of O: group `part` takes splits part, part + kParts, ... in that order, kBatch of them
  // per batch of loads; the first batch is loaded before the weights are computed.
  const int slot0 = tid % CC::kLanes, part = tid / CC::kLanes;
  float4 v[CC::kBatch][CC::kSlots];
  auto load_batch = [&](int s0) {
#pragma unroll
    for (int i = 0; i < CC::kBatch; ++i)
#pragma unroll
      for (int j = 0; j < CC::kSlots; ++j) {
        const int s = s0 + i * CC::kParts, slot = slot0 + CC::kLanes * j;
        v[i][j] = s < S ? *reinterpret_cast<const float4*>(part0 + s * PF + 4 * slot) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
  };
  auto add_batch = [&](int s0, float4 (&acc)[CC::kSlots]) {
#pragma unroll
    for (int i = 0; i < CC::kBatch; ++i)
#pragma unroll
      for (int j = 0; j < CC::kSlots; ++j) {
        const int s = s0 + i * CC::kParts, slot = slot0 + CC::kLanes * j;
        const float wt = s < S ? wO[(4 * slot / D) * S + s] : 0.f;
        acc[j].x = fmaf(wt, v[i][j].x, acc[j].x), acc[j].y = fmaf(wt, v[i][j].y, acc[j].y);
        acc[j].z = fmaf(wt, v[i][j].z, acc[j].z), acc[j].w = fmaf(wt, v[i][j].w, acc[j].w);
      }
  };

  float out[kNE], first[kNE];
  uint32_t redo = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    load_batch(part);  // (in flight while the weights are computed)
    for (int r = w; r < R; r += 4)
      if (rows.valid(r, R)) weights(r, false);
    if (kProtect)
      for (int r = (w + 1) % 4; r < R; r += 4)
        if (rows.valid(r, R)) weights(r, true);
    __syncthreads();
    {  // sum_s w_rs O_s
      float4 acc[CC::kSlots];
#pragma unroll
      for (int j = 0; j < CC::kSlots; ++j) acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
      add_batch(part, acc);
      for (int s0 = part + CC::kBatch * CC::kParts; s0 < S; s0 += CC::kBatch * CC::kParts) {
        load_batch(s0);
        add_batch(s0, acc);
      }
#pragma unroll
      for (int j = 0; j < CC::kSlots; ++j)
        reinterpret_cast<float4*>(sAcc)[part * CC::kNV + slot0 + CC::kLanes * j] = acc[j];
    }
    __syncthreads();
    float so[R];
#pragma unroll
    for (int r = 0; r < R; ++r) so[r] = 0.f;
#pragma unroll
    for (int k = 0; k < kNE; ++k) {
      const int e = tid + kThreads * k, r = e / D;
      out[k] = 0.f;
      if (!rows.valid(r, R)) continue;
      float x = sAcc[e];
#pragma unroll
      for (int q = 1; q < CC::kParts; ++q) x += sAcc[q * R * D + e];
      const float L = sL[r];
      out[k] = isnan(L) ? L : L > 0.f ? x / L : 0.f;  // no live key: 0, as SDPA's; NaN inputs: NaN
      add_at(so, r, out[k]);
    }
    if constexpr (!kProtect) break;
    block_sum<R>(so, sRed);  // (its barriers also end this round's reads of wO and sL)
    uint32_t bad = 0, rep = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (!rows.valid(r, R)) continue;
      const float LC = sL[R + r], OC = sL[2 * R + r], AB = sL[3 * R + r];
      const float ic = LC > 0.f ? 1.f / LC : 0.f;
      const bool finite = isfinite(so[r]) && isfinite(OC) && isfinite(AB) && isfinite(LC);
      // (each split passed within e_out; the merge adds its own roundings, ~(S + D) u)
      const bool ok = !finite || fabsf(so[r] - OC * ic) <= fmaf(p.e_out + (S + D) * 0x1p-24f, AB * ic, 1e-30f);
      if (!ok) bad |= 1u << r;
      if (sL[4 * R + r] != 0.f) rep |= 1u << r;
    }
    __syncthreads();  // sL is rewritten by a second attempt
    if (attempt == 0) {
      if (!bad) break;
      if (tid == 0 && p.alarms != nullptr) atomicAdd(p.alarms + kFinalAlarms, (unsigned long long)__popc(bad));
      if (!fix) {  // counted, kept (rows a split counted already are not counted again)
        if (tid == 0) bump(p.counters, kDetected, __popc(bad & ~rep));
        break;
      }
      redo = bad;
#pragma unroll
      for (int k = 0; k < kNE; ++k) first[k] = out[k];
      continue;  // the merge again: deterministic, so what changed was a fault
    }
    float nd[R];
#pragma unroll
    for (int r = 0; r < R; ++r) nd[r] = 0.f;
#pragma unroll
    for (int k = 0; k < kNE; ++k) {
      add_at(nd, (tid + kThreads * k) / D, __float_as_uint(out[k]) != __float_as_uint(first[k]) ? 1.f : 0.f);
    }
    block_sum<R>(nd, sRed);
    if (tid == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (((redo >> r) & 1u) && nd[r] > 0.f) {
          bump(p.counters, kDetected);
          bump(p.counters, (bad >> r) & 1u ? kUncorrectable : kCorrected);
        }
  }
#pragma unroll
  for (int k = 0; k < kNE; ++k) {
    const int e = tid + kThreads * k, r = e / D, c = e % D;
    if (!rows.valid(r, R)) continue;
    T* go = reinterpret_cast<T*>(p.o) + b * p.o_sb + rows.head(r, R, hk) * p.o_sh + (int64_t)rows.query(r, R) * p.o_ss;
    go[c] = Elem<T>::from_f(out[k]);
  }
  if (kProtect && tid == 0 && blockIdx.x == 0 && blockIdx.y == 0) {
    atomicAdd(p.counters + kChecks, 1ull);  // the call's check, once
    if (atomicExch(p.nf_token + 2, 0)) atomicAdd(p.counters + kNonfinite, 1ull);
  }
}

// ------------------------------------------------------------------------------------------------
// The tensor-core split kernel (B36; NOTES_attention.md, session 49): the layout and protection
// stages of the kernel above, the products on mma.sync m16n8k16.
//  * S = Q K^T: Q is the A operand (16 rows: the CTA's query rows 0..R-1, zero rows up to 7, and
//    q^c = sum_r q_r in three 16-bit parts in rows 8-10), K the B operand, so the left checksum
//    rides in rows the MMA computes anyway. Warp w takes keys 16w..16w+15 of each 64-key tile; lane
//    (g = lane / 4, t = lane % 4) holds row g's scores of keys 2t, 2t + 1, 8 + 2t, 9 + 2t (and row
//    g + 8's, the checksum parts).
//  * ||k_j||^2, for GEMM-I's threshold, from the diagonal of K K^T: the K fragments of the scores
//    are an A operand as they are.
//  * O^T = V^T P^T: V through ldmatrix.trans is the A operand (16 head-dim columns per m-tile), P^T
//    the B operand straight from the score registers (its n = 8 columns are the query rows). The
//    checksum m-tile's rows are V^c = sum_c V_jc in three 16-bit parts, sum_c |V_jc| and ones (l_mma:
//    the P the products read, summed by the tensor core); V's row sums are MMAs too (V's rows times
//    ones, issued beside the score MMAs), brought by shuffles to the lanes that need them.
// The checks are the FMA kernel's, with three differences:
//  * the unified check is one sum per key over the rows (log2 P - b + m where P is alive, c2 s where
//    it is dead, minus c2 s^c), judged by the lane holding ||k||^2;
//  * a failed tile check reruns the split at its end (no CTA vote per tile: the checks stay off the
//    loop's critical path, which bounds this kernel); the rerun is counted once if its outputs or a
//    per-lane digest of its scores, P and max moved; the unified check runs after the tile's
//    products are issued, and the thresholds' square roots are MUFU's, raised to bounds (sqrt_bound);
//  * l (registers) and l_mma (tensor core) add the same 16-bit P in different orders, so they agree
//    to kTolL, not bit for bit: a smaller change of a consumed P passes, moving O by less than that.
template <typename T, int D, int R>
struct TcCfg {
  static constexpr int kCtasPerSm = 3;  // cuda_attention.DECODE_CTAS_PER_SM plans the splits on it
  static constexpr int kKS = D / 16;                 // k-steps of S = m-tiles of O^T
  static constexpr int kStages = D == 128 ? 2 : 3;   // (~73 / ~55 KB: 3 CTAs per SM)
  static constexpr int kNE = R * D / kThreads;
  static constexpr int kRed = 5 * R;
  static constexpr int kTile = kBlockN * D;
  static constexpr int kOffQ = 0;                    // 16 x D 16-bit, swizzled as the tiles
  static constexpr int kOffMax = kOffQ + 16 * D * 2;  // [warp][8] the tile's row maxima
  static constexpr int kOffRed = kOffMax + kWarps * 8 * 4;
  static constexpr int kOffInt = kOffRed + 4 * kRed * 4;
  static constexpr int kOffFirst = kOffInt + 8 * 4;
  static constexpr int kOffStage = (kOffFirst + (R * D + 3 * R) * 4 + 127) / 128 * 128;
  static constexpr int kStageBytes = 2 * kTile * (int)sizeof(T);
  static constexpr int kSmem = kOffStage + kStages * kStageBytes;
  static_assert(kWarps * R * D * 4 <= kStages * kStageBytes, "the end-of-split O exchange reuses the ring");
  static_assert(kCtasPerSm * (kSmem + 1024) <= 228 * 1024, "3 CTAs per SM (with __launch_bounds__)");
};

// Element offset of (row, 16-byte chunk) in a tile or the Q tile: chunk XOR row % 8, so that the 8
// rows of an ldmatrix phase fall in 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz8(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// a[i] with i a runtime index (unrolled: a stays in registers); dflt past the end.
template <int N>
__device__ __forceinline__ float pick(const float (&a)[N], int i, float dflt) {
  float x = dflt;
#pragma unroll
  for (int k = 0; k < N; ++k) x = k == i ? a[k] : x;
  return x;
}

// One tile's pass for a lane: scores, the row max (one CTA exchange), exponentials and checks.
template <int R>
struct TcPass {
  float s[2][4];  // S of keys 8 nt + 2t + {0, 1}: row g (0, 1), row g + 8 (2, 3)
  float P[2][2];  // row g's numerators of those keys
  float vs[4], va[4];  // (protected) sum_c V_jc and sum_c |V_jc| of keys g (0, 1) and 8 + g (2, 3)
  float st[2][2], bias[2][2];  // (protected, for the checks) row g's log2-domain arguments and mask bias
  float kk[2];         // (protected) ||k||^2 of the keys this lane judges (g, 8 + g)
  float m[R];     // the tile's new row max (log2 units)
  bool bad;       // a check of this lane failed
  unsigned nf;    // rows with a non-finite score
};

// kInj: the build that calls with injected faults run (their hooks in the tile loop); the production
// build has none, so the loop's code and registers are only what a fault-free call executes.
template <typename T, int D, bool kProtect, int R, bool kInj>
__global__ void __launch_bounds__(kThreads, TcCfg<T, D, R>::kCtasPerSm) decode_tc_split_kernel(const Params p) {
  using C = TcCfg<T, D, R>;
  constexpr int KS = C::kKS;
  // V^c in fp16 is kept 2^8 smaller (sums of 128 values must stay below 65504)
  constexpr float kVcDown = std::is_same<T, __half>::value ? 0x1p-8f : 1.f;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem + C::kOffQ);
  float* sMax = reinterpret_cast<float*>(smem + C::kOffMax);
  float* sRed = reinterpret_cast<float*>(smem + C::kOffRed);
  int* sInt = reinterpret_cast<int*>(smem + C::kOffInt);
  float* sFirst = reinterpret_cast<float*>(smem + C::kOffFirst);
  T* ring = reinterpret_cast<T*>(smem + C::kOffStage);

  grid_dep_launch_dependents();  // (R <= 4: the combine's CTAs wait for this grid, PDL)
  // Phase timestamps (diagnostic build only, benchmarks/decode_phases.py), thread 0: 0 entry, 1 the Q
  // tile stored, 2 q^c and the query norms, 3 tile 0 landed, 4 its pass (scores to P), 5 its products,
  // checksums and unified check issued, 6 tile 1 landed, 7 tile 1 issued, 8 the first attempt's loop
  // done, 9 its O and totals summed, 10 its end checks, 11 the partial written.
  phase_stamps::Stamper st;
  st.begin();
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, tq = lane & 3;
  const int split = blockIdx.x, bh = blockIdx.z, b = bh / p.Hk, hk = bh % p.Hk;
  const Rows rows{p.Hq / p.Hk, (int)blockIdx.y, p.Sq * (p.Hq / p.Hk)};
  const int t_begin = split * p.dec_tps, t_end = min(t_begin + p.dec_tps, p.dec_visit);
  const int nt = t_end - t_begin;
  const T* gk = reinterpret_cast<const T*>(p.k) + b * p.k_sb + hk * p.k_sh;
  const T* gv = reinterpret_cast<const T*>(p.v) + b * p.v_sb + hk * p.v_sh;
  const float c2 = p.scale * kLog2e;
  // The unified check runs after the tile's products (3-8 % faster at batch 1 and at d=64, run 57b),
  // but at 8 rows, whose check inputs held across the products spill (EFTA_DEC_CHECKS_EARLY=0 / 1:
  // after / before everywhere, a measurement switch).
#ifdef EFTA_DEC_CHECKS_EARLY
  constexpr bool kChecksEarly = EFTA_DEC_CHECKS_EARLY;
#else
  constexpr bool kChecksEarly = R == 8;
#endif
  // EFTA_DEC_ABLATE (measurements, bf16 calls only; NOTES_attention.md, run 57d): 1 no K K^T products
  // (||k|| taken as infinite), 2 no V row sums (V^c as 0, sum |V| as 2^60), 4 no unified check: what
  // each costs, without alarms.
#ifdef EFTA_DEC_ABLATE
  constexpr int kAbl = EFTA_DEC_ABLATE;
#else
  constexpr int kAbl = 0;
#endif

  // Tile loads: this thread's 16-byte chunk column, every (128 / chunks per row)-th row. A full
  // tile's rows are one pointer and one stride apart (few registers, no clamp); the last, partial
  // tile clamps each row and zero-fills past Sk.
  constexpr int kRowStep = kThreads / (D / 8);
  static_assert(kRowStep % 8 == 0, "rows kRowStep apart share swz8's pattern");
  const int ld_ch = tid % (D / 8), ld_row = tid / (D / 8);
  const T* gk_ch = gk + ld_ch * 8 + (int64_t)ld_row * p.k_ss;
  const T* gv_ch = gv + ld_ch * 8 + (int64_t)ld_row * p.v_ss;
  const int64_t k_step = (int64_t)kRowStep * p.k_ss, v_step = (int64_t)kRowStep * p.v_ss;
  const uint32_t ld_at = swz8<D>(ld_row, ld_ch) * (int)sizeof(T);
  auto load_tile = [&](int t, int stg) {
    const uint32_t sk = smem_u32(ring + stg * 2 * C::kTile) + ld_at, sv = sk + C::kTile * (int)sizeof(T);
    constexpr uint32_t kRowBytes = kRowStep * D * (int)sizeof(T);
    if (t * kBlockN + kBlockN <= p.Sk) {
      const T* kp = gk_ch + (int64_t)t * kBlockN * p.k_ss;
      const T* vp = gv_ch + (int64_t)t * kBlockN * p.v_ss;
#pragma unroll
      for (int i = 0; i < kBlockN / kRowStep; ++i) {
        cp_async16(sk + i * kRowBytes, kp + i * k_step, true);
        cp_async16(sv + i * kRowBytes, vp + i * v_step, true);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kBlockN / kRowStep; ++i) {
        const int gr = t * kBlockN + ld_row + kRowStep * i, cr = min(gr, p.Sk - 1) - ld_row;
        cp_async16(sk + i * kRowBytes, gk_ch + (int64_t)cr * p.k_ss, gr < p.Sk);
        cp_async16(sv + i * kRowBytes, gv_ch + (int64_t)cr * p.v_ss, gr < p.Sk);
      }
    }
  };
  // The ring's first stages go out before the Q tile, so that their latency and Q's overlap.
  auto ring_prologue = [&]() {
#pragma unroll
    for (int s = 0; s < C::kStages - 1; ++s) {
      if (s < nt) load_tile(t_begin + s, s);
      cp_async_commit();
    }
  };
  ring_prologue();

  // The Q tile in 16-byte chunks: query rows (padding and rows R..7 zero), then q^c in three parts
  // (rows 8-10).
  for (int c = tid; c < 16 * (D / 8); c += kThreads) {
    const int rr = c / (D / 8), ch = c % (D / 8);
    uint4 x = make_uint4(0u, 0u, 0u, 0u);
    if (rr < R && rows.valid(rr, R))
      x = *reinterpret_cast<const uint4*>(reinterpret_cast<const T*>(p.q) + b * p.q_sb + rows.head(rr, R, hk) * p.q_sh +
                                          (int64_t)rows.query(rr, R) * p.q_ss + ch * 8);
    *reinterpret_cast<uint4*>(sQ + swz8<D>(rr, ch)) = x;
  }
  __syncthreads();
  st.mark(1);
  float qns = 0.f;  // sum_r ||q_r||
  if constexpr (kProtect) {
    if (tid < D) {
      float c = 0.f;
#pragma unroll
      for (int rr = 0; rr < R; ++rr) c += Elem<T>::to_f(sQ[swz8<D>(rr, tid >> 3) + (tid & 7)]);
      const T hi = Elem<T>::from_f(c);
      const float r1 = c - Elem<T>::to_f(hi);
      const T mid = Elem<T>::from_f(r1);
      sQ[swz8<D>(8, tid >> 3) + (tid & 7)] = hi;
      sQ[swz8<D>(9, tid >> 3) + (tid & 7)] = mid;
      sQ[swz8<D>(10, tid >> 3) + (tid & 7)] = Elem<T>::from_f(r1 - Elem<T>::to_f(mid));
    }
    // (the rows' shuffle chains side by side; every warp computes the same: no exchange)
    float sq[R];
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      sq[rr] = 0.f;
#pragma unroll
      for (int d = lane; d < D; d += 32) {
        const float x = Elem<T>::to_f(sQ[swz8<D>(rr, d >> 3) + (d & 7)]);
        sq[rr] = fmaf(x, x, sq[rr]);
      }
    }
#pragma unroll
    for (int o = 16; o; o >>= 1)
#pragma unroll
      for (int rr = 0; rr < R; ++rr) sq[rr] += __shfl_xor_sync(kFull, sq[rr], o);
#pragma unroll
    for (int rr = 0; rr < R; ++rr) qns += sqrt_bound(sq[rr]);
  }
  __syncthreads();
  st.mark(2);
  // Q's A fragments: held in 32 registers for the whole split, or loaded again from shared memory
  // per tile where holding them made the protected kernel spill (d=128, and 8 rows at d=64): 2-4 %
  // faster there, 1-2 % slower at d=64 with 2-4 rows (NOTES_attention.md, run 56c).
  // EFTA_DEC_QA=0 / 1 (measurements): held / loaded everywhere.
#ifdef EFTA_DEC_QA
  constexpr bool kQaReload = EFTA_DEC_QA;
#else
  constexpr bool kQaReload = kProtect && (D == 128 || R == 8);
#endif
  const uint32_t q_base = smem_u32(sQ);
  const uint32_t qa_off = ((lane & 7) + 8 * ((lane >> 3) & 1)) * 2 * D + ((((lane >> 4) & 1) ^ (lane & 7)) << 4);
  uint32_t qa[kQaReload ? 1 : KS][4];
  if constexpr (!kQaReload)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) ldsm_x4(qa[ks], q_base + (qa_off ^ (ks << 5)));
  // This lane's ldmatrix row in a K or V tile: matrices (keys 0-7 | 8-15) x (columns 0-7 | 8-15).
  const uint32_t kv_off =
      (16 * w + (lane & 7) + 8 * (lane >> 4)) * 2 * D + ((((lane >> 3) & 1) ^ (lane & 7)) << 4);

  static_assert(kProtect || !kInj, "faults are injected into protected calls");
  const bool cta_inj = kInj && split_injected<R>(p, rows, b, hk, t_begin, t_end);
  // Whether injection record rec's key (within the tile) is element (nt, e) of this lane's row rr.
  auto owns_key = [&](const InjRec& rec, int rr) { return rr == g && rec.col >> 4 == w && ((rec.col >> 1) & 3) == tq; };
  // The (stage, tile t) records on this lane's keys, applied to x[n-tile][element] (scores or P).
  auto corrupt_keys = [&](int stage, int t, auto& x) {
    for_recs<R>(p, stage, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
      if (owns_key(rec, rr)) {
        if ((rec.col >> 3) & 1) corrupt_at(x[1], rec.col & 1, rec, log);
        else corrupt_at(x[0], rec.col & 1, rec, log);
      }
    });
  };

  const bool real = g < R;  // rows R..7 of the MMA are zero: no row
  // Row g's query index and mask row, once (in the tile pass the compiler kept their divisions)
  const bool row_ok = real && rows.valid(g, R);
  const int qi = row_ok ? rows.query(g, R) : 0;
  const int64_t mrow =
      row_ok && p.mask != nullptr ? b * p.m_sb + rows.head(g, R, hk) * p.m_sh + (int64_t)qi * p.m_sq : 0;
  // V's row sums sum_c V_jc and sum_c |V_jc| on the tensor cores, the keys as the M dimension: V's
  // rows (an A operand, as K's are for K K^T) times ones, so that lane (g, t) receives keys g and
  // 8 + g: 16 MMAs a tile at d=128 (ones times V's rows, keys as N, took 32 for the same sums).
  auto v_sums = [&](uint32_t vb, float (&vs)[4], float (&va)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) vs[e] = va[e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t bv[4];
      ldsm_x4(bv, vb + (kv_off ^ (ks << 5)));
      uint32_t av[4] = {bv[0], bv[2], bv[1], bv[3]};
      Elem<T>::mma(vs, av, Elem<T>::kOnes, Elem<T>::kOnes);
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] &= 0x7fff7fffu;  // |V| (both 16-bit formats)
      Elem<T>::mma(va, av, Elem<T>::kOnes, Elem<T>::kOnes);
    }
  };
  // The unified check of a tile pass, per key summed over the rows: log2 P - bias + max where P is
  // alive (= c2 s up to EXP's error), c2 s where it is dead (P must be 0), minus c2 s^c (the checksum
  // rows): zero within EXP's tolerance and GEMM-I's bound. Unified: GEMM-I, the scale-and-mask FMA
  // and EXP at once. Run after the tile's products are issued: nothing the loop goes on with waits
  // for its shuffle chains.
  auto exp_checks = [&](TcPass<R>& tp) {
    const float mg = pick(tp.m, g, 0.f);
    float u[2][2], tl[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        // (selects, not branches: both sides are a few instructions)
        const float x = tp.st[n][e] - mg, raw = c2 * tp.s[n][e];
        const bool alive = x >= kDead2;
        tp.bad |= real && !alive && tp.P[n][e] != 0.f;  // dead or masked: exactly 0 unless hit
        float uu = alive ? lg2(tp.P[n][e]) - tp.bias[n][e] + mg : raw;
        float tt = alive ? 1.f + fabsf(x) + fabsf(tp.st[n][e]) + fabsf(tp.bias[n][e]) : 1.f + fabsf(raw);
        uu = real ? uu : 0.f, tt = real ? tt : 0.f;
        u[n][e] = fmaf(g < 3 ? -c2 : 0.f, tp.s[n][2 + e], uu), tl[n][e] = tt;
      }
#pragma unroll
    for (int o = 4; o < 32; o <<= 1)  // (the keys' shuffle chains side by side)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          u[n][e] += __shfl_xor_sync(kFull, u[n][e], o);
          tl[n][e] += __shfl_xor_sync(kFull, tl[n][e], o);
        }
    const int e = g & 1;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const float gthr = sqrt_bound(tp.kk[n]) * fmaf(p.c_gemm, qns, 0x1p-24f * D);
      const float uv = e ? u[n][1] : u[n][0], tv = e ? tl[n][1] : tl[n][0];
      tp.bad |= tq == g >> 1 && !(fabsf(uv) <= fmaf(kTolExp, tv, c2 * gthr));
    }
  };
  auto tile_pass = [&](const T* sK, const T* sV, int t, const float (&m_old)[R], bool inject) -> TcPass<R> {
    TcPass<R> tp;
    float kq[2][4];  // K K^T blocks: the diagonal is ||k||^2
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) tp.s[n][e] = kq[n][e] = 0.f;
    const uint32_t kb = smem_u32(sK);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t bk[4];
      ldsm_x4(bk, kb + (kv_off ^ (ks << 5)));
      uint32_t qk[4];
      if constexpr (kQaReload) ldsm_x4(qk, q_base + (qa_off ^ (ks << 5)));
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if constexpr (!kQaReload) qk[i] = qa[ks][i];
      Elem<T>::mma(tp.s[0], qk, bk[0], bk[1]);
      Elem<T>::mma(tp.s[1], qk, bk[2], bk[3]);
      if constexpr (kProtect && !(kAbl & 1)) {
        const uint32_t ak[4] = {bk[0], bk[2], bk[1], bk[3]};  // the same 16 keys as an A operand
        Elem<T>::mma(kq[0], ak, bk[0], bk[1]);
        Elem<T>::mma(kq[1], ak, bk[2], bk[3]);
      }
    }
    // (V's sums go out under the scores' latency: they wait on nothing the pass computes)
    if constexpr (kProtect && !(kAbl & 2)) v_sums(smem_u32(sV), tp.vs, tp.va);
    if constexpr (kProtect && (kAbl & 2))
#pragma unroll
      for (int e = 0; e < 4; ++e) tp.vs[e] = 0.f, tp.va[e] = 0x1p60f;
    if (kProtect && inject) corrupt_keys(kScore, t, tp.s);

    // Live keys, mask and scale: the log2-domain arguments of row g.
    auto& st = tp.st;
    auto& bias = tp.bias;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = t * kBlockN + 16 * w + 8 * n + 2 * tq + e;
        bool live = real && key < p.Sk;
        float b2 = 0.f;
        if (live && row_ok) {
          live = !p.causal || key <= qi;
          if (live && p.mask != nullptr) {
            const int64_t at = mrow + (int64_t)key * p.m_sk;
            if (p.mask_bool) {
              live = reinterpret_cast<const bool*>(p.mask)[at];
            } else {
              const float mv = reinterpret_cast<const float*>(p.mask)[at];
              live = mv != -INFINITY;
              b2 = live ? mv * kLog2e : 0.f;
            }
          }
        }
        bias[n][e] = b2;
        st[n][e] = live ? fmaf(tp.s[n][e], c2, b2) : -INFINITY;
      }

    // Row max of the tile: the quad's 16 keys, then the 4 warps through shared memory.
    float wm = fmaxf(fmaxf(st[0][0], st[0][1]), fmaxf(st[1][0], st[1][1]));
    wm = fmaxf(wm, __shfl_xor_sync(kFull, wm, 1));
    wm = fmaxf(wm, __shfl_xor_sync(kFull, wm, 2));
    if (tq == 0) sMax[w * 8 + g] = wm;
    tp.bad = false;
    if constexpr (kProtect) {  // SNVR, attained: the warp's max is one of its row's scores
      const bool hit = st[0][0] == wm || st[0][1] == wm || st[1][0] == wm || st[1][1] == wm;
      const unsigned weq = __reduce_or_sync(kFull, (unsigned)hit << g);
      tp.bad = real && wm != -INFINITY && !((weq >> g) & 1u);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r)
      tp.m[r] = fmaxf(m_old[r], fmaxf(fmaxf(sMax[r], sMax[8 + r]), fmaxf(sMax[16 + r], sMax[24 + r])));
    if (kProtect && inject)  // the max every thread uses, corrupted alike (one thread logs)
      for_recs<R>(p, kRowmax, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
        corrupt_at(tp.m, rr, rec, tid == 0 ? log : nullptr);
      });
    const float mg = pick(tp.m, g, 0.f);
    if constexpr (kProtect) {  // ... and the row's new max is the old one or one of the warps' (row g's lanes)
      const float mo = pick(m_old, g, 0.f);
      tp.bad |= real && !(mg == mo || mg == sMax[g] || mg == sMax[8 + g] || mg == sMax[16 + g] || mg == sMax[24 + g]);
    }

    // Exponentials and the checks.
    tp.nf = 0;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float x = st[n][e] - mg;
        tp.P[n][e] = real && x >= kDead2 ? ex2(x) : 0.f;  // false for -inf (masked) and NaN
        if (kProtect && real) {
          tp.nf |= (unsigned)!isfinite(tp.s[n][e]) << g;
          tp.bad |= st[n][e] > mg;
        }
      }
    if constexpr (kProtect) {
      if (inject) corrupt_keys(kExp, t, tp.P);
      // Lane (g, g / 2) holds ||k||^2 of keys g and 8 + g on the diagonals: it judges them.
#pragma unroll
      for (int n = 0; n < 2; ++n) tp.kk[n] = kAbl & 1 ? INFINITY : g & 1 ? kq[n][2 * n + 1] : kq[n][2 * n];
      if constexpr (kChecksEarly) exp_checks(tp);
    }
    return tp;
  };

  float m_old[R], o[KS][4], oc[4], l_own;  // l_own: row g's sum of the P this lane's products read
  unsigned nf_rows = 0;  // rows that saw a non-finite score
  bool split_bad;        // a tile check of this lane failed in this attempt
  // A digest of the lane's scores, P and max over the split: a rerun after a failed tile check
  // compares it, since a fault may change nothing the split outputs (a masked key's score).
  uint32_t dig = 0;
  SplitEnd<D, kProtect, R, C::kNE> end;

  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool first = attempt == 0;
    split_bad = false;
    dig = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) m_old[r] = -INFINITY;
#pragma unroll
    for (int mt = 0; mt < KS; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][e] = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) oc[e] = 0.f;
    l_own = 0.f;
    nf_rows = 0;

    if (!first) ring_prologue();  // (the first attempt's went out before the Q tile)
    for (int it = 0; it < nt; ++it) {
      const int t = t_begin + it;
      cp_async_wait<C::kStages - 2>();
      __syncthreads();  // tile it landed for every thread; the previous tile's readers are done
      {
        const int nx = it + C::kStages - 1;
        if (nx < nt) load_tile(t_begin + nx, nx % C::kStages);
        cp_async_commit();
      }
      if (first && it < 2) st.mark(3 + 3 * it);
      const T* sK = ring + (it % C::kStages) * 2 * C::kTile;
      const T* sV = sK + C::kTile;
      const bool inject = kInj && first && cta_inj;

      // A failed tile check is acted on at the end of the split (the split is recomputed): no
      // CTA-wide vote per tile, so the checks stay off the loop's critical path.
      TcPass<R> tp = tile_pass(sK, sV, t, m_old, inject);
      if (first && it == 0) st.mark(4);
      nf_rows |= tp.nf;
      if constexpr (kProtect) {
        const auto u = [](float x) { return __float_as_uint(x); };
        dig = dig * 0x9E3779B1u + ((u(tp.s[0][0]) ^ u(tp.s[0][1]) ^ u(tp.s[0][2]) ^ u(tp.s[0][3])) +
                                   3u * (u(tp.s[1][0]) ^ u(tp.s[1][1]) ^ u(tp.s[1][2]) ^ u(tp.s[1][3])) +
                                   5u * (u(tp.P[0][0]) ^ u(tp.P[0][1]) ^ u(tp.P[1][0]) ^ u(tp.P[1][1])) +
                                   7u * u(pick(tp.m, g, 0.f)));
      }

      // P^T as the B operand of PV, in 16 bits: what the products read, and what l sums.
      uint32_t bp[2] = {Elem<T>::pack(tp.P[0][0], tp.P[0][1]), Elem<T>::pack(tp.P[1][0], tp.P[1][1])};
      float alpha[R];
      bool moved = false;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        alpha[r] = tp.m[r] == m_old[r] ? 1.f : (m_old[r] == -INFINITY ? 0.f : ex2(m_old[r] - tp.m[r]));
        moved |= tp.m[r] != m_old[r];
        m_old[r] = tp.m[r];
      }
      {
        const float2 p0 = Elem<T>::unpack(bp[0]), p1 = Elem<T>::unpack(bp[1]);
        l_own = fmaf(pick(alpha, g, 1.f), l_own, (p0.x + p0.y) + (p1.x + p1.y));
      }
      if (inject) {
        for_recs<R>(p, kPMma, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
          if (!owns_key(rec, rr)) return;
          const int n = (rec.col >> 3) & 1;
          float2 v = Elem<T>::unpack(bp[n]);
          float one[1] = {(rec.col & 1) ? v.y : v.x};
          corrupt_at(one, 0, rec, log);
          ((rec.col & 1) ? v.y : v.x) = one[0];
          bp[n] = Elem<T>::pack(v.x, v.y);
        });
        if (w == 0 && tq == 0)
          for_recs<R>(p, kRowsum, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
            if (rr == g) {
              float one[1] = {l_own};
              corrupt_at(one, 0, rec, log);
              l_own = one[0];
            }
          });
      }

      // O^T = alpha O^T + V^T P^T (columns 2t, 2t + 1 of this lane: query rows 2t, 2t + 1).
      const float a0 = pick(alpha, 2 * tq, 1.f), a1 = pick(alpha, 2 * tq + 1, 1.f);
      if (moved) {  // CTA-uniform: every thread holds the same maxima
#pragma unroll
        for (int mt = 0; mt < KS; ++mt) o[mt][0] *= a0, o[mt][1] *= a1, o[mt][2] *= a0, o[mt][3] *= a1;
        oc[0] *= a0, oc[1] *= a1;
      }
      // The O injection hooks (rescale, pv): element (head-dim column, query row), warp 0's keys.
      auto inject_o = [&](int stage) {
        if (inject && w == 0)
          for_recs<R>(p, stage, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
            if ((rec.col & 7) != g || rr >> 1 != tq) return;
            const int e = 2 * ((rec.col >> 3) & 1) + (rr & 1);
#pragma unroll
            for (int mt = 0; mt < KS; ++mt)
              if (mt == rec.col >> 4) corrupt_at(o[mt], e, rec, log);
          });
      };
      inject_o(kRescale);
      const uint32_t vb = smem_u32(sV);
#pragma unroll
      for (int mt = 0; mt < KS; ++mt) {
        uint32_t av[4];
        ldsm_x4_t(av, vb + (kv_off ^ (mt << 5)));
        Elem<T>::mma(o[mt], av, bp[0], bp[1]);
      }
      if constexpr (kProtect) {
        // This lane's row of the checksum m-tile: V^c in three parts (rows 0-2), sum |V| (3), ones
        // (4), over its keys 2t, 2t + 1, 8 + 2t, 9 + 2t (the A columns), whose sums lanes 8t and
        // 8t + 4 received (keys 2t and 2t + 1, with 8 + 2t and 9 + 2t).
        float vsum[4], vabsum[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int from = 8 * tq + 4 * (i & 1);
          vsum[i] = __shfl_sync(kFull, tp.vs[i & 2], from);
          vabsum[i] = __shfl_sync(kFull, tp.va[i & 2], from);
        }
        float x[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float c = vsum[i] * kVcDown;
          const float vabs = vabsum[i];
          const float hi = Elem<T>::to_f(Elem<T>::from_f(c));
          const float mid = Elem<T>::to_f(Elem<T>::from_f(c - hi));
          x[i] = g == 0 ? hi : g == 1 ? mid : g == 2 ? c - hi - mid : g == 3 ? vabs * kVcDown * (1.f + 0x1p-7f)
               : g == 4 ? 1.f : 0.f;
        }
        const uint32_t ac[4] = {Elem<T>::pack(x[0], x[1]), 0u, Elem<T>::pack(x[2], x[3]), 0u};
        Elem<T>::mma(oc, ac, bp[0], bp[1]);
        if (inject && w == 0 && g == 4)
          for_recs<R>(p, kRowsumMma, t, b, hk, rows, [&](const InjRec& rec, int rr, float* log) {
            if (rr >> 1 == tq) corrupt_at(oc, rr & 1, rec, log);
          });
      }
      inject_o(kPV);
      if constexpr (kProtect && !kChecksEarly && !(kAbl & 4)) exp_checks(tp);
      split_bad |= tp.bad;
      if (first && it < 2) st.mark(5 + 2 * it);
    }
    if (first) st.mark(8);
    cp_async_wait<0>();
    __syncthreads();  // the ring is free: it holds the warps' O for the exchange

    // The split's O: the warps' key parts summed; thread element e = tid + 128 k is (row e / D,
    // column e % D).
    float* sO = reinterpret_cast<float*>(ring);
#pragma unroll
    for (int mt = 0; mt < KS; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 2 * tq + (e & 1);
        if (r < R) sO[(w * R + r) * D + 16 * mt + 8 * (e >> 1) + g] = o[mt][e];
      }
    __syncthreads();
    float red[C::kRed];  // per row: sum_c O, l, l_mma, O^c, sum P|V|
    end.template gather_o<kWarps>(sO, red);
    if (real) add_at(red, R + g, l_own);
    if constexpr (kProtect)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 2 * tq + e;
        if (r >= R || g > 4) continue;
        add_at(red, (g == 4 ? 2 * R : g == 3 ? 4 * R : 3 * R) + r, g == 4 ? oc[e] : oc[e] / kVcDown);
      }
    block_sum<C::kRed>(red, sRed);
    nf_rows = cta_or(nf_rows, sInt + 4);  // rows with a non-finite score anywhere in the CTA
    const int keys = min(t_end * kBlockN, p.Sk) - t_begin * kBlockN;
    if (first) st.mark(9);
    const bool again =
        end.attempt_done(p, rows, first, red, m_old, nf_rows, keys, /*exact_l=*/false, split_bad, dig, sFirst, sRed);
    if (first) st.mark(10);
    if (!again) break;
  }
  end.write_partial(p, m_old, nf_rows);
  st.mark(11);
}

template <typename T, int D, bool kProtect, int R>
cudaError_t launch(const Params& p, int row_blocks, cudaStream_t stream) {
  const dim3 grid(p.dec_splits, row_blocks, p.B * p.Hk);
  if (p.dec_impl == 0) {
    constexpr auto split = &decode_tc_split_kernel<T, D, kProtect, R, false>;
    constexpr auto split_inj = &decode_tc_split_kernel<T, D, kProtect, R, kProtect>;
    constexpr int smem = TcCfg<T, D, R>::kSmem;
    if (kProtect && p.n_inj > 0) {
      if (cudaError_t e = sm90::allow_smem<split_inj>(smem)) return e;
      split_inj<<<grid, kThreads, smem, stream>>>(p);
    } else {
      if (cudaError_t e = sm90::allow_smem<split>(smem)) return e;
      split<<<grid, kThreads, smem, stream>>>(p);
    }
  } else {
    constexpr auto split = &decode_split_kernel<T, D, kProtect, R>;
    constexpr int smem = Cfg<T, D, R>::kSmem;
    if (cudaError_t e = sm90::allow_smem<split>(smem)) return e;
    split<<<grid, kThreads, smem, stream>>>(p);
  }
  if (cudaError_t e = cudaGetLastError()) return e;
  const size_t cs = CombineCfg<R, D>::smem_bytes(p.dec_splits);
  constexpr auto comb = &decode_combine_kernel<T, D, kProtect, R>;
  if (cs > 48 * 1024)
    if (cudaError_t e = sm90::allow_smem<comb>(cs)) return e;
  // PDL (the combine's CTAs launch while the splits run): ~1 us faster at R <= 4, ~3.5 us slower at
  // R = 8 on an H200 (NOTES_attention.md, run 54e), so only there.
  return sm90::launch_ex(comb, dim3(row_blocks, p.B * p.Hk), kThreads, cs, stream, 1, /*pdl=*/R <= 4, p);
}

// The instantiation a call runs (rows per CTA 2, 4 or 8; head dim 64 or 128): efta_decode_<dtype>.cu.
template <typename T>
cudaError_t dispatch(const Params& p, int D, bool protect, int rows, int row_blocks, cudaStream_t s) {
  if (D == 64) {
    if (rows == 2) return protect ? launch<T, 64, true, 2>(p, row_blocks, s) : launch<T, 64, false, 2>(p, row_blocks, s);
    if (rows == 4) return protect ? launch<T, 64, true, 4>(p, row_blocks, s) : launch<T, 64, false, 4>(p, row_blocks, s);
    return protect ? launch<T, 64, true, 8>(p, row_blocks, s) : launch<T, 64, false, 8>(p, row_blocks, s);
  }
  if (rows == 2) return protect ? launch<T, 128, true, 2>(p, row_blocks, s) : launch<T, 128, false, 2>(p, row_blocks, s);
  if (rows == 4) return protect ? launch<T, 128, true, 4>(p, row_blocks, s) : launch<T, 128, false, 4>(p, row_blocks, s);
  return protect ? launch<T, 128, true, 8>(p, row_blocks, s) : launch<T, 128, false, 8>(p, row_blocks, s);
}

}  // namespace dec
}  // namespace efta

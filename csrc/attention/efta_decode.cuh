// EFTA for few query rows per KV head (decode): split-KV flash attention on the FMA pipes, with the
// protection stages of the tile kernels (efta_kernel.cuh) rebuilt for its layout, and a combine
// kernel that merges the splits under a check of its own.
//
// Why a second kernel (NOTES_attention.md, session 48): the tile kernels give each (query block, query
// head) one CTA, so one query row per step makes B x Hq CTAs that each stream the whole cache at
// 170-300 GB/s, and their checksum prepass reads the cache once more. Here
//  * one CTA holds every query row of a KV head's group (Sq x Hq/Hk <= 8 rows, run as R = 2, 4 or 8):
//    the cache is read once per KV head, not once per query head;
//  * the key tiles are cut into runs (splits), one CTA each, so that one step fills the GPU;
//  * the checksums are built in the CTA from the tiles already in shared memory (no prepass);
//  * the products run in fp32 FMAs, as the reference computes (expected idle at 2-8 rows; measured,
//    they and the latency bound the kernel: tensor cores are the next step, NOTES_attention.md B36).
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
#include "efta_common.cuh"
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

  bool cta_inj = false;
  if constexpr (kProtect)
    for (int i = 0; i < p.n_inj; ++i) {
      const InjRec& rec = p.inj[i];
      const int rr = rec.row * rows.G + rec.h % rows.G - rows.rb * R;
      cta_inj |= rec.b == b && rec.h / rows.G == hk && rr >= 0 && rr < R && rec.tile >= t_begin && rec.tile < t_end;
    }

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
  bool nf = false;
  unsigned nf_rows = 0;  // rows that saw a non-finite score
  uint32_t redo_l = 0, redo_o = 0;  // rows the end-of-split checks sent to recomputation
  uint32_t reported = 0;  // rows whose fault this split counted and kept (detect, raise): the combine skips them
  float fin_o[C::kNE], fin_l[R], fin_lm[R], fin_oc[R], fin_ab[R], fin_so[R];

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
        nf |= !any_changed && any_nf;
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
#pragma unroll
    for (int n = 0; n < C::kRed; ++n) red[n] = 0.f;
#pragma unroll
    for (int k = 0; k < C::kNE; ++k) {
      const int e = tid + kThreads * k, r = e / D, c = e % D;
      float x = 0.f;
#pragma unroll
      for (int q = 0; q < C::kKP; ++q) x += sO[(q * R + r) * D + c];
      fin_o[k] = x;
      add_at(red, r, x);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if ((r & 1) != hh) continue;
      const int i = r >> 1;
      red[R + r] = lp[i];
      if constexpr (kProtect) red[2 * R + r] = lmp[i], red[3 * R + r] = ocp[i], red[4 * R + r] = abp[i];
    }
    block_sum<C::kRed>(red, sRed);
    {  // rows with a non-finite score anywhere in the CTA
      const unsigned wn = __reduce_or_sync(kFull, nf_rows);
      __syncthreads();
      if (lane == 0) sInt[4 + w] = (int)wn;
      __syncthreads();
      nf_rows = (unsigned)(sInt[4] | sInt[5] | sInt[6] | sInt[7]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      fin_so[r] = red[r], fin_l[r] = red[R + r], fin_lm[r] = red[2 * R + r];
      fin_oc[r] = red[3 * R + r], fin_ab[r] = red[4 * R + r];
    }

    if constexpr (!kProtect) break;
    // The end-of-split checks (uniform: every thread holds the CTA's totals).
    const int keys = min(t_end * kBlockN, p.Sk) - t_begin * kBlockN;
    uint32_t bad_l = 0, bad_o = 0, nonfinite = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (!rows.valid(r, R) || m_old[r] == -INFINITY) continue;  // padding, or no live key in the split
      const bool finite = isfinite(m_old[r]) && isfinite(fin_l[r]) && isfinite(fin_lm[r]) && isfinite(fin_oc[r]) &&
                          isfinite(fin_ab[r]) && isfinite(fin_so[r]) && !((nf_rows >> r) & 1u);
      const bool l_ok = fin_l[r] >= 1.f - kTolL && fin_l[r] <= keys * (1.f + kTolL) &&
                        __float_as_uint(fin_l[r]) == __float_as_uint(fin_lm[r]);
      const bool o_ok = fabsf(fin_so[r] - fin_oc[r]) <= fmaf(p.e_out, fin_ab[r], 1e-30f);
      if (!finite) nonfinite |= 1u << r;
      else if (!l_ok) bad_l |= 1u << r;
      else if (!o_ok) bad_o |= 1u << r;
    }
    if (first) {
      if (tid == 0 && p.alarms != nullptr) {
        if (bad_l) atomicAdd(p.alarms + kRowsumAlarms, (unsigned long long)__popc(bad_l));
        if (bad_o) atomicAdd(p.alarms + kFinalAlarms, (unsigned long long)__popc(bad_o));
      }
      // Non-finite rows: inputs where the recomputation repeats them (fix policies), else inputs.
      const uint32_t rerun = fix ? (bad_l | bad_o | nonfinite) : 0u;
      if (!fix) {
        if (tid == 0) bump(p.counters, kDetected, __popc(bad_l | bad_o));
        reported = bad_l | bad_o;
        nf |= nonfinite != 0;
      }
      if (!rerun) break;
      redo_l = bad_l | nonfinite, redo_o = bad_o;
#pragma unroll
      for (int k = 0; k < C::kNE; ++k) sFirst[tid + kThreads * k] = fin_o[k];
      if (tid == 0)
#pragma unroll
        for (int r = 0; r < R; ++r)
          sFirst[R * D + r] = fin_l[r], sFirst[R * D + R + r] = m_old[r], sFirst[R * D + 2 * R + r] = fin_lm[r];
      continue;  // the split again, without injections
    }
    // Second attempt: compare with the first, element by element, per flagged row.
    float diff[R];
#pragma unroll
    for (int r = 0; r < R; ++r) diff[r] = 0.f;
#pragma unroll
    for (int k = 0; k < C::kNE; ++k) {
      const bool differs = __float_as_uint(fin_o[k]) != __float_as_uint(sFirst[tid + kThreads * k]);
      add_at(diff, (tid + kThreads * k) / D, differs ? 1.f : 0.f);
    }
    block_sum<R>(diff, sRed);
    uint32_t keep_first = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      // (a fault in l_mma alone changes no output: the rerun's l_mma tells it)
      const bool moved_r = diff[r] > 0.f || __float_as_uint(fin_l[r]) != __float_as_uint(sFirst[R * D + r]) ||
                           __float_as_uint(m_old[r]) != __float_as_uint(sFirst[R * D + R + r]) ||
                           __float_as_uint(fin_lm[r]) != __float_as_uint(sFirst[R * D + 2 * R + r]);
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
    if (keep_first)
#pragma unroll
      for (int k = 0; k < C::kNE; ++k) {
        const int r = (tid + kThreads * k) / D;
        if ((keep_first >> r) & 1u) fin_o[k] = sFirst[tid + kThreads * k];
      }
    break;
  }

  // The split's partial result (unnormalised O, max, row sum, checksum, magnitude).
  float* part = p.dec_ws + ((int64_t)(bh * gridDim.y + blockIdx.y) * gridDim.x + split) * part_floats<R, D>();
#pragma unroll
  for (int k = 0; k < C::kNE; ++k) part[tid + kThreads * k] = fin_o[k];
  if (tid < R) {
    float l = 0.f, mm = 0.f, oc = 0.f, ab = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r == tid) l = fin_l[r], mm = m_old[r], oc = fin_oc[r], ab = fin_ab[r];
    if ((nf_rows >> tid) & 1u) l = __int_as_float(0x7fc00000);  // a non-finite score: the row is NaN, as SDPA's
    part[R * D + tid] = mm;
    part[R * D + R + tid] = l;
    part[R * D + 2 * R + tid] = oc;
    part[R * D + 3 * R + tid] = (reported >> tid) & 1u ? -ab : ab;  // (the sign: counted here already)
  }
  if (kProtect && tid == 0 && (nf || nf_rows)) atomicOr(p.nf_token + 2, 1);
}

// Merge the splits of (row block, b x KV head): one CTA for all its rows at once. Warp w computes
// O's split weights and normaliser for rows w, w + 4, and the checksum's for rows w + 1, w + 5 (mod
// 4): a fault in one weight moves O or its checksum, not both.
template <typename T, int D, bool kProtect, int R>
__global__ void __launch_bounds__(kThreads) decode_combine_kernel(const Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int S = p.dec_splits;
  float* wO = reinterpret_cast<float*>(smem);  // [R][S] weights of O
  float* sL = wO + R * S;                       // [R] L_O; [R..2R) L_C; O^c; sum P|V|; reported
  float* sRed = sL + 5 * R;                     // block_sum's buffer (4 x R)
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int rb = blockIdx.x, bh = blockIdx.y, b = bh / p.Hk, hk = bh % p.Hk;
  const Rows rows{p.Hq / p.Hk, rb, p.Sq * (p.Hq / p.Hk)};
  constexpr int PF = part_floats<R, D>();
  constexpr int kNE = R * D / kThreads;  // elements per thread: (row e / D, column e % D), e = tid + 128 k
  const float* part0 = p.dec_ws + (int64_t)(bh * gridDim.x + rb) * S * PF;
  const bool fix = p.policy == kCorrect || p.policy == kRecompute;
  grid_dep_wait();  // launched while the splits ran (PDL, R <= 4): their partials, flags and counts first

  // Weights of row r (checksum: its sums too); a warp-wide computation.
  auto weights = [&](int r, bool checksum) {
    float M = -INFINITY;
    for (int s = lane; s < S; s += 32) M = fmaxf(M, part0[s * PF + R * D + r]);
#pragma unroll
    for (int o = 16; o; o >>= 1) M = fmaxf(M, __shfl_xor_sync(kFull, M, o));
    float l = 0.f, oc = 0.f, ab = 0.f;
    bool rep = false;
    for (int s = lane; s < S; s += 32) {
      const float* ps = part0 + s * PF + R * D;
      const float m = ps[r];
      const float wt = m == -INFINITY ? 0.f : ex2(m - M);
      l = fmaf(wt, ps[R + r], l);
      if (checksum) {
        oc = fmaf(wt, ps[2 * R + r], oc), ab = fmaf(wt, fabsf(ps[3 * R + r]), ab);
        rep |= signbit(ps[3 * R + r]);
      } else {
        wO[r * S + s] = wt;
      }
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) {
      l += __shfl_xor_sync(kFull, l, o);
      oc += __shfl_xor_sync(kFull, oc, o);
      ab += __shfl_xor_sync(kFull, ab, o);
    }
    rep = __any_sync(kFull, rep);
    if (lane == 0) {
      if (!checksum) sL[r] = l;
      else sL[R + r] = l, sL[2 * R + r] = oc, sL[3 * R + r] = ab, sL[4 * R + r] = rep ? 1.f : 0.f;
    }
  };

  float out[kNE], first[kNE];
  uint32_t redo = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int r = w; r < R; r += 4)
      if (rows.valid(r, R)) weights(r, false);
    if (kProtect)
      for (int r = (w + 1) % 4; r < R; r += 4)
        if (rows.valid(r, R)) weights(r, true);
    __syncthreads();
    float so[R];
#pragma unroll
    for (int r = 0; r < R; ++r) so[r] = 0.f;
#pragma unroll
    for (int k = 0; k < kNE; ++k) {
      const int e = tid + kThreads * k, r = e / D;
      out[k] = 0.f;
      if (!rows.valid(r, R)) continue;
      float x = 0.f;
      for (int s = 0; s < S; ++s) x = fmaf(wO[r * S + s], part0[s * PF + e], x);
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

template <typename T, int D, bool kProtect, int R>
cudaError_t launch(const Params& p, int row_blocks, cudaStream_t stream) {
  using C = Cfg<T, D, R>;
  constexpr auto split = &decode_split_kernel<T, D, kProtect, R>;
  if (cudaError_t e = sm90::allow_smem<split>(C::kSmem)) return e;
  split<<<dim3(p.dec_splits, row_blocks, p.B * p.Hk), kThreads, C::kSmem, stream>>>(p);
  if (cudaError_t e = cudaGetLastError()) return e;
  const size_t cs = ((size_t)R * p.dec_splits + 5 * R + 4 * R) * sizeof(float);
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

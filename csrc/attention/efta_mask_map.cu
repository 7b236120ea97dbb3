// The mask's tile map: which key tiles a block of 64 query rows must visit, and from which tile on
// the mask is not all zero. With it a causal or padding mask given as a tensor costs what
// is_causal costs: the tiles past the last live key are skipped, and the tiles where the mask
// adds nothing take the unmasked path.
#include "efta_api.cuh"

namespace efta {

// A mask chunk of V elements in one 16-byte load (bool: 16 bytes; fp32: 4 floats): does it hold
// a key that is not -inf (live), one that adds anything but zero (nonzero)?
__device__ __forceinline__ void scan16(const uint4& v, bool is_bool, bool& nonzero, bool& live) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (is_bool) {  // a zero byte (false) masks its key; a nonzero byte keeps it
      nonzero |= ((w[i] - 0x01010101u) & ~w[i] & 0x80808080u) != 0;
      live |= w[i] != 0;
    } else {
      const float f = __uint_as_float(w[i]);
      nonzero |= f != 0.f;  // NaN included: it must reach the scores
      live |= f != -INFINITY;
    }
  }
}
__device__ __forceinline__ void scan1(const Params& p, int64_t at, bool& nonzero, bool& live) {
  if (p.mask_bool) {  // false: -inf, true: adds zero
    const bool keep = __ldg(static_cast<const uint8_t*>(p.mask) + at) != 0;
    nonzero |= !keep;
    live |= keep;
  } else {
    const float v = __ldg(static_cast<const float*>(p.mask) + at);
    nonzero |= v != 0.f;
    live |= v != -INFINITY;
  }
}

// One CTA per (key tile, 64-row block, mask batch x head): if any key is not -inf there, the
// block's live count is >= t + 1 and its first live tile <= t; if the mask adds anything but zero
// there (NaN included), the block's first masked tile is <= t and its last >= t (firsts stored as
// n_tiles - t, so every field is a maximum over zeros: Params::mask_map).
// Rows contiguous along the keys and 16-byte aligned are read 16 bytes at a time (one byte per
// load made the kernel element-bound: 17 us per 2048 x 2048 bool mask, NOTES_attention.md);
// chunks past Sk, and other layouts, element by element.
__global__ void __launch_bounds__(kThreads) mask_map_kernel(const __grid_constant__ Params p, int hm_count) {
  const int t = blockIdx.x, qb = blockIdx.y, bm = blockIdx.z / hm_count, hm = blockIdx.z % hm_count;
  const int rows = p.mc_sq != 0 ? min(64, p.Sq - 64 * qb) : 1;
  const int64_t m0 = bm * p.m_sb + hm * p.m_sh + (int64_t)(64 * qb) * p.m_sq;
  const int esize = p.mask_bool ? 1 : 4, V = 16 / esize, per_row = kBlockN / V;
  const uint8_t* base = static_cast<const uint8_t*>(p.mask);
  const bool vec = p.m_sk == 1 && (reinterpret_cast<uintptr_t>(base + m0 * esize) % 16) == 0 &&
                   (rows == 1 || (p.m_sq * esize) % 16 == 0);
  bool nonzero = false, live = false;
  for (int c = threadIdx.x; c < rows * per_row; c += kThreads) {
    const int r = c / per_row, j0 = t * kBlockN + (c % per_row) * V;
    const int64_t at = m0 + r * p.m_sq + (int64_t)j0 * p.m_sk;
    if (vec && j0 + V <= p.Sk) {
      scan16(__ldg(reinterpret_cast<const uint4*>(base + at * esize)), p.mask_bool != 0, nonzero, live);
    } else {
      for (int j = j0; j < j0 + V && j < p.Sk; ++j) scan1(p, at + (int64_t)(j - j0) * p.m_sk, nonzero, live);
    }
  }
  nonzero = __syncthreads_or(nonzero);
  live = __syncthreads_or(live);
  if (threadIdx.x == 0) {
    int* map = const_cast<int*>(map_entry(p, bm, hm, qb));
    if (live) atomicMax(map, t + 1), atomicMax(map + 2, p.n_tiles - t);
    if (nonzero) atomicMax(map + 1, p.n_tiles - t), atomicMax(map + 3, t + 1);
  }
}

cudaError_t launch_mask_map(const Params& p, cudaStream_t s) {
  const int bm = p.mc_sb != 0 ? p.B : 1, hm = p.mc_sh != 0 ? p.Hq : 1;
  const int nqb = p.mc_sq != 0 ? (p.Sq + 63) / 64 : 1;
  mask_map_kernel<<<dim3(p.n_tiles, nqb, bm * hm), kThreads, 0, s>>>(p, hm);
  return cudaGetLastError();
}

}  // namespace efta

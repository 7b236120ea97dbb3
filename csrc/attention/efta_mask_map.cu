// The mask's tile map: which key tiles a block of 64 query rows must visit, and from which tile on
// the mask is not all zero. With it a causal or padding mask given as a tensor costs what
// is_causal costs: the tiles past the last live key are skipped, and the tiles where the mask
// adds nothing take the unmasked path.
#include "efta_api.cuh"

namespace efta {

// One CTA per (key tile, 64-row block, mask batch x head): if any key is not -inf there, the
// block's live count is >= t + 1; if the mask adds anything but zero there (NaN included), the
// block's first masked tile is <= t (stored as n_tiles - t, so both are maxima over zeros).
__global__ void __launch_bounds__(kThreads) mask_map_kernel(const __grid_constant__ Params p, int hm_count) {
  const int t = blockIdx.x, qb = blockIdx.y, bm = blockIdx.z / hm_count, hm = blockIdx.z % hm_count;
  const int rows = p.mc_sq != 0 ? min(64, p.Sq - 64 * qb) : 1;
  const int64_t m0 = bm * p.m_sb + hm * p.m_sh + (int64_t)(64 * qb) * p.m_sq;
  bool nonzero = false, live = false;
  for (int e = threadIdx.x; e < rows * kBlockN; e += kThreads) {
    const int r = e / kBlockN, j = t * kBlockN + e % kBlockN;
    if (j < p.Sk) {
      const int64_t at = m0 + r * p.m_sq + j * p.m_sk;
      if (p.mask_bool) {  // false: -inf, true: adds zero
        const bool keep = __ldg(static_cast<const uint8_t*>(p.mask) + at) != 0;
        nonzero |= !keep;
        live |= keep;
      } else {
        const float v = __ldg(static_cast<const float*>(p.mask) + at);
        nonzero |= v != 0.f;  // NaN included: it must reach the scores
        live |= v != -INFINITY;
      }
    }
  }
  nonzero = __syncthreads_or(nonzero);
  live = __syncthreads_or(live);
  if (threadIdx.x == 0) {
    const int64_t blk = bm * p.mc_sb + hm * p.mc_sh + qb * p.mc_sq;
    int* map = const_cast<int*>(p.mask_map) + 2 * blk;
    if (live) atomicMax(map, t + 1);
    if (nonzero) atomicMax(map + 1, p.n_tiles - t);
  }
}

cudaError_t launch_mask_map(const Params& p, cudaStream_t s) {
  const int bm = p.mc_sb != 0 ? p.B : 1, hm = p.mc_sh != 0 ? p.Hq : 1;
  const int nqb = p.mc_sq != 0 ? (p.Sq + 63) / 64 : 1;
  mask_map_kernel<<<dim3(p.n_tiles, nqb, bm * hm), kThreads, 0, s>>>(p, hm);
  return cudaGetLastError();
}

}  // namespace efta

// Host-side helpers shared by the launchers: TMA descriptors and device properties.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <utility>

#include "sm90_host.cuh"

namespace ftg {

// A [batch, rows, K] 16-bit tensor (K contiguous) as 3-D TMA tiles of box_rows x 64, 128-byte swizzle
// (the layout wgmma and the ldmatrix address math expect). Returns false where TMA cannot describe it.
inline bool make_tmap(CUtensorMap* map, const void* ptr, int64_t batch, int64_t rows, int64_t K,
                      int64_t row_stride, int64_t batch_stride, int box_rows) {
  const int64_t dims[3] = {K, rows, batch}, strides[3] = {1, row_stride, batch_stride};
  return sm90::make_tmap_16b(map, ptr, 3, dims, strides, box_rows);
}

__host__ __device__ inline int cdiv(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

// Launch of a grid whose x dimension holds clusters of `split` CTAs (the thread scheme's K split,
// the global scheme's multicast pairs; the kernels use cluster instructions only where split > 1);
// `pdl`: programmatic dependent launch (the kernel waits with griddepcontrol.wait).
template <typename... Params, typename... Args>
int launch_split(void (*kern)(Params...), dim3 grid, int threads, size_t smem, int64_t stream, int split, bool pdl,
                 Args&&... args) {
  return sm90::launch_ex(kern, grid, threads, smem, reinterpret_cast<cudaStream_t>(stream), split, pdl,
                         std::forward<Args>(args)...);
}

}  // namespace ftg

// Error codes the launchers return besides cudaError_t values (kept clear of that range).
#define FTG_ERR_TMAP 100001
#define FTG_ERR_ARGS 100002

// Host-side helpers shared by the launchers: TMA descriptors and device properties.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace ftg {

inline PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
            cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }
  return fn;
}

// A [batch, rows, K] 16-bit tensor (K contiguous) as 3-D TMA tiles of box_rows x 64, 128-byte swizzle
// (the layout wgmma and the ldmatrix address math expect). Returns false where TMA cannot describe it.
inline bool make_tmap(CUtensorMap* map, const void* ptr, int64_t batch, int64_t rows, int64_t K,
                      int64_t row_stride, int64_t batch_stride, int box_rows) {
  auto fn = encode_fn();
  if (!fn) return false;
  if (batch == 1) batch_stride = row_stride * rows;  // unused, but must be a legal stride
  cuuint64_t dims[3] = {(cuuint64_t)K, (cuuint64_t)rows, (cuuint64_t)batch};
  cuuint64_t strides[2] = {(cuuint64_t)(row_stride * 2), (cuuint64_t)(batch_stride * 2)};
  cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1};
  cuuint32_t estr[3] = {1, 1, 1};
  CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(ptr), dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

__host__ __device__ inline int cdiv(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

}  // namespace ftg

// Error codes the launchers return besides cudaError_t values (kept clear of that range).
#define FTG_ERR_TMAP 100001
#define FTG_ERR_ARGS 100002

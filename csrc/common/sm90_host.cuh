// Host side of the sm90 kernels: the driver's tensor-map encoder, looked up once through the runtime
// (so the libraries need no -lcuda), tiled maps of 16-bit tensors, and the shared-memory opt-in.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <utility>

namespace sm90 {

// cudaLaunchKernelEx with the launch attributes the kernels use: `cluster` CTAs per cluster along x
// (none for 1: a lone CTA is its own implicit cluster), and programmatic stream serialisation
// (`pdl`: the kernel may start while the previous one in the stream finishes; it must
// griddepcontrol.wait before reading what that kernel writes).
template <typename... Params, typename... Args>
cudaError_t launch_ex(void (*kern)(Params...), dim3 grid, int threads, size_t smem, cudaStream_t stream, int cluster,
                      bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (cluster > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kern, std::forward<Args>(args)...);
  return e != cudaSuccess ? e : cudaGetLastError();
}

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

// A rank-`rank` 16-bit tensor (dims and element strides innermost first; dim 0 contiguous) as tiles of
// 64 x box_rows (x 1 ...), 128-byte swizzle: the layout wgmma descriptors and the ldmatrix address
// math expect. Strides of size-1 dims are replaced by legal ones. False where TMA cannot describe it.
inline bool make_tmap_16b(CUtensorMap* map, const void* ptr, int rank, const int64_t* dims, const int64_t* strides,
                          int box_rows) {
  auto fn = encode_fn();
  if (!fn || rank < 2 || rank > 5) return false;
  cuuint64_t gd[5], gs[4];
  cuuint32_t box[5], estr[5];
  int64_t span = dims[0];  // elements a legal stride must skip for a size-1 dim
  for (int i = 0; i < rank; ++i) {
    gd[i] = (cuuint64_t)dims[i];
    box[i] = i == 0 ? 64u : i == 1 ? (cuuint32_t)box_rows : 1u;
    estr[i] = 1;
    if (i > 0) {
      const int64_t s = dims[i] == 1 ? span : strides[i];
      gs[i - 1] = (cuuint64_t)(s * 2);
      span = s * dims[i] > span ? s * dims[i] : span;
    }
  }
  CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, (cuuint32_t)rank, const_cast<void*>(ptr), gd, gs, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// Opts Kernel into `bytes` of dynamic shared memory (and, if asked, non-portable cluster sizes) on
// the current device: once per device and the largest size asked so far.
template <auto Kernel>
cudaError_t allow_smem(size_t bytes, bool nonportable_cluster = false) {
  static size_t done[64] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 64 && bytes <= done[dev]) return cudaSuccess;
  e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e == cudaSuccess && nonportable_cluster)
    e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e == cudaSuccess && dev < 64) done[dev] = bytes;
  return e;
}

// How many clusters of `cluster` CTAs of `kern` (threads and dynamic shared memory per CTA as
// given) the current device holds at once - clusters do not span GPCs, so fewer than SMs / cluster
// where GPCs' SM counts are not multiples of it - or a negative CUDA error. The caller has opted
// the kernel into `smem` (allow_smem).
template <typename... Params>
int max_active_clusters(void (*kern)(Params...), int threads, size_t smem, int cluster) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)cluster);
  cfg.blockDim = dim3((unsigned)threads);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = (unsigned)cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveClusters(&n, kern, &cfg)) return -(int)e;
  return n;
}

}  // namespace sm90

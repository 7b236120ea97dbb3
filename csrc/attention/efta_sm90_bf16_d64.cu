// Instantiations of the wgmma kernel for bf16, head dim 64 (one file per variant: parallel builds).
#ifndef EFTA_DECODE_ONLY  // (a measurement build of the decode kernel alone: efta_api.cu)
#include "efta_api.cuh"
#include "efta_sm90.cuh"

namespace efta {
cudaError_t launch_sm90_bf16_64(const Params& p, const Maps& m, bool protect, cudaStream_t s) {
  return protect ? h90::launch<__nv_bfloat16, 64, true>(p, m, s) : h90::launch<__nv_bfloat16, 64, false>(p, m, s);
}
}  // namespace efta
#endif

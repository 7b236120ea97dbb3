// Instantiations for bf16, head dim 64 (one file per variant so ninja builds them in parallel).
#include "efta_api.cuh"
#include "efta_kernel.cuh"

namespace efta {
cudaError_t launch_bf16_64(const Params& p, bool protect, cudaStream_t s) {
  return protect ? launch<__nv_bfloat16, 64, true>(p, s) : launch<__nv_bfloat16, 64, false>(p, s);
}
}  // namespace efta

// Instantiations for fp16, head dim 64 (one file per variant so ninja builds them in parallel).
#include "efta_api.cuh"
#include "efta_kernel.cuh"

namespace efta {
cudaError_t launch_fp16_64(const Params& p, bool protect, cudaStream_t s) {
  return protect ? launch<__half, 64, true>(p, s) : launch<__half, 64, false>(p, s);
}
}  // namespace efta

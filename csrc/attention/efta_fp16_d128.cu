// Instantiations for fp16, head dim 128 (one file per variant so ninja builds them in parallel).
#include "efta_api.cuh"
#include "efta_kernel.cuh"

namespace efta {
cudaError_t launch_fp16_128(const Params& p, bool protect, cudaStream_t s) {
  return protect ? launch<__half, 128, true>(p, s) : launch<__half, 128, false>(p, s);
}
}  // namespace efta

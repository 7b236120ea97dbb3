// Instantiations for fp16, head dim 128 (one file per variant so ninja builds them in parallel).
#ifndef EFTA_DECODE_ONLY  // (a measurement build of the decode kernel alone: efta_api.cu)
#include "efta_api.cuh"
#include "efta_kernel.cuh"

namespace efta {
cudaError_t launch_fp16_128(const Params& p, bool protect, int /*mt: always 1 at d=128*/, cudaStream_t s) {
  return protect ? launch<__half, 128, true, 1>(p, s) : launch<__half, 128, false, 1>(p, s);
}
cudaError_t prepass_fp16_128(const Params& p, cudaStream_t s) { return launch_prepass<__half, 128>(p, s); }
}  // namespace efta
#endif

// Instantiations for bf16, head dim 64 (one file per variant so ninja builds them in parallel).
#ifndef EFTA_DECODE_ONLY  // (a measurement build of the decode kernel alone: efta_api.cu)
#include "efta_api.cuh"
#include "efta_kernel.cuh"

namespace efta {
cudaError_t launch_bf16_64(const Params& p, bool protect, int mt, cudaStream_t s) {
  if (mt == 1) return protect ? launch<__nv_bfloat16, 64, true, 1>(p, s) : launch<__nv_bfloat16, 64, false, 1>(p, s);
  return protect ? launch<__nv_bfloat16, 64, true, 2>(p, s) : launch<__nv_bfloat16, 64, false, 2>(p, s);
}
cudaError_t prepass_bf16_64(const Params& p, cudaStream_t s) { return launch_prepass<__nv_bfloat16, 64>(p, s); }
}  // namespace efta
#endif

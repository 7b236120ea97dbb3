// Instantiations of the wgmma kernel for fp16, head dim 64 (one file per variant: parallel builds).
#ifndef EFTA_DECODE_ONLY  // (a measurement build of the decode kernel alone: efta_api.cu)
#include "efta_api.cuh"
#include "efta_sm90.cuh"

namespace efta {
cudaError_t launch_sm90_fp16_64(const Params& p, const Maps& m, bool protect, cudaStream_t s) {
  return protect ? h90::launch<__half, 64, true>(p, m, s) : h90::launch<__half, 64, false>(p, m, s);
}
}  // namespace efta

#ifdef PHASE_STAMPS
// Diagnostic build: this file's kernels' phase records (fp16, d=64; benchmarks/prefill_phases.py).
extern "C" EFTA_API int efta_sm90_fp16_d64_stamps(void* out, int cap) { return phase_stamps::copy_records(out, cap); }
#endif
#endif

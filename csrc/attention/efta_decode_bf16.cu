// The decode kernel's instantiations for bf16 (one file per dtype: parallel builds).
#include "efta_api.cuh"
#include "efta_decode.cuh"

namespace efta {
cudaError_t decode_bf16(const Params& p, int D, bool protect, int rows, int row_blocks, cudaStream_t s) {
  return dec::dispatch<__nv_bfloat16>(p, D, protect, rows, row_blocks, s);
}
}  // namespace efta

#ifdef PHASE_STAMPS
// Diagnostic build: the tensor-core split kernel's phase records (bf16 calls; benchmarks/decode_phases.py).
extern "C" EFTA_API int efta_decode_stamps(void* out, int cap) { return phase_stamps::copy_records(out, cap); }
extern "C" EFTA_API int efta_decode_stamp_size() { return (int)sizeof(phase_stamps::Rec); }
#endif

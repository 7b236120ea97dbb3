// The decode kernel's instantiations for bf16 (one file per dtype: parallel builds).
#include "efta_api.cuh"
#include "efta_decode.cuh"

namespace efta {
cudaError_t decode_bf16(const Params& p, int D, bool protect, int rows, int row_blocks, cudaStream_t s) {
  return dec::dispatch<__nv_bfloat16>(p, D, protect, rows, row_blocks, s);
}
}  // namespace efta

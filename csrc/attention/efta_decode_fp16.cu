// The decode kernel's instantiations for fp16 (one file per dtype: parallel builds).
#include "efta_api.cuh"
#include "efta_decode.cuh"

namespace efta {
cudaError_t decode_fp16(const Params& p, int D, bool protect, int rows, int row_blocks, cudaStream_t s) {
  return dec::dispatch<__half>(p, D, protect, rows, row_blocks, s);
}
}  // namespace efta

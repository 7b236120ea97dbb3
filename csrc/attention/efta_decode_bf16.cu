// Instantiations of the decode kernel for bf16 (one file per dtype: parallel builds).
#include "efta_api.cuh"
#include "efta_decode.cuh"

namespace efta {
cudaError_t decode_bf16(const Params& p, int D, bool protect, int rows, int row_blocks, cudaStream_t s) {
  using T = __nv_bfloat16;
  if (D == 64) {
    if (rows == 2) return protect ? dec::launch<T, 64, true, 2>(p, row_blocks, s) : dec::launch<T, 64, false, 2>(p, row_blocks, s);
    if (rows == 4) return protect ? dec::launch<T, 64, true, 4>(p, row_blocks, s) : dec::launch<T, 64, false, 4>(p, row_blocks, s);
    return protect ? dec::launch<T, 64, true, 8>(p, row_blocks, s) : dec::launch<T, 64, false, 8>(p, row_blocks, s);
  }
  if (rows == 2) return protect ? dec::launch<T, 128, true, 2>(p, row_blocks, s) : dec::launch<T, 128, false, 2>(p, row_blocks, s);
  if (rows == 4) return protect ? dec::launch<T, 128, true, 4>(p, row_blocks, s) : dec::launch<T, 128, false, 4>(p, row_blocks, s);
  return protect ? dec::launch<T, 128, true, 8>(p, row_blocks, s) : dec::launch<T, 128, false, 8>(p, row_blocks, s);
}
}  // namespace efta

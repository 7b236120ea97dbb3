// Event timing shared by the loads-only probes (stride_probe.cu, bulk_ring_probe.cu): `launch(i)`
// runs one call on buffer i of `nbuf` (rotated so that L2 holds none of them), 4 warm-up calls,
// then the mean of 60 back-to-back calls in microseconds.
#pragma once
#include <cuda_runtime.h>

template <typename Launch>
float time_us(Launch launch, int nbuf) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 4; ++i) launch(i % nbuf);
  const int iters = 60;
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) launch(i % nbuf);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a); cudaEventDestroy(b);
  return 1000.f * ms / iters;
}

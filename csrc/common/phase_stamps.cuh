// Phase timestamps of a kernel's CTAs: a diagnostic build only (-DPHASE_STAMPS, made by
// benchmarks/stream_phases.py, thin_phases.py and decode_phases.py for the streaming, thin and decode
// split kernels). Thread 0 of every CTA takes a ticket at entry and records, per phase, the SM clock
// and the global timer into the ticket's slot; the host reads the slots back through the library's
// own export (ft_gemm_stream_stamps, ft_gemm_thin_stamps, efta_decode_stamps). Tickets are handed out in
// start order, and a launch's CTAs all start before the next launch's (even with programmatic
// dependent launch, which waits for every CTA to have started), so ticket / ctas_per_launch is the
// launch. Without the macro every hook is empty and the production kernel is unchanged.
#pragma once
#include <stdint.h>

namespace phase_stamps {

// Up to NPH phases per CTA, numbered by each kernel (the streaming kernel's: stream_gemm.cu at its
// Stamper; the thin kernel's: thin_gemm.cu, above Ctrl; the decode split's: efta_decode.cuh).
constexpr int NPH = 12;
constexpr int CAP = 1 << 16;
struct Rec {
  uint32_t block, smid;  // block: x | y << 16 | z << 24
  uint64_t clk[NPH];     // SM clock (0: phase not reached)
  uint64_t gt[NPH];      // global timer, ns
};

#ifdef PHASE_STAMPS
__device__ Rec g_rec[CAP];
__device__ unsigned g_ticket;

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t sm_id() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// The record's slot lives in shared memory: a register held across the main loop would spill.
struct Stamper {
  __device__ __forceinline__ static unsigned& slot() {
    __shared__ unsigned s;
    return s;
  }
  __device__ __forceinline__ void begin() {
    if (threadIdx.x != 0) return;
    const unsigned t = atomicAdd(&g_ticket, 1u) % CAP;
    slot() = t;
    Rec& r = g_rec[t];
    r.block = blockIdx.x | blockIdx.y << 16 | blockIdx.z << 24;
    r.smid = sm_id();
    for (int i = 1; i < NPH; ++i) r.clk[i] = r.gt[i] = 0;
    mark(0);
  }
  __device__ __forceinline__ void mark(int i) {
    if (threadIdx.x != 0) return;
    Rec& r = g_rec[slot()];
    r.clk[i] = clock64();
    r.gt[i] = global_ns();
  }
};

// The same records for kernels whose phases end in different threads (the thin kernel: its
// producer thread and its first consumer thread): the slot is a word of the kernel's own shared
// control block, and mark(i, by) records in thread `by` only. (A static __shared__ slot would pad
// a kernel whose dynamic shared memory is declared 1024-aligned by a whole kilobyte.)
struct SlotStamper {
  unsigned* slot;
  __device__ __forceinline__ void begin(unsigned* s) {
    slot = s;
    if (threadIdx.x != 0) return;
    const unsigned t = atomicAdd(&g_ticket, 1u) % CAP;
    *slot = t;
    Rec& r = g_rec[t];
    r.block = blockIdx.x | blockIdx.y << 16 | blockIdx.z << 24;
    r.smid = sm_id();
    for (int i = 1; i < NPH; ++i) r.clk[i] = r.gt[i] = 0;
    r.clk[0] = clock64();
    r.gt[0] = global_ns();
  }
  // (by thread `by`, after a barrier that follows begin())
  __device__ __forceinline__ void mark(int i, int by = 0) {
    if ((int)threadIdx.x != by) return;
    Rec& r = g_rec[*slot];
    r.clk[i] = clock64();
    r.gt[i] = global_ns();
  }
};

// Host side: copies up to `cap` records of the launches since the last call into `out` and starts
// over; returns how many CTAs recorded (may exceed cap), or a negative CUDA error. (Each file that
// includes this header has its own records: the libraries' exports call it.)
static inline int copy_records(void* out, int cap) {
  unsigned n = 0;
  if (cudaError_t e = cudaMemcpyFromSymbol(&n, g_ticket, sizeof n)) return -(int)e;
  const unsigned keep = n < (unsigned)cap ? n : (unsigned)cap;
  if (keep && out)
    if (cudaError_t e = cudaMemcpyFromSymbol(out, g_rec, keep * sizeof(Rec))) return -(int)e;
  const unsigned zero = 0;
  if (cudaError_t e = cudaMemcpyToSymbol(g_ticket, &zero, sizeof zero)) return -(int)e;
  return (int)n;
}
#else
struct Stamper {
  __device__ __forceinline__ void begin() {}
  __device__ __forceinline__ void mark(int) {}
};
struct SlotStamper {
  __device__ __forceinline__ void begin(unsigned*) {}
  __device__ __forceinline__ void mark(int, int = 0) {}
};
#endif

}  // namespace phase_stamps

"""Writes wgmma_ops.cuh: the wgmma wrappers both kernel families use (an m64n256 accumulator has 128
operands: too many to type by hand), and wgmma_ss<T, N> / wgmma_rs<T, N, tnsp> that pick one by
element type and shape. Run: python csrc/common/gen_wgmma.py

  ss: A and B from shared memory (descriptors, both K-major)       - GEMM mainloop, attention S = Q K^T
  rs: A from registers (4 x 16-bit pairs), B from shared memory;    - attention O += P V (B N-major:
      tnsp = 1 reads B N-major (V as stored), 0 K-major               V as stored); the tile-local
                                                                      check's GEMM mainloop (x's
                                                                      range from its A fragments)
  rs_cs: rs, N-major, whose last 8 columns accumulate into a         - attention [O | O^c] += P [V | V^c]
      second array (the checksum columns: O^c apart from O)            in one wgmma (protected)
"""
from pathlib import Path

SS = (256, 200, 192, 136, 128, 72, 64, 40, 32)  # gemm tiles (128x256, 128x192, 128x128; +8 tile checksum columns: 200, 136); attention S (+ 8 checksum columns) / S unprotected; thin kernel x tiles (32, 64, 128 rows of x, + 8 checksum columns)
RS = ((64, 1), (128, 1), (200, 0), (192, 0), (136, 0), (128, 0))  # (N, tnsp): attention O at d=64, d=128; tile-check GEMM tiles (K-major W)
RS_CS = (72, 136)         # attention O and its 8 checksum columns at d=64, d=128
TYPES = (("bf16", "bf16"), ("f16", "f16"))


def _operands(regs: int) -> str:
    return ",\n        ".join(", ".join(f'"+f"(d[{i + j}])' for j in range(min(8, regs - i))) for i in range(0, regs, 8))


def ss(n: int, name: str, ptx: str) -> str:
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    return f"""
// D[64x{n}] (+)= A[64x16] * B[16x{n}]; A, B K-major in shared memory (descriptors), fp32 accumulators.
__device__ __forceinline__ void wgmma_m64n{n}k16_{name}(float* d, uint64_t desc_a, uint64_t desc_b, int accumulate) {{
  asm volatile(
      "{{\\n"
      ".reg .pred p;\\n"
      "setp.ne.b32 p, %{regs + 2}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} "
      "{{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1, 0, 0;\\n"
      "}}\\n"
      : {_operands(regs)}
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}}
"""


def rs(n: int, tnsp: int, name: str, ptx: str, cs: bool = False) -> str:
    """cs: the rs_cs form (N-major; the last 8 columns accumulate into dc)."""
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    a = ", ".join(f"%{regs + i}" for i in range(4))
    ops = _operands(regs - 4 if cs else regs)
    if cs:
        ops += ",\n        " + ", ".join(f'"+f"(dc[{j}])' for j in range(4))
        doc = (f"// [D | Dc][64x{n}] += A[64x16] * B[16x{n}]; A in registers, B N-major in shared memory; columns\n"
               f"// {n - 8}..{n - 1} accumulate into dc.")
        head = f"wgmma_rs_cs_m64n{n}k16_{name}(float* d, float* dc, const uint32_t* a, uint64_t desc_b)"
    else:
        major = "N-major" if tnsp else "K-major"
        doc = f"// D[64x{n}] += A[64x16] * B[16x{n}]; A in registers (wgmma A fragment), B {major} in shared memory."
        head = f"wgmma_rs_m64n{n}k16_{name}_t{tnsp}(float* d, const uint32_t* a, uint64_t desc_b)"
    return f"""
{doc}
__device__ __forceinline__ void {head} {{
  asm volatile(
      "{{\\n"
      ".reg .pred p;\\n"
      "setp.eq.u32 p, 1, 1;\\n"  // scale-d is a predicate: always accumulate
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} "
      "{{{outs}}}, {{{a}}}, %{regs + 4}, p, 1, 1, {tnsp};\\n"
      "}}\\n"
      : {ops}
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}}
"""


def dispatch() -> str:
    """wgmma_ss<T, N>, wgmma_rs<T, N, tnsp>, wgmma_rs_cs<T, N>: the wrappers above by element type and shape."""
    def chain(fmt, shapes):
        lines = []
        for name, _ in TYPES:
            cpp = CPP_TYPES[name]
            for i, shape in enumerate(shapes):
                cond = f"std::is_same<T, {cpp}>::value && " + " && ".join(f"{k} == {v}" for k, v in shape.items())
                lines.append(f"  {'if' if not lines else 'else if'} constexpr ({cond}) {fmt(name, shape)};")
        return "\n".join(lines) + '\n  else static_assert(sizeof(T) == 0, "no wgmma wrapper for this type and shape");'
    ss_body = chain(lambda nm, sh: f"wgmma_m64n{sh['N']}k16_{nm}(d, desc_a, desc_b, accumulate)", [dict(N=n) for n in SS])
    rs_body = chain(lambda nm, sh: f"wgmma_rs_m64n{sh['N']}k16_{nm}_t{sh['TNSP']}(d, a, desc_b)",
                    [dict(N=n, TNSP=t) for n, t in RS])
    cs_body = chain(lambda nm, sh: f"wgmma_rs_cs_m64n{sh['N']}k16_{nm}(d, dc, a, desc_b)", [dict(N=n) for n in RS_CS])
    return f"""
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float* d, uint64_t desc_a, uint64_t desc_b, int accumulate) {{
{ss_body}
}}
template <typename T, int N, int TNSP>
__device__ __forceinline__ void wgmma_rs(float* d, const uint32_t* a, uint64_t desc_b) {{
{rs_body}
}}
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs_cs(float* d, float* dc, const uint32_t* a, uint64_t desc_b) {{
{cs_body}
}}
"""


CPP_TYPES = {"bf16": "__nv_bfloat16", "f16": "__half"}

def main() -> None:
    parts = ["// Generated by gen_wgmma.py: do not edit.\n#pragma once\n#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n"
             "#include <stdint.h>\n\n#include <type_traits>\n\nnamespace sm90 {\n"]
    for name, ptx in TYPES:
        parts += [ss(n, name, ptx) for n in SS]
        parts += [rs(n, t, name, ptx) for n, t in RS]
        parts += [rs(n, 1, name, ptx, cs=True) for n in RS_CS]
    parts.append(dispatch())
    parts.append("\n}  // namespace sm90\n")
    Path(__file__).with_name("wgmma_ops.cuh").write_text("".join(parts))


if __name__ == "__main__":  # importable: benchmarks/micro/wgmma_rate.sh takes ss() for its own shapes
    main()

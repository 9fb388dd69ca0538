// RoPE's per-element device math, shared by every kernel that rotates (rope_cuda.cu's rope_kernel,
// kv_append_cuda.cu's fused decode step), so that a rotation gives the same bits in all of them
// (included by .cu files only). Math as rope_ref.h:
//
//   theta_i = base^(-2i/Dh),  a = p * theta_i
//   y1 = x1 cos(a) - x2 sin(a),  y2 = x2 cos(a) + x1 sin(a)      (x1 = x[i], x2 = x[i + Dh/2])
//
// The angle is formed and reduced modulo 2*pi in f64 (an f32 angle p * theta would be off by
// ~p * 6e-8 rad), then sincosf of the reduced f32 angle: cos and sin are accurate to f32 rounding
// at any position. The rotation is in f32.
//
// Every multiply and add whose rounding the compiler could choose is spelt out as an intrinsic
// (__fmaf_rn, __fmul_rn, __fma_rn, __dmul_rn): nvcc contracts a plain `x1 * c - x2 * s` into an FMA, or
// not, depending on the code around it once inlined, so two kernels calling the same plain
// expression need not agree to the bit (moving rope_kernel's plain expressions here as they were
// changed which product nvcc fused). The forms below are what rope_kernel compiled to before
// (its sm_90a SASS: one FMUL and one FFMA per output, the angle's a - 2 pi turns one DFMA), so its
// results did not change: checked bit for bit on an H100, old kernel against new.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace amor::cuda {

namespace rope_detail {
// Correctly rounded operations; under the CPU emulator (tests/cuda/emu) the host's IEEE ones
// (x86-64 without -mfma never fuses a * b + c on its own).
#ifdef AMOR_CUDA_EMU
__device__ __forceinline__ float mul(float a, float b) { return a * b; }
__device__ __forceinline__ float fma(float a, float b, float c) { return std::fma(a, b, c); }
__device__ __forceinline__ double mul(double a, double b) { return a * b; }
__device__ __forceinline__ double fma(double a, double b, double c) { return std::fma(a, b, c); }
#else
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double fma(double a, double b, double c) { return __fma_rn(a, b, c); }
#endif
}  // namespace rope_detail

// cos and sin of a = p * base^(-2i/Dh), for position p and frequency i in [0, Dh/2).
__device__ __forceinline__ void rope_cos_sin(int64_t p, int i, int Dh, double base, float* cs,
                                             float* sn) {
  namespace r = rope_detail;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double a = r::mul(double(p), pow(base, -2.0 * double(i) / double(Dh)));
  const double turns = rint(a / kTwoPi);
  const double reduced = r::fma(-kTwoPi, turns, a);  // a - 2 pi turns, in [-pi, pi]
  sincosf(float(reduced), sn, cs);
}

// The pair (x1, x2) rotated by the angle whose cos and sin are c and s (s negated: the inverse).
__device__ __forceinline__ void rope_rotate_pair(float x1, float x2, float c, float s, float* y1,
                                                 float* y2) {
  namespace r = rope_detail;
  *y1 = r::fma(x1, c, -r::mul(x2, s));  // x1 c - x2 s
  *y2 = r::fma(x2, c, r::mul(x1, s));   // x2 c + x1 s
}

}  // namespace amor::cuda

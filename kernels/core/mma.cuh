// Warp-level tensor-core helpers (sm_80+): the bf16 MMA m16n8k16 with f32 accumulation, ldmatrix
// fragment loads from shared memory, and 16-byte cp.async copies global -> shared. Included by .cu
// files only. Under the CPU emulator (tests/cuda/emu/emu.h defines AMOR_CUDA_EMU) each helper is
// emulated exactly as documented here, so kernels built on them can be checked without a GPU.
//
// Every helper is warp-collective: all 32 lanes of the warp must call it together (same call site,
// no divergence), as the hardware instructions require.
//
// Fragment layouts of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, D = A B + C with
// A 16x16 (row major), B 16x8 (k x n), C and D 16x8 f32. For lane l: g = l / 4, t = l % 4. A
// uint32_t holds two bf16, the lower 16 bits the element with the smaller column (k or n) index.
//
//   A (a[4]):  a[0] = A[g    ][2t, 2t+1]      a[1] = A[g + 8][2t, 2t+1]
//              a[2] = A[g    ][2t+8, 2t+9]    a[3] = A[g + 8][2t+8, 2t+9]
//   B (b[2]):  b[0] = B[2t, 2t+1  ][g]        b[1] = B[2t+8, 2t+9][g]       (two k, one n)
//   C/D (c[4], f32): c[0], c[1] = C[g][2t, 2t+1]      c[2], c[3] = C[g + 8][2t, 2t+1]
//
// ldmatrix.x4 loads four 8x8 bf16 matrices: lanes 8m .. 8m+7 give the addresses of the 8 rows
// (16 contiguous bytes each, 16-byte aligned) of matrix m, and lane l receives in r[m]:
//   plain:  M_m[g][2t, 2t+1]                  (row g, two neighbouring columns)
//   .trans: M_m[2t][g], M_m[2t+1][g]          (two neighbouring rows, column g)
// So with a row-major tile X in shared memory:
//   - an A fragment of X[r0.., k0..]: lane l points at X[r0 + l % 16][k0 + (l / 16) * 8];
//   - a B fragment where B[k][n] = X[n][k] (X = K for S = Q K^T): matrices (n0, k0), (n0, k0+8)
//     give b[0], b[1] (plain);
//   - a B fragment where B[k][n] = X[k][n] (X = V for O = P V): matrices (k0, n0), (k0+8, n0)
//     give b[0], b[1] (.trans).
// stmatrix.x4 is the inverse: lanes 8m .. 8m+7 give the row addresses of matrix m and lane l's
// r[m] is stored as M_m[g][2t, 2t+1] (plain) or M_m[2t][g], M_m[2t+1][g] (.trans); so a C
// fragment pair packed as an A fragment (below) lands transposed in a row-major tile with .trans.
// A C fragment pair of two neighbouring n-tiles (16 x 16 f32) converts to an A fragment of the
// next MMA without shuffles: a[0] = pack(c_j[0], c_j[1]), a[1] = pack(c_j[2], c_j[3]),
// a[2] = pack(c_{j+1}[0], c_{j+1}[1]), a[3] = pack(c_{j+1}[2], c_{j+1}[3]) (flash-attention's
// register reuse of P).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace amor::cuda::mma {

// log2(e): exp(x) = exp2_approx(x * kLog2e), one ex2.approx.
constexpr float kLog2e = 1.4426950408889634f;

// Two floats rounded to bf16 (nearest even) in one register, lo in the lower half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat16 a = __float2bfloat16_rn(lo), b = __float2bfloat16_rn(hi);
  uint16_t ua, ub;
  memcpy(&ua, &a, 2);
  memcpy(&ub, &b, 2);
  return uint32_t(ua) | (uint32_t(ub) << 16);
}

// Two bf16 (a packed pair) times lo and hi, each rounded back to bf16 (as
// from_f32(lo * to_f32(x)) would): a scaled operand tile or fragment, two elements at a time.
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t v, float lo, float hi) {
  const uint32_t ul = v << 16, uh = v & 0xffff0000u;
  float a, b;
  memcpy(&a, &ul, 4);
  memcpy(&b, &uh, 4);
  return pack_bf16x2(a * lo, b * hi);
}

#ifdef AMOR_CUDA_EMU

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
  ::emu::mma_bf16_16816(d, a, b);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  ::emu::ldmatrix_x4(r, smem_row, false);
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  ::emu::ldmatrix_x4(r, smem_row, true);
}
__device__ __forceinline__ void stmatrix_x4_trans(void* smem_row, const uint32_t (&r)[4]) {
  ::emu::stmatrix_x4_trans(smem_row, r);
}
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  if (valid) {
    memcpy(smem, gmem, 16);
  } else {
    memset(smem, 0, 16);
  }
}
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  if (valid) {
    memcpy(smem, gmem, 4);
  } else {
    memset(smem, 0, 4);
  }
}
__device__ __forceinline__ void cp_async_commit() {}
template <int N>
__device__ __forceinline__ void cp_async_wait() {}
__device__ __forceinline__ float exp2_approx(float x) { return std::exp2(x); }
__device__ __forceinline__ void sync_warp() { ::emu::syncwarp(); }

#else

// d += A B (see the layouts above).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices; this lane's row address is smem_row (see above).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row)));
}
// Four 8x8 matrices stored transposed (sm_90); this lane's row address is smem_row (see above).
__device__ __forceinline__ void stmatrix_x4_trans(void* smem_row, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n"
               :
               : "r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// 16 bytes global -> shared without passing through registers; zeros when !valid (gmem must
// still be a valid address). Per thread, not collective. Complete after cp_async_wait.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
               "l"(gmem), "r"(valid ? 16 : 0));
}
// 4 bytes global -> shared (cp.async.ca: 4-byte copies may not bypass L1), zeros when !valid;
// for arrays whose rows are not 16-byte aligned (the per-row gate sums). As cp_async_16 otherwise.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)),
               "l"(gmem), "r"(valid ? 4 : 0));
}
// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups are still in flight (then __syncthreads to share).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 2^x on the special-function unit (ex2.approx.ftz.f32: relative error ~2^-22, results below
// 2^-126 flush to 0, 2^-inf = 0): one instruction where exp2f adds range handling. For softmax
// probabilities that are rounded to bf16 or summed in f32.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// A barrier of the warp's lanes that also orders their shared-memory accesses.
__device__ __forceinline__ void sync_warp() { __syncwarp(); }

#endif

}  // namespace amor::cuda::mma

// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a) for bf16 operands with f32 accumulators, the
// one shape the kernels use: m64n64k16. A warpgroup is 4 consecutive warps (threads 128 w ..
// 128 w + 127); all 128 threads issue each instruction together. Included by .cu files only;
// under the CPU emulator (tests/cuda/emu/emu.h) every helper is emulated on mma.cuh's emulated
// mma.sync, warp by warp, with the operand layouts written out below.
//
// Why wgmma where mma.sync works: one instruction multiplies a 64 x 64 x 16 block (32 mma.sync
// and 16 ldmatrix of a warp each), runs asynchronously (a warp issues the next products, or
// elementwise work, while the tensor cores run), and reads B straight from shared memory. In a
// latency-bound chain (the gated delta rule's state recurrence) that is fewer instructions in the
// chain and less waiting per step.
//
// D = A B (+ D), A 64 x 16, B 16 x N, D 64 x N f32.
//  - D: warp w of the warpgroup holds rows 16 w .. 16 w + 15 as N / 8 m16n8 C fragments, d[j]
//    for columns 8 j .. 8 j + 7, each laid out as mma.sync's C (mma.cuh): lane (g, t) holds
//    d[j][0..1] = D[16 w + g][8 j + 2 t, +1], d[j][2..3] = D[16 w + g + 8][8 j + 2 t, +1].
//  - A from registers (mma_rs): warp w supplies rows 16 w .. 16 w + 15 as mma.sync's A fragment.
//    So a C fragment pair packed to bf16 (mma.cuh) is the A of the next product, as with mma.sync.
//  - A from shared memory (mma_ss) and B (always shared memory) are described by an Operand.
//
// Operand tiles in shared memory: the "core matrix" layout without swizzling. A tile of `rows` x
// `cols` bf16 (both multiples of 8) is stored as 8 x 8 core matrices of 128 contiguous bytes,
// each row of a core matrix 16 bytes (8 consecutive columns):
//   element (r, c) at element offset  (r / 8) * 8 cols + (c / 8) * 64 + (r % 8) * 8 + c % 8
// (core_offset). A 16-byte piece (8 consecutive columns of a row) stays contiguous, so tiles are
// filled by the same 16-byte cp.async copies as the padded tiles. The hardware reads a core
// matrix's 8 rows as one 128-byte line: no bank conflicts without a swizzle.
//
// An Operand is the tile's start element (a core matrix corner) and two strides in bytes:
// LBO between core matrices neighbouring along the product's k dimension, SBO between those
// neighbouring along M (for A) or N (for B). Two uses of a tile X [rows][cols]:
//  - k_major(X): the operand's k runs along X's columns (A[m][k] = X[m][k], B[k][n] = X[n][k]):
//    LBO 128 bytes, SBO 16 cols bytes;
//  - mn_major(X): k runs along X's rows (B[k][n] = X[k][n]; the instruction's transpose flag for
//    B): LBO 16 cols bytes (k), SBO 128 bytes (n).
// Each product takes a byte `step` from the operand's start to the core matrices it reads (its k
// step, and for B an offset along N when N is less than the tile).
// So one stored tile serves as K^T (k_major) and as K (mn_major) without a second copy.
//
// Ordering rules (PTX ISA, "asynchronous warpgroup level matrix multiply"): fence() before the
// first wgmma of a group and whenever the accumulators or the A registers were written by other
// instructions since; commit() closes the group; wait<N>() blocks until at most N groups are in
// flight, after which the accumulators may be read. Shared memory written by ordinary stores or
// cp.async must be made visible to the tensor cores' (async) proxy with fence_smem() by the
// writing threads, then a barrier, before a wgmma reads it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/mma.cuh"

namespace amor::cuda::wg {

using bf16 = __nv_bfloat16;

__host__ __device__ constexpr int core_offset(int r, int c, int cols) {
  return (r >> 3) * (8 * cols) + (c >> 3) * 64 + (r & 7) * 8 + (c & 7);
}

struct Operand {
  const bf16* base;  // the element (0, 0) of the operand (a core matrix corner)
  uint32_t lbo, sbo;  // bytes (multiples of 16)
};

// The operand whose k runs along the tile's columns (see above), from the tile's start; the
// products take a byte step to their k step's core matrices (two core matrices, 256 bytes, per
// 16 columns).
__device__ __forceinline__ Operand k_major(const bf16* tile, int cols) {
  return {tile, 128u, uint32_t(16 * cols)};
}
// The operand whose k runs along the tile's rows (B only: the transposed form); a k step of 16
// rows is 32 cols bytes.
__device__ __forceinline__ Operand mn_major(const bf16* tile, int cols) {
  return {tile, uint32_t(16 * cols), 128u};
}

#ifdef AMOR_CUDA_EMU

// Emulated: each warp computes its own 16 rows of D by N / 8 mma.sync m16n8k16, gathering B's
// fragments (and A's, for mma_ss) from shared memory by the layouts above. Synchronous, so the
// ordering helpers have nothing to do.
__device__ __forceinline__ void fence() {}
__device__ __forceinline__ void commit() {}
template <int N>
__device__ __forceinline__ void wait() {}
__device__ __forceinline__ void fence_smem() {}
template <int NT>
__device__ __forceinline__ void fence_operand(float (&)[NT][4]) {}

// Element (k, n) of B (trans: mn_major) or (m, k) of a k_major A, as raw bf16 bits.
__device__ __forceinline__ uint32_t operand_bits(const Operand& o, int rows_idx, int k, bool trans) {
  // k_major: rows_idx runs along SBO, k along LBO and within a 16-byte row; mn_major: k runs
  // along LBO and across the 8 rows of a core matrix, rows_idx (n) within a 16-byte row.
  const char* p = reinterpret_cast<const char*>(o.base);
  const int64_t at = trans ? int64_t(k / 8) * o.lbo + int64_t(rows_idx / 8) * o.sbo +
                                 (k % 8) * 16 + (rows_idx % 8) * 2
                           : int64_t(rows_idx / 8) * o.sbo + int64_t(k / 8) * o.lbo +
                                 (rows_idx % 8) * 16 + (k % 8) * 2;
  uint16_t bits;
  memcpy(&bits, p + at, 2);
  return bits;
}

__device__ __forceinline__ Operand advanced(const Operand& o, uint32_t step) {
  return {reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(o.base) + step), o.lbo,
          o.sbo};
}

template <bool TransB, int NT>
__device__ __forceinline__ void mma_with_a(float (&d)[NT][4], const uint32_t (&a)[4],
                                           const Operand& b, bool accumulate) {
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  if (!accumulate)
    for (int j = 0; j < NT; ++j)
      for (int e = 0; e < 4; ++e) d[j][e] = 0.0f;
  for (int j = 0; j < NT; ++j) {
    const int n = 8 * j + g;
    uint32_t bf[2];
    bf[0] = operand_bits(b, n, 2 * t, TransB) | (operand_bits(b, n, 2 * t + 1, TransB) << 16);
    bf[1] = operand_bits(b, n, 2 * t + 8, TransB) | (operand_bits(b, n, 2 * t + 9, TransB) << 16);
    mma::mma_bf16_16816(d[j], a, bf);
  }
}

template <bool TransB, int NT>
__device__ __forceinline__ void mma_rs(float (&d)[NT][4], const uint32_t (&a)[4], const Operand& b,
                                       uint32_t step, bool accumulate) {
  mma_with_a<TransB>(d, a, advanced(b, step), accumulate);
}

template <int NT>
__device__ __forceinline__ void mma_ss(float (&d)[NT][4], const Operand& a0, uint32_t step_a,
                                       const Operand& b0, uint32_t step_b, bool accumulate) {
  const Operand a = advanced(a0, step_a), b = advanced(b0, step_b);
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int m0 = 16 * ((int(threadIdx.x) / 32) % 4);
  auto pair = [&](int m, int k) {
    return operand_bits(a, m0 + m, k, false) | (operand_bits(a, m0 + m, k + 1, false) << 16);
  };
  const uint32_t af[4] = {pair(g, 2 * t), pair(g + 8, 2 * t), pair(g, 2 * t + 8),
                          pair(g + 8, 2 * t + 8)};
  mma_with_a<false>(d, af, b, accumulate);
}

#else

// The 64-bit matrix descriptor: start address, LBO and SBO in 16-byte units (bits 0-13, 16-29,
// 32-45), base offset 0, no swizzle (bits 62-63 = 0).
__device__ __forceinline__ uint64_t descriptor(const Operand& o) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(o.base));
  return uint64_t((addr & 0x3ffff) >> 4) | (uint64_t((o.lbo >> 4) & 0x3fff) << 16) |
         (uint64_t((o.sbo >> 4) & 0x3fff) << 32);
}

__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of the accumulators across the asynchronous
// products (an empty asm that "changes" each register).
template <int NT>
__device__ __forceinline__ void fence_operand(float (&d)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}

#define AMOR_WG_D16(d)                                                                         \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),    \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
#define AMOR_WG_D32(d)                                                                         \
  AMOR_WG_D16(d), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),  \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), \
      "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define AMOR_WG_D16_TEXT "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define AMOR_WG_D32_TEXT                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

// D (+)= A B, A from registers (this warp's 16 rows), B from shared memory (TransB: mn_major)
// starting `step` bytes past b's start. The step is added to the descriptor inside the asm:
// computed outside, the compiler hoists one descriptor per k step and tile out of the chunk loop
// and keeps them all in registers (ptxas spilled at 168 registers). NT = N / 8: 8 or 4.
template <bool TransB, int NT>
__device__ __forceinline__ void mma_rs(float (&d)[NT][4], const uint32_t (&a)[4], const Operand& b,
                                       uint32_t step, bool accumulate) {
  static_assert(NT == 8 || NT == 4, "wgmma m64n64k16 or m64n32k16");
  const uint64_t db = descriptor(b), off = step >> 4;
  if constexpr (NT == 8) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 db;\nsetp.ne.b32 p, %38, 0;\n"
        "add.s64 db, %36, %37;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " AMOR_WG_D32_TEXT
        ", {%32, %33, %34, %35}, db, p, 1, 1, %39;\n}\n"
        : AMOR_WG_D32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "l"(off), "r"(int(accumulate)),
          "n"(TransB ? 1 : 0));
  } else {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 db;\nsetp.ne.b32 p, %22, 0;\n"
        "add.s64 db, %20, %21;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " AMOR_WG_D16_TEXT
        ", {%16, %17, %18, %19}, db, p, 1, 1, %23;\n}\n"
        : AMOR_WG_D16(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "l"(off), "r"(int(accumulate)),
          "n"(TransB ? 1 : 0));
  }
}

// D (+)= A B, A (k_major) and B (k_major) from shared memory, step_a / step_b bytes past their
// starts.
template <int NT>
__device__ __forceinline__ void mma_ss(float (&d)[NT][4], const Operand& a, uint32_t step_a,
                                       const Operand& b, uint32_t step_b, bool accumulate) {
  static_assert(NT == 8 || NT == 4, "wgmma m64n64k16 or m64n32k16");
  const uint64_t da = descriptor(a), db = descriptor(b), oa = step_a >> 4, ob = step_b >> 4;
  if constexpr (NT == 8) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %36, 0;\n"
        "add.s64 da, %32, %34;\nadd.s64 db, %33, %35;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " AMOR_WG_D32_TEXT
        ", da, db, p, 1, 1, 0, 0;\n}\n"
        : AMOR_WG_D32(d)
        : "l"(da), "l"(db), "l"(oa), "l"(ob), "r"(int(accumulate)));
  } else {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %20, 0;\n"
        "add.s64 da, %16, %18;\nadd.s64 db, %17, %19;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " AMOR_WG_D16_TEXT
        ", da, db, p, 1, 1, 0, 0;\n}\n"
        : AMOR_WG_D16(d)
        : "l"(da), "l"(db), "l"(oa), "l"(ob), "r"(int(accumulate)));
  }
}

#undef AMOR_WG_D16
#undef AMOR_WG_D32
#undef AMOR_WG_D16_TEXT
#undef AMOR_WG_D32_TEXT

#endif

}  // namespace amor::cuda::wg

// wgmma_layout_check (wgmma_check.h): one block of one warpgroup stores A and B in the
// core-matrix layout (A [64][16] and B as X[n][k] for k_major, as X[k][n] for mn_major), runs
// each product once and writes D back in row-major order through the D fragment layout.
#include "kernels/core/wgmma_check.h"

#include <stdexcept>

#include "kernels/core/cuda_check.h"
#include "kernels/core/tile.cuh"
#include "kernels/core/wgmma.cuh"

namespace amor::cuda {
namespace {

__global__ void wgmma_check_kernel(const uint16_t* a, const uint16_t* b, bool swap, float* d_rs,
                                   float* d_rs_trans, float* d_ss, float* d_n32) {
  // The three tiles at the start of a zeroed pool: the run with the strides exchanged reads up to
  // 8 bands x 1024 bytes past a tile's start (mn_major's SBO becomes 1024), which must stay inside
  // shared memory (past the block's allocation the hardware faults: session 11's first GPU run).
  alignas(128) __shared__ wg::bf16 pool[12 * 1024];
  wg::bf16 *sa = pool, *sbk = pool + 1024, *sbm = pool + 2048;
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  for (int i = 3 * 1024 + tid; i < 12 * 1024; i += 128) reinterpret_cast<uint16_t*>(pool)[i] = 0;
  for (int i = tid; i < 64 * 16; i += 128) {
    const int m = i / 16, k = i % 16;  // A [m][k]
    reinterpret_cast<uint16_t*>(sa)[wg::core_offset(m, k, 16)] = a[i];
    const int kb = i / 64, n = i % 64;  // B [kb][n]
    reinterpret_cast<uint16_t*>(sbk)[wg::core_offset(n, kb, 16)] = b[i];
    reinterpret_cast<uint16_t*>(sbm)[wg::core_offset(kb, n, 64)] = b[i];
  }
  wg::fence_smem();
  __syncthreads();
  auto sw = [&](wg::Operand o) { return swap ? wg::Operand{o.base, o.sbo, o.lbo} : o; };
  auto pair = [&](int m, int k) { return uint32_t(a[m * 16 + k]) | (uint32_t(a[m * 16 + k + 1]) << 16); };
  const int m0 = 16 * warp;
  const uint32_t af[4] = {pair(m0 + g, 2 * t), pair(m0 + g + 8, 2 * t), pair(m0 + g, 2 * t + 8),
                          pair(m0 + g + 8, 2 * t + 8)};
  float* outs[3] = {d_rs, d_rs_trans, d_ss};
  for (int way = 0; way < 3; ++way) {
    float d[8][4];
    wg::fence();
    if (way == 0) wg::mma_rs<false>(d, af, sw(wg::k_major(sbk, 16)), 0, false);
    if (way == 1) wg::mma_rs<true>(d, af, sw(wg::mn_major(sbm, 64)), 0, false);
    if (way == 2) wg::mma_ss(d, sw(wg::k_major(sa, 16)), 0, sw(wg::k_major(sbk, 16)), 0, false);
    wg::commit();
    wg::wait<0>();
    wg::fence_operand(d);
    for (int j = 0; j < 8; ++j)
      for (int e = 0; e < 4; ++e)
        outs[way][(m0 + tile::c_row(lane, e)) * 64 + 8 * j + tile::c_col(lane, e)] = d[j][e];
  }
  // N = 32 on B's second half (n 32 .., rows 32 .. of the k_major tile: a byte step of four
  // bands of 8 rows): D's columns 32 .. 63.
  float h[4][4];
  wg::fence();
  wg::mma_rs<false>(h, af, sw(wg::k_major(sbk, 16)), 4 * 16 * 16, false);
  wg::commit();
  wg::wait<0>();
  wg::fence_operand(h);
  for (int j = 0; j < 4; ++j)
    for (int e = 0; e < 4; ++e)
      d_n32[(m0 + tile::c_row(lane, e)) * 32 + 8 * j + tile::c_col(lane, e)] = h[j][e];
}

}  // namespace

WgmmaCheckOut wgmma_layout_check(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                 bool swap_strides) {
  if (a.size() != 64 * 16 || b.size() != 16 * 64)
    throw std::invalid_argument("wgmma_layout_check: A is [64][16] and B [16][64]");
  uint16_t *da = nullptr, *db = nullptr;
  float* dd = nullptr;
  AMOR_CUDA_CHECK(cudaMalloc(&da, a.size() * 2));
  AMOR_CUDA_CHECK(cudaMalloc(&db, b.size() * 2));
  AMOR_CUDA_CHECK(cudaMalloc(&dd, (3 * 64 + 32) * 64 * sizeof(float)));
  AMOR_CUDA_CHECK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  AMOR_CUDA_CHECK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  wgmma_check_kernel<<<1, 128, 0, nullptr>>>(da, db, swap_strides, dd, dd + 4096, dd + 8192, dd + 12288);
  AMOR_CUDA_CHECK_LAUNCH();
  std::vector<float> all(3 * 4096 + 2048);
  AMOR_CUDA_CHECK(cudaMemcpy(all.data(), dd, all.size() * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  WgmmaCheckOut out;
  out.rs.assign(all.begin(), all.begin() + 4096);
  out.rs_trans.assign(all.begin() + 4096, all.begin() + 8192);
  out.ss.assign(all.begin() + 8192, all.begin() + 12288);
  out.rs_n32_hi.assign(all.begin() + 12288, all.end());
  return out;
}

}  // namespace amor::cuda

// The bf16 tensor-core backward of causal GQA attention, FlashAttention-2 style, deterministic
// (no atomics): one kernel for dk and dv per key tile and one for dq per query tile, both
// recomputing P = exp2(S log2e scale - lse log2e) from the forward's lse (design at the top of
// attention_cuda.cu; fragment layouts in kernels/core/mma.cuh). delta = rowsum(dO * O) comes
// precomputed (attention_cuda.cu). With dS = P (dP - delta), dP = dO V^T:
//
//   dV = P^T dO      dK = scale dS^T Q      dQ = scale dS K
//
// dk/dv kernel: a block of 4 warps per (key tile of 64 keys, kv head g, sequence b); warp w owns
// keys 16w .. 16w+15 and keeps their dK, dV in registers. It walks the query heads of the group
// and, per head, the query tiles (BQ rows: consecutive queries, or compacted firing rows) from the
// first row that sees the tile's first key; Q and dO tiles are double-buffered (cp.async). Per
// tile it computes the transposed products, so that P^T and dS^T come out of the MMAs in the
// accumulator layout and go straight back in as A fragments:
//   S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
// dq kernel: as the forward (64 query rows per block, key tiles double-buffered):
//   S = Q K^T, dP = dO V^T, dQ += dS K.
#include <cmath>

#include "kernels/attention/attention_tc.cuh"

namespace amor::cuda::attn {
namespace {

// ---------------------------------------------------------------------------------------- dq
template <int D>
constexpr int dq_smem_bytes() {
  return 6 * kBlockRows * kLd<D> * int(sizeof(bf16_t));  // Q, dO, then K and V twice
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
              const bf16_t* __restrict__ v, RowMap map, int H, int Hkv, int Tk, float scale_log2,
              float scale, const float* __restrict__ lse, const float* __restrict__ delta,
              const bf16_t* __restrict__ dout, bf16_t* __restrict__ dq) {
  extern __shared__ uint4 smem_raw[];
  __shared__ int s_pos[kBlockRows];
  __shared__ int s_qi[kBlockRows];
  __shared__ float s_lse[kBlockRows];
  __shared__ float s_delta[kBlockRows];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* sdO = sQ + kBlockRows * kLd<D>;
  bf16_t* sK[2] = {sQ + 2 * kBlockRows * kLd<D>, sQ + 4 * kBlockRows * kLd<D>};
  bf16_t* sV[2] = {sQ + 3 * kBlockRows * kLd<D>, sQ + 5 * kBlockRows * kLd<D>};

  const int b = blockIdx.z, h = blockIdx.y;
  const int tile = gridDim.x - 1 - blockIdx.x;
  const int nrows = map.num_rows(b), row0 = tile * kBlockRows;
  if (row0 >= nrows) return;
  const int nvalid = nrows - row0 < kBlockRows ? nrows - row0 : kBlockRows;
  const int g = h / (H / Hkv), Tq = map.Tq;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g4 = lane >> 2, t4 = lane & 3;

  if (tid < kBlockRows) {
    const int qi = tid < nvalid ? map.query(b, row0 + tid) : -1;
    s_qi[tid] = qi;
    s_pos[tid] = qi >= 0 ? qi + map.offset : -1;
    const int64_t st = (int64_t(b) * H + h) * Tq + qi;
    s_lse[tid] = qi >= 0 ? lse[st] * kLog2e : 0.0f;
    s_delta[tid] = qi >= 0 ? delta[st] : 0.0f;
  }
  __syncthreads();
  const int first_pos = s_pos[0], ntiles = s_pos[nvalid - 1] / kBlockKeys + 1;
  auto q_row = [&](int r) -> int64_t {
    return s_qi[r] >= 0 ? ((int64_t(b) * Tq + s_qi[r]) * H + h) * D : -1;
  };
  auto load_kv = [&](int kt, int buf) {
    auto kv_row = [&](int r) -> int64_t {
      const int j = kt * kBlockKeys + r;
      return j < Tk ? ((int64_t(b) * Tk + j) * Hkv + g) * D : -1;
    };
    load_tile_async<D>(sK[buf], k, kv_row, kBlockKeys);
    load_tile_async<D>(sV[buf], v, kv_row, kBlockKeys);
  };
  load_tile_async<D>(sQ, q, q_row, kBlockRows);
  load_tile_async<D>(sdO, dout, q_row, kBlockRows);
  load_kv(0, 0);
  mma::cp_async_commit();

  const int ra = warp * 16 + g4, rb = ra + 8;
  const int pos_a = s_pos[ra], pos_b = s_pos[rb];
  const float lse_a = s_lse[ra], lse_b = s_lse[rb], del_a = s_delta[ra], del_b = s_delta[rb];
  float acc[D / 8][4] = {};

  for (int kt = 0; kt < ntiles; ++kt) {
    mma::cp_async_wait<0>();
    __syncthreads();
    if (kt + 1 < ntiles) load_kv(kt + 1, (kt + 1) & 1);
    mma::cp_async_commit();
    const bf16_t* cK = sK[kt & 1];
    const bf16_t* cV = sV[kt & 1];

    float s[8][4] = {}, dp[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4], da[4];
      load_a<D>(qa, sQ, warp * 16, kk * 16);
      load_a<D>(da, sdO, warp * 16, kk * 16);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kb[4], vb[4];
        load_b_rows<D>(kb, cK, np * 16, kk * 16);
        mma2(s[2 * np], s[2 * np + 1], qa, kb);
        load_b_rows<D>(vb, cV, np * 16, kk * 16);
        mma2(dp[2 * np], dp[2 * np + 1], da, vb);
      }
    }
    const int j0 = kt * kBlockKeys;
    const bool masked = j0 + kBlockKeys - 1 > first_pos;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const bool row_a = i < 2;
        float p = exp2f(s[nt][i] * scale_log2 - (row_a ? lse_a : lse_b));
        if (masked && j0 + nt * 8 + 2 * t4 + (i & 1) > (row_a ? pos_a : pos_b)) p = 0.0f;
        s[nt][i] = p * (dp[nt][i] - (row_a ? del_a : del_b));  // dS
      }
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t dsa[4];
      acc_to_a(dsa, s, kk);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t kb[4];
        load_b_cols<D>(kb, cK, kk * 16, dn * 16);
        mma2(acc[2 * dn], acc[2 * dn + 1], dsa, kb);
      }
    }
  }
  mma::cp_async_wait<0>();
  const int qa = s_qi[ra], qb = s_qi[rb];
  bf16_t* da = qa >= 0 ? dq + ((int64_t(b) * Tq + qa) * H + h) * D : nullptr;
  bf16_t* db = qb >= 0 ? dq + ((int64_t(b) * Tq + qb) * H + h) * D : nullptr;
  store_acc_rows<D>(acc, scale, scale, da, db);
}

// -------------------------------------------------------------------------------------- dk dv
// Query rows per tile: 64 at D = 64; 32 at D = 128, where dK and dV alone take 128 registers.
template <int D>
constexpr int kDkdvRows = D == 64 ? 64 : 32;
template <int D>
constexpr int dkdv_smem_bytes() {
  return (2 * kBlockKeys + 4 * kDkdvRows<D>) * kLd<D> * int(sizeof(bf16_t));  // K, V; Q, dO x2
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                const bf16_t* __restrict__ v, RowMap map, int H, int Hkv, int Tk,
                float scale_log2, float scale, const float* __restrict__ lse,
                const float* __restrict__ delta, const bf16_t* __restrict__ dout,
                bf16_t* __restrict__ dk, bf16_t* __restrict__ dv) {
  constexpr int BQ = kDkdvRows<D>;
  extern __shared__ uint4 smem_raw[];
  __shared__ int s_pos[2][BQ];
  __shared__ float s_lse[2][BQ];
  __shared__ float s_delta[2][BQ];
  bf16_t* sK = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* sV = sK + kBlockKeys * kLd<D>;
  bf16_t* sQ[2] = {sV + kBlockKeys * kLd<D>, sV + kBlockKeys * kLd<D> + 2 * BQ * kLd<D>};
  bf16_t* sdO[2] = {sQ[0] + BQ * kLd<D>, sQ[1] + BQ * kLd<D>};

  const int b = blockIdx.z, g = blockIdx.y, k0 = blockIdx.x * kBlockKeys;
  const int group = H / Hkv, Tq = map.Tq;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g4 = lane >> 2, t4 = lane & 3;
  const int nrows = map.num_rows(b), r_start = map.first_row_seeing(b, k0);
  const int ntile = nrows > r_start ? (nrows - r_start + BQ - 1) / BQ : 0;
  const int total = group * ntile;  // (head, query tile) steps

  auto kv_row = [&](int r) -> int64_t {
    const int j = k0 + r;
    return j < Tk ? ((int64_t(b) * Tk + j) * Hkv + g) * D : -1;
  };
  load_tile_async<D>(sK, k, kv_row, kBlockKeys);
  load_tile_async<D>(sV, v, kv_row, kBlockKeys);
  // Step `it`: head g * group + it / ntile, rows r0 .. r0 + BQ - 1 of the sequence's row list.
  auto stage = [&](int it, int buf) {
    const int h = g * group + it / ntile, r0 = r_start + (it % ntile) * BQ;
    auto q_row = [&](int r) -> int64_t {
      return r0 + r < nrows ? ((int64_t(b) * Tq + map.query(b, r0 + r)) * H + h) * D : -1;
    };
    load_tile_async<D>(sQ[buf], q, q_row, BQ);
    load_tile_async<D>(sdO[buf], dout, q_row, BQ);
    if (tid < BQ) {
      const bool valid = r0 + tid < nrows;
      const int qi = valid ? map.query(b, r0 + tid) : 0;
      const int64_t st = (int64_t(b) * H + h) * Tq + qi;
      s_pos[buf][tid] = valid ? qi + map.offset : -1;
      s_lse[buf][tid] = valid ? lse[st] * kLog2e : 0.0f;
      s_delta[buf][tid] = valid ? delta[st] : 0.0f;
    }
  };
  if (total > 0) stage(0, 0);
  mma::cp_async_commit();

  const int kr = warp * 16;                                    // the warp's keys in the tile
  const int key_a = k0 + kr + g4, key_b = key_a + 8;           // this thread's two keys
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};

  for (int it = 0; it < total; ++it) {
    mma::cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < total) stage(it + 1, (it + 1) & 1);
    mma::cp_async_commit();
    const int buf = it & 1;
    const bf16_t* cQ = sQ[buf];
    const bf16_t* cdO = sdO[buf];

    float st[BQ / 8][4] = {}, dpt[BQ / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[4], va[4];
      load_a<D>(ka, sK, kr, kk * 16);
      load_a<D>(va, sV, kr, kk * 16);
#pragma unroll
      for (int np = 0; np < BQ / 16; ++np) {
        uint32_t qb[4], ob[4];
        load_b_rows<D>(qb, cQ, np * 16, kk * 16);
        mma2(st[2 * np], st[2 * np + 1], ka, qb);
        load_b_rows<D>(ob, cdO, np * 16, kk * 16);
        mma2(dpt[2 * np], dpt[2 * np + 1], va, ob);
      }
    }
    // Rows are increasing: the tile needs no mask when its first row sees the last key and every
    // row is a real one.
    const bool masked = k0 + kBlockKeys - 1 > s_pos[buf][0] || s_pos[buf][BQ - 1] < 0;
#pragma unroll
    for (int nt = 0; nt < BQ / 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int col = nt * 8 + 2 * t4 + (i & 1);
        float p = exp2f(st[nt][i] * scale_log2 - s_lse[buf][col]);
        if (masked && (i < 2 ? key_a : key_b) > s_pos[buf][col]) p = 0.0f;
        st[nt][i] = p;                                        // P^T
        dpt[nt][i] = p * (dpt[nt][i] - s_delta[buf][col]);    // dS^T
      }
    }
#pragma unroll
    for (int kq = 0; kq < BQ / 16; ++kq) {
      uint32_t pa[4], dsa[4];
      acc_to_a(pa, st, kq);
      acc_to_a(dsa, dpt, kq);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t ob[4], qb[4];
        load_b_cols<D>(ob, cdO, kq * 16, dn * 16);
        mma2(dv_acc[2 * dn], dv_acc[2 * dn + 1], pa, ob);
        load_b_cols<D>(qb, cQ, kq * 16, dn * 16);
        mma2(dk_acc[2 * dn], dk_acc[2 * dn + 1], dsa, qb);
      }
    }
  }
  mma::cp_async_wait<0>();
  const int64_t base_a = ((int64_t(b) * Tk + key_a) * Hkv + g) * D;
  const int64_t base_b = ((int64_t(b) * Tk + key_b) * Hkv + g) * D;
  store_acc_rows<D>(dk_acc, scale, scale, key_a < Tk ? dk + base_a : nullptr,
                    key_b < Tk ? dk + base_b : nullptr);
  store_acc_rows<D>(dv_acc, 1.0f, 1.0f, key_a < Tk ? dv + base_a : nullptr,
                    key_b < Tk ? dv + base_b : nullptr);
}

template <int D>
void launch_backward(const bf16_t* q, const bf16_t* k, const bf16_t* v, const RowMap& map,
                     const float* lse, const float* delta, const bf16_t* dout, float scale,
                     bf16_t* dq, bf16_t* dk, bf16_t* dv, const AttnDims& n, cudaStream_t s) {
  constexpr int kDkdvSmem = dkdv_smem_bytes<D>(), kDqSmem = dq_smem_bytes<D>();
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(dkdv_kernel<D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kDkdvSmem));
  AMOR_CUDA_CHECK(
      cudaFuncSetAttribute(dq_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kDqSmem));
  const float scale_log2 = scale * kLog2e;
  const dim3 kv_grid(unsigned(ceil_div(n.Tk, kBlockKeys)), unsigned(n.Hkv), unsigned(n.B));
  dkdv_kernel<D><<<kv_grid, kThreads, kDkdvSmem, s>>>(q, k, v, map, int(n.H), int(n.Hkv),
                                                      int(n.Tk), scale_log2, scale, lse, delta,
                                                      dout, dk, dv);
  AMOR_CUDA_CHECK_LAUNCH();
  const dim3 q_grid(unsigned(ceil_div(n.Tq, kBlockRows)), unsigned(n.H), unsigned(n.B));
  dq_kernel<D><<<q_grid, kThreads, kDqSmem, s>>>(q, k, v, map, int(n.H), int(n.Hkv), int(n.Tk),
                                                 scale_log2, scale, lse, delta, dout, dq);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void backward_tc(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                 const int32_t* count, const float* lse, const float* delta, const bf16_t* dout,
                 float scale, bf16_t* dq, bf16_t* dk, bf16_t* dv, const AttnDims& n,
                 cudaStream_t s) {
  const RowMap map{rows, count, int(n.Tq), int(n.Tk - n.Tq)};
  if (n.D == 64) {
    launch_backward<64>(q, k, v, map, lse, delta, dout, scale, dq, dk, dv, n, s);
  } else if (n.D == 128) {
    launch_backward<128>(q, k, v, map, lse, delta, dout, scale, dq, dk, dv, n, s);
  } else {
    ::amor::cuda_fail(__FILE__, __LINE__, "attn::backward_tc", "head dim is neither 64 nor 128");
  }
}

}  // namespace amor::cuda::attn

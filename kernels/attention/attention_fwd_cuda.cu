// The bf16 tensor-core forward of causal GQA attention, FlashAttention-2 style (design and memory
// traffic at the top of attention_cuda.cu; fragment layouts in kernels/core/mma.cuh).
//
// One block of 4 warps per (query tile of 64 rows, head h, sequence b); warp w owns rows
// 16w .. 16w+15. The tile's rows are consecutive queries, or with a gate the next 64 firing rows
// of the sequence (compacted), each with its own causal limit (its position). The block walks the
// key tiles 0 .. (last row's position) / 64; K and V tiles are double-buffered in shared memory by
// cp.async. Per key tile, in log2 units (x = s * scale * log2 e):
//
//   S = Q K^T (16 x 64 per warp, f32)      masked to -inf where key > the row's position
//   m' = max(m, rowmax S),  P = exp2(S - m'),  l = l exp2(m - m') + rowsum P,  O = O exp2(m - m')
//   O += P V                               (P re-packed to bf16 A fragments in registers)
//
// At the end o = O / l and lse = (m + log2 l) ln 2. Rows with no valid entries (padding) keep
// m = -inf; their alpha and P use 0 in place of m so that no NaN appears (they are not stored).
#include <cmath>

#include "kernels/attention/attention_tc.cuh"

namespace amor::cuda::attn {
namespace {

template <int D>
constexpr int forward_smem_bytes() {
  return 5 * kBlockRows * kLd<D> * int(sizeof(bf16_t));  // Q, then K and V twice
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                   const bf16_t* __restrict__ v, RowMap map, int H, int Hkv, int Tk,
                   float scale_log2, bf16_t* __restrict__ o, float* __restrict__ lse) {
  extern __shared__ uint4 smem_raw[];
  __shared__ int s_pos[kBlockRows];
  __shared__ int s_qi[kBlockRows];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* sK[2] = {sQ + kBlockRows * kLd<D>, sQ + 3 * kBlockRows * kLd<D>};
  bf16_t* sV[2] = {sQ + 2 * kBlockRows * kLd<D>, sQ + 4 * kBlockRows * kLd<D>};

  const int b = blockIdx.z, h = blockIdx.y;
  const int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
  const int nrows = map.num_rows(b), row0 = tile * kBlockRows;
  if (row0 >= nrows) return;  // the whole block: fewer firing rows than tiles
  const int nvalid = nrows - row0 < kBlockRows ? nrows - row0 : kBlockRows;
  const int g = h / (H / Hkv), Tq = map.Tq;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g4 = lane >> 2, t4 = lane & 3;

  if (tid < kBlockRows) {
    const int qi = tid < nvalid ? map.query(b, row0 + tid) : -1;
    s_qi[tid] = qi;
    s_pos[tid] = qi >= 0 ? qi + map.offset : -1;
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
  load_kv(0, 0);
  mma::cp_async_commit();

  const int ra = warp * 16 + g4, rb = ra + 8;  // this thread's two rows in the tile
  const int pos_a = s_pos[ra], pos_b = s_pos[rb];
  float acc[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  uint32_t qf[D / 16][4];

  for (int kt = 0; kt < ntiles; ++kt) {
    mma::cp_async_wait<0>();
    __syncthreads();  // tile kt is in; every warp is done with the buffer reloaded next
    if (kt + 1 < ntiles) load_kv(kt + 1, (kt + 1) & 1);
    mma::cp_async_commit();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) load_a<D>(qf[kk], sQ, warp * 16, kk * 16);
    }
    const bf16_t* cK = sK[kt & 1];
    const bf16_t* cV = sV[kt & 1];

    float s[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kb[4];
        load_b_rows<D>(kb, cK, np * 16, kk * 16);
        mma2(s[2 * np], s[2 * np + 1], qf[kk], kb);
      }
    }
    const int j0 = kt * kBlockKeys;
    const bool masked = j0 + kBlockKeys - 1 > first_pos;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float x = s[nt][i] * scale_log2;
        if (masked && j0 + nt * 8 + 2 * t4 + (i & 1) > (i < 2 ? pos_a : pos_b)) x = -INFINITY;
        s[nt][i] = x;
        mx[i >> 1] = fmaxf(mx[i >> 1], x);
      }
    }
    float base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
      const float alpha = exp2f(m[r] - base[r]);
      m[r] = mx[r];
      l[r] *= alpha;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        acc[dt][2 * r] *= alpha;
        acc[dt][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[nt][i] = exp2f(s[nt][i] - base[i >> 1]);
        sum[i >> 1] += s[nt][i];
      }
    }
    l[0] += sum[0];  // per-thread partial sums; the 4 lanes of a row are added at the end
    l[1] += sum[1];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t pa[4];
      acc_to_a(pa, s, kk);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vb[4];
        load_b_cols<D>(vb, cV, kk * 16, dp * 16);
        mma2(acc[2 * dp], acc[2 * dp + 1], pa, vb);
      }
    }
  }
  mma::cp_async_wait<0>();

  float inv[2], row_lse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    row_lse[r] = (m[r] + log2f(l[r])) * 0.69314718055994531f;
  }
  const int qa = s_qi[ra], qb = s_qi[rb];
  bf16_t* oa = qa >= 0 ? o + ((int64_t(b) * Tq + qa) * H + h) * D : nullptr;
  bf16_t* ob = qb >= 0 ? o + ((int64_t(b) * Tq + qb) * H + h) * D : nullptr;
  store_acc_rows<D>(acc, inv[0], inv[1], oa, ob);
  if (t4 == 0) {
    if (qa >= 0) lse[(int64_t(b) * H + h) * Tq + qa] = row_lse[0];
    if (qb >= 0) lse[(int64_t(b) * H + h) * Tq + qb] = row_lse[1];
  }
}

template <int D>
void launch_forward(const bf16_t* q, const bf16_t* k, const bf16_t* v, const RowMap& map,
                    float scale, bf16_t* o, float* lse, const AttnDims& n, cudaStream_t s) {
  constexpr int kSmem = forward_smem_bytes<D>();
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(forward_kernel<D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(unsigned(ceil_div(n.Tq, kBlockRows)), unsigned(n.H), unsigned(n.B));
  forward_kernel<D><<<grid, kThreads, kSmem, s>>>(q, k, v, map, int(n.H), int(n.Hkv), int(n.Tk),
                                                  scale * kLog2e, o, lse);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void forward_tc(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                const int32_t* count, float scale, bf16_t* o, float* lse, const AttnDims& n,
                cudaStream_t s) {
  const RowMap map{rows, count, int(n.Tq), int(n.Tk - n.Tq)};
  if (n.D == 64) {
    launch_forward<64>(q, k, v, map, scale, o, lse, n, s);
  } else if (n.D == 128) {
    launch_forward<128>(q, k, v, map, scale, o, lse, n, s);
  } else {
    ::amor::cuda_fail(__FILE__, __LINE__, "attn::forward_tc", "head dim is neither 64 nor 128");
  }
}

}  // namespace amor::cuda::attn

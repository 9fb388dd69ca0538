// router_mlp_forward on the GPU (router_mlp.h), two kernels:
//
// 1. hidden units: block b takes units j = 4 b .. 4 b + 3, one warp each. For every row r the
//    warp's lanes stride over d (coalesced 16-byte reads of W1[j] and reads of x[r], several in
//    flight per lane; x's row is read by all four warps, from L1 after the first), the warp sums
//    its lanes, and lane 0 keeps w2[j] SiLU(b1[j] + a) in shared memory; then the block adds its
//    four units per row in unit order into partial[b][r]. W1 (W d floats, 4 MB at the 1.5B
//    presets) is read once per row: at a decode step (n <= 16) the 128 blocks of W = 512 each read
//    4 rows of W1, so the read is spread over the GPU's SMs.
// 2. one block per row: y[r] = b2 + x[r] . u (a block sum) + partial[0][r] + partial[1][r] + ...
//    in block order.
// Every sum runs in a fixed order, so equal inputs give equal bits (graph replay = eager step).
#include "kernels/cast/cuda_device.cuh"
#include "kernels/router_mlp/router_mlp_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kUnits = 4;  // hidden units per block of the first kernel, one warp each
constexpr int kThreads = 32 * kUnits;
constexpr int kMaxRows = kRouterMlpCudaMaxRows;

// V: elements per load (4: 16-byte loads of W1 where d % 4 == 0 and the rows are aligned, so a
// lane keeps several loads in flight; 1 otherwise).
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    router_hidden_kernel(const T* __restrict__ x, const float* __restrict__ w1,
                         const float* __restrict__ b1, const float* __restrict__ w2,
                         float* __restrict__ partial, int n, int d, int W) {
  __shared__ float unit_val[kUnits][kMaxRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int j = blockIdx.x * kUnits + warp;
  if (j < W) {
    const float* wj = w1 + int64_t(j) * d;
    const float bj = b1[j], cj = w2[j];
    for (int r = 0; r < n; ++r) {
      const T* xr = x + int64_t(r) * d;
      float acc = 0.0f;
#pragma unroll 4
      for (int c = lane * V; c < d; c += 32 * V) {
        float wv[V], xv[V];
        load_vec<float, V>(wj + c, wv);
        load_vec<T, V>(xr + c, xv);
#pragma unroll
        for (int e = 0; e < V; ++e) acc = fmaf(wv[e], xv[e], acc);
      }
      const float a = warp_sum(acc) + bj;
      if (lane == 0) unit_val[warp][r] = cj * (a / (1.0f + expf(-a)));
    }
  } else if (lane == 0) {
    for (int r = 0; r < n; ++r) unit_val[warp][r] = 0.0f;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < n; r += kThreads) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kUnits; ++w) s += unit_val[w][r];
    partial[int64_t(blockIdx.x) * n + r] = s;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    router_output_kernel(const T* __restrict__ x, const float* __restrict__ u,
                         const float* __restrict__ b2, const float* __restrict__ partial,
                         float* __restrict__ y, int n, int d, int blocks) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  const T* xr = x + int64_t(r) * d;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < d; c += kThreads) acc = fmaf(u[c], to_f32(xr[c]), acc);
  const float skip = block_sum(acc, scratch);
  if (threadIdx.x == 0) {
    float s = b2[0] + skip;
    for (int b = 0; b < blocks; ++b) s += partial[int64_t(b) * n + r];
    y[r] = s;
  }
}

}  // namespace

int64_t router_mlp_partial_blocks(int64_t W) { return ceil_div(W, kUnits); }

void router_mlp_forward(DType t, const void* x, const float* w1, const float* b1, const float* w2,
                        const float* u, const float* b2, float* partial, float* y, int64_t n,
                        int64_t d, int64_t W, cudaStream_t s) {
  if (n == 0) return;
  const int64_t blocks = router_mlp_partial_blocks(W);
  dispatch_storage(t, "cuda::router_mlp_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    auto hidden = [&](auto kernel) {
      kernel<<<unsigned(blocks), kThreads, 0, s>>>(xt, w1, b1, w2, partial, int(n), int(d), int(W));
      AMOR_CUDA_CHECK_LAUNCH();
    };
    if (d % 4 == 0 && aligned16(w1) && aligned16(x) && (sizeof(T) == 4 || d % 8 == 0)) {
      hidden(router_hidden_kernel<T, 4>);
    } else {
      hidden(router_hidden_kernel<T, 1>);
    }
    router_output_kernel<T><<<unsigned(n), kThreads, 0, s>>>(xt, u, b2, partial, y, int(n), int(d),
                                                             int(blocks));
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace amor::cuda

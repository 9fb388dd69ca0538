// Gradient norm pieces on the GPU (math as grad_norm_ref.h):
//
//   sum_of_squares: sum_i g_i^2 in f64. Pass 1: a fixed grid of at most kMaxBlocks blocks; each
//     thread adds the squares of its grid-stride elements (16-byte loads) in f64, the block folds
//     its threads (warp shuffles, then the warps in order) into one partial. Pass 2: one block adds
//     the partials the same way. Fixed order, so one tensor gives the same bits on every run.
//   scale_inplace:  g_i <- g_i * coef (f32 arithmetic, stored in g's dtype).
#include "kernels/cast/cuda_device.cuh"
#include "kernels/grad_norm/grad_norm_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;

template <class T, int V>
__global__ void sumsq_partial_kernel(const T* __restrict__ g, int64_t n, double* partial) {
  __shared__ double scratch[32];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double acc = 0.0;
  const int64_t nvec = n / V;
  for (int64_t k = tid; k < nvec; k += stride) {
    float v[V];
    load_vec<T, V>(g + k * V, v);
#pragma unroll
    for (int e = 0; e < V; ++e) acc += double(v[e]) * double(v[e]);
  }
  for (int64_t i = nvec * V + tid; i < n; i += stride) {  // the tail (n % V elements)
    const double v = to_f32(g[i]);
    acc += v * v;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void sum_partials_kernel(const double* partial, int64_t count, double* out) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) *out = acc;
}

template <class T>
struct ScaleOp {
  T* __restrict__ g;
  float coef;
  template <int V>
  __device__ void apply(int64_t i) const {
    float v[V];
    load_vec<T, V>(g + i, v);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] *= coef;
    store_vec<T, V>(g + i, v);
  }
};

}  // namespace

int64_t sum_of_squares_scratch_doubles() { return kMaxBlocks; }

void sum_of_squares(DType t, const void* g, int64_t n, double* scratch, double* out,
                    cudaStream_t s) {
  dispatch_storage(t, "cuda::sum_of_squares", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = aligned16(g);
    const int64_t work = vec ? ceil_div(n, V) : n;
    int64_t blocks = grid_for(work, kThreads);
    if (blocks > kMaxBlocks) blocks = kMaxBlocks;
    if (vec) {
      sumsq_partial_kernel<T, V><<<unsigned(blocks), kThreads, 0, s>>>(static_cast<const T*>(g),
                                                                        n, scratch);
    } else {
      sumsq_partial_kernel<T, 1><<<unsigned(blocks), kThreads, 0, s>>>(static_cast<const T*>(g),
                                                                        n, scratch);
    }
    AMOR_CUDA_CHECK_LAUNCH();
    sum_partials_kernel<<<1, kThreads, 0, s>>>(scratch, blocks, out);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

void scale_inplace(DType t, void* g, int64_t n, double coef, cudaStream_t s) {
  dispatch_storage(t, "cuda::scale_inplace", [&](auto tag) {
    using T = decltype(tag);
    launch_map<kVec16<T>>(n, aligned16(g), ScaleOp<T>{static_cast<T*>(g), float(coef)}, s);
  });
}

}  // namespace amor::cuda

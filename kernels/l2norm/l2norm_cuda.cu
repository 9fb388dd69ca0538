// L2 normalisation on the GPU over rows of [rows, d] (math as l2norm_ref.h), in f32:
//
//   r  = 1 / sqrt(sum_j x_j^2 + eps)           saved as rstd[row], f32
//   y  = x * r
//   dx = r * (dy - y * sum_k dy_k y_k),   y = x * r
//
// Rows are short (Gated DeltaNet normalises each 64- or 128-wide head), so a row belongs to a
// group of tpr lanes of one warp (tpr a power of two up to 32, about one 16-byte vector per lane):
// the lanes sum their vectors, fold the group with shuffles, then re-read the row (from L1) to
// write it. The loop over rows is uniform across the warp so every shuffle has all 32 lanes.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/l2norm/l2norm_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kThreads = 256;

struct RowGroup {
  int64_t first_row, row_stride;  // warp-uniform loop over row blocks
  int sub, tpr, rows_per_warp;
};

__device__ __forceinline__ RowGroup row_group(int tpr) {
  const int64_t gt = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int rows_per_warp = 32 / tpr;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  return {(gt / 32) * rows_per_warp, warps * rows_per_warp, int(threadIdx.x & 31) % tpr, tpr,
          rows_per_warp};
}

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    l2norm_fwd_kernel(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ rstd,
                      int64_t rows, int d, int tpr, float eps) {
  const RowGroup g = row_group(tpr);
  const int nvec = d / V;
  for (int64_t rb = g.first_row; rb < rows; rb += g.row_stride) {
    const int64_t row = rb + int(threadIdx.x & 31) / tpr;
    const bool ok = row < rows;
    const int64_t base = row * d;
    float s = 0.0f;
    if (ok) {
      for (int v = g.sub; v < nvec; v += tpr) {
        float vx[V];
        load_vec<T, V>(x + base + int64_t(v) * V, vx);
#pragma unroll
        for (int k = 0; k < V; ++k) s += vx[k] * vx[k];
      }
    }
    s = subwarp_sum(s, tpr);
    if (ok) {
      const float r = 1.0f / sqrtf(s + eps);
      if (g.sub == 0) rstd[row] = r;
      for (int v = g.sub; v < nvec; v += tpr) {
        float vx[V];
        load_vec<T, V>(x + base + int64_t(v) * V, vx);
#pragma unroll
        for (int k = 0; k < V; ++k) vx[k] *= r;
        store_vec<T, V>(y + base + int64_t(v) * V, vx);
      }
    }
  }
}

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    l2norm_bwd_kernel(const T* __restrict__ x, const float* __restrict__ rstd,
                      const T* __restrict__ dy, T* __restrict__ dx, int64_t rows, int d, int tpr) {
  const RowGroup g = row_group(tpr);
  const int nvec = d / V;
  for (int64_t rb = g.first_row; rb < rows; rb += g.row_stride) {
    const int64_t row = rb + int(threadIdx.x & 31) / tpr;
    const bool ok = row < rows;
    const int64_t base = row * d;
    const float r = ok ? rstd[row] : 0.0f;
    float dot = 0.0f;  // sum_k dy_k * y_k
    if (ok) {
      for (int v = g.sub; v < nvec; v += tpr) {
        float vx[V], vg[V];
        load_vec<T, V>(x + base + int64_t(v) * V, vx);
        load_vec<T, V>(dy + base + int64_t(v) * V, vg);
#pragma unroll
        for (int k = 0; k < V; ++k) dot += vg[k] * (vx[k] * r);
      }
    }
    dot = subwarp_sum(dot, tpr);
    if (ok) {
      for (int v = g.sub; v < nvec; v += tpr) {
        float vx[V], vg[V];
        load_vec<T, V>(x + base + int64_t(v) * V, vx);
        load_vec<T, V>(dy + base + int64_t(v) * V, vg);
#pragma unroll
        for (int k = 0; k < V; ++k) vg[k] = r * (vg[k] - vx[k] * r * dot);
        store_vec<T, V>(dx + base + int64_t(v) * V, vg);
      }
    }
  }
}

// Lanes per row: the vectors of a row rounded up to a power of two, at most a warp.
int lanes_for(int64_t nvec) {
  int t = 1;
  while (t < nvec && t < 32) t <<= 1;
  return t;
}

template <class F>
void dispatch(DType t, int64_t d, std::initializer_list<const void*> ptrs, F&& f) {
  dispatch_storage(t, "cuda l2norm", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    bool vec = d % V == 0;
    for (const void* p : ptrs) vec = vec && aligned16(p);
    if (vec) {
      f(T{}, std::integral_constant<int, V>{});
    } else {
      f(T{}, std::integral_constant<int, 1>{});
    }
  });
}

unsigned blocks_for(int64_t rows, int tpr) {
  const int64_t rows_per_block = kThreads / tpr;
  return grid_for(ceil_div(rows, rows_per_block) * kThreads, kThreads);
}

}  // namespace

void l2norm_forward(DType t, const void* x, void* y, float* rstd, int64_t rows, int64_t d,
                    double eps, cudaStream_t s) {
  if (rows == 0) return;
  dispatch(t, d, {x, y}, [&](auto tag, auto v_c) {
    using T = decltype(tag);
    constexpr int V = decltype(v_c)::value;
    const int tpr = lanes_for(d / V);
    l2norm_fwd_kernel<T, V><<<blocks_for(rows, tpr), kThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<T*>(y), rstd, rows, int(d), tpr, float(eps));
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

void l2norm_backward(DType t, const void* x, const float* rstd, const void* dy, void* dx,
                     int64_t rows, int64_t d, cudaStream_t s) {
  if (rows == 0) return;
  dispatch(t, d, {x, dy, dx}, [&](auto tag, auto v_c) {
    using T = decltype(tag);
    constexpr int V = decltype(v_c)::value;
    const int tpr = lanes_for(d / V);
    l2norm_bwd_kernel<T, V><<<blocks_for(rows, tpr), kThreads, 0, s>>>(
        static_cast<const T*>(x), rstd, static_cast<const T*>(dy), static_cast<T*>(dx), rows,
        int(d), tpr);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace amor::cuda

// The elementwise ops on the GPU (math as elementwise_ref.h, computed in f32):
//
//   add            y = a + b                 add_inplace   a += alpha * b
//   mul            y = a * b                 scale         y = a * s
//   sigmoid        y = 1 / (1 + exp(-x))     backward      dx = dy * y * (1 - y)
//   silu           y = x * sigmoid(x)        backward      dx = dy * s * (1 + x * (1 - s))
//   bias_softplus  y = softplus(x + b[c]),   softplus(z) = max(z, 0) + log1p(exp(-|z|))
//                  dx = dy * sigmoid(x + b[c]),  db[c] = sum over rows of dx
//   channel_scale  y = x * s[c];  dx = dy * s[c],  ds[c] = sum over rows of dy * x
//
// Flat ops run through launch_map (16-byte accesses, grid-stride). The two backward ops with a
// per-channel sum use a 2-D kernel: a block of 32 x 8 threads covers 32 channel vectors and a
// chunk of rows; threads sum their column over the chunk's rows, the block folds its 8 row-lanes
// in shared memory and writes one partial row per chunk to the scratch; column_sum adds the
// chunks' partials per channel in a fixed order. No atomics: the same bits on every run.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/elementwise/elementwise_cuda.h"

namespace amor::cuda {
namespace {

__device__ __forceinline__ float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }
__device__ __forceinline__ float softplusf(float z) {
  return fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z)));
}

// ---- flat maps: F(float...) -> float per element.
template <class T, class F>
struct Map1 {
  const T* __restrict__ a;
  T* __restrict__ y;
  F f;
  template <int V>
  __device__ void apply(int64_t i) const {
    float va[V];
    load_vec<T, V>(a + i, va);
#pragma unroll
    for (int k = 0; k < V; ++k) va[k] = f(va[k]);
    store_vec<T, V>(y + i, va);
  }
};

template <class T, class F>
struct Map2 {
  const T* __restrict__ a;
  const T* __restrict__ b;
  T* __restrict__ y;
  F f;
  template <int V>
  __device__ void apply(int64_t i) const {
    float va[V], vb[V];
    load_vec<T, V>(a + i, va);
    load_vec<T, V>(b + i, vb);
#pragma unroll
    for (int k = 0; k < V; ++k) va[k] = f(va[k], vb[k]);
    store_vec<T, V>(y + i, va);
  }
};

template <class TA, class TB>
struct AddInplaceOp {
  TA* __restrict__ a;
  const TB* __restrict__ b;
  float alpha;
  template <int V>
  __device__ void apply(int64_t i) const {
    float va[V], vb[V];
    load_vec<TA, V>(a + i, va);
    load_vec<TB, V>(b + i, vb);
#pragma unroll
    for (int k = 0; k < V; ++k) va[k] += alpha * vb[k];
    store_vec<TA, V>(a + i, va);
  }
};

template <class F>
void map1(DType t, const void* a, void* y, int64_t n, F f, cudaStream_t s) {
  dispatch_storage(t, "cuda elementwise map", [&](auto tag) {
    using T = decltype(tag);
    launch_map<kVec16<T>>(n, aligned16(a) && aligned16(y),
                          Map1<T, F>{static_cast<const T*>(a), static_cast<T*>(y), f}, s);
  });
}

template <class F>
void map2(DType t, const void* a, const void* b, void* y, int64_t n, F f, cudaStream_t s) {
  dispatch_storage(t, "cuda elementwise map", [&](auto tag) {
    using T = decltype(tag);
    launch_map<kVec16<T>>(
        n, aligned16(a) && aligned16(b) && aligned16(y),
        Map2<T, F>{static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), f}, s);
  });
}

// ---- per-channel forward maps: element i has channel i % c.
template <class T, bool kSoftplus>
struct ChannelOp {
  const T* __restrict__ x;
  const T* __restrict__ v;  // bias or factors [c]
  T* __restrict__ y;
  int64_t c;
  template <int V>
  __device__ void apply(int64_t i) const {
    float vx[V], vv[V];
    load_vec<T, V>(x + i, vx);
    load_vec<T, V>(v + i % c, vv);  // V divides c when vectorised, so the V channels are adjacent
#pragma unroll
    for (int k = 0; k < V; ++k) vx[k] = kSoftplus ? softplusf(vx[k] + vv[k]) : vx[k] * vv[k];
    store_vec<T, V>(y + i, vx);
  }
};

template <bool kSoftplus>
void channel_forward(DType t, const void* x, const void* v, void* y, int64_t rows, int64_t c,
                     cudaStream_t s) {
  dispatch_storage(t, "cuda channel op", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = c % V == 0 && aligned16(x) && aligned16(v) && aligned16(y);
    launch_map<V>(rows * c, vec,
                  ChannelOp<T, kSoftplus>{static_cast<const T*>(x), static_cast<const T*>(v),
                                          static_cast<T*>(y), c},
                  s);
  });
}

// y = h + round(x * v): the product rounded to T as channel_scale_forward's store does, then
// added as add's kernel does; __fmul_rn / __fadd_rn keep the compiler from fusing them into one
// multiply-add (for T = float the rounding is no barrier), so the bits are the two ops'.
template <class T>
struct ChannelScaleAddOp {
  const T* __restrict__ h;
  const T* __restrict__ x;
  const T* __restrict__ v;
  T* __restrict__ y;
  int64_t c;
  template <int V>
  __device__ void apply(int64_t i) const {
    float vh[V], vx[V], vv[V];
    load_vec<T, V>(h + i, vh);
    load_vec<T, V>(x + i, vx);
    load_vec<T, V>(v + i % c, vv);
#pragma unroll
    for (int k = 0; k < V; ++k) vh[k] = __fadd_rn(vh[k], to_f32(from_f32<T>(__fmul_rn(vx[k], vv[k]))));
    store_vec<T, V>(y + i, vh);
  }
};

// ---- per-channel backward: dx per element and a column sum per channel.
template <class T, bool kSoftplus>
struct ChannelGradOp {
  const T* __restrict__ x;
  const T* __restrict__ v;
  const T* __restrict__ dy;
  T* __restrict__ dx;
  int64_t c;
  // Row r, channels [col, col + V): writes dx, adds the channel-gradient terms to acc.
  template <int V>
  __device__ void apply(int64_t r, int64_t col, float (&acc)[V]) const {
    const int64_t i = r * c + col;
    float vx[V], vv[V], vg[V];
    load_vec<T, V>(x + i, vx);
    load_vec<T, V>(v + col, vv);
    load_vec<T, V>(dy + i, vg);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if constexpr (kSoftplus) {
        const float g = vg[k] * sigmoidf(vx[k] + vv[k]);
        acc[k] += g;
        vx[k] = g;
      } else {
        acc[k] += vg[k] * vx[k];
        vx[k] = vg[k] * vv[k];
      }
    }
    store_vec<T, V>(dx + i, vx);
  }
};

constexpr int kColThreads = 32, kRowThreads = 8;
constexpr int kRowsPerChunkMin = 64;
constexpr int64_t kMaxChunks = 256;

int64_t chunks_for(int64_t rows) {
  const int64_t want = ceil_div(rows, kRowsPerChunkMin);
  return want < 1 ? 1 : (want > kMaxChunks ? kMaxChunks : want);
}

template <int V, class Op>
__global__ void colsum_kernel(int64_t rows, int64_t c, int64_t rows_per_chunk, float* partial,
                              Op op) {
  __shared__ float sh[kRowThreads][kColThreads * V];
  const int64_t col = (int64_t(blockIdx.x) * kColThreads + threadIdx.x) * V;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.0f;
  if (col < c)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) op.template apply<V>(r, col, acc);
#pragma unroll
  for (int k = 0; k < V; ++k) sh[threadIdx.y][threadIdx.x * V + k] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && col < c) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float s = 0.0f;
      for (int y = 0; y < kRowThreads; ++y) s += sh[y][threadIdx.x * V + k];
      partial[int64_t(blockIdx.y) * c + col + k] = s;
    }
  }
}

template <bool kSoftplus>
void channel_backward(DType t, const void* x, const void* v, const void* dy, void* dx,
                      float* dv, float* scratch, int64_t rows, int64_t c, cudaStream_t s) {
  if (c <= 0) return;
  const int64_t chunks = chunks_for(rows);
  const int64_t rows_per_chunk = rows > 0 ? ceil_div(rows, chunks) : 1;
  dispatch_storage(t, "cuda channel op backward", [&](auto tag) {
    using T = decltype(tag);
    const ChannelGradOp<T, kSoftplus> op{static_cast<const T*>(x), static_cast<const T*>(v),
                                         static_cast<const T*>(dy), static_cast<T*>(dx), c};
    constexpr int V = kVec16<T>;
    const dim3 block(kColThreads, kRowThreads);
    if (c % V == 0 && aligned16(x) && aligned16(v) && aligned16(dy) && aligned16(dx)) {
      const dim3 grid(unsigned(ceil_div(c / V, kColThreads)), unsigned(chunks));
      colsum_kernel<V><<<grid, block, 0, s>>>(rows, c, rows_per_chunk, scratch, op);
    } else {
      const dim3 grid(unsigned(ceil_div(c, kColThreads)), unsigned(chunks));
      colsum_kernel<1><<<grid, block, 0, s>>>(rows, c, rows_per_chunk, scratch, op);
    }
    AMOR_CUDA_CHECK_LAUNCH();
  });
  column_sum(scratch, chunks, c, dv, c, nullptr, s);
}

// Functors for the flat maps (device lambdas would need --extended-lambda).
struct AddF { __device__ float operator()(float a, float b) const { return a + b; } };
struct MulF { __device__ float operator()(float a, float b) const { return a * b; } };
struct ScaleF {
  float s;
  __device__ float operator()(float a) const { return a * s; }
};
struct SigmoidF { __device__ float operator()(float x) const { return sigmoidf(x); } };
struct SigmoidBwdF {
  __device__ float operator()(float y, float g) const { return g * y * (1.0f - y); }
};
struct SiluF { __device__ float operator()(float x) const { return x * sigmoidf(x); } };
struct SiluBwdF {
  __device__ float operator()(float x, float g) const {
    const float s = sigmoidf(x);
    return g * s * (1.0f + x * (1.0f - s));
  }
};

}  // namespace

void add(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t s) {
  map2(t, a, b, y, n, AddF{}, s);
}

void add_inplace(DType ta, void* a, DType tb, const void* b, double alpha, int64_t n,
                 cudaStream_t s) {
  const bool vec = aligned16(a) && aligned16(b);
  const float al = static_cast<float>(alpha);
  dispatch_storage(ta, "cuda::add_inplace", [&](auto tag_a) {
    using TA = decltype(tag_a);
    dispatch_storage(tb, "cuda::add_inplace", [&](auto tag_b) {
      using TB = decltype(tag_b);
      // 8 elements: 16 bytes of bf16, 32 bytes (two accesses) of f32.
      launch_map<8>(n, vec,
                    AddInplaceOp<TA, TB>{static_cast<TA*>(a), static_cast<const TB*>(b), al}, s);
    });
  });
}

void mul(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t s) {
  map2(t, a, b, y, n, MulF{}, s);
}

void scale(DType t, const void* a, double factor, void* y, int64_t n, cudaStream_t s) {
  map1(t, a, y, n, ScaleF{static_cast<float>(factor)}, s);
}

void sigmoid_forward(DType t, const void* x, void* y, int64_t n, cudaStream_t s) {
  map1(t, x, y, n, SigmoidF{}, s);
}

void sigmoid_backward(DType t, const void* y, const void* dy, void* dx, int64_t n,
                      cudaStream_t s) {
  map2(t, y, dy, dx, n, SigmoidBwdF{}, s);
}

void silu_forward(DType t, const void* x, void* y, int64_t n, cudaStream_t s) {
  map1(t, x, y, n, SiluF{}, s);
}

void silu_backward(DType t, const void* x, const void* dy, void* dx, int64_t n, cudaStream_t s) {
  map2(t, x, dy, dx, n, SiluBwdF{}, s);
}

void bias_softplus_forward(DType t, const void* x, const void* bias, void* y, int64_t rows,
                           int64_t c, cudaStream_t s) {
  channel_forward<true>(t, x, bias, y, rows, c, s);
}

void channel_scale_forward(DType t, const void* x, const void* factors, void* y, int64_t rows,
                           int64_t c, cudaStream_t s) {
  channel_forward<false>(t, x, factors, y, rows, c, s);
}

void channel_scale_add(DType t, const void* h, const void* x, const void* factors, void* y,
                       int64_t rows, int64_t c, cudaStream_t s) {
  dispatch_storage(t, "cuda::channel_scale_add", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = c % V == 0 && aligned16(h) && aligned16(x) && aligned16(factors) && aligned16(y);
    launch_map<V>(rows * c, vec,
                  ChannelScaleAddOp<T>{static_cast<const T*>(h), static_cast<const T*>(x),
                                       static_cast<const T*>(factors), static_cast<T*>(y), c},
                  s);
  });
}

int64_t channel_grad_scratch_floats(int64_t rows, int64_t c) { return chunks_for(rows) * c; }

void bias_softplus_backward(DType t, const void* x, const void* bias, const void* dy, void* dx,
                            float* dbias, float* scratch, int64_t rows, int64_t c,
                            cudaStream_t s) {
  channel_backward<true>(t, x, bias, dy, dx, dbias, scratch, rows, c, s);
}

void channel_scale_backward(DType t, const void* x, const void* factors, const void* dy, void* dx,
                            float* dfactors, float* scratch, int64_t rows, int64_t c,
                            cudaStream_t s) {
  channel_backward<false>(t, x, factors, dy, dx, dfactors, scratch, rows, c, s);
}

}  // namespace amor::cuda

// Device-side helpers shared by the CUDA kernels of the memory-bound ops (included by .cu files
// only): f32 <-> storage-dtype conversion, 16-byte vector loads and stores, warp and block sums,
// a vectorised grid-stride map over n elements, and the launch geometry.
//
// Storage dtypes are float and __nv_bfloat16 (bit-compatible with amor::bf16); every kernel
// computes in float. Conversions to bf16 round to nearest even (__float2bfloat16_rn), as
// amor::bf16's constructor does, so CPU and GPU agree bit for bit on a rounding.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/core/cuda_check.h"
#include "kernels/core/dtype.h"

namespace amor::cuda {

using bf16_t = __nv_bfloat16;

// ---- conversions
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(bf16_t v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ bf16_t from_f32<bf16_t>(float v) { return __float2bfloat16_rn(v); }

// ---- vector access: V consecutive elements starting at an index that is a multiple of V, from
// memory whose base is 16-byte aligned (checked on the host by aligned16). V * sizeof(T) is a
// power of two up to 16 bytes, or a multiple of 16 (then split into 16-byte accesses). The raw
// word is moved to and from the element array with memcpy (compiled to register moves), since
// writing it through a T* would break strict aliasing.
template <int Bytes>
struct RawVec;
template <> struct RawVec<2> { using type = unsigned short; };
template <> struct RawVec<4> { using type = unsigned int; };
template <> struct RawVec<8> { using type = uint2; };
template <> struct RawVec<16> { using type = uint4; };

template <class T, int V>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[V]) {
  constexpr int kBytes = V * int(sizeof(T));
  constexpr int kChunk = kBytes < 16 ? kBytes : 16;
  constexpr int kPer = kChunk / int(sizeof(T));
  using R = typename RawVec<kChunk>::type;
#pragma unroll
  for (int c = 0; c < V / kPer; ++c) {
    const R raw = *reinterpret_cast<const R*>(p + c * kPer);
    T e[kPer];
    memcpy(e, &raw, sizeof(raw));  // not a pointer cast: that would break strict aliasing
#pragma unroll
    for (int i = 0; i < kPer; ++i) out[c * kPer + i] = to_f32(e[i]);
  }
}

template <class T, int V>
__device__ __forceinline__ void store_vec(T* p, const float (&in)[V]) {
  constexpr int kBytes = V * int(sizeof(T));
  constexpr int kChunk = kBytes < 16 ? kBytes : 16;
  constexpr int kPer = kChunk / int(sizeof(T));
  using R = typename RawVec<kChunk>::type;
#pragma unroll
  for (int c = 0; c < V / kPer; ++c) {
    T e[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) e[i] = from_f32<T>(in[c * kPer + i]);
    R raw;
    memcpy(&raw, e, sizeof(raw));
    *reinterpret_cast<R*>(p + c * kPer) = raw;
  }
}

// ---- reductions (fixed order: the same inputs give the same bits on every run)
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the first `width` lanes of groups of `width` lanes (width a power of two <= 32).
__device__ __forceinline__ float subwarp_sum(float v, int width) {
  for (int o = width >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; every thread gets the result. scratch holds >= 32 values of S. Ends with a
// barrier so the scratch may be reused right after.
template <class S>
__device__ __forceinline__ S block_sum(S v, S* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  S total = 0;
  for (int i = 0; i < nwarps; ++i) total += scratch[i];  // same order in every thread
  __syncthreads();
  return total;
}

// ---- host side: launch geometry and alignment
inline int num_sms() {
  static const int n = [] {
    int dev = 0, sms = 0;
    AMOR_CUDA_CHECK(cudaGetDevice(&dev));
    AMOR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
  }();
  return n;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over `work` items: enough to fill the GPU a few times over, not
// one block per item (a grid-stride loop then keeps several loads in flight per thread).
inline unsigned grid_for(int64_t work, int threads) {
  const int64_t want = ceil_div(work > 0 ? work : 1, threads);
  const int64_t cap = int64_t(num_sms()) * 16;
  return static_cast<unsigned>(want < cap ? want : cap);
}

// ---- a vectorised elementwise map: op.template apply<V>(i) handles elements [i, i + V).
// Elements [0, n - n % V) go V at a time, the tail one at a time (apply<1>).
template <int V, class Op>
__global__ void map_kernel(int64_t n, Op op) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / V;
  for (int64_t k = tid; k < nvec; k += stride) op.template apply<V>(k * V);
  if constexpr (V > 1) {
    const int64_t i = nvec * V + tid;
    if (i < n) op.template apply<1>(i);
  }
}

// Runs op over n elements, V at a time when `vectorise` (every pointer 16-byte aligned), else one
// at a time.
template <int V, class Op>
void launch_map(int64_t n, bool vectorise, const Op& op, cudaStream_t stream) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  if (vectorise) {
    map_kernel<V><<<grid_for(ceil_div(n, V), kThreads), kThreads, 0, stream>>>(n, op);
  } else {
    map_kernel<1><<<grid_for(n, kThreads), kThreads, 0, stream>>>(n, op);
  }
  AMOR_CUDA_CHECK_LAUNCH();
}

// ---- deterministic column sums of per-block partials: out[j] = sum over r of partial[r][j] for
// an f32 [rows, width] matrix, added in a fixed order (the same bits on every run). A block of
// 32 x 16 threads covers 32 columns; each of the 16 row lanes adds every 16th row, four loads in
// flight, and the lanes' sums are then added in order. Columns j < split go to out_a[j], the rest
// to out_b[j - split] (skipped when out_b is null): e.g. dw then dbias from one partial row.
template <class F = float>
__global__ void column_sum_kernel(const F* __restrict__ partial, int64_t rows, int64_t width,
                                  int64_t split, F* __restrict__ out_a, F* __restrict__ out_b) {
  constexpr int kLanes = 16;
  __shared__ F sh[kLanes][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  F s = 0;
  if (col < width) {
    int64_t r = threadIdx.y;
    for (; r + 3 * kLanes < rows; r += 4 * kLanes) {
      const F a0 = partial[r * width + col], a1 = partial[(r + kLanes) * width + col];
      const F a2 = partial[(r + 2 * kLanes) * width + col];
      const F a3 = partial[(r + 3 * kLanes) * width + col];
      s += a0;
      s += a1;
      s += a2;
      s += a3;
    }
    for (; r < rows; r += kLanes) s += partial[r * width + col];
  }
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < width) {
    F total = 0;
    for (int y = 0; y < kLanes; ++y) total += sh[y][threadIdx.x];
    if (col < split) {
      out_a[col] = total;
    } else if (out_b) {
      out_b[col - split] = total;
    }
  }
}

inline void column_sum(const float* partial, int64_t rows, int64_t width, float* out_a,
                       int64_t split, float* out_b, cudaStream_t stream) {
  if (width <= 0) return;
  column_sum_kernel<float><<<unsigned((width + 31) / 32), dim3(32, 16), 0, stream>>>(
      partial, rows, width, split, out_a, out_b);
  AMOR_CUDA_CHECK_LAUNCH();
}

// Elements per 16 bytes of T.
template <class T>
inline constexpr int kVec16 = 16 / int(sizeof(T));

// Calls f(float{}) or f(bf16_t{}) for a storage dtype; any other is a caller bug (the .cpp entry
// point checks dtypes with a message naming the op before calling a launcher).
template <class F>
void dispatch_storage(DType t, const char* where, F&& f) {
  if (t == DType::F32) {
    f(float{});
  } else if (t == DType::BF16) {
    f(bf16_t{});
  } else {
    ::amor::cuda_fail(__FILE__, __LINE__, where, "dtype is neither f32 nor bf16");
  }
}

}  // namespace amor::cuda

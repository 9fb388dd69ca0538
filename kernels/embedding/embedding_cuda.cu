// Token embedding on the GPU (math as embedding_ref.h), W [V, d]:
//
//   y[n, :]  = W[ids[n], :]                                    a gather: 16-byte copies
//   dW[v, :] = sum over n with ids[n] == v of dy[n, :]          f32, zeroed then scatter-added
//
// One thread step moves one 16-byte vector of a row (grid-stride over n * d / V vectors). The
// backward adds with atomics (float4 atomics on Hopper, 4 floats per instruction), so the order of
// additions to a row shared by several tokens varies from run to run: dW agrees with the cpu
// reference to f32 rounding, not bit for bit. Every id is range-checked on the device: the
// smallest position holding a bad id is kept with atomicMin in a flag the host reads back.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/embedding/embedding_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned long long kNoBadId = ~0ull;

template <class T, int V>
__global__ void gather_kernel(const int32_t* __restrict__ ids, const T* __restrict__ weight,
                              T* __restrict__ y, int64_t n, int64_t vocab, int64_t d,
                              unsigned long long* flag) {
  const int64_t nvec = d / V;
  const int64_t total = n * nvec;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = k / nvec, col = (k % nvec) * V;
    const int32_t id = ids[row];
    if (id < 0 || id >= vocab) {
      atomicMin(flag, static_cast<unsigned long long>(row));
      continue;
    }
    float v[V];
    load_vec<T, V>(weight + int64_t(id) * d + col, v);
    store_vec<T, V>(y + row * d + col, v);
  }
}

template <class T, int V>
__global__ void scatter_add_kernel(const int32_t* __restrict__ ids, const T* __restrict__ dy,
                                   float* __restrict__ dw, int64_t n, int64_t vocab, int64_t d,
                                   unsigned long long* flag) {
  const int64_t nvec = d / V;
  const int64_t total = n * nvec;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = k / nvec, col = (k % nvec) * V;
    const int32_t id = ids[row];
    if (id < 0 || id >= vocab) {
      atomicMin(flag, static_cast<unsigned long long>(row));
      continue;
    }
    float v[V];
    load_vec<T, V>(dy + row * d + col, v);
    float* dst = dw + int64_t(id) * d + col;
    if constexpr (V % 4 == 0) {
#pragma unroll
      for (int c = 0; c < V; c += 4)  // 16-byte aligned: V divides d, dw is aligned
        atomicAdd(reinterpret_cast<float4*>(dst + c),
                  make_float4(v[c], v[c + 1], v[c + 2], v[c + 3]));
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) atomicAdd(dst + e, v[e]);
    }
  }
}

BadId read_flag(const int32_t* ids, unsigned long long* flag, cudaStream_t s) {
  unsigned long long pos = kNoBadId;
  // Under stream capture (a decode-step CUDA graph) nothing may wait for the device: the check
  // is skipped (the kernel still leaves bad ids' rows unwritten); the graph's caller checks the
  // ids it copies in (models/infer/decode_graph.h).
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  AMOR_CUDA_CHECK(cudaStreamIsCapturing(s, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return BadId{};
  AMOR_CUDA_CHECK(cudaMemcpyAsync(&pos, flag, sizeof(pos), cudaMemcpyDeviceToHost, s));
  AMOR_CUDA_CHECK(cudaStreamSynchronize(s));
  BadId bad;
  if (pos == kNoBadId) return bad;
  bad.position = static_cast<int64_t>(pos);
  AMOR_CUDA_CHECK(cudaMemcpy(&bad.id, ids + pos, sizeof(int32_t), cudaMemcpyDeviceToHost));
  return bad;
}

template <class F>
void dispatch(DType t, int64_t d, std::initializer_list<const void*> ptrs, F&& f) {
  dispatch_storage(t, "cuda embedding", [&](auto tag) {
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

}  // namespace

BadId embedding_forward(DType t, const int32_t* ids, const void* weight, void* y, int64_t n,
                        int64_t vocab, int64_t d, unsigned long long* flag, cudaStream_t s) {
  AMOR_CUDA_CHECK(cudaMemsetAsync(flag, 0xff, sizeof(unsigned long long), s));
  if (n > 0 && d > 0) {
    dispatch(t, d, {weight, y}, [&](auto tag, auto v_c) {
      using T = decltype(tag);
      constexpr int V = decltype(v_c)::value;
      gather_kernel<T, V><<<grid_for(n * (d / V), kThreads), kThreads, 0, s>>>(
          ids, static_cast<const T*>(weight), static_cast<T*>(y), n, vocab, d, flag);
      AMOR_CUDA_CHECK_LAUNCH();
    });
  }
  return read_flag(ids, flag, s);
}

BadId embedding_backward(DType t, const int32_t* ids, const void* dy, float* dw, int64_t n,
                         int64_t vocab, int64_t d, unsigned long long* flag, cudaStream_t s) {
  AMOR_CUDA_CHECK(cudaMemsetAsync(flag, 0xff, sizeof(unsigned long long), s));
  AMOR_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(float) * size_t(vocab * d), s));
  if (n > 0 && d > 0) {
    dispatch(t, d, {dy, dw}, [&](auto tag, auto v_c) {
      using T = decltype(tag);
      constexpr int V = decltype(v_c)::value;
      scatter_add_kernel<T, V><<<grid_for(n * (d / V), kThreads), kThreads, 0, s>>>(
          ids, static_cast<const T*>(dy), dw, n, vocab, d, flag);
      AMOR_CUDA_CHECK_LAUNCH();
    });
  }
  return read_flag(ids, flag, s);
}

}  // namespace amor::cuda

// kv_append_step on the GPU (kv_append.h): one block per sequence. Every thread reads the
// sequence's length first; after a barrier thread 0 writes the incremented length, so no thread
// of the block reads it after the write, and no other block touches that sequence. The row (Hkv
// D elements) is copied with 16-byte accesses where the row and the pointers allow.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/kv_append/kv_append_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kThreads = 128;

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    kv_append_kernel(T* __restrict__ k_cache, T* __restrict__ v_cache, const T* __restrict__ k,
                     const T* __restrict__ v, int32_t* __restrict__ lengths, int64_t C, int row) {
  const int b = blockIdx.x;
  const int32_t L = lengths[b];
  __syncthreads();  // every thread has read the length before thread 0 advances it
  if (L < 0 || L >= C) return;  // no room (the host checks first): leave the sequence alone
  const int64_t dst = (int64_t(b) * C + L) * row, src = int64_t(b) * row;
  for (int i = threadIdx.x * V; i < row; i += kThreads * V) {
    float a[V], c[V];
    load_vec<T, V>(k + src + i, a);
    load_vec<T, V>(v + src + i, c);
    store_vec<T, V>(k_cache + dst + i, a);
    store_vec<T, V>(v_cache + dst + i, c);
  }
  if (threadIdx.x == 0) lengths[b] = L + 1;
}

}  // namespace

void kv_append_step(DType t, void* k_cache, void* v_cache, const void* k, const void* v,
                    int32_t* lengths, int64_t B, int64_t C, int64_t row, cudaStream_t s) {
  if (B == 0) return;
  dispatch_storage(t, "cuda::kv_append_step", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kV = kVec16<T>;
    const bool vec = row % kV == 0 && aligned16(k_cache) && aligned16(v_cache) && aligned16(k) &&
                     aligned16(v);
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(B), kThreads, 0, s>>>(static_cast<T*>(k_cache), static_cast<T*>(v_cache),
                                              static_cast<const T*>(k), static_cast<const T*>(v),
                                              lengths, C, int(row));
      AMOR_CUDA_CHECK_LAUNCH();
    };
    if (vec) {
      launch(kv_append_kernel<T, kV>);
    } else {
      launch(kv_append_kernel<T, 1>);
    }
  });
}

}  // namespace amor::cuda

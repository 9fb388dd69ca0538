// kv_append_step on the GPU (kv_append.h): one block per sequence. Every thread reads the
// sequence's length first; after a barrier thread 0 writes the incremented length, so no thread
// of the block reads it after the write, and no other block touches that sequence. The row (Hkv
// D elements) is copied with 16-byte accesses where the row and the pointers allow.
//
// kv_rope_append_step fuses a decode step's RoPE of Q and K with that append. Per sequence b, with
// L = lengths[b], qkv[b] = (q[0..Hq), k[0..Hkv), v[0..Hkv)) heads of D, half = D/2, i in [0, half):
//
//   theta_i = base^(-2i/D),  a_i = L theta_i
//   rot(x)[i]        = x[i] cos(a_i) - x[i + half] sin(a_i)
//   rot(x)[i + half] = x[i + half] cos(a_i) + x[i] sin(a_i)
//   q_out[b, h] = rot(q[h]) for every h < Hq
//   if 0 <= L < C:  k_cache[b, L, h] = rot(k[h]),  v_cache[b, L, h] = v[h],  lengths[b] = L + 1
//
// One block per sequence: its threads fill a shared table of cos(a_i), sin(a_i) (one position, so
// D/2 sincos shared by all Hq + Hkv heads), then rotate Q into q_out and K into the cache row (V
// pairs of 16-byte accesses per step) and copy V. The angle and the rotation are rope_device.cuh's,
// as rope_kernel's (rope_cuda.cu): Q and K are bit for bit rope_forward_lengths' on the GPU.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/kv_append/kv_append_cuda.h"
#include "kernels/rope/rope_device.cuh"

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

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    kv_rope_append_kernel(const T* __restrict__ qkv, T* __restrict__ q_out, T* __restrict__ k_cache,
                          T* __restrict__ v_cache, int32_t* __restrict__ lengths, int64_t C, int Hq,
                          int Hkv, int D, double base) {
  extern __shared__ float table[];  // cos [half], then sin [half]
  const int b = blockIdx.x, half = D / 2;
  const int vecs = half / V;  // vector pairs per head
  const int32_t L = lengths[b];
  for (int i = threadIdx.x; i < half; i += kThreads)
    rope_cos_sin(int64_t(L), i, D, base, &table[i], &table[half + i]);
  __syncthreads();  // the table is full, and every thread has read L before thread 0 advances it
  const bool room = L >= 0 && L < C;
  const int row = Hkv * D;
  const T* q = qkv + int64_t(b) * (Hq * D + 2 * row);
  const T* k = q + int64_t(Hq) * D;
  T* qo = q_out + int64_t(b) * Hq * D;
  const int64_t dst = room ? (int64_t(b) * C + L) * row : 0;
  const int qpairs = Hq * vecs, pairs = qpairs + (room ? Hkv * vecs : 0);
  for (int n = threadIdx.x; n < pairs; n += kThreads) {
    const bool is_q = n < qpairs;
    const int r = is_q ? n : n - qpairs;
    const int h = r / vecs, i = (r % vecs) * V;
    const T* x = (is_q ? q : k) + h * D;
    T* y = is_q ? qo + int64_t(h) * D : k_cache + dst + h * D;
    float x1[V], x2[V], y1[V], y2[V];
    load_vec<T, V>(x + i, x1);
    load_vec<T, V>(x + i + half, x2);
#pragma unroll
    for (int e = 0; e < V; ++e)
      rope_rotate_pair(x1[e], x2[e], table[i + e], table[half + i + e], &y1[e], &y2[e]);
    store_vec<T, V>(y + i, y1);
    store_vec<T, V>(y + i + half, y2);
  }
  if (!room) return;  // no room (the cpu checks first): the sequence's rows and length stay
  const T* v = k + row;
  for (int i = threadIdx.x * V; i < row; i += kThreads * V) {
    float a[V];
    load_vec<T, V>(v + i, a);
    store_vec<T, V>(v_cache + dst + i, a);
  }
  if (threadIdx.x == 0) lengths[b] = L + 1;
}

}  // namespace

void kv_rope_append_step(DType t, const void* qkv, void* q_out, void* k_cache, void* v_cache,
                         int32_t* lengths, int64_t B, int64_t C, int64_t Hq, int64_t Hkv, int64_t D,
                         double base, cudaStream_t s) {
  if (B == 0) return;
  dispatch_storage(t, "cuda::kv_rope_append_step", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kV = kVec16<T>;
    const bool vec = (D / 2) % kV == 0 && aligned16(qkv) && aligned16(q_out) &&
                     aligned16(k_cache) && aligned16(v_cache);
    const size_t smem = sizeof(float) * size_t(D);
    auto launch = [&](auto kernel) {
      if (smem > 48 * 1024)
        AMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
      kernel<<<unsigned(B), kThreads, smem, s>>>(static_cast<const T*>(qkv), static_cast<T*>(q_out),
                                                 static_cast<T*>(k_cache), static_cast<T*>(v_cache),
                                                 lengths, C, int(Hq), int(Hkv), int(D), base);
      AMOR_CUDA_CHECK_LAUNCH();
    };
    if (vec) {
      launch(kv_rope_append_kernel<T, kV>);
    } else {
      launch(kv_rope_append_kernel<T, 1>);
    }
  });
}

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

// Mamba2 SSD decode step on the GPU (ssd_recurrent_ref.h's ssd_step), per batch b and head h
// (group g = h / (H/G)), on an f32 state s [P, N] updated in place:
//
//   s <- exp(dt A) s + dt x B^T,    y = s C + D x
//
// A block of 128 threads per (b, h): warp w updates rows p = w, w + 4, ...; lane l the columns
// n = l, l + 32, ... of a row (coalesced), and the row's y_p is a warp sum. The step is memory
// bound: it reads and writes the state once, 8 P N bytes per (b, h); x, B, C, y are noise.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/ssd/ssd_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kStepThreads = 128;

template <class T>
__global__ void __launch_bounds__(kStepThreads)
    ssd_step_kernel(int64_t H, int64_t P, int64_t G, int64_t N, const T* __restrict__ x,
                    const float* __restrict__ dt, const float* __restrict__ A,
                    const T* __restrict__ Bm, const T* __restrict__ Cm,
                    const float* __restrict__ D, float* __restrict__ state, T* __restrict__ y) {
  const int64_t bh = blockIdx.x, b = bh / H, h = bh % H, g = h / (H / G);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const float dtv = dt[bh], decay = expf(dtv * A[h]), d = D[h];
  const T* Bv = Bm + (b * G + g) * N;
  const T* Cv = Cm + (b * G + g) * N;
  float* s = state + bh * P * N;
  for (int64_t p = warp; p < P; p += warps) {
    const float xp = to_f32(x[bh * P + p]), dx = dtv * xp;
    float acc = 0.0f;
    for (int64_t n = lane; n < N; n += 32) {
      const float v = decay * s[p * N + n] + dx * to_f32(Bv[n]);
      s[p * N + n] = v;
      acc += v * to_f32(Cv[n]);
    }
    acc = warp_sum(acc);
    if (lane == 0) y[bh * P + p] = from_f32<T>(acc + d * xp);
  }
}

}  // namespace

void ssd_step(DType t, int64_t batch, int64_t heads, int64_t headdim, int64_t groups,
              int64_t dstate, const void* x, const float* dt, const float* A, const void* Bm,
              const void* Cm, const float* D, float* state, void* y, cudaStream_t s) {
  if (batch * heads * headdim == 0) return;
  dispatch_storage(t, "cuda ssd_step", [&](auto tag) {
    using T = decltype(tag);
    ssd_step_kernel<T><<<unsigned(batch * heads), kStepThreads, 0, s>>>(
        heads, headdim, groups, dstate, static_cast<const T*>(x), dt, A,
        static_cast<const T*>(Bm), static_cast<const T*>(Cm), D, state, static_cast<T*>(y));
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace amor::cuda

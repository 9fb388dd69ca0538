// RoPE on the GPU, half-split rotation (math as rope_ref.h). For token n = b*T + t at position p
// (positions[n], or lengths[b] + t, or offset + t) and i in [0, Dh/2):
//
//   theta_i = base^(-2i/Dh),  a = p * theta_i
//   y1 = x1 cos(a) - x2 sin(a),  y2 = x2 cos(a) + x1 sin(a)      (x1 = x[i], x2 = x[i + Dh/2])
//   backward (inverse): the same with -a
//
// The angle (reduced modulo 2*pi in f64, then sincosf: accurate to f32 rounding at any position)
// and the rotation are rope_device.cuh's (rope_cos_sin, rope_rotate_pair, whose comment says why),
// shared with the fused decode step of kv_append_cuda.cu, which so rotates to the same bits. A
// block takes `tok` tokens at a time: its threads first fill a shared table of cos/sin per
// (token, i), then rotate every head of those tokens with 16-byte accesses (V pairs per thread
// step), so the transcendental work is shared by the H heads.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/rope/rope_cuda.h"
#include "kernels/rope/rope_device.cuh"

namespace amor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxTableFloats = 4096;  // cos and sin: 2 * tok * half floats, 16 KB

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(const T* __restrict__ x, T* __restrict__ y, const int64_t* __restrict__ positions,
                const int32_t* __restrict__ lengths, int64_t offset, int64_t ntokens, int64_t Tn,
                int H, int Dh, int tok, double base, bool inverse) {
  extern __shared__ float table[];  // cos [tok][half], then sin [tok][half]
  const int half = Dh / 2;
  const int vecs = half / V;  // vector pairs per head
  for (int64_t n0 = int64_t(blockIdx.x) * tok; n0 < ntokens; n0 += int64_t(gridDim.x) * tok) {
    const int ntok = ntokens - n0 < tok ? int(ntokens - n0) : tok;
    for (int k = threadIdx.x; k < ntok * half; k += blockDim.x) {
      const int64_t n = n0 + k / half;
      const int i = k % half;
      const int64_t p =
          positions ? positions[n] : (lengths ? int64_t(lengths[n / Tn]) : offset) + n % Tn;
      float cs, sn;
      rope_cos_sin(p, i, Dh, base, &cs, &sn);
      table[k] = cs;
      table[tok * half + k] = inverse ? -sn : sn;
    }
    __syncthreads();
    const int pairs = H * vecs;
    for (int k = threadIdx.x; k < ntok * pairs; k += blockDim.x) {
      const int tk = k / pairs, rem = k % pairs;
      const int h = rem / vecs, i = (rem % vecs) * V;
      const int64_t o = ((n0 + tk) * H + h) * int64_t(Dh);
      float x1[V], x2[V], y1[V], y2[V];
      load_vec<T, V>(x + o + i, x1);
      load_vec<T, V>(x + o + i + half, x2);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float c = table[tk * half + i + e], sn = table[tok * half + tk * half + i + e];
        rope_rotate_pair(x1[e], x2[e], c, sn, &y1[e], &y2[e]);
      }
      store_vec<T, V>(y + o + i, y1);
      store_vec<T, V>(y + o + i + half, y2);
    }
    __syncthreads();  // the next tokens overwrite the table
  }
}

void launch_rope(DType t, const void* x, void* y, const int64_t* positions,
                 const int32_t* lengths, int64_t offset, int64_t B, int64_t T, int64_t H,
                 int64_t Dh, double base, bool inverse, cudaStream_t s) {
  const int64_t ntokens = B * T;
  if (ntokens == 0 || H == 0 || Dh == 0) return;
  const int64_t half = Dh / 2;
  dispatch_storage(t, "cuda::rope_rotate", [&](auto tag) {
    using T_ = decltype(tag);
    constexpr int kV = kVec16<T_>;
    const bool vec = half % kV == 0 && aligned16(x) && aligned16(y);
    const int64_t v = vec ? kV : 1;
    // Tokens per block: enough vector pairs (H * half / v per token) for each thread to rotate
    // about four, within the size of the cos/sin table.
    int64_t tok = ceil_div(4 * kThreads, H * (half / v));
    const int64_t tok_cap = kMaxTableFloats / (2 * half) > 0 ? kMaxTableFloats / (2 * half) : 1;
    if (tok > tok_cap) tok = tok_cap;
    if (tok > ntokens) tok = ntokens;
    const size_t smem = sizeof(float) * size_t(2 * tok * half);
    const unsigned grid = grid_for(ceil_div(ntokens, tok) * kThreads, kThreads);
    auto launch = [&](auto kernel) {
      if (smem > 48 * 1024)
        AMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
      kernel<<<grid, kThreads, smem, s>>>(static_cast<const T_*>(x), static_cast<T_*>(y),
                                          positions, lengths, offset, ntokens, T, int(H), int(Dh),
                                          int(tok), base, inverse);
      AMOR_CUDA_CHECK_LAUNCH();
    };
    if (vec) {
      launch(rope_kernel<T_, kV>);
    } else {
      launch(rope_kernel<T_, 1>);
    }
  });
}

}  // namespace

void rope_rotate(DType t, const void* x, void* y, const int64_t* positions, int64_t offset,
                 int64_t B, int64_t T, int64_t H, int64_t Dh, double base, bool inverse,
                 cudaStream_t s) {
  launch_rope(t, x, y, positions, nullptr, offset, B, T, H, Dh, base, inverse, s);
}

void rope_rotate_lengths(DType t, const void* x, void* y, const int32_t* lengths, int64_t B,
                         int64_t T, int64_t H, int64_t Dh, double base, bool inverse,
                         cudaStream_t s) {
  launch_rope(t, x, y, nullptr, lengths, 0, B, T, H, Dh, base, inverse, s);
}

}  // namespace amor::cuda

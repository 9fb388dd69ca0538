// The fused LM head + cross-entropy + normalised entropy on the GPU (math: lm_head_loss_ref.h).
//
// Forward, per block of tokens n (up to kLmHeadCudaTokenBlock = 8192 rows) and per vocabulary
// chunk c (vocab_chunk columns):
//   Z = h_n W_c^T                 [nb, vc] f32, cuBLASLt (bf16 or f32 inputs, f32 accumulation)
//   chunk_stats_kernel, one thread block per row, two passes over the row:
//     pass 1: chunk max cm and its first index;   pass 2: S = sum e^(z - cm), T = sum e^(z-cm) (z-cm)
//   folded into the row's online state (m, s, t, argmax, z[target]), s and t in f64:
//     M = max(m, cm), s <- e^(m-M) s + e^(cm-M) S,
//     t <- e^(m-M) (t + s (m - M)) + e^(cm-M) (T + S (cm - M))
//   and after the last chunk: lse = m + log s, loss = lse - z[target] (0 if ignored),
//   entropy = (log s - t / s) / log V, argmax (strictly larger wins, so the lowest id on ties).
// Why f32 logits: a bf16 logit of magnitude ~10 is off by up to 0.03, which would move the loss
// by about that much; f32 logits keep loss and lse within f32 rounding of the cpu reference. The
// price is 4 bytes per logit written by the GEMM and read by the row kernel (2 x 4 N V bytes: at
// N = 8192, V = 128256 about 8 GB, ~2 ms of the H200's bandwidth against ~6 ms of tensor-core
// time).
//
// Backward, per token block and chunk (the entropy is detached: only the loss has a gradient):
//   Z = h_n W_c^T again (recomputed, f32)
//   dZ = dloss_n (e^(Z - lse_n) - onehot(target))   softmax_grad_kernel, 0 rows at ignored tokens;
//        in t (bf16 dZ feeds the tensor cores; an f32 dZ is written over Z in place)
//   dh_n (+)= dZ W_c        f32 accumulator over the chunks (bf16 h: a scratch, cast at the end)
//   dW_c (+)= dZ^T h_n      f32, accumulated over the token blocks
// Token blocks whose targets are all ignored are skipped (their dh rows are zeroed).
//
// Memory: the scratch is Z (4 nb vc bytes), the per-row state (28 nb bytes) and, for bf16, dZ
// (2 nb vc) and the dh accumulator (4 nb D): at nb = vc = 8192, D = 2048 about 450 MB, whatever N
// and V are. The [N x V] logits and their gradient never exist.
#include <algorithm>
#include <cmath>

#include "kernels/cast/cuda_device.cuh"
#include "kernels/linear/gemm_cuda.h"
#include "kernels/lm_head_loss/lm_head_loss_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int32_t kIgnore = -100;  // ref::kIgnoreIndex

// The online-softmax state of the rows of a token block, between vocabulary chunks.
struct RowState {
  double* s;         // sum e^(z - m)
  double* t;         // sum e^(z - m) (z - m)
  float* m;          // running max
  float* z_target;   // the target's logit, once its chunk has been seen
  int32_t* arg;      // index of the running max
};

// Where the last chunk writes the results of the block's rows (each may be null).
struct RowOutputs {
  float* loss;
  float* entropy;
  float* lse;
  int32_t* argmax;
};

// Max and its lowest index over the block (every thread gets them); scratch of 32 each.
__device__ __forceinline__ void block_argmax(float& v, int& j, float* sv, int* sj) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oj = __shfl_xor_sync(0xffffffffu, j, o);
    if (ov > v || (ov == v && oj < j)) v = ov, j = oj;
  }
  if (lane == 0) sv[warp] = v, sj[warp] = j;
  __syncthreads();
  v = sv[0], j = sj[0];
  for (int w = 1; w < nwarps; ++w)
    if (sv[w] > v || (sv[w] == v && sj[w] < j)) v = sv[w], j = sj[w];
  __syncthreads();
}

// Folds the chunk Z[rows, vc] (columns c0 .. c0 + vc of the vocabulary) into the rows' state;
// `first` starts the state, `last` writes the outputs.
__global__ void __launch_bounds__(kThreads)
    chunk_stats_kernel(const float* __restrict__ Z, int64_t rows, int64_t vc, int64_t c0,
                       int64_t V, const int32_t* __restrict__ targets, RowState st,
                       RowOutputs out, int first, int last) {
  __shared__ float sv[32];
  __shared__ int sj[32];
  __shared__ double sd[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* z = Z + r * vc;
    // pass 1: the chunk's max and its first index (each thread sees increasing j)
    float cm = -INFINITY;
    int cj = int(vc);
    for (int64_t j = threadIdx.x; j < vc; j += blockDim.x) {
      const float v = z[j];
      if (v > cm) cm = v, cj = int(j);
    }
    block_argmax(cm, cj, sv, sj);
    if (cj >= vc) cj = 0;  // every logit -inf: no index beat the sentinel
    // pass 2: the sums relative to the chunk max (terms <= 1, f32 per thread, f64 across)
    float ps = 0.0f, pt = 0.0f;
    for (int64_t j = threadIdx.x; j < vc; j += blockDim.x) {
      const float d = z[j] - cm;
      const float e = expf(d);
      ps += e;
      pt += e * d;
    }
    const double S = block_sum<double>(double(ps), sd);
    const double T = block_sum<double>(double(pt), sd);
    if (threadIdx.x != 0) continue;

    const int32_t target = targets ? targets[r] : kIgnore;
    double s = S, t = T;
    float m = cm, zt = 0.0f;
    int32_t arg = int32_t(c0 + cj);
    if (!first) {
      const float m_old = st.m[r];
      const double s_old = st.s[r], t_old = st.t[r];
      zt = st.z_target[r];
      if (cm > m_old) {  // the max moves to this chunk: rescale the old sums
        const double a = exp(double(m_old) - double(cm));
        t = a * (t_old + s_old * (double(m_old) - double(cm))) + T;
        s = a * s_old + S;
      } else {  // the old max stays (and so does its lower index on a tie)
        const double a = exp(double(cm) - double(m_old));
        t = t_old + a * (T + S * (double(cm) - double(m_old)));
        s = s_old + a * S;
        m = m_old;
        arg = st.arg[r];
      }
    }
    if (target >= c0 && target < c0 + vc) zt = z[target - c0];
    if (!last) {
      st.s[r] = s, st.t[r] = t, st.m[r] = m, st.z_target[r] = zt, st.arg[r] = arg;
      continue;
    }
    const double log_s = log(s);
    const float l = float(double(m) + log_s);
    if (out.lse) out.lse[r] = l;
    if (out.loss) out.loss[r] = target == kIgnore ? 0.0f : l - zt;
    if (out.entropy) out.entropy[r] = float((log_s - t / s) / log(double(V)));
    if (out.argmax) out.argmax[r] = arg;
  }
}

// Z[r, id - c0] = -inf for every excluded id inside the chunk [c0, c0 + vc), every row r (the
// argmax that skips those ids; lm_head_argmax_excluding). A chunk whose ids are all excluded then
// has max -inf and never wins against a chunk with a finite logit.
__global__ void mask_excluded_kernel(float* __restrict__ Z, int64_t rows, int64_t vc, int64_t c0,
                                     const int32_t* __restrict__ excluded, int64_t n_excluded) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * n_excluded;
       i += stride) {
    const int64_t r = i / n_excluded, id = excluded[i % n_excluded];
    if (id >= c0 && id < c0 + vc) Z[r * vc + (id - c0)] = -INFINITY;
  }
}

// dZ[r, j] = dloss[r] (e^(Z[r, j] - lse[r]) - [c0 + j == target[r]]), 0 for ignored rows. dZ may
// be Z itself (T = float): each element is read and then written by the same thread.
template <class T>
__global__ void __launch_bounds__(kThreads)
    softmax_grad_kernel(const float* Z, T* dZ, int64_t rows, int64_t vc, int64_t c0,
                        const int32_t* __restrict__ targets, const float* __restrict__ lse,
                        const float* __restrict__ dloss) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t target = targets[r];
    const float g = target == kIgnore ? 0.0f : dloss[r], l = lse[r];
    const float* z = Z + r * vc;
    T* dz = dZ + r * vc;
    for (int64_t j = threadIdx.x; j < vc; j += blockDim.x) {
      const float p = target == kIgnore ? 0.0f : expf(z[j] - l);
      dz[j] = from_f32<T>(g * (p - (c0 + j == target ? 1.0f : 0.0f)));
    }
  }
}

// dst[i] = src[i] in T (the dh accumulator to bf16).
template <class T>
__global__ void store_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = from_f32<T>(src[i]);
}

unsigned row_grid(int64_t rows) { return grid_for(rows * kThreads, kThreads); }

// Carves the scratch into 256-byte aligned pieces, in order.
class Carver {
 public:
  explicit Carver(void* base) : p_(static_cast<char*>(base)) {}
  template <class U>
  U* take(int64_t count) {
    U* r = reinterpret_cast<U*>(p_ + used_);
    used_ += (count * int64_t(sizeof(U)) + 255) / 256 * 256;
    return r;
  }
  int64_t used() const { return used_; }

 private:
  char* p_;
  int64_t used_ = 0;
};

struct ForwardScratch {
  float* Z;
  RowState st;
};

ForwardScratch carve_forward(void* base, int64_t N, int64_t V, int64_t vocab_chunk,
                             int64_t* bytes) {
  const int64_t tb = std::min(kLmHeadCudaTokenBlock, N), vc = std::min(vocab_chunk, V);
  Carver c(base);
  ForwardScratch f;
  f.Z = c.take<float>(tb * vc);
  f.st.s = c.take<double>(tb);
  f.st.t = c.take<double>(tb);
  f.st.m = c.take<float>(tb);
  f.st.z_target = c.take<float>(tb);
  f.st.arg = c.take<int32_t>(tb);
  if (bytes) *bytes = c.used();
  return f;
}

const char* at(const void* p, int64_t elements, DType t) {
  return static_cast<const char*>(p) + elements * int64_t(dtype_size(t));
}

}  // namespace

int64_t lm_head_forward_scratch_bytes(int64_t N, int64_t V, int64_t vocab_chunk) {
  int64_t bytes = 0;
  carve_forward(nullptr, N, V, vocab_chunk, &bytes);
  return bytes;
}

namespace {

// lm_head_forward, with the logits of excluded[0 .. n_excluded) set to -inf in each chunk when
// n_excluded > 0 (then only the argmax is meaningful: the callers ask for nothing else).
void forward_impl(DType t, const void* h, const void* W, const int32_t* targets, float* loss,
                  float* entropy, float* lse, int32_t* argmax, int64_t N, int64_t V, int64_t D,
                  int64_t vocab_chunk, const int32_t* excluded, int64_t n_excluded, void* scratch,
                  cudaStream_t stream) {
  if (N == 0) return;
  ForwardScratch f = carve_forward(scratch, N, V, vocab_chunk, nullptr);
  for (int64_t n0 = 0; n0 < N; n0 += kLmHeadCudaTokenBlock) {
    const int64_t nb = std::min(kLmHeadCudaTokenBlock, N - n0);
    const RowOutputs out{loss ? loss + n0 : nullptr, entropy ? entropy + n0 : nullptr,
                         lse ? lse + n0 : nullptr, argmax ? argmax + n0 : nullptr};
    for (int64_t c0 = 0; c0 < V; c0 += vocab_chunk) {
      const int64_t vc = std::min(vocab_chunk, V - c0);
      gemm(t, DType::F32, false, true, nb, vc, D, 1.0f, at(h, n0 * D, t), at(W, c0 * D, t), 0.0f,
           f.Z, stream);
      if (n_excluded > 0) {
        mask_excluded_kernel<<<grid_for(nb * n_excluded, kThreads), kThreads, 0, stream>>>(
            f.Z, nb, vc, c0, excluded, n_excluded);
        AMOR_CUDA_CHECK_LAUNCH();
      }
      chunk_stats_kernel<<<row_grid(nb), kThreads, 0, stream>>>(
          f.Z, nb, vc, c0, V, targets ? targets + n0 : nullptr, f.st, out, c0 == 0,
          c0 + vc >= V);
      AMOR_CUDA_CHECK_LAUNCH();
    }
  }
}

}  // namespace

void lm_head_forward(DType t, const void* h, const void* W, const int32_t* targets, float* loss,
                     float* entropy, float* lse, int32_t* argmax, int64_t N, int64_t V, int64_t D,
                     int64_t vocab_chunk, void* scratch, cudaStream_t stream) {
  forward_impl(t, h, W, targets, loss, entropy, lse, argmax, N, V, D, vocab_chunk, nullptr, 0,
               scratch, stream);
}

void lm_head_argmax_excluding(DType t, const void* h, const void* W, int32_t* argmax, int64_t N,
                              int64_t V, int64_t D, int64_t vocab_chunk, const int32_t* excluded,
                              int64_t n_excluded, void* scratch, cudaStream_t stream) {
  forward_impl(t, h, W, nullptr, nullptr, nullptr, nullptr, argmax, N, V, D, vocab_chunk,
               excluded, n_excluded, scratch, stream);
}

int64_t lm_head_backward_scratch_bytes(DType t, int64_t N, int64_t V, int64_t D,
                                       int64_t vocab_chunk) {
  const int64_t tb = std::min(kLmHeadCudaTokenBlock, N), vc = std::min(vocab_chunk, V);
  Carver c(nullptr);
  c.take<float>(tb * vc);                 // Z (and dZ in place for f32)
  if (t == DType::BF16) {
    c.take<uint16_t>(tb * vc);            // dZ in bf16
    c.take<float>(tb * D);                // the dh accumulator
  }
  return c.used();
}

void lm_head_backward(DType t, const void* h, const void* W, const int32_t* targets,
                      const int32_t* host_targets, const float* lse, const float* dloss, void* dh,
                      float* dW, int64_t N, int64_t V, int64_t D, int64_t vocab_chunk,
                      void* scratch, cudaStream_t stream) {
  const int64_t tb = std::min(kLmHeadCudaTokenBlock, N), vcm = std::min(vocab_chunk, V);
  const bool bf16 = t == DType::BF16;
  Carver c(scratch);
  float* Z = c.take<float>(tb * vcm);
  void* dZ = bf16 ? static_cast<void*>(c.take<uint16_t>(tb * vcm)) : static_cast<void*>(Z);
  float* dh_acc = bf16 ? c.take<float>(tb * D) : nullptr;
  const int64_t esize = int64_t(dtype_size(t));
  bool dW_written = false;
  for (int64_t n0 = 0; n0 < N; n0 += kLmHeadCudaTokenBlock) {
    const int64_t nb = std::min(kLmHeadCudaTokenBlock, N - n0);
    char* dh_blk = static_cast<char*>(dh) + n0 * D * esize;
    bool active = host_targets == nullptr;
    for (int64_t i = 0; i < nb && !active; ++i) active = host_targets[n0 + i] != kIgnore;
    if (!active) {  // all ignored: no gradient from these tokens
      AMOR_CUDA_CHECK(cudaMemsetAsync(dh_blk, 0, size_t(nb * D * esize), stream));
      continue;
    }
    float* acc = bf16 ? dh_acc : reinterpret_cast<float*>(dh_blk);
    const void* h_blk = at(h, n0 * D, t);
    for (int64_t c0 = 0; c0 < V; c0 += vocab_chunk) {
      const int64_t vc = std::min(vocab_chunk, V - c0);
      const void* W_c = at(W, c0 * D, t);
      gemm(t, DType::F32, false, true, nb, vc, D, 1.0f, h_blk, W_c, 0.0f, Z, stream);
      dispatch_storage(t, "lm_head_backward", [&](auto tag) {
        using T = decltype(tag);
        softmax_grad_kernel<T><<<row_grid(nb), kThreads, 0, stream>>>(
            Z, static_cast<T*>(dZ), nb, vc, c0, targets + n0, lse + n0, dloss + n0);
        AMOR_CUDA_CHECK_LAUNCH();
      });
      // dh[block] (+)= dZ W_c;  dW_c (+)= dZ^T h[block]
      gemm(t, DType::F32, false, false, nb, D, vc, 1.0f, dZ, W_c, c0 == 0 ? 0.0f : 1.0f, acc,
           stream);
      gemm(t, DType::F32, true, false, vc, D, nb, 1.0f, dZ, h_blk, dW_written ? 1.0f : 0.0f,
           dW + c0 * D, stream);
    }
    dW_written = true;
    if (bf16) {
      store_kernel<bf16_t><<<grid_for(nb * D, kThreads), kThreads, 0, stream>>>(
          dh_acc, reinterpret_cast<bf16_t*>(dh_blk), nb * D);
      AMOR_CUDA_CHECK_LAUNCH();
    }
  }
  if (!dW_written) AMOR_CUDA_CHECK(cudaMemsetAsync(dW, 0, size_t(V * D) * sizeof(float), stream));
}

}  // namespace amor::cuda

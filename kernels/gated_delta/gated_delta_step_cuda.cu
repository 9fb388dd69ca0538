// Gated delta rule decode step on the GPU (math as gated_delta_step in
// gated_delta_recurrent_ref.h). Per (b,h), with the f32 state S [K,V] updated in place:
//   S <- exp(g) S;  u = v - S^T k;  S <- S + beta k u^T;  o = scale S^T q
// Column c of S only meets column c: u_c = v_c - exp(g) sum_i S_ic k_i, then
// S_ic <- exp(g) S_ic + beta k_i u_c and o_c = scale sum_i S_ic q_i. So one thread owns a column
// (threads of a block: consecutive columns of one head, coalesced row by row), reads its K values
// twice (the second time from L1) and writes them once; q and k sit in shared memory. One block
// per (b,h). The step is memory bound: it must read and write the whole state, 2 K V 4 bytes
// per head.
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"

namespace amor::cuda {
namespace {

constexpr int kStepThreads = 128;

template <class T>
__global__ void __launch_bounds__(kStepThreads)
    gdn_step_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                    const void* g, const void* beta, bool gate_f32, float scale,
                    float* __restrict__ state, T* __restrict__ o, int64_t K, int64_t V) {
  extern __shared__ float smem[];
  float* qs = smem;
  float* ks = smem + K;
  const int64_t bh = blockIdx.x;
  for (int i = threadIdx.x; i < K; i += blockDim.x) {
    qs[i] = to_f32(q[bh * K + i]);
    ks[i] = to_f32(k[bh * K + i]);
  }
  const float decay = expf(gdn::load_any(g, bh, gate_f32));
  const float b = gdn::load_any(beta, bh, gate_f32);
  __syncthreads();
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
    float* S = state + bh * K * V + c;
    float sk = 0.0f;
    for (int64_t i = 0; i < K; ++i) sk += S[i * V] * ks[i];
    const float u = to_f32(v[bh * V + c]) - decay * sk;
    float acc = 0.0f;
    for (int64_t i = 0; i < K; ++i) {
      const float sn = decay * S[i * V] + b * ks[i] * u;
      S[i * V] = sn;
      acc += sn * qs[i];
    }
    o[bh * V + c] = from_f32<T>(scale * acc);
  }
}

template <class T>
void step_typed(const void* q_t, const void* k_t, const void* v_t, const void* g_t,
                const void* beta_t, bool gate_f32, float scale, float* state, void* o_t, int64_t B,
                int64_t H, int64_t K, int64_t V, cudaStream_t stream) {
  if (B * H == 0) return;
  const int64_t smem = 2 * K * int64_t(sizeof(float));
  gdn::allow_smem(gdn_step_kernel<T>);
  gdn_step_kernel<T><<<unsigned(B * H), kStepThreads, smem, stream>>>(
      static_cast<const T*>(q_t), static_cast<const T*>(k_t), static_cast<const T*>(v_t), g_t,
      beta_t, gate_f32, scale, state, static_cast<T*>(o_t), K, V);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gated_delta_step(DType t, const void* q_t, const void* k_t, const void* v_t, const void* g_t,
                      const void* beta_t, bool gate_f32, float scale, float* state, void* o_t,
                      int64_t B, int64_t H, int64_t K, int64_t V, cudaStream_t stream) {
  if (t == DType::F32)
    step_typed<float>(q_t, k_t, v_t, g_t, beta_t, gate_f32, scale, state, o_t, B, H, K, V, stream);
  else
    step_typed<bf16_t>(q_t, k_t, v_t, g_t, beta_t, gate_f32, scale, state, o_t, B, H, K, V, stream);
}

}  // namespace amor::cuda

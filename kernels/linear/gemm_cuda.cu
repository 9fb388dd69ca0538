// Row-major GEMM on the GPU (gemm_cuda.h): C = alpha op(A) op(B) + beta C, through cuBLASLt.
//
// cuBLASLt is column-major. A row-major [M,N] matrix with leading dimension ldc is, read
// column-major, its transpose C^T (N x M, same ld), so we ask cuBLASLt for
//
//   C^T = op(B)^T op(A)^T        (m = N, n = M, k = K)
//
// with our B as its first operand and our A as its second; a row-major operand stored [r, c] is a
// column-major c x r matrix, hence the layouts and transposes in make_plan below.
//
// State per device (created on first use, kept for the process): a cuBLASLt handle and a 32 MiB
// workspace (NVIDIA's recommendation for Hopper). Every GEMM runs on that device's one workspace,
// so GEMMs of one device must not run concurrently on different streams (all ops use the default
// stream today). Per problem (dtypes, transposes, sizes, leading dimensions, pointer alignments)
// a plan is built once and cached: the matmul descriptor, the three matrix layouts and the
// algorithm cuBLASLt's heuristic ranks first. A call is then a map lookup and one cublasLtMatmul.
// Compute is CUBLAS_COMPUTE_32F with f32 scale in every case (f32 inputs: no TF32).
//
// No epilogue is fused: the model's linear layers have no bias and their activations (SwiGLU,
// RoPE, norms) are separate memory-bound kernels that read several GEMM outputs at once, so a
// cuBLASLt epilogue (bias, GELU, ReLU) has nothing to fuse into here.
//
// The CPU emulator (tests/cuda/emu) compiles this file with a host compiler and has no cuBLASLt:
// there (__CUDACC__ undefined) a plain one-thread-per-output kernel with the same contract stands
// in, so that the ops built on gemm() (linear, the LM head) can be emulated end to end on small
// inputs. nvcc never compiles that stand-in.
#include <cstdio>
#include <string>

#include "kernels/cast/cuda_device.cuh"
#include "kernels/linear/gemm_cuda.h"

#ifdef __CUDACC__
#include <cublasLt.h>

#include <array>
#include <map>
#include <mutex>
#endif

namespace amor::cuda {
namespace {

[[noreturn]] void gemm_fail(const char* call, const char* what, bool transA, bool transB,
                            int64_t M, int64_t N, int64_t K, DType ab, DType c) {
  char msg[320];
  std::snprintf(msg, sizeof(msg),
                "%s (gemm M=%lld N=%lld K=%lld transA=%d transB=%d, A/B %s, C %s)", what,
                static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                int(transA), int(transB), dtype_name(ab), dtype_name(c));
  ::amor::cuda_fail(__FILE__, __LINE__, call, msg);
}

// C[M,N] = beta * C (beta == 0: zeros, C not read): the whole product when K == 0.
template <class TC>
__global__ void scale_c_kernel(TC* C, int64_t M, int64_t N, int64_t ldc, float beta) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < M * N; i += stride) {
    TC* p = C + (i / N) * ldc + i % N;
    *p = from_f32<TC>(beta == 0.0f ? 0.0f : beta * to_f32(*p));
  }
}

template <class TC>
void scale_c(TC* C, int64_t M, int64_t N, int64_t ldc, float beta, cudaStream_t stream) {
  constexpr int kThreads = 256;
  scale_c_kernel<TC><<<grid_for(M * N, kThreads), kThreads, 0, stream>>>(C, M, N, ldc, beta);
  AMOR_CUDA_CHECK_LAUNCH();
}

#ifdef __CUDACC__

#define AMOR_CUBLAS_CHECK(call)                                                        \
  do {                                                                                 \
    const cublasStatus_t amor_cublas_st_ = (call);                                     \
    if (amor_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                      \
      ::amor::cuda_fail(__FILE__, __LINE__, #call, cublasLtGetStatusName(amor_cublas_st_)); \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct DeviceLt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// This device's handle and workspace, created on first use (std::map keeps references stable).
DeviceLt& device_lt(int device) {
  static std::mutex mu;
  static std::map<int, DeviceLt> per_device;
  std::lock_guard<std::mutex> lock(mu);
  auto it = per_device.find(device);
  if (it != per_device.end()) return it->second;
  DeviceLt d;
  AMOR_CUBLAS_CHECK(cublasLtCreate(&d.handle));
  AMOR_CUDA_CHECK(cudaMalloc(&d.workspace, kWorkspaceBytes));
  return per_device.emplace(device, d).first->second;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// The largest power of two <= 16 dividing the address: cuBLASLt's kernels pick vector widths by
// it, so it is part of the plan's key and told to the heuristic.
int64_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t al = 16;
  while (al > 1 && a % uintptr_t(al) != 0) al /= 2;
  return al;
}

cudaDataType_t lt_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

Plan make_plan(cublasLtHandle_t handle, DType ab, DType c, bool transA, bool transB, int64_t M,
               int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t align_a,
               int64_t align_b, int64_t align_c) {
  Plan p;
  AMOR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt's first operand is our B: stored row-major [K,N] (column-major N x K, used as is)
  // or [N,K] when transB (column-major K x N, transposed). Its second is our A likewise.
  const cublasOperation_t op_first = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  AMOR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                                   sizeof(op_first)));
  AMOR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                   &op_second, sizeof(op_second)));
  AMOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.first, lt_type(ab), transB ? K : N,
                                               transB ? N : K, ldb));
  AMOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.second, lt_type(ab), transA ? M : K,
                                               transA ? K : M, lda));
  AMOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.out, lt_type(c), N, M, ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  AMOR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  const uint32_t al_first = uint32_t(align_b), al_second = uint32_t(align_a),
                 al_out = uint32_t(align_c);
  AMOR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  AMOR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_first, sizeof(al_first)));
  AMOR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_second, sizeof(al_second)));
  AMOR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_out, sizeof(al_out)));
  AMOR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_out, sizeof(al_out)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.first, p.second,
                                                           p.out, p.out, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS)
    gemm_fail("cublasLtMatmulAlgoGetHeuristic", cublasLtGetStatusName(st), transA, transB, M, N,
              K, ab, c);
  if (found == 0)
    gemm_fail("cublasLtMatmulAlgoGetHeuristic", "no algorithm for this problem", transA, transB,
              M, N, K, ab, c);
  p.algo = result.algo;
  return p;
}

// The cached plan of a problem (plans live for the process; references into std::map are stable).
const Plan& plan_for(int device, cublasLtHandle_t handle, DType ab, DType c, bool transA,
                     bool transB, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                     int64_t ldc, const void* A, const void* B, const void* C) {
  using Key = std::array<int64_t, 14>;
  static std::mutex mu;
  static std::map<Key, Plan> plans;
  const int64_t al_a = alignment(A), al_b = alignment(B), al_c = alignment(C);
  const Key key{device, int64_t(ab), int64_t(c), transA, transB, M, N, K, lda, ldb, ldc,
                al_a, al_b, al_c};
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it == plans.end())
    it = plans.emplace(key, make_plan(handle, ab, c, transA, transB, M, N, K, lda, ldb, ldc, al_a,
                                      al_b, al_c))
             .first;
  return it->second;
}

void run_gemm(DType ab, DType c, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta,
              void* C, int64_t ldc, cudaStream_t stream) {
  int device = 0;
  AMOR_CUDA_CHECK(cudaGetDevice(&device));
  DeviceLt& lt = device_lt(device);
  const Plan& p =
      plan_for(device, lt.handle, ab, c, transA, transB, M, N, K, lda, ldb, ldc, A, B, C);
  // A library call with stream 0 would mean the legacy NULL stream; our stream 0 is the
  // per-thread default stream (kernels/CMakeLists.txt), which stream capture can record.
  if (stream == 0) stream = cudaStreamPerThread;
  const cublasStatus_t st =
      cublasLtMatmul(lt.handle, p.desc, &alpha, B, p.first, A, p.second, &beta, C, p.out, C,
                     p.out, &p.algo, lt.workspace, kWorkspaceBytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    gemm_fail("cublasLtMatmul", cublasLtGetStatusName(st), transA, transB, M, N, K, ab, c);
}

#else  // a host compiler: the CPU emulator's stand-in (see the top of the file)

template <class TA, class TC>
__global__ void plain_gemm_kernel(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                                  float alpha, const TA* A, int64_t lda, const TA* B, int64_t ldb,
                                  float beta, TC* C, int64_t ldc) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < M * N; i += stride) {
    const int64_t m = i / N, n = i % N;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      const float a = to_f32(transA ? A[k * lda + m] : A[m * lda + k]);
      const float b = to_f32(transB ? B[n * ldb + k] : B[k * ldb + n]);
      acc += a * b;
    }
    TC* p = C + m * ldc + n;
    *p = from_f32<TC>(alpha * acc + (beta == 0.0f ? 0.0f : beta * to_f32(*p)));
  }
}

void run_gemm(DType ab, DType c, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta,
              void* C, int64_t ldc, cudaStream_t stream) {
  constexpr int kThreads = 64;
  dispatch_storage(ab, "gemm (emulated)", [&](auto tag_ab) {
    using TA = decltype(tag_ab);
    dispatch_storage(c, "gemm (emulated)", [&](auto tag_c) {
      using TC = decltype(tag_c);
      plain_gemm_kernel<TA, TC><<<grid_for(M * N, kThreads), kThreads, 0, stream>>>(
          transA, transB, M, N, K, alpha, static_cast<const TA*>(A), lda,
          static_cast<const TA*>(B), ldb, beta, static_cast<TC*>(C), ldc);
      AMOR_CUDA_CHECK_LAUNCH();
    });
  });
}

#endif

}  // namespace

void gemm(DType ab, DType c, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta, void* C,
          int64_t ldc, cudaStream_t stream) {
  const bool types_ok = (ab == DType::F32 && c == DType::F32) ||
                        (ab == DType::BF16 && (c == DType::BF16 || c == DType::F32));
  if (!types_ok)
    gemm_fail("gemm", "unsupported dtypes (A/B f32 -> C f32, or A/B bf16 -> C bf16 or f32)",
              transA, transB, M, N, K, ab, c);
  if (M < 0 || N < 0 || K < 0 || lda < (transA ? M : K) || ldb < (transB ? K : N) || ldc < N)
    gemm_fail("gemm", "negative size or leading dimension too small", transA, transB, M, N, K, ab,
              c);
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty product: C = beta C (cuBLASLt rejects k = 0)
    dispatch_storage(c, "gemm", [&](auto tag) {
      using TC = decltype(tag);
      scale_c<TC>(static_cast<TC*>(C), M, N, ldc, beta, stream);
    });
    return;
  }
  run_gemm(ab, c, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}

}  // namespace amor::cuda

// bench-gemm: the compute-bound ops built on cuBLASLt (linear forward/backward at the 1.5B
// model's shapes, the fused LM head + loss + entropy) against cuBLASLt's own bf16 GEMM peak,
// measured in the same run.
//
//   bench-gemm OUT.csv [--only SUBSTRING] [--reps N]
//
// Reference ("peak"): a bf16 x bf16 -> bf16 GEMM of 8192^3 with f32 accumulation through the
// cuBLASLt API directly (not through amor's gemm wrapper), every algorithm of cuBLASLt's top 8
// timed, the fastest kept: TFLOP/s = 2 * 8192^3 / time.
//
// Per case: warm-up calls, then N timed calls (default 20) each between two CUDA events; the
// median is reported. FLOPs (multiply-adds count 2):
//   linear forward            2 N in out
//   linear backward           4 N in out          (dx = dy W and dw = dy^T x)
//   lm_head_loss forward      2 N d V             (logits; the row statistics are not counted)
//   lm_head_entropy           2 N d V
//   lm_head_loss fwd+bwd      6 N d V             (forward 2, backward 4: dh and dW)
//     the backward also recomputes the logits (2 N d V more executed); "exec" columns count them
// "vs peak" = TFLOP/s / peak TFLOP/s. Everything in bf16 (the GPU training dtype); dw and dW are
// f32 as in training. Prints a table and writes it as CSV (temp + rename).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/core/backend.h"
#include "kernels/core/caching_allocator.h"
#include "kernels/core/cuda_check.h"
#include "kernels/linear/linear.h"
#include "kernels/lm_head_loss/lm_head_argmax.h"
#include "kernels/lm_head_loss/lm_head_loss.h"
#include "tests/cuda/bench_util.h"

namespace amor {
namespace {

#define BENCH_CUBLAS(call)                                                             \
  do {                                                                                 \
    const cublasStatus_t st_ = (call);                                                 \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::amor::cuda_fail(__FILE__, __LINE__, #call, cublasLtGetStatusName(st_));        \
  } while (0)

using Run = std::function<void()>;

struct Case {
  std::string op, shape;
  double flops, exec_flops;  // counted FLOPs; executed FLOPs (with the backward's recompute)
  std::function<Run()> make;  // allocates the inputs, returns the call on them
};

struct Result {
  Case c;
  double us = 0;
};

double time_us(int reps, const Run& run) { return bench::time_us(reps, run); }

// A cuda tensor of uniform values in [-scale, scale), in dtype d.
Tensor random_tensor(const Shape& shape, DType d, float scale, uint64_t seed) {
  return bench::random_uniform(shape, d, seed, -scale, scale);
}

// cuBLASLt's bf16 GEMM peak at n^3: the best of its top-8 heuristic algorithms, TFLOP/s.
double cublaslt_peak_tflops(int64_t n, int reps, std::string* algo_note) {
  cublasLtHandle_t handle;
  BENCH_CUBLAS(cublasLtCreate(&handle));
  Tensor A = random_tensor({n, n}, DType::BF16, 1.0f, 1), B = random_tensor({n, n}, DType::BF16,
                                                                            1.0f, 2);
  Tensor C = Tensor::empty({n, n}, DType::BF16, Device::CUDA);
  const size_t ws_bytes = size_t(32) << 20;
  Tensor ws = Tensor::empty({int64_t(ws_bytes)}, DType::U8, Device::CUDA);
  cublasLtMatmulDesc_t desc;
  BENCH_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;  // the "TN" layout cuBLAS favours
  BENCH_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT)));
  BENCH_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof(opN)));
  cublasLtMatrixLayout_t la, lb, lc;
  BENCH_CUBLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n));
  BENCH_CUBLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n));
  BENCH_CUBLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n));
  cublasLtMatmulPreference_t pref;
  BENCH_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws64 = ws_bytes;
  BENCH_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws64, sizeof(ws64)));
  cublasLtMatmulHeuristicResult_t results[8];
  int found = 0;
  BENCH_CUBLAS(cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref, 8, results,
                                              &found));
  const float alpha = 1.0f, beta = 0.0f;
  double best_us = 0;
  int best = -1;
  for (int i = 0; i < found; ++i) {
    const double us = time_us(reps, [&] {
      BENCH_CUBLAS(cublasLtMatmul(handle, desc, &alpha, A.raw_data(), la, B.raw_data(), lb, &beta,
                                  C.raw_data(), lc, C.raw_data(), lc, &results[i].algo,
                                  ws.raw_data(), ws_bytes, 0));
    });
    if (best < 0 || us < best_us) best_us = us, best = i;
  }
  AMOR_CHECK(best >= 0, "bench-gemm: cuBLASLt found no bf16 algorithm for {}^3", n);
  *algo_note = "best of " + std::to_string(found) + " cuBLASLt algorithms (#" +
               std::to_string(best) + ")";
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
  return 2.0 * double(n) * n * n / best_us / 1e6;
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  const DType bf = DType::BF16;
  // The 1.5B model at 8192 tokens: attention q/k/v/o (d -> d), fused qkv (d -> 3d), SwiGLU up and
  // gate (d -> d_ff = 4096), down (d_ff -> d).
  const int64_t N = 8192;
  struct Lin {
    const char* what;
    int64_t in, out;
  };
  for (const Lin& l : {Lin{"d->d", 2048, 2048}, Lin{"qkv d->3d", 2048, 6144},
                       Lin{"up/gate d->d_ff", 2048, 4096}, Lin{"down d_ff->d", 4096, 2048}}) {
    const std::string shape = "[" + std::to_string(N) + "," + std::to_string(l.in) + "]->" +
                              std::to_string(l.out) + " " + l.what;
    const double f = 2.0 * N * l.in * l.out;
    const int64_t in = l.in, out = l.out;
    cs.push_back({"linear_forward", shape, f, f, [=] {
                    Tensor x = random_tensor({N, in}, bf, 1.0f, 11);
                    Tensor w = random_tensor({out, in}, bf, 0.02f, 12);
                    return Run([x, w] { linear_forward(x, w); });
                  }});
    cs.push_back({"linear_backward (dx, dw)", shape, 2 * f, 2 * f, [=] {
                    Tensor x = random_tensor({N, in}, bf, 1.0f, 13);
                    Tensor w = random_tensor({out, in}, bf, 0.02f, 14);
                    Tensor dy = random_tensor({N, out}, bf, 1.0f, 15);
                    return Run([x, w, dy] { linear_backward(x, w, dy); });
                  }});
  }
  // The tied LM head of the Llama-3 vocabulary at d = 2048, 8192 tokens, default chunk 8192.
  const int64_t d = 2048, V = 128256;
  const double f = 2.0 * N * d * V;
  const std::string shape = "N=8192 d=2048 V=128256";
  auto inputs = [=](uint64_t seed) {
    Tensor h = random_tensor({N, d}, bf, 1.0f, seed);
    Tensor W = random_tensor({V, d}, bf, 0.04f, seed + 1);  // logits of std ~1
    std::vector<int32_t> t(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) t[size_t(n)] = int32_t((n * 7919) % V);
    return std::tuple{h, W, Tensor::from_vector<int32_t>({N}, t).to(Device::CUDA)};
  };
  cs.push_back({"lm_head_loss_forward", shape, f, f, [=] {
                  auto [h, W, t] = inputs(21);
                  return Run([h, W, t] { lm_head_loss_forward(h, W, t); });
                }});
  cs.push_back({"lm_head_entropy", shape, f, f, [=] {
                  auto [h, W, t] = inputs(23);
                  return Run([h, W] { lm_head_entropy(h, W); });
                }});
  cs.push_back({"lm_head_argmax", shape, f, f, [=] {
                  auto [h, W, t] = inputs(25);
                  return Run([h, W] { lm_head_argmax(h, W); });
                }});
  cs.push_back({"lm_head_loss fwd+bwd", shape, 3 * f, 4 * f, [=] {
                  auto [h, W, t] = inputs(27);
                  Tensor dloss = Tensor::full<float>({N}, 1.0f / float(N)).to(Device::CUDA);
                  return Run([h, W, t, dloss] {
                    LmHeadLossOut o = lm_head_loss_forward(h, W, t);
                    lm_head_loss_backward(h, W, t, o.lse, dloss);
                  });
                }});
  return cs;
}

void write_csv(const std::string& path, const std::vector<Result>& rs, double peak) {
  const double n3 = 2.0 * 8192.0 * 8192.0 * 8192.0;
  bench::write_csv("bench-gemm", path,
                   "op,shape,dtype,flops,exec_flops,median_us,tflops,exec_tflops,peak_tflops,"
                   "vs_peak,exec_vs_peak",
                   [&](FILE* f) {
                     std::fprintf(f, "\"cublaslt_gemm_peak\",\"8192^3\",bf16,%.0f,%.0f,%.3f,%.2f,%.2f,%.2f,1,1\n",
                                  n3, n3, n3 / peak / 1e6, peak, peak, peak);
                     for (const Result& r : rs) {
                       const double tf = r.c.flops / r.us / 1e6, etf = r.c.exec_flops / r.us / 1e6;
                       std::fprintf(f, "\"%s\",\"%s\",bf16,%.0f,%.0f,%.3f,%.2f,%.2f,%.2f,%.3f,%.3f\n",
                                    r.c.op.c_str(), r.c.shape.c_str(), r.c.flops, r.c.exec_flops, r.us,
                                    tf, etf, peak, tf / peak, etf / peak);
                     }
                   });
}

int run(const bench::Args& args) {
  const std::string& csv = args.csv;
  const std::string& only = args.only;
  const int reps = args.reps;
  cudaDeviceProp prop{};
  AMOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench-gemm on %s (%d SMs), median of %d calls, bf16\n", prop.name,
              prop.multiProcessorCount, reps);
  std::string note;
  const double peak = cublaslt_peak_tflops(8192, reps, &note);
  std::printf("reference: cuBLASLt bf16 GEMM 8192^3: %.1f TFLOP/s (%s)\n", peak, note.c_str());
  allocator(Device::CUDA).release_cached();
  std::printf("%-26s %-34s %10s %10s %8s %8s %9s\n", "op", "shape", "GFLOP", "us", "TFLOP/s",
              "vs peak", "exec vs");
  std::vector<Result> results;
  for (const Case& c : cases()) {
    if (!only.empty() && c.op.find(only) == std::string::npos) continue;
    Result r{c};
    {
      const Run call = c.make();
      r.us = time_us(reps, call);
    }
    const double tf = c.flops / r.us / 1e6, etf = c.exec_flops / r.us / 1e6;
    std::printf("%-26s %-34s %10.1f %10.1f %8.1f %8.3f %9.3f\n", c.op.c_str(), c.shape.c_str(),
                c.flops / 1e9, r.us, tf, tf / peak, etf / peak);
    std::fflush(stdout);
    results.push_back(std::move(r));
    allocator(Device::CUDA).release_cached();  // the next case starts from a clean cache
  }
  write_csv(csv, results, peak);
  std::printf("wrote %s\n", csv.c_str());
  return 0;
}

}  // namespace
}  // namespace amor

int main(int argc, char** argv) {
  return amor::bench::run_command(argc, argv, "bench-gemm", true, 20, amor::run);
}

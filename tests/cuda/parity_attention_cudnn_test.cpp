// CUDA == cpu reference for the cuDNN path of causal attention
// (kernels/attention/attention_cudnn.h): dense bf16, forced with AMOR_ATTENTION=cudnn, forward (o,
// lse) and backward (dq, dk, dv) at the training shape (B2 T2048 H32 D64), head dim 128, GQA (32
// query heads on 8 kv heads), T 1, T 77 (not a multiple of cuDNN's 64/128 tiles: on cuDNN <= 9.15
// the backward takes the frontend's padding-mask workaround), and Tq < Tk (cuDNN's bottom-right
// causal diagonal).
//
// AttentionCudnnVsOurs compares cuDNN with our kernels at the bench's full shapes (GPU against
// GPU); AttentionCudnnAuto checks the default dispatch; AttentionCudnnDescriptors finalizes every
// descriptor of both graphs and needs no GPU (the check a machine without one can run).
//
// These tests FAIL, not skip, when cuDNN cannot build a plan on the GPU: the lead needs to know,
// and the message carries cuDNN's reason. They skip only without a GPU or in a build without
// cuDNN (the CPU emulator compiles the stand-in, which has none).
//
// The cpu reference is single-threaded O(B H T^2 D): the T 2048 cases take ~1 minute together;
// only the first has the full B2 H32 (the others: every (b, h) runs the same code).
//
// Tolerances as tests/cuda/parity_attention_test.cpp: bf16 o <= 5e-3, gradients <= 1e-2 (rms
// relative), lse (f32 on both sides, scores accumulated in f32) <= 1e-5.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/attention/attention.h"
#include "tests/cuda/parity.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/attention/attention_cudnn.h"
#endif

namespace amor::parity {
namespace {

#ifdef AMOR_HAVE_CUDA

// Sets AMOR_ATTENTION for the scope of a test, then restores it.
class ScopedImpl {
 public:
  explicit ScopedImpl(const char* value) {
    const char* old = std::getenv("AMOR_ATTENTION");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("AMOR_ATTENTION", value, 1);
  }
  ~ScopedImpl() {
    if (had_)
      setenv("AMOR_ATTENTION", old_.c_str(), 1);
    else
      unsetenv("AMOR_ATTENTION");
  }

 private:
  bool had_ = false;
  std::string old_;
};

#define AMOR_REQUIRE_CUDNN()                                                                  \
  do {                                                                                        \
    AMOR_REQUIRE_GPU();                                                                       \
    if (!cuda::cudnn_attention_built())                                                       \
      GTEST_SKIP() << "this build has no cuDNN (CMake did not find it, or the CPU emulator)"; \
  } while (0)

struct Case {
  int64_t B, Tq, Tk, H, Hkv, D;
};

std::string name(const Case& c) {
  return "attention cudnn B" + std::to_string(c.B) + " Tq" + std::to_string(c.Tq) + " Tk" +
         std::to_string(c.Tk) + " H" + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " D" +
         std::to_string(c.D);
}

void check_case(const Case& c, uint64_t seed) {
  const std::string op = name(c);
  const DType dt = DType::BF16;
  const Shape qs{c.B, c.Tq, c.H, c.D}, ks{c.B, c.Tk, c.Hkv, c.D}, ls{c.B, c.H, c.Tq};
  Tensor q = input(qs, seed + 1, dt), k = input(ks, seed + 2, dt), v = input(ks, seed + 3, dt);
  Tensor dout = input(qs, seed + 4, dt);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  const cuda::CudnnAttnShape cn{c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D};

  // The plans first, so that a shape cuDNN declines fails here with cuDNN's reason.
  EXPECT_TRUE(cuda::cudnn_attention_supported(cn, scale, false))
      << op << " forward: " << cuda::cudnn_attention_unsupported_reason(cn, scale, false);
  EXPECT_TRUE(cuda::cudnn_attention_supported(cn, scale, true))
      << op << " backward: " << cuda::cudnn_attention_unsupported_reason(cn, scale, true);

  ScopedImpl forced("cudnn");
  AttentionOutput r = attention_forward(q, k, v);
  poison({{qs, dt}, {ls, DType::F32}});
  AttentionOutput g;
  const std::string ferr =
      error_of([&] { g = attention_forward(up(q, dt), up(k, dt), up(v, dt)); });
  ASSERT_EQ(ferr, "(no error)") << op;
  EXPECT_EQ(g.lse.dtype(), DType::F32);
  expect_close(op, "o", g.o, r.o, out_tol(dt));
  expect_close(op, "lse", g.lse, r.lse, kF32Tol);

  AttentionGrads rg = attention_backward(q, k, v, Tensor(), r.o, r.lse, dout);
  poison({{qs, dt}, {ks, dt}});
  AttentionGrads gg;
  const std::string berr = error_of([&] {
    gg = attention_backward(up(q, dt), up(k, dt), up(v, dt), Tensor(), g.o, g.lse, up(dout, dt));
  });
  ASSERT_EQ(berr, "(no error)") << op;
  expect_close(op, "dq", gg.dq, rg.dq, grad_tol(dt));
  expect_close(op, "dk", gg.dk, rg.dk, grad_tol(dt));
  expect_close(op, "dv", gg.dv, rg.dv, grad_tol(dt));
}

// Every tensor and operation descriptor of both graphs finalizes (no GPU needed: this is the
// check that runs on a machine without one; the operation graph itself needs a cuDNN handle).
TEST(CudaParity, AttentionCudnnDescriptors) {
  if (!cuda::cudnn_attention_built()) GTEST_SKIP() << "this build has no cuDNN";
  for (const Case& c : {Case{2, 2048, 2048, 32, 32, 64}, Case{2, 77, 77, 32, 8, 128},
                        Case{2, 37, 300, 8, 2, 64}, Case{1, 1, 1, 4, 4, 64}}) {
    for (bool backward : {false, true}) {
      int ops = 0;
      const std::string err = error_of([&] {
        ops = cuda::cudnn_attention_check_descriptors({c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D}, 0.125f,
                                                      backward);
      });
      EXPECT_EQ(err, "(no error)") << name(c) << (backward ? " backward" : " forward");
      EXPECT_GT(ops, 10) << name(c);
    }
  }
}

// The training shape of bench-attention's first row (B8 T2048 H32 D64) takes cuDNN under auto.
TEST(CudaParity, AttentionCudnnDispatch) {
  AMOR_REQUIRE_CUDNN();
  const cuda::CudnnAttnShape n{8, 2048, 2048, 32, 32, 64};
  EXPECT_TRUE(cuda::cudnn_attention_supported(n, 0.125f, false))
      << cuda::cudnn_attention_unsupported_reason(n, 0.125f, false);
  EXPECT_TRUE(cuda::cudnn_attention_supported(n, 0.125f, true))
      << cuda::cudnn_attention_unsupported_reason(n, 0.125f, true);
  std::printf("cuDNN %lld\n", static_cast<long long>(cuda::cudnn_attention_version()));

  // Forced cudnn on what it does not take: an error naming the shape, not a silent fallback.
  ScopedImpl forced("cudnn");
  const Shape qs{1, 8, 2, 64};
  Tensor q = up(input(qs, 1, DType::F32), DType::F32);
  const std::string f32_err = error_of([&] { attention_forward(q, q, q); });
  EXPECT_NE(f32_err.find("AMOR_ATTENTION=cudnn"), std::string::npos) << f32_err;
  Tensor qb = up(input(qs, 1, DType::BF16), DType::BF16);
  Tensor gate = Tensor::empty({1, 8}, DType::U8);
  for (int i = 0; i < 8; ++i) gate.data<uint8_t>()[i] = 1;
  const std::string gate_err =
      error_of([&] { attention_forward(qb, qb, qb, gate.to(Device::CUDA)); });
  EXPECT_NE(gate_err.find("dense"), std::string::npos) << gate_err;
  ScopedImpl bogus("fastest");
  const std::string bad = error_of([&] { attention_forward(qb, qb, qb); });
  EXPECT_NE(bad.find("AMOR_ATTENTION is 'fastest'"), std::string::npos) << bad;
}

TEST(CudaParity, AttentionCudnn) {
  AMOR_REQUIRE_CUDNN();
  check_case({2, 2048, 2048, 32, 32, 64}, 9000);
}

TEST(CudaParity, AttentionCudnnHead128) {
  AMOR_REQUIRE_CUDNN();
  check_case({1, 2048, 2048, 8, 8, 128}, 9100);
}

TEST(CudaParity, AttentionCudnnGqa) {
  AMOR_REQUIRE_CUDNN();
  check_case({1, 2048, 2048, 32, 8, 64}, 9200);
}

// T 1 and T 77: single and odd lengths (77 is not a multiple of 64 or 128), MHA and GQA.
TEST(CudaParity, AttentionCudnnShort) {
  AMOR_REQUIRE_CUDNN();
  check_case({2, 1, 1, 32, 32, 64}, 9300);
  check_case({2, 77, 77, 32, 32, 64}, 9310);
  check_case({2, 77, 77, 32, 8, 128}, 9320);
}

// Tq < Tk: the queries are the last Tq positions (decode, a chunk of a longer context).
TEST(CudaParity, AttentionCudnnTqBelowTk) {
  AMOR_REQUIRE_CUDNN();
  check_case({2, 1, 300, 8, 2, 64}, 9400);
  check_case({2, 37, 300, 8, 2, 64}, 9410);
  check_case({1, 128, 2048, 16, 16, 128}, 9420);
}

// AMOR_ATTENTION=auto (the default): a dense bf16 shape with Tq == Tk a multiple of 128 is served
// by cuDNN once its first call agreed with our kernels (cuDNN's forward is deterministic, so its
// output is bitwise the forced one); gated and Tq < Tk calls are served by ours (deterministic:
// bitwise the forced ones). A stderr line "disagrees" here means cuDNN's graph is wrong.
TEST(CudaParity, AttentionCudnnAuto) {
  AMOR_REQUIRE_CUDNN();
  const DType dt = DType::BF16;
  auto run = [&](const char* impl, const Tensor& q, const Tensor& k, const Tensor& gate) {
    ScopedImpl scoped(impl);
    return attention_forward(q, k, k, gate).o;
  };
  const Shape qs{2, 256, 4, 64};
  Tensor q = up(input(qs, 11, dt), dt), k = up(input(qs, 12, dt), dt);
  for (int call = 0; call < 2; ++call)  // the first call compares, the second trusts the verdict
    expect_equal("attention auto B2 T256 H4 D64 call " + std::to_string(call), "o",
                 run("auto", q, k, Tensor()), down(run("cudnn", q, k, Tensor())));
  Tensor gate = Tensor::empty({2, 256}, DType::U8);
  for (int64_t i = 0; i < gate.numel(); ++i) gate.data<uint8_t>()[i] = i % 3 == 0;
  Tensor ggate = gate.to(Device::CUDA);
  expect_equal("attention auto gated", "o", run("auto", q, k, ggate),
               down(run("ours", q, k, ggate)));
  Tensor qd = up(input({2, 100, 4, 64}, 13, dt), dt);
  expect_equal("attention auto Tq < Tk", "o", run("auto", qd, k, Tensor()),
               down(run("ours", qd, k, Tensor())));
}

// The bench's shapes at full size (B*T = 16K tokens, where the cpu reference would take minutes):
// cuDNN against our kernels, both on the GPU. Each is within 5e-3 (o) / 1e-2 (gradients) of the
// exact result, so the two are within twice that of each other.
TEST(CudaParity, AttentionCudnnVsOurs) {
  AMOR_REQUIRE_CUDNN();
  for (const Case& c : {Case{8, 2048, 2048, 32, 32, 64}, Case{4, 4096, 4096, 16, 16, 128},
                        Case{1, 16384, 16384, 32, 8, 64}}) {
    const std::string op = name(c) + " vs ours";
    const Shape qs{c.B, c.Tq, c.H, c.D}, ks{c.B, c.Tk, c.Hkv, c.D};
    const DType dt = DType::BF16;
    Tensor q = up(input(qs, 1, dt), dt), k = up(input(ks, 2, dt), dt);
    Tensor v = up(input(ks, 3, dt), dt), dout = up(input(qs, 4, dt), dt);
    AttentionOutput ro, go;
    AttentionGrads rg, gg;
    {
      ScopedImpl ours("ours");
      ro = attention_forward(q, k, v);
      rg = attention_backward(q, k, v, Tensor(), ro.o, ro.lse, dout);
    }
    {
      ScopedImpl cudnn("cudnn");
      const std::string err = error_of([&] {
        go = attention_forward(q, k, v);
        gg = attention_backward(q, k, v, Tensor(), go.o, go.lse, dout);
      });
      ASSERT_EQ(err, "(no error)") << op;
    }
    expect_close(op, "o", go.o, down(ro.o), 2 * out_tol(dt));
    expect_close(op, "lse", go.lse, down(ro.lse), kF32Tol);
    expect_close(op, "dq", gg.dq, down(rg.dq), 2 * grad_tol(dt));
    expect_close(op, "dk", gg.dk, down(rg.dk), 2 * grad_tol(dt));
    expect_close(op, "dv", gg.dv, down(rg.dv), 2 * grad_tol(dt));
  }
}

#endif  // AMOR_HAVE_CUDA

}  // namespace
}  // namespace amor::parity

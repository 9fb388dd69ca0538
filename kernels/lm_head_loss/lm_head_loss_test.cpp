#include <gtest/gtest.h>

#include <cmath>

#include "kernels/core/caching_allocator.h"
#include "kernels/lm_head_loss/lm_head_loss.h"
#include "kernels/lm_head_loss/lm_head_loss_blas.h"
#include "kernels/lm_head_loss/lm_head_loss_ref.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::max_abs_diff;
using testing::randint;
using testing::randn;
using testing::rel_rms;

// Random targets in [0, V) with the listed tokens set to the ignore index.
Tensor targets_with_ignored(int64_t N, int64_t V, uint64_t seed, std::vector<int64_t> ignored) {
  Tensor t = randint({N}, seed, V);
  for (int64_t n : ignored) t.data<int32_t>()[n] = ref::kIgnoreIndex;
  return t;
}

TEST(LmHeadLoss, GradcheckDouble) {
  const int64_t N = 6, D = 5, V = 37;
  Tensor h = randn({N, D}, 1, DType::F64, 1.5), W = randn({V, D}, 2);
  Tensor targets = targets_with_ignored(N, V, 3, {2});
  Tensor dloss = randn({N}, 4);
  for (int64_t chunk : {8, 37, 100}) {
    SCOPED_TRACE(chunk);
    LmHeadLossOut f = lm_head_loss_forward(h, W, targets, chunk);
    LmHeadLossGrads g = lm_head_loss_backward(h, W, targets, f.lse, dloss, chunk);
    gradcheck([&] { return std::vector<Tensor>{lm_head_loss_forward(h, W, targets, chunk).loss}; },
              {dloss}, {{"h", h, g.dh}, {"W", W, g.dW}});
  }
}

TEST(LmHeadLoss, IndependentOfVocabChunk) {
  const int64_t N = 11, D = 6, V = 37;
  Tensor h = randn({N, D}, 5, DType::F64, 2.0), W = randn({V, D}, 6);
  Tensor targets = targets_with_ignored(N, V, 7, {0, 9});
  Tensor dloss = randn({N}, 8);
  LmHeadLossOut f0 = lm_head_loss_forward(h, W, targets, V);
  LmHeadLossGrads g0 = lm_head_loss_backward(h, W, targets, f0.lse, dloss, V);
  for (int64_t chunk : {1, 7, 8192}) {
    SCOPED_TRACE(chunk);
    LmHeadLossOut f = lm_head_loss_forward(h, W, targets, chunk);
    LmHeadLossGrads g = lm_head_loss_backward(h, W, targets, f.lse, dloss, chunk);
    EXPECT_LT(max_abs_diff(f.loss, f0.loss), 1e-13);
    EXPECT_LT(max_abs_diff(f.entropy, f0.entropy), 1e-13);
    EXPECT_LT(max_abs_diff(f.lse, f0.lse), 1e-13);
    EXPECT_LT(max_abs_diff(g.dh, g0.dh), 1e-13);
    EXPECT_LT(max_abs_diff(g.dW, g0.dW), 1e-13);
    EXPECT_LT(max_abs_diff(lm_head_entropy(h, W, chunk), f0.entropy), 1e-13);
  }
}

// The BLAS-blocked backend against the plain loops, with token blocks that do not divide N.
template <class T>
void expect_blas_matches_plain(double tol) {
  const int64_t N = 13, D = 10, V = 37, chunk = 8;
  const DType dt = dtype_of<T>;
  Tensor h = randn({N, D}, 9, dt, 1.5), W = randn({V, D}, 10, dt);
  Tensor targets = targets_with_ignored(N, V, 11, {4});
  Tensor dloss = randn({N}, 12, dt);
  Tensor loss = Tensor::empty({N}, dt), ent = Tensor::empty({N}, dt), lse = Tensor::empty({N}, dt);
  Tensor dh = Tensor::empty({N, D}, dt), dW = Tensor::empty({V, D}, dt);
  ref::lm_head_loss_forward(h.data<T>(), W.data<T>(), targets.data<int32_t>(), loss.data<T>(),
                            ent.data<T>(), lse.data<T>(), N, V, D, chunk);
  ref::lm_head_loss_backward(h.data<T>(), W.data<T>(), targets.data<int32_t>(), lse.data<T>(),
                             dloss.data<T>(), dh.data<T>(), dW.data<T>(), N, V, D);
  for (int64_t token_block : {int64_t{4}, kLmHeadTokenBlock}) {
    SCOPED_TRACE(token_block);
    Tensor loss2 = Tensor::empty({N}, dt), ent2 = Tensor::empty({N}, dt);
    Tensor lse2 = Tensor::empty({N}, dt);
    Tensor dh2 = Tensor::empty({N, D}, dt), dW2 = Tensor::empty({V, D}, dt);
    cpu::lm_head_loss_forward(h.data<T>(), W.data<T>(), targets.data<int32_t>(), loss2.data<T>(),
                              ent2.data<T>(), lse2.data<T>(), N, V, D, chunk, token_block);
    cpu::lm_head_loss_backward(h.data<T>(), W.data<T>(), targets.data<int32_t>(), lse.data<T>(),
                               dloss.data<T>(), dh2.data<T>(), dW2.data<T>(), N, V, D, chunk,
                               token_block);
    EXPECT_LT(rel_rms(loss2, loss), tol);
    EXPECT_LT(rel_rms(ent2, ent), tol);
    EXPECT_LT(rel_rms(lse2, lse), tol);
    EXPECT_LT(rel_rms(dh2, dh), tol);
    EXPECT_LT(rel_rms(dW2, dW), tol);
  }
}

TEST(LmHeadLoss, BlasMatchesPlainLoops) {
  expect_blas_matches_plain<double>(1e-13);
  expect_blas_matches_plain<float>(1e-5);
}

// The online-softmax entropy against the two-pass textbook formula on the full logits.
TEST(LmHeadLoss, EntropyMatchesTwoPassFormula) {
  const int64_t N = 5, D = 4, V = 29;
  Tensor h = randn({N, D}, 13, DType::F64, 3.0), W = randn({V, D}, 14);
  Tensor ent = lm_head_entropy(h, W, 6);
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> z(V);
    double zmax = -INFINITY;
    for (int64_t v = 0; v < V; ++v) {
      z[v] = 0;
      for (int64_t d = 0; d < D; ++d) z[v] += h.item(n * D + d) * W.item(v * D + d);
      zmax = std::max(zmax, z[v]);
    }
    double sum = 0;
    for (double zv : z) sum += std::exp(zv - zmax);
    double H = 0;
    for (double zv : z) {
      double p = std::exp(zv - zmax) / sum;
      H -= p * std::log(p);
    }
    EXPECT_NEAR(ent.item(n), H / std::log(double(V)), 1e-14) << "token " << n;
  }
}

// Entropy is invariant to a common offset of the logits; a constant last hidden unit with a
// constant embedding column adds 60 to every logit.
TEST(LmHeadLoss, EntropyInvariantToLogitOffset) {
  const int64_t N = 7, D = 5, V = 41;
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor h = randn({N, D}, 15, dt), W = randn({V, D}, 16, dt);
    for (int64_t n = 0; n < N; ++n) h.set_item(n * D + D - 1, 1.0);
    for (int64_t v = 0; v < V; ++v) W.set_item(v * D + D - 1, 0.0);
    Tensor plain = lm_head_entropy(h, W, 8);
    for (int64_t v = 0; v < V; ++v) W.set_item(v * D + D - 1, 60.0);
    Tensor shifted = lm_head_entropy(h, W, 8);
    EXPECT_LT(max_abs_diff(shifted, plain), dt == DType::F64 ? 1e-13 : 2e-6) << dtype_name(dt);
  }
}

TEST(LmHeadLoss, IgnoredTargetsHaveNoLossAndNoGradient) {
  const int64_t N = 5, D = 4, V = 23;
  Tensor h = randn({N, D}, 17), W = randn({V, D}, 18);
  Tensor targets = targets_with_ignored(N, V, 19, {1, 3});
  Tensor dloss = randn({N}, 20);  // nonzero at ignored tokens too: they must still get nothing
  LmHeadLossOut f = lm_head_loss_forward(h, W, targets, 7);
  LmHeadLossGrads g = lm_head_loss_backward(h, W, targets, f.lse, dloss, 7);
  Tensor ent = lm_head_entropy(h, W, 7);
  for (int64_t n = 0; n < N; ++n) {
    bool ignored = n == 1 || n == 3;
    EXPECT_EQ(f.loss.item(n) == 0.0, ignored) << n;
    EXPECT_EQ(f.entropy.item(n), ent.item(n)) << "entropy is computed for every token";
    for (int64_t d = 0; d < D; ++d) {
      if (ignored) {
        EXPECT_EQ(g.dh.item(n * D + d), 0.0) << n;
      }
    }
  }
  // All ignored: no gradient at all.
  Tensor none = Tensor::full<int32_t>({N}, ref::kIgnoreIndex);
  LmHeadLossGrads g0 = lm_head_loss_backward(h, W, none, f.lse, dloss, 7);
  for (int64_t i = 0; i < g0.dW.numel(); ++i) ASSERT_EQ(g0.dW.item(i), 0.0);
  for (int64_t i = 0; i < g0.dh.numel(); ++i) ASSERT_EQ(g0.dh.item(i), 0.0);
}

TEST(LmHeadLoss, UniformLogitsHaveEntropyExactlyOne) {
  const int64_t N = 3, D = 4, V = 37;
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor h = randn({N, D}, 21, dt), W = Tensor::zeros({V, D}, dt);
    Tensor targets = randint({N}, 22, V);
    for (int64_t chunk : {1, 7, 8192}) {
      LmHeadLossOut f = lm_head_loss_forward(h, W, targets, chunk);
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_EQ(f.entropy.item(n), 1.0) << dtype_name(dt) << " chunk " << chunk;
        EXPECT_NEAR(f.loss.item(n), std::log(double(V)), 1e-6);
      }
    }
  }
}

TEST(LmHeadLoss, FloatMatchesDouble) {
  const int64_t N = 9, D = 8, V = 50;
  Tensor h = randn({N, D}, 23), W = randn({V, D}, 24);
  Tensor targets = targets_with_ignored(N, V, 25, {5});
  Tensor dloss = randn({N}, 26);
  LmHeadLossOut fd = lm_head_loss_forward(h, W, targets, 16);
  LmHeadLossGrads gd = lm_head_loss_backward(h, W, targets, fd.lse, dloss, 16);
  Tensor hf = h.to(DType::F32), Wf = W.to(DType::F32);
  LmHeadLossOut ff = lm_head_loss_forward(hf, Wf, targets, 16);
  LmHeadLossGrads gf = lm_head_loss_backward(hf, Wf, targets, ff.lse, dloss.to(DType::F32), 16);
  EXPECT_LT(rel_rms(ff.loss, fd.loss), 1e-6);
  EXPECT_LT(rel_rms(ff.entropy, fd.entropy), 1e-6);
  EXPECT_LT(rel_rms(gf.dh, gd.dh), 1e-5);
  EXPECT_LT(rel_rms(gf.dW, gd.dW), 1e-5);
}

// Llama-3's vocabulary: the working memory is one [token block x vocab chunk] buffer, far below
// the N x V logits, and the result still matches the plain loops.
TEST(LmHeadLoss, FullVocabularyMemoryStaysBounded) {
  const int64_t N = 64, D = 16, V = 128256, chunk = 8192;
  const size_t logits_bytes = size_t(N) * V * 4;
  Tensor h = randn({N, D}, 27, DType::F32), W = randn({V, D}, 28, DType::F32, 0.5);
  Tensor targets = targets_with_ignored(N, V, 29, {7});
  Tensor dloss = Tensor::full<float>({N}, 1.0f / (N - 1));
  CachingAllocator& alloc = allocator(Device::CPU);

  alloc.reset_peak();
  size_t base = alloc.stats().bytes_in_use;
  LmHeadLossOut f = lm_head_loss_forward(h, W, targets, chunk);
  size_t fwd_peak = alloc.stats().peak_bytes_in_use - base;
  EXPECT_LT(fwd_peak, logits_bytes / 8) << "forward peak " << fwd_peak;

  alloc.reset_peak();
  base = alloc.stats().bytes_in_use;
  LmHeadLossGrads g = lm_head_loss_backward(h, W, targets, f.lse, dloss, chunk);
  size_t bwd_scratch = alloc.stats().peak_bytes_in_use - base - g.dh.nbytes() - g.dW.nbytes();
  EXPECT_LT(bwd_scratch, logits_bytes / 8) << "backward scratch " << bwd_scratch;

  // The plain loops in double on the same (float-valued) inputs are the truth.
  Tensor hd = h.to(DType::F64), Wd = W.to(DType::F64), dlossd = dloss.to(DType::F64);
  std::vector<double> loss(N), ent(N), lse(N), dh(N * D), dW(V * D);
  ref::lm_head_loss_forward(hd.data<double>(), Wd.data<double>(), targets.data<int32_t>(),
                            loss.data(), ent.data(), lse.data(), N, V, D, chunk);
  ref::lm_head_loss_backward(hd.data<double>(), Wd.data<double>(), targets.data<int32_t>(),
                             lse.data(), dlossd.data<double>(), dh.data(), dW.data(), N, V, D);
  EXPECT_LT(rel_rms(f.loss, Tensor::from_vector({N}, loss)), 5e-7);
  EXPECT_LT(rel_rms(f.entropy, Tensor::from_vector({N}, ent)), 5e-7);
  EXPECT_LT(rel_rms(g.dh, Tensor::from_vector({N, D}, dh)), 5e-6);
  EXPECT_LT(rel_rms(g.dW, Tensor::from_vector({V, D}, dW)), 5e-6);
}

TEST(LmHeadLoss, BadInputsNameTheOpAndShapes) {
  const int64_t N = 4, D = 3, V = 37;
  Tensor h = randn({N, D}, 30), W = randn({V, D}, 31);
  Tensor targets = Tensor::from_vector<int32_t>({N}, {0, 5, -100, 37});
  try {
    lm_head_loss_forward(h, W, targets, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "lm_head_loss_forward: targets[3] = 37 is out of range for a vocabulary of V = 37 "
                 "(expected 0 <= target < 37, or -100 to ignore)");
  }
  try {
    lm_head_loss_forward(h, randn({V, 4}, 32), randint({N}, 33, V));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "lm_head_loss_forward: argument 'W' is f64[37,4]@cpu, expected shape [*,3]");
  }
  Tensor ok = randint({N}, 34, V);
  Tensor lse = Tensor::zeros({N}, DType::F64), dloss = Tensor::zeros({N}, DType::F64);
  EXPECT_THROW(lm_head_loss_forward(h, W, Tensor::from_vector<int32_t>({N}, {0, -1, 2, 3})), Error);
  EXPECT_THROW(lm_head_loss_forward(h, W, ok.to(DType::I64)), Error);
  EXPECT_THROW(lm_head_loss_forward(h, W, randint({N + 1}, 35, V)), Error);
  EXPECT_THROW(lm_head_loss_forward(h, W.to(DType::F32), ok), Error);
  EXPECT_THROW(lm_head_loss_forward(h, W, ok, 0), Error);
  EXPECT_THROW(lm_head_loss_forward(h, randn({1, D}, 36), Tensor::zeros({N}, DType::I32)), Error);
  EXPECT_THROW(lm_head_loss_forward(h.view({N * D}), W, ok), Error);
  EXPECT_THROW(lm_head_loss_backward(h, W, ok, Tensor::zeros({N + 1}, DType::F64), dloss), Error);
  EXPECT_THROW(lm_head_loss_backward(h, W, ok, lse, dloss.to(DType::F32)), Error);
  EXPECT_THROW(lm_head_loss_backward(h, W, targets, lse, dloss), Error);
  EXPECT_THROW(lm_head_entropy(h.to(DType::I32), W), Error);
}

}  // namespace
}  // namespace amor

// Decode steps' few rows take the whole vocabulary in one pass; from 4M logits on, the chunks.
TEST(LmHeadLoss, InferenceVocabChunk) {
  EXPECT_EQ(amor::inference_vocab_chunk(1, 50277, 8192), 50277);
  EXPECT_EQ(amor::inference_vocab_chunk(83, 50277, 8192), 50277);   // 4.17M logits
  EXPECT_EQ(amor::inference_vocab_chunk(84, 50277, 8192), 8192);    // 4.22M: over 4M
  EXPECT_EQ(amor::inference_vocab_chunk(32, 128256, 8192), 128256);
  EXPECT_EQ(amor::inference_vocab_chunk(33, 128256, 8192), 8192);
  EXPECT_EQ(amor::inference_vocab_chunk(16000, 260, 64), 260);      // a byte vocabulary: one pass
  EXPECT_EQ(amor::inference_vocab_chunk(16384, 260, 64), 64);       // 4.26M
  EXPECT_EQ(amor::inference_vocab_chunk(0, 13, 4), 13);
  EXPECT_THROW(amor::inference_vocab_chunk(1, 0, 8192), amor::Error);
}

// CUDA == cpu reference for the fused LM head (lm_head_loss_forward / _backward, lm_head_entropy,
// lm_head_argmax): per-token loss, normalised entropy and lse (f32 on cuda), dh (h's dtype) and
// dW (f32), greedy argmax. LmHeadSmall (awkward shapes: one token, vocabularies that are not a
// multiple of the chunk, ignored targets, ties) also runs in the CPU emulator; LmHead holds the
// realistic shapes (Llama-3 and GPT-NeoX vocabularies at d = 2048) for the GPU.
#include <algorithm>
#include <cmath>

#include "kernels/lm_head_loss/lm_head_argmax.h"
#include "kernels/lm_head_loss/lm_head_loss.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16};

enum class Targets { All, SomeIgnored, AllIgnored };

struct HeadCase {
  int64_t N, V, D, chunk;
  Targets targets;
};

// i32 [N] targets in [0, V), every fifth ignored (SomeIgnored) or all ignored.
Tensor make_targets(int64_t N, int64_t V, Targets mode, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(N));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t n = 0; n < N; ++n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t[size_t(n)] = int32_t((s >> 33) % uint64_t(V));
    if (mode == Targets::AllIgnored || (mode == Targets::SomeIgnored && n % 5 == 2))
      t[size_t(n)] = -100;
  }
  return Tensor::from_vector<int32_t>({N}, t);
}

// The GPU's greedy ids against the cpu's: exact, except that at realistic sizes a near-tie (two
// logits within the f32 rounding of the two GEMMs) may go either way: up to one in a thousand.
void expect_argmax(const std::string& op, const Tensor& gpu, const Tensor& ref, int64_t allowed) {
  const std::vector<int32_t> a = gpu.to(Device::CPU).to_vector<int32_t>();
  const std::vector<int32_t> b = ref.to_vector<int32_t>();
  ASSERT_EQ(a.size(), b.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) mismatches += a[i] != b[i];
  std::printf("[parity] %-40s %-9s %-18s %-5s exact: %lld mismatches (allowed %lld)%s\n",
              op.c_str(), "argmax", shape_str(gpu.shape()).c_str(), dtype_name(gpu.dtype()),
              static_cast<long long>(mismatches), static_cast<long long>(allowed),
              mismatches <= allowed ? "" : "  FAIL");
  EXPECT_LE(mismatches, allowed) << op;
}

void check_head(const HeadCase& c, DType dt, uint64_t seed) {
  const std::string tag = "lm_head (N=" + std::to_string(c.N) + " V=" + std::to_string(c.V) +
                          " chunk=" + std::to_string(c.chunk) + ")";
  // Logits of standard deviation ~2 (h ~ N(0,1), W ~ N(0, 2 / sqrt(D))), as in a trained model.
  Tensor h = input({c.N, c.D}, seed, dt), W = input({c.V, c.D}, seed + 1, dt, 2.0 / std::sqrt(c.D));
  Tensor targets = make_targets(c.N, c.V, c.targets, seed + 2);
  Tensor dloss = input({c.N}, seed + 3, DType::F32);
  Tensor gh = up(h, dt), gW = up(W, dt), gt = targets.to(Device::CUDA);
  const bool none = c.targets == Targets::AllIgnored;

  LmHeadLossOut r = lm_head_loss_forward(h, W, targets, c.chunk);
  poison({{{c.N}, DType::F32}});
  LmHeadLossOut g = lm_head_loss_forward(gh, gW, gt, c.chunk);
  EXPECT_EQ(g.loss.dtype(), DType::F32);
  const double stat_tol = dt == DType::BF16 ? out_tol(dt) : kF32Tol;
  if (none) {
    expect_equal(tag + " fwd", "loss", g.loss, r.loss);  // all zeros: no relative error exists
  } else {
    expect_close(tag + " fwd", "loss", g.loss, r.loss, stat_tol);
  }
  expect_close(tag + " fwd", "entropy", g.entropy, r.entropy, stat_tol);
  expect_close(tag + " fwd", "lse", g.lse, r.lse, stat_tol);

  poison({{{c.N}, DType::F32}});
  expect_close(tag + " entropy", "entropy", lm_head_entropy(gh, gW, c.chunk), r.entropy,
               stat_tol);
  poison({{{c.N}, DType::I32}});
  const Tensor ref_arg = lm_head_argmax(h, W, c.chunk);
  expect_argmax(tag, lm_head_argmax(gh, gW, c.chunk), ref_arg, c.N >= 1000 ? c.N / 1000 : 0);
  // lm_head_decode (a decode step's entropy and argmax in one pass, what a CUDA graph of a decode
  // step captures): bitwise the separate GPU calls' numbers (the same kernel, the same chunks).
  poison({{{c.N}, DType::F32}, {{c.N}, DType::I32}});
  const LmHeadDecodeOut dec = lm_head_decode(gh, gW, c.chunk);
  expect_equal(tag + " decode", "entropy", dec.entropy, lm_head_entropy(gh, gW, c.chunk).to(Device::CPU));
  expect_argmax(tag + " decode", dec.argmax, lm_head_argmax(gh, gW, c.chunk).to(Device::CPU), 0);
  // With excluded ids (greedy_generate's min_new_tokens): id 0, the first rows' own argmax and,
  // for small chunks, every id of the first chunk (a chunk whose logits are all -inf).
  std::vector<int32_t> excluded = {0};
  for (int64_t n = 0; n < std::min<int64_t>(c.N, 3); ++n)
    excluded.push_back(ref_arg.to_vector<int32_t>()[size_t(n)]);
  if (c.chunk <= 64 && 2 * c.chunk <= c.V)
    for (int32_t v = 0; v < int32_t(c.chunk); ++v) excluded.push_back(v);
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  if (int64_t(excluded.size()) >= c.V) excluded.resize(size_t(c.V - 1));
  poison({{{c.N}, DType::I32}});
  expect_argmax(tag + " excluding " + std::to_string(excluded.size()) + " ids",
                lm_head_argmax(gh, gW, c.chunk, excluded), lm_head_argmax(h, W, c.chunk, excluded),
                c.N >= 1000 ? c.N / 1000 : 0);

  LmHeadLossGrads rr = lm_head_loss_backward(h, W, targets, r.lse, dloss, c.chunk);
  poison({{{c.N, c.D}, dt}, {{c.V, c.D}, DType::F32}});
  LmHeadLossGrads gg = lm_head_loss_backward(gh, gW, gt, g.lse, up(dloss, DType::F32), c.chunk);
  EXPECT_EQ(gg.dh.dtype(), dt);
  EXPECT_EQ(gg.dW.dtype(), DType::F32);
  if (none) {  // no token has a loss: both gradients are exactly zero
    expect_equal(tag + " bwd", "dh", gg.dh, rr.dh);
    expect_equal(tag + " bwd", "dW", gg.dW, rr.dW);
  } else {
    expect_close(tag + " bwd", "dh", gg.dh, rr.dh, grad_tol(dt));
    expect_close(tag + " bwd", "dW", gg.dW, rr.dW, dt == DType::BF16 ? grad_tol(dt) : kF32Tol);
  }
}

// One token; 7 tokens with a vocabulary (259) not a multiple of the chunk (64) and a width (100)
// not a multiple of 8; one chunk holding everything; all targets ignored; the smallest vocabulary
// in chunks of one column.
const HeadCase kSmallCases[] = {{1, 300, 16, 128, Targets::All},
                                {7, 259, 100, 64, Targets::SomeIgnored},
                                {5, 100, 33, 8192, Targets::All},
                                {6, 130, 24, 50, Targets::AllIgnored},
                                {3, 2, 1, 1, Targets::SomeIgnored}};

TEST(CudaParity, LmHeadSmall) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 8000;
  for (const HeadCase& c : kSmallCases)
    for (DType dt : kDtypes) check_head(c, dt, seed += 10);
}

// W = 0: every logit is exactly 0 on every backend, so each token's argmax is the tie-break
// (id 0, across chunks too), its entropy exactly 1 and its loss log V.
TEST(CudaParity, LmHeadTies) {
  AMOR_REQUIRE_GPU();
  const int64_t N = 4, V = 300, D = 8;
  for (DType dt : kDtypes) {
    Tensor gh = up(input({N, D}, 8100, dt), dt);
    Tensor gW = up(Tensor::zeros({V, D}, DType::F32), dt);
    Tensor gt = make_targets(N, V, Targets::All, 8101).to(Device::CUDA);
    poison({{{N}, DType::I32}});
    expect_equal("lm_head_argmax (W = 0)", "argmax", lm_head_argmax(gh, gW, 128),
                 Tensor::zeros({N}, DType::I32).to(DType::F32));
    // Excluding ids 0, 1 and 129 (two chunks): the tie goes to the lowest id left, 2.
    const std::vector<int32_t> excluded = {0, 1, 129};
    poison({{{N}, DType::I32}});
    expect_equal("lm_head_argmax (W = 0, excluding 0 1 129)", "argmax",
                 lm_head_argmax(gh, gW, 128, excluded),
                 Tensor::full<int32_t>({N}, 2).to(DType::F32));
    poison({{{N}, DType::F32}});
    LmHeadLossOut g = lm_head_loss_forward(gh, gW, gt, 128);
    expect_close("lm_head_loss_forward (W = 0)", "entropy", g.entropy,
                 Tensor::full<float>({N}, 1.0f), kF32Tol);
    expect_close("lm_head_loss_forward (W = 0)", "loss", g.loss,
                 Tensor::full<float>({N}, float(std::log(double(V)))), kF32Tol);
  }
}

// The Llama-3 vocabulary (V = 128256, 15 full chunks of 8192 and a partial one) at 4096 tokens,
// GPT-NeoX's (50277, not a multiple of anything) at 8192 tokens, both at d = 2048; and more tokens
// than one GPU token block (8192) with the second block's targets all ignored (its gradient pass
// is skipped).
const HeadCase kRealisticCases[] = {{4096, 128256, 2048, 8192, Targets::SomeIgnored},
                                    {8192, 50277, 2048, 8192, Targets::SomeIgnored},
                                    {8200, 1000, 64, 256, Targets::All}};

TEST(CudaParity, LmHead) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 8200;
  for (const HeadCase& c : kRealisticCases)
    for (DType dt : kDtypes) check_head(c, dt, seed += 10);
}

// A second token block with every target ignored: its dh rows must be zeroed (not left as
// poison) and it must add nothing to dW.
TEST(CudaParity, LmHeadIgnoredTokenBlock) {
  AMOR_REQUIRE_GPU();
  const int64_t N = 8200, V = 300, D = 16;
  for (DType dt : kDtypes) {
    Tensor h = input({N, D}, 8300, dt), W = input({V, D}, 8301, dt, 0.5);
    Tensor targets = make_targets(N, V, Targets::All, 8302);
    for (int64_t n = 8192; n < N; ++n) targets.set_item(n, -100);
    Tensor dloss = input({N}, 8303, DType::F32);
    LmHeadLossOut r = lm_head_loss_forward(h, W, targets, 128);
    LmHeadLossOut g = lm_head_loss_forward(up(h, dt), up(W, dt), targets.to(Device::CUDA), 128);
    LmHeadLossGrads rr = lm_head_loss_backward(h, W, targets, r.lse, dloss, 128);
    poison({{{N, D}, dt}, {{V, D}, DType::F32}});
    LmHeadLossGrads gg = lm_head_loss_backward(up(h, dt), up(W, dt), targets.to(Device::CUDA),
                                               g.lse, up(dloss, DType::F32), 128);
    expect_close("lm_head_loss_backward (ignored block)", "dh", gg.dh, rr.dh, grad_tol(dt));
    expect_close("lm_head_loss_backward (ignored block)", "dW", gg.dW, rr.dW,
                 dt == DType::BF16 ? grad_tol(dt) : kF32Tol);
    const Tensor tail = down(gg.dh).slice_flat(8192 * D, {N - 8192, D});
    expect_equal("lm_head_loss_backward (ignored block)", "dh tail", tail,
                 Tensor::zeros({N - 8192, D}, DType::F32));
  }
}

TEST(CudaErrors, LmHeadArguments) {
  AMOR_REQUIRE_GPU();
  Tensor h = up(input({3, 4}, 8400, DType::F32), DType::BF16);
  Tensor W = up(input({10, 4}, 8401, DType::F32), DType::BF16);
  Tensor bad = Tensor::from_vector<int32_t>({3}, {1, 10, -100}).to(Device::CUDA);
  EXPECT_EQ(error_of([&] { lm_head_loss_forward(h, W, bad); }),
            "lm_head_loss_forward: targets[1] = 10 is out of range for a vocabulary of V = 10 "
            "(expected 0 <= target < 10, or -100 to ignore)");
  Tensor cpu_targets = Tensor::from_vector<int32_t>({3}, {1, 2, 3});
  EXPECT_EQ(error_of([&] { lm_head_loss_forward(h, W, cpu_targets); }),
            "lm_head_loss_forward: argument 'targets' is i32[3]@cpu, expected a cuda tensor like "
            "the others");
  Tensor targets = cpu_targets.to(Device::CUDA);
  Tensor lse16 = up(input({3}, 8402, DType::F32), DType::BF16);
  Tensor dloss = up(input({3}, 8403, DType::F32), DType::F32);
  EXPECT_EQ(error_of([&] { lm_head_loss_backward(h, W, targets, lse16, dloss); }),
            "lm_head_loss_backward: argument 'lse' is bf16[3]@cuda; on cuda it must be f32 (f32 "
            "per-token statistics)");
  Tensor h64 = up(input({3, 4}, 8404, DType::F32), DType::F64);
  Tensor W64 = up(input({10, 4}, 8405, DType::F32), DType::F64);
  EXPECT_EQ(error_of([&] { lm_head_entropy(h64, W64); }),
            "lm_head_entropy: argument 'h' is f64[3,4]@cuda; on cuda this op takes f32 or bf16");
  EXPECT_EQ(error_of([&] { lm_head_argmax(h64, W64); }),
            "lm_head_argmax: argument 'h' is f64[3,4]@cuda; on cuda this op takes f32 or bf16");
}

}  // namespace
}  // namespace amor::parity

// CUDA graphs of decode steps (decode_graph.h): on the GPU a greedy decode replayed from captured
// graphs equals the eager one bitwise (the same kernels on the same inputs) for every kind that
// can be captured; on the cpu and for the other kinds every step stays eager, with the reason.
#include "models/infer/decode_graph.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/core/backend.h"
#include "models/infer/infer_test_support.h"

namespace amor::model {
namespace {

using testing_infer::make_model;
using testing_infer::tiny;

TEST(DecodeGraph, EnvSwitchValues) {
  EXPECT_FALSE(parse_decode_graphs(nullptr));
  EXPECT_FALSE(parse_decode_graphs(""));
  EXPECT_FALSE(parse_decode_graphs("0"));
  EXPECT_TRUE(parse_decode_graphs("1"));
  try {
    parse_decode_graphs("yes");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AMOR_DECODE_GRAPHS='yes'"), std::string::npos) << e.what();
  }
}

TEST(DecodeGraph, BlockersNameTheReason) {
  auto blocker = [](const ModelConfig& cfg) { return make_model(cfg, DType::F32, 1)->decode_graph_blocker(); };
  // On the cpu nothing is captured.
  EXPECT_NE(blocker(tiny("mamba2")).find("cpu"), std::string::npos);
  EXPECT_NE(blocker(tiny("transformer")).find("cpu"), std::string::npos);
  if (!cuda_available()) return;
  auto on_gpu = [](const ModelConfig& cfg) {
    auto m = make_model(cfg, DType::F32, 1);
    for (const auto& p : m->params().params()) p->value = p->value.to(Device::CUDA);
    return m->decode_graph_blocker();
  };
  EXPECT_EQ(on_gpu(tiny("mamba2")), "");
  EXPECT_EQ(on_gpu(tiny("gdn")), "");
  EXPECT_NE(on_gpu(tiny("transformer")).find("attention"), std::string::npos);
  ModelConfig serial = tiny("serial");
  serial.pattern = "MA";
  EXPECT_NE(on_gpu(serial).find("attention"), std::string::npos);
  serial.pattern = "MG";
  EXPECT_EQ(on_gpu(serial), "");
}

TEST(DecodeGraph, SessionOnTheCpuStaysEager) {
  auto m = make_model(tiny("mamba2"), DType::F32, 3);
  InferenceSession eager(*m, 2), graphs(*m, 2);
  graphs.use_graphs(true);
  EXPECT_NE(graphs.graph_blocker().find("cpu"), std::string::npos);
  Tensor prompt = testing::randint({2, 3}, 5, m->config().vocab);
  StepOutput a = eager.prefill(prompt), b = graphs.prefill(prompt);
  for (int i = 0; i < 4; ++i) {
    Tensor tok = testing::randint({2}, 10 + uint64_t(i), m->config().vocab);
    a = eager.step(tok);
    b = graphs.step(tok);
    EXPECT_FALSE(graphs.last_step_graphed());
    EXPECT_EQ(testing_infer::mismatches(a.predictions, b.predictions), 0);
    EXPECT_EQ(testing_infer::max_rel_diff(a.entropy, b.entropy), 0.0);
  }
}

// ---- GPU (the harness below also runs on the cpu, where every step is eager)

// tests/cuda/train_parity.py's small model (its shapes run on the GPU), with several vocabulary
// chunks (the last partial) and larger weights (init_std 0.1) so predictions vary.
ModelConfig gpu_tiny(const std::string& kind, const std::string& pattern = "") {
  ModelConfig c;
  c.kind = kind;
  c.pattern = pattern;
  c.vocab = 260;
  c.vocab_chunk = 100;
  c.d_model = 128;
  c.n_layers = 2;
  c.d_ff = 256;
  c.head_dim = 64;
  c.mamba2.head_dim = 64;
  c.mamba2.d_state = 64;
  c.mamba2.chunk = 64;
  c.gdn.head_dim = 64;
  c.gdn.chunk = 64;
  c.init_std = 0.1;
  return c;
}

struct Trace {
  std::vector<std::vector<int32_t>> predictions;  // per step, [B]
  std::vector<std::vector<float>> entropy;        // per step, [B]
  int64_t graphed = 0;
};

// Prefill a random prompt, then `steps` greedy steps, each fed the previous step's predictions
// (from the host on even steps, straight from the device on odd ones); step 5 excludes token 0
// (an eager step inside a graphed session when graphs are on).
Trace greedy(LanguageModel& m, int64_t B, int64_t steps, bool graphs, Device dev = Device::CUDA) {
  InferenceSession s(m, B);
  s.use_graphs(graphs);
  const int64_t V = m.config().vocab;
  StepOutput out = s.prefill(testing::randint({B, 6}, 77, V).to(dev));
  Tensor pred = out.predictions.to(Device::CPU);
  std::vector<int32_t> next(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) next[size_t(b)] = pred.data<int32_t>()[b * 6 + 5];
  Tensor tok = Tensor::from_vector<int32_t>({B}, next);
  Trace t;
  for (int64_t i = 0; i < steps; ++i) {
    const int32_t ban[] = {0};
    out = i == 5 ? s.step(tok, Tensor(), ban) : s.step(tok);
    t.graphed += s.last_step_graphed();
    t.predictions.push_back(out.predictions.to(Device::CPU).to_vector<int32_t>());
    const Tensor e = out.entropy.to(Device::CPU);
    t.entropy.push_back(std::vector<float>(e.data<float>(), e.data<float>() + B));
    tok = i % 2 ? out.predictions.view({B}) : out.predictions.to(Device::CPU).view({B});
  }
  EXPECT_EQ(s.length(), 6 + steps);
  return t;
}

TEST(DecodeGraph, GreedyHarnessOnTheCpuIsEager) {
  for (const std::string kind : {"mamba2", "gdn"}) {
    auto m = make_model(gpu_tiny(kind), DType::F32, 11);
    const Trace eager = greedy(*m, 2, 7, false, Device::CPU);
    const Trace on = greedy(*m, 2, 7, true, Device::CPU);
    EXPECT_EQ(on.graphed, 0);
    EXPECT_EQ(on.predictions, eager.predictions);
    EXPECT_EQ(on.entropy, eager.entropy);
  }
}

TEST(DecodeGraph, GpuGreedyDecodeEqualsEagerBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  struct Case {
    std::string name;
    ModelConfig cfg;
  };
  const std::vector<Case> cases = {{"mamba2", gpu_tiny("mamba2")},
                                   {"gdn", gpu_tiny("gdn")},
                                   {"serial_MG", gpu_tiny("serial", "MG")}};
  const int64_t steps = 12;
  for (const Case& c : cases) {
    for (DType dt : {DType::BF16, DType::F32}) {
      for (int64_t B : {1, 3}) {
        SCOPED_TRACE(c.name + " " + dtype_name(dt) + " B=" + std::to_string(B));
        auto m = make_model(c.cfg, dt, 11);
        for (const auto& p : m->params().params()) p->value = p->value.to(Device::CUDA);
        ASSERT_EQ(m->decode_graph_blocker(), "");
        const Trace eager = greedy(*m, B, steps, false);
        const Trace graphed = greedy(*m, B, steps, true);
        EXPECT_EQ(eager.graphed, 0);
        // Step 0 eager, step 1 captured and launched, step 5 eager (an exclusion), the rest
        // replayed.
        EXPECT_EQ(graphed.graphed, steps - 2);
        for (int64_t i = 0; i < steps; ++i) {
          EXPECT_EQ(graphed.predictions[size_t(i)], eager.predictions[size_t(i)]) << "step " << i;
          EXPECT_EQ(std::memcmp(graphed.entropy[size_t(i)].data(), eager.entropy[size_t(i)].data(),
                                sizeof(float) * size_t(B)),
                    0)
              << "step " << i;
        }
      }
    }
  }
}

// The graph's memory comes from a private pool that is given back with the graph.
TEST(DecodeGraph, GpuPoolReleasedWithTheSession) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  auto m = make_model(gpu_tiny("mamba2"), DType::BF16, 5);
  for (const auto& p : m->params().params()) p->value = p->value.to(Device::CUDA);
  {
    InferenceSession s(*m, 2);
    s.use_graphs(true);
    s.prefill(testing::randint({2, 4}, 3, 260).to(Device::CUDA));
    for (int i = 0; i < 4; ++i) s.step(testing::randint({2}, 40 + uint64_t(i), 260));
    EXPECT_TRUE(s.last_step_graphed());
    EXPECT_GT(allocator(Device::CUDA).stats().bytes_in_pools, 0u);
  }
  EXPECT_EQ(allocator(Device::CUDA).stats().bytes_in_pools, 0u);
}

}  // namespace
}  // namespace amor::model

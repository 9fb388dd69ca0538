// CUDA graphs of decode steps (decode_graph.h): on the GPU a greedy decode replayed from captured
// graphs equals the eager one bitwise (the same kernels on the same inputs) for every kind that
// can be captured, with and without excluded ids (one graph per exclusion set); on the cpu and
// for the other kinds every step stays eager, with the reason. The cpu tests also cover which
// step may run as a graph, and which graph serves which exclusion set.
#include "models/infer/decode_graph.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>

#include "kernels/core/backend.h"
#include "models/amor/amor_model.h"
#include "models/infer/infer_test_support.h"

namespace amor::model {
namespace {

using testing_infer::make_model;
using testing_infer::StepPathOnGpu;
using testing_infer::tiny;
using testing_infer::tiny_amor;
using testing_infer::tiny_oryx;

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
    m->params().to(Device::CUDA);
    return m->decode_graph_blocker();
  };
  {
    // With the step path switched off on the GPU (AMOR_KV_STEP_PATH=0) attention is not
    // captured, and the reason names the switch; the recurrent kinds are.
    StepPathOnGpu off(false);
    EXPECT_EQ(on_gpu(tiny("mamba2")), "");
    EXPECT_NE(on_gpu(tiny("transformer")).find("AMOR_KV_STEP_PATH=0"), std::string::npos);
    auto amor = make_model(tiny_amor("gdn", 3), DType::F32, 1);
    amor->params().to(Device::CUDA);
    dynamic_cast<AmorModel&>(*amor).set_sparse_inference(false);
    EXPECT_NE(amor->decode_graph_blocker().find("AMOR_KV_STEP_PATH=0"), std::string::npos);
  }
  StepPathOnGpu on(true);
  EXPECT_EQ(on_gpu(tiny("mamba2")), "");
  EXPECT_EQ(on_gpu(tiny("gdn")), "");
  // Attention runs on its KV cache's step path (lengths on the device): capturable.
  EXPECT_EQ(on_gpu(tiny("transformer")), "");
  ModelConfig serial = tiny("serial");
  serial.pattern = "MA";
  EXPECT_EQ(on_gpu(serial), "");
  serial.pattern = "MG";
  EXPECT_EQ(on_gpu(serial), "");
  ModelConfig fused = tiny("fused");
  fused.fused_linear = "gdn";
  EXPECT_EQ(on_gpu(fused), "");
  // Oryx decides its modes on the host; AMOR's sparse form reads its firing rows back.
  EXPECT_NE(on_gpu(tiny_oryx("gdn", "attention")).find("Oryx"), std::string::npos);
  auto amor = make_model(tiny_amor("gdn", 3), DType::F32, 1);
  amor->params().to(Device::CUDA);
  auto& am = dynamic_cast<AmorModel&>(*amor);
  am.set_sparse_inference(true);
  EXPECT_NE(amor->decode_graph_blocker().find("sparse"), std::string::npos);
  am.set_sparse_inference(false);
  EXPECT_EQ(amor->decode_graph_blocker(), "");
  am.set_block_observer([](int64_t, const Tensor&, const Tensor&) {});
  EXPECT_NE(amor->decode_graph_blocker().find("observer"), std::string::npos);
}

// How a step runs (decode_step_kind): eagerly when it may not run as a graph or a KV cache has
// no room for its token (the eager step grows it), else as a capture when its exclusion set has
// no graph or the set's graph is not current (a KV cache moved), else as a replay.
TEST(DecodeGraph, StepKindFromRoomAndCurrency) {
  using K = DecodeStepKind;
  EXPECT_EQ(decode_step_kind(true, true, true, true), K::Replay);
  EXPECT_EQ(decode_step_kind(true, true, false, false), K::Capture);
  EXPECT_EQ(decode_step_kind(true, true, true, false), K::Capture);
  EXPECT_EQ(decode_step_kind(true, false, true, true), K::Eager);
  EXPECT_EQ(decode_step_kind(true, false, false, false), K::Eager);
  EXPECT_EQ(decode_step_kind(false, true, true, true), K::Eager);
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

// A step runs as a graph only with graphs on, a capturable model, no targets and after an eager
// step; its exclusion set only picks the graph.
TEST(DecodeGraph, WhichStepsMayRunAsAGraph) {
  EXPECT_TRUE(decode_step_may_graph(true, "", false, 1));
  EXPECT_TRUE(decode_step_may_graph(true, "", false, 7));
  EXPECT_FALSE(decode_step_may_graph(false, "", false, 1));                      // graphs off
  EXPECT_FALSE(decode_step_may_graph(true, "the model is on the cpu", false, 1));  // blocker
  EXPECT_FALSE(decode_step_may_graph(true, "", true, 1));                        // targets
  EXPECT_FALSE(decode_step_may_graph(true, "", false, 0));                       // no eager step yet
}

// Graphs are keyed by the exclusion as a set.
TEST(DecodeGraph, ExclusionKeyIsSortedWithoutRepeats) {
  EXPECT_EQ(exclusion_key({}), std::vector<int32_t>{});
  const std::vector<int32_t> a = {259, 0, 259, 3}, b = {3, 0, 259};
  EXPECT_EQ(exclusion_key(a), (std::vector<int32_t>{0, 3, 259}));
  EXPECT_EQ(exclusion_key(a), exclusion_key(b));
}

// One slot per set; a new set takes a free slot, else the least recently used one (found or
// inserted last longest ago); clear() forgets every set.
TEST(DecodeGraph, SlotsKeepOneGraphPerSetAndReplaceTheLeastRecentlyUsed) {
  const std::vector<int32_t> none = {}, pad = {259}, stop = {0, 2, 259}, other = {7};
  DecodeGraphSlots slots(2);
  EXPECT_FALSE(slots.find(pad).has_value());
  EXPECT_EQ(slots.insert(pad), 0u);
  EXPECT_EQ(slots.find(pad), std::optional<size_t>(0));
  EXPECT_FALSE(slots.find(stop).has_value());
  EXPECT_EQ(slots.insert(stop), 1u);
  EXPECT_EQ(slots.size(), 2u);
  // Used in the order pad, stop, pad: stop is the least recently used.
  EXPECT_EQ(slots.find(pad), std::optional<size_t>(0));
  EXPECT_EQ(slots.insert(other), 1u);
  EXPECT_FALSE(slots.find(stop).has_value());
  EXPECT_EQ(slots.find(other), std::optional<size_t>(1));
  // Now pad is: the empty set replaces it.
  EXPECT_EQ(slots.insert(none), 0u);
  EXPECT_FALSE(slots.find(pad).has_value());
  EXPECT_EQ(slots.find(none), std::optional<size_t>(0));
  EXPECT_EQ(slots.size(), 2u);
  slots.clear();
  EXPECT_EQ(slots.size(), 0u);
  EXPECT_FALSE(slots.find(none).has_value());
  EXPECT_EQ(slots.insert(other), 0u);
  EXPECT_THROW(DecodeGraphSlots(0), Error);
}

// A step with excluded ids and no targets runs LanguageModel::infer_on_device (what a graph
// captures) with the ids on the device; it chooses what the step with targets (the path with the
// losses) chooses, bit for bit on the cpu, for a prompt (T > 1: only the last position skips the
// ids) and a step, for every kind.
TEST(DecodeGraph, ExcludingWithoutTargetsEqualsTheTargetsPath) {
  for (const testing_infer::KindCase& c : testing_infer::all_kinds()) {
    SCOPED_TRACE(c.name);
    auto m = make_model(c.cfg, DType::F32, 21);
    const int64_t B = 2, T = 4, V = m->config().vocab;
    std::unique_ptr<InferenceState> a = m->new_inference_state(B), b = m->new_inference_state(B);
    const Tensor prompt = testing::randint({B, T}, 31, V);
    // Every id the plain prefill predicts at the last positions, and 0: the choice must move.
    const Tensor plain = m->infer(prompt, Tensor(), *m->new_inference_state(B)).predictions;
    std::vector<int32_t> ban = {0};
    for (int64_t r = 0; r < B; ++r) ban.push_back(plain.data<int32_t>()[r * T + T - 1]);
    StepOutput x = m->infer(prompt, Tensor(), *a, ban);
    StepOutput y = m->infer(prompt, Tensor::full<int32_t>({B, T}, -100), *b, ban);
    EXPECT_EQ(testing_infer::mismatches(x.predictions, y.predictions), 0);
    EXPECT_EQ(testing_infer::max_rel_diff(x.entropy, y.entropy), 0.0);
    for (int64_t r = 0; r < B; ++r) {
      const int32_t last = x.predictions.data<int32_t>()[r * T + T - 1];
      EXPECT_EQ(std::count(ban.begin(), ban.end(), last), 0) << "row " << r;
      // Earlier positions keep their plain prediction.
      for (int64_t t = 0; t + 1 < T; ++t)
        EXPECT_EQ(x.predictions.data<int32_t>()[r * T + t], plain.data<int32_t>()[r * T + t]);
    }
    for (int i = 0; i < 3; ++i) {
      const Tensor tok = testing::randint({B, 1}, 40 + uint64_t(i), V);
      x = m->infer(tok, Tensor(), *a, ban);
      y = m->infer(tok, Tensor::full<int32_t>({B, 1}, -100), *b, ban);
      EXPECT_EQ(testing_infer::mismatches(x.predictions, y.predictions), 0) << "step " << i;
      EXPECT_EQ(testing_infer::max_rel_diff(x.entropy, y.entropy), 0.0) << "step " << i;
      EXPECT_EQ(x.n_valid, 0);
      for (int64_t r = 0; r < B; ++r)
        EXPECT_EQ(std::count(ban.begin(), ban.end(), x.predictions.data<int32_t>()[r]), 0);
    }
    EXPECT_EQ(a->length(), T + 3);
    // An id outside the vocabulary is refused before any cache advances.
    const std::vector<int32_t> bad = {0, static_cast<int32_t>(V)};
    const Tensor tok = testing::randint({B, 1}, 50, V);
    EXPECT_THROW(m->infer(tok, Tensor(), *a, bad), Error);
    EXPECT_THROW(m->infer(tok, Tensor::full<int32_t>({B, 1}, -100), *a, bad), Error);
    EXPECT_EQ(a->length(), T + 3);
    x = m->infer(tok, Tensor(), *a, ban);
    y = m->infer(tok, Tensor(), *b, ban);
    EXPECT_EQ(testing_infer::mismatches(x.predictions, y.predictions), 0);
    EXPECT_EQ(testing_infer::max_rel_diff(x.entropy, y.entropy), 0.0);
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
  // AMOR: per step, every block's gates and gate entropies, [K * B]
  std::vector<std::vector<uint8_t>> gates;
  std::vector<std::vector<float>> gate_entropy;
  int64_t graphed = 0;
  int64_t captures = 0;
  int64_t room_fallbacks = 0;
};

// What each step of a greedy decode is given besides its tokens.
struct Schedule {
  std::function<std::vector<int32_t>(int64_t step)> exclude;  // unset: nothing excluded
  int64_t targets_at = -1;  // the step given (random) targets: eager in a graphed session
  int64_t reserve = 0;      // InferenceSession::reserve_tokens before the prefill (0: none)
};

// Prefill a random prompt, then `steps` greedy steps, each fed the previous step's predictions
// (from the host on even steps, straight from the device on odd ones), with the schedule's
// exclusions and targets.
Trace greedy(LanguageModel& m, int64_t B, int64_t steps, bool graphs, const Schedule& plan,
             Device dev = Device::CUDA) {
  InferenceSession s(m, B);
  s.use_graphs(graphs);
  if (plan.reserve > 0) s.reserve_tokens(plan.reserve);
  const int64_t V = m.config().vocab;
  StepOutput out = s.prefill(testing::randint({B, 6}, 77, V).to(dev));
  Tensor pred = out.predictions.to(Device::CPU);
  std::vector<int32_t> next(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) next[size_t(b)] = pred.data<int32_t>()[b * 6 + 5];
  Tensor tok = Tensor::from_vector<int32_t>({B}, next);
  Trace t;
  for (int64_t i = 0; i < steps; ++i) {
    const std::vector<int32_t> ban = plan.exclude ? plan.exclude(i) : std::vector<int32_t>{};
    const Tensor targets = i == plan.targets_at ? testing::randint({B}, 90 + uint64_t(i), V) : Tensor();
    out = s.step(tok, targets, ban);
    t.graphed += s.last_step_graphed();
    t.predictions.push_back(out.predictions.to(Device::CPU).to_vector<int32_t>());
    const Tensor e = out.entropy.to(Device::CPU);
    t.entropy.push_back(std::vector<float>(e.data<float>(), e.data<float>() + B));
    std::vector<uint8_t> gates;
    std::vector<float> gate_entropy;
    for (size_t k = 0; k < out.gates.size(); ++k) {
      for (uint8_t g : out.gates[k].to(Device::CPU).to_vector<uint8_t>()) gates.push_back(g);
      const Tensor ge = out.gate_entropy[k].to(Device::CPU);
      gate_entropy.insert(gate_entropy.end(), ge.data<float>(), ge.data<float>() + B);
    }
    t.gates.push_back(gates);
    t.gate_entropy.push_back(gate_entropy);
    for (int32_t p : t.predictions.back())
      EXPECT_EQ(std::count(ban.begin(), ban.end(), p), 0) << "step " << i << " predicted excluded id " << p;
    tok = i % 2 ? out.predictions.view({B}) : out.predictions.to(Device::CPU).view({B});
  }
  t.captures = s.graph_captures();
  t.room_fallbacks = s.graph_room_fallbacks();
  EXPECT_EQ(s.length(), 6 + steps);
  return t;
}

// The ids in [lo, hi) and, as generation always excludes with gpu_tiny's vocab of 260 and the
// byte tokenizer's 259 ids, 259.
std::vector<int32_t> ban_range(int32_t lo, int32_t hi) {
  std::vector<int32_t> v;
  for (int32_t i = lo; i < hi; ++i) v.push_back(i);
  v.push_back(259);
  return v;
}

// A generation's exclusions and more: steps 0-3 E1 (the min_new_tokens phase, here most of the
// vocabulary so that the choice surely moves: only [200, 259) is left), 4-8 E0 = {259} (step 7
// with targets: eager), 9-10 E2 (only [0, 100) left: a third set, re-captured in place of E1,
// the least recently used), 11-13 E1 again (in place of E0; given in another order with a
// repeat: the same set). In a graphed session: step 0 eager, captures at 1, 4, 9 and 11, step 7
// eager, the other steps replayed.
Schedule exclusion_schedule() {
  Schedule p;
  p.exclude = [](int64_t i) -> std::vector<int32_t> {
    if (i <= 3) return ban_range(0, 200);
    if (i <= 8) return {259};
    if (i <= 10) return ban_range(100, 259);
    std::vector<int32_t> e1 = ban_range(0, 200);
    std::reverse(e1.begin(), e1.end());
    e1.push_back(17);
    return e1;
  };
  p.targets_at = 7;
  return p;
}
constexpr int64_t kScheduleSteps = 14;

// Where the schedule's predictions must lie (beyond not being excluded, which greedy() checks).
void expect_in_allowed_ranges(const Trace& t) {
  for (int64_t i = 0; i < int64_t(t.predictions.size()); ++i)
    for (int32_t p : t.predictions[size_t(i)]) {
      if (i <= 3 || i >= 11) EXPECT_TRUE(p >= 200 && p < 259) << "step " << i << ": " << p;
      if (i == 9 || i == 10) EXPECT_TRUE(p >= 0 && p < 100) << "step " << i << ": " << p;
    }
}

void expect_bitwise_equal(const Trace& graphed, const Trace& eager, int64_t B) {
  ASSERT_EQ(graphed.predictions.size(), eager.predictions.size());
  for (size_t i = 0; i < eager.predictions.size(); ++i) {
    EXPECT_EQ(graphed.predictions[i], eager.predictions[i]) << "step " << i;
    EXPECT_EQ(std::memcmp(graphed.entropy[i].data(), eager.entropy[i].data(), sizeof(float) * size_t(B)), 0)
        << "step " << i;
    EXPECT_EQ(graphed.gates[i], eager.gates[i]) << "step " << i;
    ASSERT_EQ(graphed.gate_entropy[i].size(), eager.gate_entropy[i].size()) << "step " << i;
    EXPECT_EQ(std::memcmp(graphed.gate_entropy[i].data(), eager.gate_entropy[i].data(),
                          sizeof(float) * eager.gate_entropy[i].size()), 0)
        << "step " << i;
  }
}

TEST(DecodeGraph, GreedyHarnessOnTheCpuIsEager) {
  for (const std::string kind : {"mamba2", "gdn"}) {
    SCOPED_TRACE(kind);
    auto m = make_model(gpu_tiny(kind), DType::F32, 11);
    Schedule step5;  // as the GPU test below
    step5.exclude = [](int64_t i) { return i == 5 ? std::vector<int32_t>{0} : std::vector<int32_t>{}; };
    const Trace eager = greedy(*m, 2, 7, false, step5, Device::CPU);
    const Trace on = greedy(*m, 2, 7, true, step5, Device::CPU);
    EXPECT_EQ(on.graphed, 0);
    EXPECT_EQ(on.captures, 0);
    EXPECT_EQ(on.predictions, eager.predictions);
    EXPECT_EQ(on.entropy, eager.entropy);
    const Trace ex_eager = greedy(*m, 2, kScheduleSteps, false, exclusion_schedule(), Device::CPU);
    const Trace ex_on = greedy(*m, 2, kScheduleSteps, true, exclusion_schedule(), Device::CPU);
    EXPECT_EQ(ex_on.graphed, 0);
    expect_in_allowed_ranges(ex_eager);
    EXPECT_EQ(ex_on.predictions, ex_eager.predictions);
    EXPECT_EQ(ex_on.entropy, ex_eager.entropy);
  }
}

struct GpuCase {
  std::string name;
  ModelConfig cfg;
};
std::vector<GpuCase> gpu_cases() {
  return {{"mamba2", gpu_tiny("mamba2")}, {"gdn", gpu_tiny("gdn")}, {"serial_MG", gpu_tiny("serial", "MG")}};
}

TEST(DecodeGraph, GpuGreedyDecodeEqualsEagerBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  const int64_t steps = 12;
  // Step 5 excludes token 0 (a second graph), step 8 has targets (eager inside a graphed session).
  Schedule plan;
  plan.exclude = [](int64_t i) { return i == 5 ? std::vector<int32_t>{0} : std::vector<int32_t>{}; };
  plan.targets_at = 8;
  for (const GpuCase& c : gpu_cases()) {
    for (DType dt : {DType::BF16, DType::F32}) {
      for (int64_t B : {1, 3}) {
        SCOPED_TRACE(c.name + " " + dtype_name(dt) + " B=" + std::to_string(B));
        auto m = make_model(c.cfg, dt, 11);
        m->params().to(Device::CUDA);
        ASSERT_EQ(m->decode_graph_blocker(), "");
        const Trace eager = greedy(*m, B, steps, false, plan);
        const Trace graphed = greedy(*m, B, steps, true, plan);
        EXPECT_EQ(eager.graphed, 0);
        // Step 0 eager, step 1 captured ({}) and launched, step 5 captured ({0}), step 8 eager
        // (targets), the rest replayed.
        EXPECT_EQ(graphed.graphed, steps - 2);
        EXPECT_EQ(graphed.captures, 2);
        expect_bitwise_equal(graphed, eager, B);
      }
    }
  }
}

// Generation excludes ids at every step (those past the tokenizer's vocabulary; eos and stop ids
// too at first): each step replays the graph of its exclusion set, which equals the eager step
// with that set bit for bit, and never predicts an excluded id (greedy() checks; the sets here
// leave so few ids that the choice moves at almost every step).
TEST(DecodeGraph, GpuExcludingStepsReplayAndEqualEagerBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  for (const GpuCase& c : gpu_cases()) {
    for (DType dt : {DType::BF16, DType::F32}) {
      for (int64_t B : {1, 3}) {
        SCOPED_TRACE(c.name + " " + dtype_name(dt) + " B=" + std::to_string(B));
        auto m = make_model(c.cfg, dt, 13);
        m->params().to(Device::CUDA);
        const Trace eager = greedy(*m, B, kScheduleSteps, false, exclusion_schedule());
        const Trace graphed = greedy(*m, B, kScheduleSteps, true, exclusion_schedule());
        EXPECT_EQ(eager.graphed, 0);
        EXPECT_EQ(graphed.graphed, kScheduleSteps - 2);  // step 0 (first) and 7 (targets) eager
        EXPECT_EQ(graphed.captures, 4);                  // steps 1, 4, 9, 11
        expect_in_allowed_ranges(eager);
        expect_bitwise_equal(graphed, eager, B);
      }
    }
  }
}

// DecodeGraph alone, as InferenceSession drives it: made with ids given in any order (kept sorted
// and on the device; the caller's vector is gone before the replays), its steps equal infer()'s
// with those ids on a twin state, bit for bit.
TEST(DecodeGraph, GpuGraphWithExclusionEqualsInferBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  auto m = make_model(gpu_tiny("gdn"), DType::BF16, 17);
  m->params().to(Device::CUDA);
  const int64_t B = 2, V = 260;
  const std::vector<int32_t> ban = ban_range(0, 200);
  std::unique_ptr<InferenceState> es = m->new_inference_state(B), gs = m->new_inference_state(B);
  const Tensor prompt = testing::randint({B, 5}, 5, V).to(Device::CUDA);
  m->infer(prompt, Tensor(), *es, ban);
  m->infer(prompt, Tensor(), *gs, ban);
  Tensor tok = testing::randint({B, 1}, 6, V);
  m->infer(tok, Tensor(), *es, ban);  // the eager step a capture needs
  m->infer(tok, Tensor(), *gs, ban);
  std::unique_ptr<DecodeGraph> g;
  {
    std::vector<int32_t> shuffled(ban.rbegin(), ban.rend());
    shuffled.push_back(259);
    g = std::make_unique<DecodeGraph>(*m, *gs, shuffled);
  }
  EXPECT_EQ(g->excluded(), ban);
  EXPECT_FALSE(g->captured());
  for (int i = 0; i < 6; ++i) {
    tok = testing::randint({B, 1}, 60 + uint64_t(i), V);
    const StepOutput want = m->infer(tok, Tensor(), *es, ban);
    const StepOutput got = g->step(tok);
    EXPECT_TRUE(g->captured());
    const std::vector<int32_t> p = got.predictions.to(Device::CPU).to_vector<int32_t>();
    EXPECT_EQ(p, want.predictions.to(Device::CPU).to_vector<int32_t>()) << "step " << i;
    for (int32_t id : p) EXPECT_TRUE(id >= 200 && id < 259) << "step " << i << ": " << id;
    const Tensor ge = got.entropy.to(Device::CPU), we = want.entropy.to(Device::CPU);
    EXPECT_EQ(std::memcmp(ge.data<float>(), we.data<float>(), sizeof(float) * size_t(B)), 0) << "step " << i;
  }
  EXPECT_EQ(gs->lengths, es->lengths);
}

// The kinds with attention (issue #18): a transformer, a serial MA model, a fused model and AMOR
// in its dense inference form (over mamba2, 2 blocks, gates calibrated on a forward's entropies;
// the rows fired are printed) run every attention on the KV cache's step path (lengths on the device, one
// launch for every sequence), so their decode steps replay too, bit for bit equal to eager
// decode: predictions, entropies and AMOR's gates and gate entropies, in bf16 (the split-KV
// kernel at head dim 64) and f32 (the SIMT kernel), at batch 1 and 3. With the generation's
// tokens reserved up front no cache regrows: step 0 eager, captures at 1 and 5 (exclusion {0}),
// step 8 eager (targets), the rest replayed. Without the reservation the prefill's 16 rows run
// out at step 10 (6 + 10 tokens held): that step runs eagerly, doubling the storage and dropping
// the graphs, and step 11 captures anew.
std::vector<GpuCase> gpu_attention_cases() {
  ModelConfig fused = gpu_tiny("fused");
  fused.fused_linear = "mamba2";
  ModelConfig amor = gpu_tiny("amor");
  amor.amor.backbone = "mamba2";
  amor.amor.blocks = 3;  // the paper's variants have 1 or 3 (ModelConfig refuses 2)
  return {{"transformer", gpu_tiny("transformer")},
          {"serial_MA", gpu_tiny("serial", "MA")},
          {"fused_mamba2", fused},
          {"amor_dense", amor},
          {"amor_dense_router", amor}};
}

// Every block's router with random weights (the fitted router's shape; replay equals eager
// whatever it predicts).
std::shared_ptr<const EntropyRouter> random_router(const ModelConfig& cfg) {
  auto r = std::make_shared<EntropyRouter>();
  for (int64_t k = 0; k < cfg.amor.blocks; ++k) r->blocks.push_back(router_init(cfg.d_model, 32, 70 + uint64_t(k), 0.5));
  return r;
}

TEST(DecodeGraph, GpuAttentionKindsReplayEqualsEagerBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  StepPathOnGpu on(true);
  const int64_t steps = 12;
  for (const GpuCase& c : gpu_attention_cases()) {
    for (DType dt : {DType::BF16, DType::F32}) {
      for (int64_t B : {1, 3}) {
        for (bool reserve : {true, false}) {
          SCOPED_TRACE(c.name + " " + dtype_name(dt) + " B=" + std::to_string(B) +
                       (reserve ? " reserved" : " growing"));
          auto m = make_model(c.cfg, dt, 19);
          m->params().to(Device::CUDA);
          if (auto* amor = dynamic_cast<AmorModel*>(m.get())) {
            amor->set_sparse_inference(false);
            if (c.name == "amor_dense_router") amor->set_entropy_router(random_router(c.cfg));
            Batch probe{testing::randint({4, 32}, 23, 260).to(Device::CUDA),
                        testing::randint({4, 32}, 24, 260).to(Device::CUDA)};
            testing_infer::calibrate_eval_gates(*amor, probe);
          }
          ASSERT_EQ(m->decode_graph_blocker(), "");
          Schedule plan;
          plan.exclude = [](int64_t i) { return i == 5 ? std::vector<int32_t>{0} : std::vector<int32_t>{}; };
          plan.targets_at = 8;
          plan.reserve = reserve ? 6 + steps : 0;
          const Trace eager = greedy(*m, B, steps, false, plan);
          const Trace graphed = greedy(*m, B, steps, true, plan);
          EXPECT_EQ(eager.graphed, 0);
          EXPECT_EQ(graphed.graphed, reserve ? steps - 2 : steps - 3);
          EXPECT_EQ(graphed.captures, reserve ? 2 : 3);
          EXPECT_EQ(graphed.room_fallbacks, reserve ? 0 : 1);
          expect_bitwise_equal(graphed, eager, B);
          if (c.cfg.kind == "amor") {
            // How many rows fired (a greedy decode of a random model may settle into a loop of one
            // entropy that no threshold splits; replay equals eager whatever fires).
            int64_t fired = 0, total = 0;
            for (const auto& g : eager.gates)
              for (uint8_t x : g) fired += x, ++total;
            EXPECT_GT(total, 0);
            std::printf("[amor_dense] %s B=%lld %s: %lld of %lld gate rows fired\n", dtype_name(dt),
                        static_cast<long long>(B), reserve ? "reserved" : "growing",
                        static_cast<long long>(fired), static_cast<long long>(total));
          }
        }
      }
    }
  }
}

// A joined session (sequences prefilled apart: every KV cache holds sequences of different
// lengths, so RoPE and the attention read per-sequence lengths on the device) replays too, bit
// for bit equal to the same joined session decoding eagerly; a reserve_tokens after the capture
// moves the storage, and the next step captures anew instead of replaying the stale graph.
TEST(DecodeGraph, GpuJoinedAttentionSessionReplaysBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  StepPathOnGpu on(true);
  for (const GpuCase& c : gpu_attention_cases()) {
    if (c.cfg.kind == "amor") continue;  // its gates: GpuAttentionKindsReplayEqualsEagerBitwise
    for (DType dt : {DType::BF16, DType::F32}) {
      SCOPED_TRACE(c.name + " " + dtype_name(dt));
      auto m = make_model(c.cfg, dt, 29);
      m->params().to(Device::CUDA);
      auto run = [&](bool graphs) {
        std::vector<std::unique_ptr<InferenceSession>> parts;
        const std::vector<int64_t> lens = {5, 9, 2};
        for (size_t p = 0; p < lens.size(); ++p) {
          parts.push_back(std::make_unique<InferenceSession>(*m, p == 1 ? 2 : 1));
          parts.back()->use_graphs(false);
          parts.back()->prefill(testing::randint({p == 1 ? 2 : 1, lens[p]}, 40 + p, 260).to(Device::CUDA));
        }
        parts.front()->use_graphs(graphs);
        std::unique_ptr<InferenceSession> s = InferenceSession::join(std::move(parts));
        s->reserve_tokens(30);
        Trace t;
        for (int i = 0; i < 8; ++i) {
          if (i == 4) s->reserve_tokens(40);  // moves every KV cache's storage
          StepOutput out = s->step(testing::randint({4}, 60 + uint64_t(i), 260));
          t.graphed += s->last_step_graphed();
          t.predictions.push_back(out.predictions.to(Device::CPU).to_vector<int32_t>());
          const Tensor e = out.entropy.to(Device::CPU);
          t.entropy.push_back(std::vector<float>(e.data<float>(), e.data<float>() + 4));
          t.gates.emplace_back();
          t.gate_entropy.emplace_back();
        }
        t.captures = s->graph_captures();
        EXPECT_EQ(s->length(1), 9 + 8);
        return t;
      };
      const Trace eager = run(false), graphed = run(true);
      EXPECT_EQ(graphed.graphed, 7);   // step 0 eager
      EXPECT_EQ(graphed.captures, 2);  // steps 1 and 4 (the storage moved)
      expect_bitwise_equal(graphed, eager, 4);
    }
  }
}

// The graph's memory comes from a private pool that is given back with the graph.
TEST(DecodeGraph, GpuPoolReleasedWithTheSession) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  auto m = make_model(gpu_tiny("mamba2"), DType::BF16, 5);
  m->params().to(Device::CUDA);
  {
    InferenceSession s(*m, 2);
    s.use_graphs(true);
    s.prefill(testing::randint({2, 4}, 3, 260).to(Device::CUDA));
    for (int i = 0; i < 4; ++i) s.step(testing::randint({2}, 40 + uint64_t(i), 260));
    EXPECT_TRUE(s.last_step_graphed());
    EXPECT_GT(allocator(Device::CUDA).stats().bytes_in_pools, 0u);
    // A second graph (another exclusion set), and a third in place of the first.
    const std::vector<int32_t> pad = {259}, stop = {0, 259};
    for (int i = 0; i < 2; ++i) s.step(testing::randint({2}, 50 + uint64_t(i), 260), Tensor(), pad);
    for (int i = 0; i < 2; ++i) s.step(testing::randint({2}, 60 + uint64_t(i), 260), Tensor(), stop);
    EXPECT_TRUE(s.last_step_graphed());
    EXPECT_EQ(s.graph_captures(), 3);
  }
  EXPECT_EQ(allocator(Device::CUDA).stats().bytes_in_pools, 0u);
}

}  // namespace
}  // namespace amor::model

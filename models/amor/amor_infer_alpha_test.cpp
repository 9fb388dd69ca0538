// AmorBlock::infer keeps alpha = sigmoid(max(raw_alpha, -1)) between calls (on the GPU computing
// it meant a copy of raw_alpha back to the host, and the result up, per block per decode step) and
// recomputes it when raw_alpha changes, which Param::version tells. A model decoded before and
// after its raw alphas change (by a weights load, or in place as the optimizer writes) decodes
// afterwards bit for bit as a fresh model holding the new weights; a write that skips the version
// is an error on the cpu, never a decode with the old alpha. Decodes run at batch 3 with mixed
// gates, so steps where a block fires on no row, some rows and every row all occur.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <filesystem>

#include "models/infer/infer_test_support.h"
#include "models/io/model_weights.h"

namespace amor::model {
namespace {

using namespace testing_infer;

constexpr int64_t kB = 3, kT = 12, kPrompt = 3;

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// A prefill of kPrompt tokens, then one step per token: each call's outputs.
std::vector<StepOutput> decode_all(LanguageModel& m, const Batch& batch) {
  InferenceSession s(m, kB);
  std::vector<StepOutput> out;
  out.push_back(s.prefill(columns(batch.tokens, 0, kPrompt), columns(batch.targets, 0, kPrompt)));
  for (int64_t t = kPrompt; t < kT; ++t)
    out.push_back(s.step(columns(batch.tokens, t, 1).view({kB}), columns(batch.targets, t, 1).view({kB})));
  return out;
}

bool same(const std::vector<StepOutput>& a, const std::vector<StepOutput>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const StepOutput &x = a[i], &y = b[i];
    if (!bitwise_equal(x.token_loss, y.token_loss) || !bitwise_equal(x.entropy, y.entropy) ||
        !bitwise_equal(x.predictions, y.predictions) || x.gates.size() != y.gates.size() ||
        x.tau != y.tau)
      return false;
    for (size_t k = 0; k < x.gates.size(); ++k)
      if (!bitwise_equal(x.gates[k], y.gates[k]) || !bitwise_equal(x.gate_entropy[k], y.gate_entropy[k]))
        return false;
  }
  return true;
}

// Raw alphas other than make_model's, some below the clamp at -1.
void new_alphas(ParamStore& ps, uint64_t seed) {
  std::vector<Tensor> v;
  for (auto& p : ps.params())
    if (p->name.size() > 6 && p->name.compare(p->name.size() - 6, 6, ".alpha") == 0) {
      Tensor r = testing::randn(p->value.shape(), seed++, DType::F64, 1.5);
      for (int64_t c = 0; c < r.numel(); ++c) p->value.set_item(c, r.item(c));
      ++p->version;  // what every write of a parameter does (param_store.h)
    }
}

struct Case {
  ModelConfig cfg = tiny_amor("mamba2", 3);
  DType dtype;
  uint64_t seed = 41;
  Batch batch{testing::randint({kB, kT}, 42, 23), testing::randint({kB, kT}, 43, 23)};
  std::vector<AmorGateState> gates;

  explicit Case(DType dt) : dtype(dt) {}
  // make_model's weights, with the gates calibrated once (on the first model) and then shared.
  std::unique_ptr<LanguageModel> model() {
    std::unique_ptr<LanguageModel> m = make_model(cfg, dtype, seed);
    auto& a = dynamic_cast<AmorModel&>(*m);
    if (gates.empty()) {
      EXPECT_GT(calibrate_eval_gates(a, batch), 1e-6);
      gates = a.gate_state();
    }
    a.set_gate_state(gates);
    return m;
  }
};

// Counts, over a decode's steps (not the prefill) and blocks, the steps where a block fired on no
// row, on some and on all kB.
std::array<int, 3> firing_kinds(const std::vector<StepOutput>& d) {
  std::array<int, 3> n{0, 0, 0};
  for (size_t i = 1; i < d.size(); ++i)
    for (const Tensor& g : d[i].gates) {
      int64_t f = 0;
      for (uint8_t x : g.to_vector<uint8_t>()) f += x;
      ++n[f == 0 ? 0 : f < kB ? 1 : 2];
    }
  return n;
}

TEST(AmorInferAlpha, WeightsLoadedAfterADecodeAreUsed) {
  for (DType dt : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    Case c(dt);
    auto m = c.model();
    const std::vector<StepOutput> before = decode_all(*m, c.batch);
    const std::array<int, 3> kinds = firing_kinds(before);
    EXPECT_GT(kinds[0], 0);  // steps with nothing firing (no delta) ...
    EXPECT_GT(kinds[1], 0);  // ... some rows ...
    EXPECT_GT(kinds[2], 0);  // ... and every row
    EXPECT_TRUE(same(decode_all(*m, c.batch), before));  // the kept alpha: the same bits

    auto other = c.model();
    new_alphas(other->params(), 7);
    const std::string path =
        (std::filesystem::temp_directory_path() / "amor_infer_alpha_test.safetensors").string();
    save_model_weights(path, other->params(), c.cfg, "test");
    load_model_weights(path, m->params());  // in place: the same storage, other values
    std::filesystem::remove(path);

    const std::vector<StepOutput> after = decode_all(*m, c.batch);
    EXPECT_FALSE(same(after, before));  // the new alphas change what fires and what it adds
    EXPECT_TRUE(same(after, decode_all(*other, c.batch)));
  }
}

TEST(AmorInferAlpha, InPlaceWritesWithTheVersionAreUsed) {
  for (DType dt : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    Case c(dt);
    auto m = c.model();
    const std::vector<StepOutput> before = decode_all(*m, c.batch);
    new_alphas(m->params(), 11);  // as the optimizer step writes them (Fsdp::step)
    auto fresh = c.model();
    new_alphas(fresh->params(), 11);
    const std::vector<StepOutput> after = decode_all(*m, c.batch);
    EXPECT_FALSE(same(after, before));
    EXPECT_TRUE(same(after, decode_all(*fresh, c.batch)));
    // A ParamStore::initialize rewrites them too.
    m->params().initialize(c.seed);
    testing_amor::perturb_amor_weights(m->params(), c.seed + 1);
    EXPECT_TRUE(same(decode_all(*m, c.batch), before));
  }
}

TEST(AmorInferAlpha, AWriteWithoutTheVersionIsAnError) {
  Case c(DType::F64);
  auto m = c.model();
  decode_all(*m, c.batch);
  Param* a = m->params().find("amor.1.alpha");
  ASSERT_NE(a, nullptr);
  a->value.set_item(2, a->value.item(2) + 0.5);  // no ++version
  try {
    decode_all(*m, c.batch);
    ADD_FAILURE() << "decoded with a changed raw alpha and no new version";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("amor.1.alpha changed without its Param::version"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace amor::model

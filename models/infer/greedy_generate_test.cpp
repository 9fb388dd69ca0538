// greedy_generate: the generated ids are the argmax of the full forward re-run on the growing
// sequence; eos, the stop predicate and max_new_tokens end a generation where they should;
// prompts of different lengths batched together give the results of one prompt at a time.
#include <gtest/gtest.h>

#include "models/infer/greedy_generate.h"
#include "models/infer/infer_test_support.h"

namespace amor::model {
namespace {

using namespace testing_infer;

std::vector<std::vector<int32_t>> prompts(int64_t vocab, uint64_t seed) {
  std::vector<std::vector<int32_t>> p;
  for (int64_t len : {3, 5, 3, 7, 1, 5, 3}) {
    Tensor t = amor::testing::randint({len}, seed++, vocab);
    p.push_back(t.to_vector<int32_t>());
  }
  return p;
}

std::vector<KindCase> kinds() {
  return {{"transformer", tiny("transformer")},
          {"mamba2", tiny("mamba2")},
          {"serial_GA", [] { ModelConfig c = tiny("serial"); c.pattern = "GA"; return c; }()},
          {"amor_gdn_K3", tiny_amor("gdn", 3)},
          {"oryx_gdn_pdla", tiny_oryx("gdn", "prefill_linear_decode_attention")}};
}

TEST(GreedyGenerate, IdsAreTheArgmaxOfTheFullForward) {
  for (const KindCase& kc : kinds()) {
    SCOPED_TRACE(kc.name);
    std::unique_ptr<LanguageModel> model = make_model(kc.cfg, DType::F64, 41);
    GenerateOptions opt;
    opt.max_new_tokens = 6;
    opt.batch_size = 3;
    auto ps = prompts(kc.cfg.vocab, 50);
    std::vector<Generation> gen = greedy_generate(*model, ps, opt);
    ASSERT_EQ(gen.size(), ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      const int64_t P = static_cast<int64_t>(ps[i].size());
      ASSERT_EQ(gen[i].tokens.size(), 6u);
      EXPECT_EQ(gen[i].stop_reason, "max_new_tokens");
      // One record per token read: the prompt and every generated token but the last.
      EXPECT_EQ(gen[i].records.entropy.size(), static_cast<size_t>(P + 5));
      std::vector<int32_t> seq = ps[i];
      for (size_t j = 0; j < gen[i].tokens.size(); ++j) {
        const int64_t n = static_cast<int64_t>(seq.size());
        Batch b{Tensor::from_vector<int32_t>({1, n}, seq), Tensor::full<int32_t>({1, n}, -100)};
        if (kc.cfg.kind == "oryx") b.modes = oryx_inference_modes(kc.cfg.oryx, 1, n, P);
        StepOutput ref = model->forward(b, false);
        EXPECT_EQ(gen[i].tokens[j], ref.predictions.data<int32_t>()[n - 1]) << "prompt " << i << " token " << j;
        EXPECT_NEAR(gen[i].records.entropy[static_cast<size_t>(n - 1)], ref.entropy.item(n - 1), 1e-10);
        seq.push_back(gen[i].tokens[j]);
      }
    }
  }
}

TEST(GreedyGenerate, BatchedEqualsOneAtATime) {
  for (const KindCase& kc : kinds()) {
    SCOPED_TRACE(kc.name);
    std::unique_ptr<LanguageModel> model = make_model(kc.cfg, DType::F64, 43);
    auto ps = prompts(kc.cfg.vocab, 60);
    GenerateOptions opt;
    opt.max_new_tokens = 5;
    opt.stop = [](const std::vector<int32_t>& g) { return g.size() >= 2 && g.back() == g[g.size() - 2]; };
    opt.batch_size = 1;
    std::vector<Generation> one = greedy_generate(*model, ps, opt);
    opt.batch_size = 4;
    std::vector<Generation> batched = greedy_generate(*model, ps, opt);
    for (size_t i = 0; i < ps.size(); ++i) {
      EXPECT_EQ(batched[i].tokens, one[i].tokens) << i;
      EXPECT_EQ(batched[i].stop_reason, one[i].stop_reason) << i;
      ASSERT_EQ(batched[i].records.entropy.size(), one[i].records.entropy.size()) << i;
      for (size_t t = 0; t < one[i].records.entropy.size(); ++t) {
        EXPECT_NEAR(batched[i].records.entropy[t], one[i].records.entropy[t], 1e-12);
        EXPECT_NEAR(batched[i].records.loss[t], one[i].records.loss[t], 1e-12);
      }
      EXPECT_EQ(batched[i].records.gates, one[i].records.gates) << i;
      EXPECT_EQ(batched[i].records.modes, one[i].records.modes) << i;
    }
  }
}

TEST(GreedyGenerate, EosStopAndLimit) {
  std::unique_ptr<LanguageModel> model = make_model(tiny("gdn"), DType::F64, 47);
  auto ps = prompts(23, 70);
  GenerateOptions opt;
  opt.max_new_tokens = 8;
  std::vector<Generation> free_run = greedy_generate(*model, ps, opt);

  // eos: the third token of prompt 1's free run ends its generation there (or earlier, if the
  // same id came before).
  opt.eos = free_run[1].tokens[2];
  std::vector<Generation> eos = greedy_generate(*model, ps, opt);
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto& f = free_run[i].tokens;
    auto it = std::find(f.begin(), f.end(), opt.eos);
    size_t expect = it == f.end() ? f.size() : static_cast<size_t>(it - f.begin()) + 1;
    ASSERT_EQ(eos[i].tokens.size(), expect) << i;
    EXPECT_TRUE(std::equal(eos[i].tokens.begin(), eos[i].tokens.end(), f.begin())) << i;
    EXPECT_EQ(eos[i].stop_reason, it == f.end() ? "max_new_tokens" : "eos") << i;
  }
  EXPECT_LE(eos[1].tokens.size(), 3u);

  // The stop predicate sees the ids so far; the token that stops is kept.
  opt.eos = -1;
  opt.stop = [](const std::vector<int32_t>& g) { return g.size() == 2; };
  for (const Generation& g : greedy_generate(*model, ps, opt)) {
    EXPECT_EQ(g.tokens.size(), 2u);
    EXPECT_EQ(g.stop_reason, "stop");
  }

  // max_new_tokens 0: only the prompt's records.
  opt.stop = nullptr;
  opt.max_new_tokens = 0;
  std::vector<Generation> none = greedy_generate(*model, ps, opt);
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_TRUE(none[i].tokens.empty());
    EXPECT_EQ(none[i].records.entropy.size(), ps[i].size());
  }
  EXPECT_THROW(greedy_generate(*model, {{}}, opt), Error);
}

}  // namespace
}  // namespace amor::model

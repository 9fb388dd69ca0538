// greedy_generate: the generated ids are the argmax of the full forward re-run on the growing
// sequence; eos, the stop predicate and max_new_tokens end a generation where they should;
// prompts of different lengths batched together give the results of one prompt at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

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

// The same tokens and stop reason, and the same records (entropies and losses to 1e-12 in f64;
// predictions, gates and modes exactly).
void expect_same_generation(const Generation& got, const Generation& want) {
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.stop_reason, want.stop_reason);
  ASSERT_EQ(got.records.entropy.size(), want.records.entropy.size());
  for (size_t t = 0; t < want.records.entropy.size(); ++t) {
    EXPECT_NEAR(got.records.entropy[t], want.records.entropy[t], 1e-12);
    EXPECT_NEAR(got.records.loss[t], want.records.loss[t], 1e-12);
  }
  EXPECT_EQ(got.records.predictions, want.records.predictions);
  EXPECT_EQ(got.records.gates, want.records.gates);
  EXPECT_EQ(got.records.modes, want.records.modes);
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
      SCOPED_TRACE("prompt " + std::to_string(i));
      expect_same_generation(batched[i], one[i]);
      // Batches by length, whatever the lengths within one: {1, 3, 3, 3} and {5, 5, 7}.
      const bool first = ps[i].size() <= 3;
      EXPECT_EQ(batched[i].batch_index, first ? 0 : 1) << i;
      EXPECT_EQ(batched[i].group_size, first ? 4 : 3) << i;
    }
  }
}

// Prompts prefilled in calls of 2 tokens (and with min_new_tokens, whose exclusion applies to the
// last call's last prediction only) give what one call per prompt gives.
TEST(GreedyGenerate, ChunkedPrefillEqualsOneCall) {
  for (const KindCase& kc : kinds()) {
    SCOPED_TRACE(kc.name);
    std::unique_ptr<LanguageModel> model = make_model(kc.cfg, DType::F64, 47);
    auto ps = prompts(kc.cfg.vocab, 70);
    GenerateOptions opt;
    opt.max_new_tokens = 4;
    opt.batch_size = 3;
    opt.eos = 0;
    opt.min_new_tokens = 1;
    const std::vector<Generation> whole = greedy_generate(*model, ps, opt);
    opt.prefill_chunk = 2;
    const std::vector<Generation> chunked = greedy_generate(*model, ps, opt);
    for (size_t i = 0; i < ps.size(); ++i) {
      SCOPED_TRACE("prompt " + std::to_string(i));
      expect_same_generation(chunked[i], whole[i]);
    }
  }
  GenerateOptions bad;
  bad.prefill_chunk = -1;
  std::unique_ptr<LanguageModel> model = make_model(tiny("mamba2"), DType::F64, 1);
  EXPECT_THROW(greedy_generate(*model, {{1, 2}}, bad), Error);
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

// The ids ordered from most to least likely after reading seq (ties by id): the full forward
// scores every id v as the target of seq's last position (one row per v), so this is computed
// from the losses, independently of the argmax kernel.
std::vector<int32_t> ranking(LanguageModel& model, const std::vector<int32_t>& seq) {
  const int64_t V = model.config().vocab, n = static_cast<int64_t>(seq.size());
  std::vector<int32_t> tokens, targets;
  for (int64_t v = 0; v < V; ++v) {
    tokens.insert(tokens.end(), seq.begin(), seq.end());
    for (int64_t t = 0; t < n; ++t) targets.push_back(t + 1 < n ? -100 : static_cast<int32_t>(v));
  }
  StepOutput out = model.forward(
      {Tensor::from_vector<int32_t>({V, n}, tokens), Tensor::from_vector<int32_t>({V, n}, targets), {}, {}},
      false);
  std::vector<int32_t> ids(static_cast<size_t>(V));
  for (int32_t v = 0; v < V; ++v) ids[static_cast<size_t>(v)] = v;
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return out.token_loss.item(a * n + n - 1) < out.token_loss.item(b * n + n - 1);
  });
  return ids;
}

// Stop ids end a generation on the token itself; min_new_tokens makes the first tokens the best
// id that is neither eos nor a stop id (Hugging Face's min_new_tokens with an eos_token_id list,
// as LongBench's samsum generation), and the rest follows greedily from there.
TEST(GreedyGenerate, StopIdsAndMinNewTokens) {
  for (const KindCase& kc : kinds()) {
    SCOPED_TRACE(kc.name);
    if (kc.cfg.kind == "oryx") continue;  // its decode modes depend on the prefill: no full-forward reference here
    std::unique_ptr<LanguageModel> model = make_model(kc.cfg, DType::F64, 53);
    auto ps = prompts(kc.cfg.vocab, 80);
    GenerateOptions opt;
    opt.max_new_tokens = 6;
    opt.batch_size = 3;
    std::vector<Generation> free_run = greedy_generate(*model, ps, opt);

    // Stop ids: the third token of prompt 1's free run (and an id no prompt generates... or does)
    // ends each generation at its first occurrence, kept, with stop_reason "stop_id".
    opt.stop_ids = {free_run[1].tokens[2]};
    std::vector<Generation> stopped = greedy_generate(*model, ps, opt);
    for (size_t i = 0; i < ps.size(); ++i) {
      const auto& f = free_run[i].tokens;
      auto it = std::find(f.begin(), f.end(), opt.stop_ids[0]);
      const size_t expect = it == f.end() ? f.size() : static_cast<size_t>(it - f.begin()) + 1;
      EXPECT_EQ(stopped[i].tokens, std::vector<int32_t>(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(expect))) << i;
      EXPECT_EQ(stopped[i].stop_reason, it == f.end() ? "max_new_tokens" : "stop_id") << i;
    }
    EXPECT_LE(stopped[1].tokens.size(), 3u);

    // min_new_tokens = 1 with eos = prompt 0's first free token and stop id = prompt 2's: no
    // generation starts with either; the first token is the best other id (by the losses), and
    // after it the generation is greedy (each token the argmax of the full forward) until an end.
    for (int64_t min_new : {1, 2}) {
      SCOPED_TRACE("min_new_tokens " + std::to_string(min_new));
      opt.eos = free_run[0].tokens[0];
      opt.stop_ids = {free_run[2].tokens[0], free_run[2].tokens[0]};
      opt.min_new_tokens = min_new;
      std::vector<Generation> gen = greedy_generate(*model, ps, opt);
      int replaced = 0;
      for (size_t i = 0; i < ps.size(); ++i) {
        std::vector<int32_t> seq = ps[i];
        ASSERT_FALSE(gen[i].tokens.empty());
        for (size_t j = 0; j < gen[i].tokens.size(); ++j) {
          const std::vector<int32_t> rank = ranking(*model, seq);
          int32_t want = rank[0];
          if (static_cast<int64_t>(j) < min_new) {
            size_t k = 0;
            while (rank[k] == opt.eos || rank[k] == opt.stop_ids[0]) ++k;
            want = rank[k];
            replaced += k > 0;
            EXPECT_NE(gen[i].tokens[j], opt.eos);
            EXPECT_NE(gen[i].tokens[j], opt.stop_ids[0]);
          }
          EXPECT_EQ(gen[i].tokens[j], want) << "prompt " << i << " token " << j;
          // The record of the position that produced the token holds it.
          EXPECT_EQ(gen[i].records.predictions[seq.size() - 1], want) << "prompt " << i << " token " << j;
          seq.push_back(gen[i].tokens[j]);
        }
        const int32_t last = gen[i].tokens.back();
        EXPECT_EQ(gen[i].stop_reason, last == opt.eos ? "eos"
                                      : last == opt.stop_ids[0] ? "stop_id"
                                                                : "max_new_tokens") << i;
        if (gen[i].stop_reason != "max_new_tokens")
          EXPECT_GT(static_cast<int64_t>(gen[i].tokens.size()), min_new) << i;
      }
      EXPECT_GE(replaced, 2);  // prompts 0 and 2 at least had their first token replaced
      // Batched equals one at a time with the mask too.
      opt.batch_size = 1;
      std::vector<Generation> one = greedy_generate(*model, ps, opt);
      for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(one[i].tokens, gen[i].tokens) << i;
      opt.batch_size = 3;
    }
    opt.min_new_tokens = -1;
    EXPECT_THROW(greedy_generate(*model, ps, opt), Error);
  }
}

// decodable_ids: ids at or past it (a vocabulary padded past the tokenizer's) are never generated;
// each token is the best id below it (by the full forward's ranking), also while min_new_tokens
// masks the end ids. The limit is taken just above the smallest id the free run generates, so at
// least one free token is out of range and has to be replaced.
TEST(GreedyGenerate, NeverAnIdPastTheDecodableOnes) {
  for (const KindCase& kc : kinds()) {
    SCOPED_TRACE(kc.name);
    if (kc.cfg.kind == "oryx") continue;  // its decode modes depend on the prefill: no full-forward reference here
    std::unique_ptr<LanguageModel> model = make_model(kc.cfg, DType::F64, 61);
    auto ps = prompts(kc.cfg.vocab, 90);
    GenerateOptions opt;
    opt.max_new_tokens = 5;
    opt.batch_size = 3;
    std::vector<Generation> free_run = greedy_generate(*model, ps, opt);
    int32_t lowest = std::numeric_limits<int32_t>::max(), highest = 0;
    for (const auto& g : free_run) {
      for (int32_t t : g.tokens) {
        lowest = std::min(lowest, t);
        highest = std::max(highest, t);
      }
    }
    ASSERT_LT(lowest, highest);  // else no limit would leave some ids and remove others
    opt.decodable_ids = lowest + 1;
    for (int64_t min_new : {0, 1}) {
      SCOPED_TRACE("min_new_tokens " + std::to_string(min_new));
      opt.min_new_tokens = min_new;
      opt.eos = min_new > 0 ? lowest : -1;  // with the mask, only ids below `lowest` remain first
      if (min_new > 0 && lowest == 0) continue;
      std::vector<Generation> gen = greedy_generate(*model, ps, opt);
      int replaced = 0;
      for (size_t i = 0; i < ps.size(); ++i) {
        std::vector<int32_t> seq = ps[i];
        for (size_t j = 0; j < gen[i].tokens.size(); ++j) {
          const std::vector<int32_t> rank = ranking(*model, seq);
          size_t k = 0;
          while (rank[k] >= opt.decodable_ids || (static_cast<int64_t>(j) < min_new && rank[k] == opt.eos)) ++k;
          replaced += k > 0;
          EXPECT_EQ(gen[i].tokens[j], rank[k]) << "prompt " << i << " token " << j;
          EXPECT_LT(gen[i].tokens[j], opt.decodable_ids);
          seq.push_back(gen[i].tokens[j]);
          if (gen[i].tokens[j] == opt.eos) break;
        }
      }
      EXPECT_GE(replaced, 1);
    }
  }
}

}  // namespace
}  // namespace amor::model

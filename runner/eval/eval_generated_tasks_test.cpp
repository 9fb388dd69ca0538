// NIAH / passkey (string_match_all over a length x depth grid), MQAR (Zoology accuracy) and
// perplexity by position, with fake models whose answers are fixed rules; expected numbers by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "data/tokenizer/byte_tokenizer.h"
#include "kernels/core/error.h"
#include "runner/eval/eval_tasks.h"
#include "runner/eval/fake_eval_model.h"

namespace amor::eval {
namespace {

using testing::FakeEvalModel;

std::string fixture(const std::string& name) {
  return std::string(AMOR_SOURCE_DIR) + "/tests/fixtures/eval/" + name;
}

// Answers with the digits after the first "is: " of the context (the first needle's value).
std::string first_needle_value(const std::string& context) {
  const size_t at = context.find("is: ");
  if (at == std::string::npos) return "none";
  size_t end = at + 4;
  while (end < context.size() && std::isdigit(static_cast<unsigned char>(context[end]))) ++end;
  return " " + context.substr(at + 4, end - at - 4) + ".";
}

TEST(EvalGeneratedTasks, NiahSingleScoresEveryCell) {
  FakeEvalModel model;
  model.responder = first_needle_value;
  TaskSpec spec{.name = "niah_single_1"};
  spec.lengths = {700, 1000};
  spec.depths = {0, 50, 100};
  const TaskResult r = run_task(spec, model);
  ASSERT_EQ(model.gen_requests.size(), 6u);
  EXPECT_EQ(r.metrics.at("score"), 1.0);
  EXPECT_EQ(r.per_example.at("depth"), (std::vector<double>{0, 0.5, 1, 0, 0.5, 1}));
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(model.gen_requests[i].max_new_tokens, 128);  // RULER's niah tokens_to_generate
    EXPECT_EQ(r.per_example.at("length")[i], static_cast<double>(model.gen_requests[i].context.size()));
    EXPECT_LE(r.per_example.at("length")[i] + 128, i < 3 ? 700 : 1000);
  }
}

TEST(EvalGeneratedTasks, NiahMultivalueFindsOneOfFourValues) {
  FakeEvalModel model;
  model.responder = first_needle_value;  // names only the first of the key's 4 values
  TaskSpec spec{.name = "niah_multivalue"};
  spec.lengths = {1000};
  spec.depths = {0, 100};
  spec.essay_path = fixture("essay.txt");
  const TaskResult r = run_task(spec, model);
  EXPECT_EQ(r.per_example.at("score"), (std::vector<double>{0.25, 0.25}));
  EXPECT_EQ(r.metrics.at("score"), 0.25);
}

TEST(EvalGeneratedTasks, PasskeyScoresZeroForAWrongAnswer) {
  FakeEvalModel model;
  model.responder = [](const std::string& context) {
    const size_t at = context.find("The pass key is ");
    return context.substr(at + 16, context.find('.', at) - at - 16);
  };
  TaskSpec spec{.name = "passkey"};
  spec.lengths = {400};
  spec.depths = {0, 100};
  EXPECT_EQ(run_task(spec, model).metrics.at("score"), 1.0);
  model.responder = [](const std::string&) { return std::string("0"); };  // keys are >= 1
  EXPECT_EQ(run_task(spec, model).metrics.at("score"), 0.0);
}

TEST(EvalGeneratedTasks, MqarAccuracyOverQueryPositions) {
  FakeEvalModel model;
  // Recall through the key's first occurrence (in the key-value prefix); wrong on odd examples.
  model.teacher_rule = [](const TeacherForcedRequest& r, size_t index) {
    TeacherForcedResult out;
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      int32_t pred = 0;
      for (size_t s = 0; s + 1 <= t; ++s)
        if (r.tokens[s] == r.tokens[t]) {
          pred = r.tokens[s + 1];
          break;
        }
      out.argmax.push_back(index % 2 ? pred + 1 : pred);
      out.nll.push_back(0);
    }
    return out;
  };
  TaskSpec spec{.name = "mqar"};
  spec.mqar_vocab_size = 64;
  spec.mqar_seq_len = 32;
  spec.mqar_kv_pairs = 4;
  spec.mqar_examples = 5;
  const TaskResult r = run_task(spec, model);
  ASSERT_EQ(model.teacher_requests.size(), 5u);
  for (const auto& q : model.teacher_requests) {
    ASSERT_EQ(q.tokens.size(), 32u);
    EXPECT_EQ(std::count_if(q.targets.begin(), q.targets.end(), [](int32_t y) { return y >= 0; }), 4);
  }
  // 4 queries each; examples 0, 2, 4 right: 12 / 20.
  EXPECT_EQ(r.per_example.at("acc"), (std::vector<double>{1, 0, 1, 0, 1}));
  EXPECT_DOUBLE_EQ(r.metrics.at("acc"), 0.6);
}

TEST(EvalGeneratedTasks, PplByPositionBuckets) {
  FakeEvalModel model;
  model.teacher_rule = [](const TeacherForcedRequest& r, size_t index) {
    TeacherForcedResult out;
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      out.nll.push_back(0.001 * static_cast<double>(t) + 0.1 * static_cast<double>(index));
      out.argmax.push_back(0);
    }
    return out;
  };
  TaskSpec spec{.name = "ppl_by_position", .path = fixture("ppl.txt")};
  spec.seq_len = 10;
  spec.bucket_size = 4;
  spec.num_sequences = 2;
  const TaskResult r = run_task(spec, model);
  ASSERT_EQ(model.teacher_requests.size(), 2u);
  ByteTokenizer byte;
  EXPECT_EQ(byte.decode(model.teacher_requests[1].tokens), "klmnopqrst");
  EXPECT_EQ(byte.decode(model.teacher_requests[1].targets), "lmnopqrstu");
  // Bucket means over both sequences: 0.001 * (mean t) + 0.05.
  EXPECT_EQ(r.per_example.at("position"), (std::vector<double>{0, 4, 8}));
  const double loss[3] = {0.0015 + 0.05, 0.0055 + 0.05, 0.0085 + 0.05};
  for (int b = 0; b < 3; ++b) EXPECT_NEAR(r.per_example.at("loss")[b], loss[b], 1e-12);
  EXPECT_NEAR(r.metrics.at("ppl_0_4"), std::exp(loss[0]), 1e-12);
  EXPECT_NEAR(r.metrics.at("ppl_8_10"), std::exp(loss[2]), 1e-12);
  EXPECT_NEAR(r.metrics.at("ppl"), std::exp(0.0045 + 0.05), 1e-12);
  EXPECT_EQ(task_layout(spec).metrics,
            (std::vector<std::string>{"ppl", "ppl_0_4", "ppl_4_8", "ppl_8_10"}));

  // jsonl documents are joined with EOS after each.
  FakeEvalModel jsonl_model;
  TaskSpec j{.name = "ppl_by_position", .path = fixture("ppl.jsonl")};
  j.seq_len = 4;
  j.bucket_size = 4;
  j.num_sequences = 1;
  run_task(j, jsonl_model);
  EXPECT_EQ(jsonl_model.teacher_requests[0].tokens,
            (std::vector<int32_t>{'a', 'b', 'c', ByteTokenizer::kEos}));
  EXPECT_EQ(jsonl_model.teacher_requests[0].targets,
            (std::vector<int32_t>{'b', 'c', ByteTokenizer::kEos, 'd'}));
  j.num_sequences = 3;  // needs 13 tokens, the file has 9
  try {
    run_task(j, jsonl_model);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ppl.jsonl holds 9 tokens"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace amor::eval

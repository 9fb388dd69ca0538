// LongBench tasks on fixtures in LongBench's jsonl format: prompts, middle truncation, first-line
// post-processing, max over answers and the LongBench-E buckets; expected numbers by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "data/tokenizer/byte_tokenizer.h"
#include "runner/eval/eval_tasks.h"
#include "runner/eval/fake_eval_model.h"

namespace amor::eval {
namespace {

using testing::FakeEvalModel;

std::string fixture(const std::string& name) {
  return std::string(AMOR_SOURCE_DIR) + "/tests/fixtures/eval/" + name;
}

TEST(EvalLongBench, QasperF1AndLengthBuckets) {
  FakeEvalModel model;
  model.responder = [](const std::string& prompt) -> std::string {
    if (prompt.find("What dataset") != std::string::npos) return " Penn Treebank corpus";
    if (prompt.find("How many layers") != std::string::npos) return " twelve";
    return " Yes.";
  };
  const TaskResult r = run_task({.name = "longbench_qasper", .path = fixture("qasper.jsonl")}, model);
  ASSERT_EQ(model.gen_requests.size(), 3u);
  EXPECT_EQ(model.gen_requests[0].max_new_tokens, 128);  // dataset2maxlen["qasper"]
  const std::string prompt = ByteTokenizer().decode(model.gen_requests[0].context);
  EXPECT_EQ(prompt.substr(0, 32), "You are given a scientific artic");
  EXPECT_NE(prompt.find("Article: We train on the Penn Treebank.\n\n Answer the question"),
            std::string::npos);
  const std::string tail = "Question: What dataset is used?\n\nAnswer:";
  EXPECT_EQ(prompt.substr(prompt.size() - tail.size()), tail);
  // 1: {penn, treebank, corpus} vs {penn, treebank}: P 2/3, R 1, F1 0.8 (vs "PTB": 0; max 0.8).
  // 2: "twelve" vs "12 layers": 0.   3: "Yes." vs "yes": 1.
  EXPECT_NEAR(r.per_example.at("score")[0], 0.8, 1e-12);
  EXPECT_EQ(r.per_example.at("score")[1], 0.0);
  EXPECT_EQ(r.per_example.at("score")[2], 1.0);
  EXPECT_EQ(r.per_example.at("length"), (std::vector<double>{5, 4500, 9000}));
  EXPECT_NEAR(r.metrics.at("score"), 0.6, 1e-12);
  EXPECT_NEAR(r.metrics.at("score_0_4k"), 0.8, 1e-12);
  EXPECT_EQ(r.metrics.at("score_4_8k"), 0.0);
  EXPECT_EQ(r.metrics.at("score_8k_plus"), 1.0);
}

TEST(EvalLongBench, MiddleTruncationAndCodeSimilarity) {
  // Window 104 - max_gen 64 = a 40-token prompt budget: the first 20 and the last 20 bytes.
  FakeEvalModel model({}, 104);
  model.responder = [](const std::string&) { return std::string("# comment\n    return y\n"); };
  const TaskResult r = run_task({.name = "longbench_lcc", .path = fixture("lcc.jsonl")}, model);
  const std::string full =
      "Please complete the code given below. \ndef f(x):\n    y = x * 2\nNext line of code:\n";
  ASSERT_EQ(model.gen_requests[0].context.size(), 40u);
  EXPECT_EQ(ByteTokenizer().decode(model.gen_requests[0].context),
            full.substr(0, 20) + full.substr(full.size() - 20));
  EXPECT_EQ(r.metrics.at("score"), 1.0);  // "    return y" equals the answer: fuzz 100
  EXPECT_EQ(r.metrics.at("score_0_4k"), 1.0);
  EXPECT_TRUE(std::isnan(r.metrics.at("score_4_8k")));
  EXPECT_TRUE(std::isnan(r.metrics.at("score_8k_plus")));
}

TEST(EvalLongBench, TrecScoresTheFirstLineOnly) {
  FakeEvalModel model;
  model.responder = [](const std::string&) { return std::string("\nLocation\nType: Entity"); };
  const TaskResult r = run_task({.name = "longbench_trec", .path = fixture("trec.jsonl")}, model);
  // The first line "Location" matches one class: 1 (the whole text would match two: 1/2).
  EXPECT_EQ(r.metrics.at("score"), 1.0);
  EXPECT_EQ(model.gen_requests[0].max_new_tokens, 64);
}

}  // namespace
}  // namespace amor::eval

// LongBench tasks on fixtures in LongBench's jsonl format: prompts, middle truncation, first-line
// post-processing, max over answers and the LongBench-E buckets; expected numbers by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "data/tokenizer/byte_tokenizer.h"
#include "runner/eval/eval_tasks.h"
#include "runner/eval/fake_eval_model.h"
#include "runner/eval/longbench_metrics.h"

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

// samsum as LongBench generates and scores it (issue #18): the requests stop on the newline
// token id (not on a decoded "\n") and forbid it and EOS as the first token (min_new_tokens 1);
// the output is scored on its first line after leading newlines, so an output that starts with a
// "\n\n" token (what a Llama-3 model may produce, and what used to score 0) scores its summary.
TEST(EvalLongBench, SamsumStopsOnTheNewlineTokenAndScoresTheFirstNonEmptyLine) {
  FakeEvalModel model;
  model.responder = [](const std::string& prompt) -> std::string {
    if (prompt.find("Are you coming") != std::string::npos) return "\n\nTom will come at 8.\n";
    return "Bob has no time.";
  };
  const TaskResult r = run_task({.name = "longbench_samsum", .path = fixture("samsum.jsonl")}, model);
  ASSERT_EQ(model.gen_requests.size(), 2u);
  for (const GenRequest& q : model.gen_requests) {
    EXPECT_EQ(q.max_new_tokens, 128);                      // dataset2maxlen["samsum"]
    EXPECT_TRUE(q.stop.empty());                           // no decoded-text stop
    EXPECT_EQ(q.stop_ids, (std::vector<int32_t>{'\n'}));   // encode("\n")[-1] of the byte tokenizer
    EXPECT_EQ(q.min_new_tokens, 1);
  }
  const std::string prompt = ByteTokenizer().decode(model.gen_requests[0].context);
  EXPECT_EQ(prompt, "Summarize the dialogue into a few short sentences. The following are some "
                    "examples.\n\nDialogue: Bob: Lunch?\nEve: Sure.\nSummary: Bob and Eve will "
                    "have lunch.\n\n\nDialogue: Anna: Are you coming tonight?\nTom: Yes, at 8.\n"
                    "Summary: ");
  const double s0 = rouge_l_score("Tom will come at 8.", "Tom is coming tonight at 8.");
  const double s1 = rouge_l_score("Bob has no time.", "Bob can't have lunch with Eve.");
  EXPECT_GT(s0, 0.3);  // {tom, at, 8} in common
  EXPECT_EQ(r.per_example.at("score")[0], s0);
  EXPECT_EQ(r.per_example.at("score")[1], s1);
  EXPECT_NEAR(r.metrics.at("score"), (s0 + s1) / 2, 1e-15);

  // Other datasets keep plain generation.
  FakeEvalModel trec;
  trec.responder = [](const std::string&) { return std::string("Location"); };
  run_task({.name = "longbench_trec", .path = fixture("trec.jsonl")}, trec);
  EXPECT_TRUE(trec.gen_requests[0].stop_ids.empty());
  EXPECT_EQ(trec.gen_requests[0].min_new_tokens, 0);
}

}  // namespace
}  // namespace amor::eval

// lm-eval's pair encoding and the loglikelihood tasks (lambada, piqa, hellaswag, arc, winogrande)
// on fixtures in the public formats (tests/fixtures/eval/), scored against a fake model whose
// log-probabilities are log(1/2) (predicted byte), log(1/516) (another byte after a prediction) or
// log(1/259) (nothing predicted): see fake_eval_model.h. Expected numbers are counted by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "data/tokenizer/byte_tokenizer.h"
#include "kernels/core/error.h"
#include "runner/eval/eval_tasks.h"
#include "runner/eval/fake_eval_model.h"
#include "runner/eval/pair_encoding.h"

namespace amor::eval {
namespace {

using testing::FakeEvalModel;

const double kPred = std::log(0.5), kMiss = std::log(1.0 / 516), kNone = std::log(1.0 / 259);

std::string fixture(const std::string& name) {
  return std::string(AMOR_SOURCE_DIR) + "/tests/fixtures/eval/" + name;
}

std::string text(const std::vector<int32_t>& ids) { return ByteTokenizer().decode(ids); }

// Longest-match over a few multi-byte pieces (ids 259..) and single bytes, so that merges across
// the context/continuation boundary can be seen. No BOS; EOS 256 unless another id (-1: none).
class PieceTokenizer final : public Tokenizer {
 public:
  explicit PieceTokenizer(std::vector<std::string> pieces, int32_t eos = 256)
      : pieces_(std::move(pieces)), eos_(eos) {}
  const std::string& name() const override { return name_; }
  int64_t vocab_size() const override { return 259 + static_cast<int64_t>(pieces_.size()); }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return eos_; }
  void encode_into(std::string_view s, std::vector<int32_t>& out, const EncodeOptions&) const override {
    for (size_t i = 0; i < s.size();) {
      int32_t best = static_cast<unsigned char>(s[i]);
      size_t len = 1;
      for (size_t p = 0; p < pieces_.size(); ++p)
        if (pieces_[p].size() > len && s.compare(i, pieces_[p].size(), pieces_[p]) == 0) {
          best = static_cast<int32_t>(259 + p);
          len = pieces_[p].size();
        }
      out.push_back(best);
      i += len;
    }
  }
  std::string_view token_bytes(int32_t id) const override {
    return id >= 259 ? std::string_view(pieces_[static_cast<size_t>(id - 259)]) : byte_.token_bytes(id);
  }
  bool is_special(int32_t id) const override { return id >= 256 && id < 259; }
  int32_t special_id(std::string_view) const override { return -1; }

 private:
  std::string name_ = "pieces";
  std::vector<std::string> pieces_;
  int32_t eos_;
  ByteTokenizer byte_;
};

TEST(PairEncoding, TrailingWhitespaceMovesToTheContinuation) {
  ByteTokenizer byte;
  const LoglikRequest r = encode_pair(byte, "Answer: \n", "yes");
  EXPECT_EQ(text(r.context), "Answer:");
  EXPECT_EQ(text(r.continuation), " \nyes");
  // With merges: pieces {"ab", " c"}: "xab " + "c" is scored as "xab" + " c", one token.
  PieceTokenizer pieces({"ab", " c"});
  const LoglikRequest m = encode_pair(pieces, "xab ", "c");
  EXPECT_EQ(m.context, (std::vector<int32_t>{'x', 259}));
  EXPECT_EQ(m.continuation, (std::vector<int32_t>{260}));
}

TEST(PairEncoding, ContinuationIsTheTailOfTheWholeEncoding) {
  // encode("xa") = [x, a]; encode("xabc") = [x, ab, c]: the continuation is whole[2:] = [c].
  PieceTokenizer pieces({"ab"});
  const LoglikRequest r = encode_pair(pieces, "xa", "bc");
  EXPECT_EQ(r.context, (std::vector<int32_t>{'x', 'a'}));
  EXPECT_EQ(r.continuation, (std::vector<int32_t>{'c'}));
}

TEST(PairEncoding, EmptyContextIsBosElseEosAndTruncationKeepsTheRight) {
  ByteTokenizer byte;  // has a BOS: lm-eval's prefix_token_id is the BOS
  const LoglikRequest e = encode_pair(byte, "", "hi");
  EXPECT_EQ(e.context, (std::vector<int32_t>{byte.bos_id()}));
  EXPECT_NE(byte.bos_id(), byte.eos_id());
  EXPECT_EQ(text(e.continuation), "hi");
  PieceTokenizer pieces({"ab"});  // no BOS: the EOS
  const LoglikRequest p = encode_pair(pieces, "", "hi");
  EXPECT_EQ(p.context, (std::vector<int32_t>{pieces.eos_id()}));
  EXPECT_EQ(text(p.continuation), "hi");
  // Neither: an error naming the tokenizer, not a request scored after token -1.
  try {
    encode_pair(PieceTokenizer({"ab"}, -1), "", "hi");
    ADD_FAILURE() << "an empty context with neither BOS nor EOS was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("tokenizer 'pieces' has neither"), std::string::npos)
        << err.what();
  }
  // Window 4: at most 5 tokens of "abcdef" + "gh" survive, cut from the left.
  const LoglikRequest t = make_loglik_request(byte, "abcdef", "gh", 4, "test");
  EXPECT_EQ(text(t.context), "def");
  EXPECT_EQ(text(t.continuation), "gh");
  EXPECT_THROW(make_loglik_request(byte, "abc", "defgh", 4, "test"), Error);
}

TEST(EvalLoglikTasks, LambadaAccuracyNeedsEveryTargetTokenGreedy) {
  FakeEvalModel model({"the cat sat on the mat", "the dog ate the bank"});
  const TaskResult r = run_task({.name = "lambada", .path = fixture("lambada.jsonl")}, model);
  ASSERT_EQ(model.loglik_requests.size(), 3u);  // the blank line is skipped
  EXPECT_EQ(text(model.loglik_requests[0].context), "the cat sat on the");
  EXPECT_EQ(text(model.loglik_requests[0].continuation), " mat");
  // " mat": 4 predicted bytes. " bone" against "bank": ' ', 'b' predicted, 'o' missed, then nothing
  // continues "the dog ate the bo": 2 uniform. " hand": nothing memorised, 5 uniform.
  const double lp[3] = {4 * kPred, 2 * kPred + kMiss + 2 * kNone, 5 * kNone};
  EXPECT_EQ(r.per_example.at("acc"), (std::vector<double>{1, 0, 0}));
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.per_example.at("logprob")[i], lp[i], 1e-12);
  EXPECT_NEAR(r.metrics.at("acc"), 1.0 / 3, 1e-12);
  EXPECT_NEAR(r.metrics.at("ppl"), std::exp(-(lp[0] + lp[1] + lp[2]) / 3), 1e-9);
  EXPECT_EQ(model.tasks_begun, (std::vector<std::string>{"lambada"}));
}

TEST(EvalLoglikTasks, PiqaAccAndCharacterLengthAccNorm) {
  FakeEvalModel model({"Question: open a jar\nAnswer: twist the lid",
                       "Question: boil water\nAnswer: use ice"});
  const TaskResult r = run_task({.name = "piqa", .path = fixture("piqa.jsonl")}, model);
  ASSERT_EQ(model.loglik_requests.size(), 6u);
  EXPECT_EQ(text(model.loglik_requests[0].context), "Question: open a jar\nAnswer:");
  EXPECT_EQ(text(model.loglik_requests[1].continuation), " hit it");
  // 1: " twist the lid" all predicted wins both ways.
  // 2: nothing memorised, ll = -len(" " + choice) log 259: acc picks the shorter " use a towel"
  //    (gold); acc_norm divides by the choice's own characters: 12/11 > 14/13, so it picks the
  //    toaster (dividing by 12 and 14 would tie and pick the towel).
  // 3: " use ice" (8 predicted) beats " use a kettle" (5 predicted, 1 missed, 7 uniform) both ways;
  //    the gold is the kettle.
  EXPECT_EQ(r.per_example.at("acc"), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(r.per_example.at("acc_norm"), (std::vector<double>{1, 0, 0}));
  EXPECT_NEAR(r.metrics.at("acc"), 2.0 / 3, 1e-12);
  EXPECT_NEAR(r.metrics.at("acc_norm"), 1.0 / 3, 1e-12);
}

TEST(EvalLoglikTasks, HellaswagPreprocessing) {
  const std::string query = "Baking cookies: A woman mixes flour in a bowl. She then";
  FakeEvalModel model({query + " puts the tray in the oven. Wait ten minutes."});
  const TaskResult r = run_task({.name = "hellaswag", .path = fixture("hellaswag.jsonl")}, model);
  ASSERT_EQ(model.loglik_requests.size(), 4u);
  // ctx_b "SHE [header] then" is capitalised to "She [header] then", "[header]" dropped, the double
  // space collapsed; " [title]" becomes ". ".
  EXPECT_EQ(text(model.loglik_requests[0].context), query);
  EXPECT_EQ(text(model.loglik_requests[0].continuation), " puts the tray in the oven. Wait ten minutes.");
  EXPECT_EQ(text(model.loglik_requests[2].continuation), " sings loudly.");
  EXPECT_EQ(r.metrics.at("acc"), 1.0);
  EXPECT_EQ(r.metrics.at("acc_norm"), 1.0);
}

TEST(EvalLoglikTasks, ArcGoldIsTheAnswerKeysIndex) {
  FakeEvalModel model({"Question: Which gas do plants absorb?\nAnswer: carbon dioxide"});
  const TaskResult r = run_task({.name = "arc_easy", .path = fixture("arc.jsonl")}, model);
  ASSERT_EQ(model.loglik_requests.size(), 6u);
  // 2: uniform; acc picks " no" (3 tokens) over the gold " a longer answer"; acc_norm compares
  //    -16/15, -3/2, -4/3 (x log 259) and picks the gold.
  EXPECT_EQ(r.per_example.at("acc"), (std::vector<double>{1, 0}));
  EXPECT_EQ(r.per_example.at("acc_norm"), (std::vector<double>{1, 1}));
  EXPECT_EQ(task_layout({.name = "arc_challenge"}).metrics, (std::vector<std::string>{"acc", "acc_norm"}));
}

TEST(EvalLoglikTasks, WinograndePartialScoring) {
  FakeEvalModel model({"The trophy didn't fit in the suitcase because the trophy was too big."});
  const TaskResult r = run_task({.name = "winogrande", .path = fixture("winogrande.jsonl")}, model);
  ASSERT_EQ(model.loglik_requests.size(), 4u);
  EXPECT_EQ(text(model.loglik_requests[1].context),
            "The trophy didn't fit in the suitcase because the suitcase");
  EXPECT_EQ(text(model.loglik_requests[1].continuation), " was too big.");
  // The model prefers "trophy" in both; the second's gold is "suitcase".
  EXPECT_EQ(r.per_example.at("acc"), (std::vector<double>{1, 0}));
  EXPECT_EQ(r.metrics.at("acc"), 0.5);
  EXPECT_EQ(r.metrics.count("acc_norm"), 0u);
  EXPECT_EQ(task_layout({.name = "winogrande"}).per_example, (std::vector<std::string>{"acc"}));
}

}  // namespace
}  // namespace amor::eval

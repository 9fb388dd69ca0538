// A fake EvalModel for the harness's tests: byte tokens, and probabilities given by a rule a test
// can compute by hand.
//
// The rule ("memorised strings"): the model knows a list of strings. After reading tokens that
// decode to the text P, it predicts byte m[|P|] of the first string m that P is a proper prefix
// of, with probability 1/2, and every other id with 1/(2 (V - 1)), V = 259; when no string
// continues P, every id has 1/V. So log p is log(1/2), log(1/516) or log(1/259), and a token is
// greedy exactly when it is the predicted byte (with no prediction the argmax is id 0, never
// text). Generation follows the predictions until there is none (then EOS) or a predicted byte is
// one of the request's stop_ids (kept, as a real model's token-level stop); min_new_tokens is
// only recorded (a test that needs it gives a responder).
//
// Tests may replace teacher_forced and generate with their own rules (teacher_rule, responder),
// and inspect every request the harness sent.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer/byte_tokenizer.h"
#include "runner/eval/eval_model.h"

namespace amor::eval::testing {

class FakeEvalModel final : public EvalModel {
 public:
  static constexpr double kVocab = ByteTokenizer::kVocabSize;

  explicit FakeEvalModel(std::vector<std::string> memory = {}, int64_t max_length = 1 << 20)
      : memory_(std::move(memory)), max_length_(max_length) {}

  // -1 when nothing continues the text.
  int predicted_byte(const std::string& text) const {
    for (const auto& m : memory_)
      if (m.size() > text.size() && m.compare(0, text.size(), text) == 0)
        return static_cast<unsigned char>(m[text.size()]);
    return -1;
  }
  double logprob(const std::string& text, int32_t next) const {
    const int p = predicted_byte(text);
    if (p < 0) return std::log(1.0 / kVocab);
    return next == p ? std::log(0.5) : std::log(0.5 / (kVocab - 1));
  }

  std::vector<LoglikResult> loglikelihood(const std::vector<LoglikRequest>& requests) override {
    std::vector<LoglikResult> out;
    for (const auto& r : requests) {
      loglik_requests.push_back(r);
      std::string text = tok_.decode(r.context);
      LoglikResult res{0.0, true};
      for (int32_t t : r.continuation) {
        res.logprob += logprob(text, t);
        res.greedy = res.greedy && predicted_byte(text) == t;
        text += tok_.decode(std::vector<int32_t>{t});
      }
      out.push_back(res);
    }
    return out;
  }

  std::function<TeacherForcedResult(const TeacherForcedRequest&, size_t index)> teacher_rule;
  std::vector<TeacherForcedResult> teacher_forced(
      const std::vector<TeacherForcedRequest>& requests) override {
    std::vector<TeacherForcedResult> out;
    for (size_t i = 0; i < requests.size(); ++i) {
      teacher_requests.push_back(requests[i]);
      if (teacher_rule) {
        out.push_back(teacher_rule(requests[i], i));
        continue;
      }
      TeacherForcedResult res;
      for (size_t t = 0; t < requests[i].tokens.size(); ++t) {
        const std::string text = tok_.decode(std::span(requests[i].tokens).first(t + 1));
        const int32_t y = requests[i].targets[t];
        res.nll.push_back(y < 0 ? std::nan("") : -logprob(text, y));
        res.argmax.push_back(std::max(predicted_byte(text), 0));
      }
      out.push_back(res);
    }
    return out;
  }

  std::function<std::string(const std::string& context)> responder;
  std::vector<std::string> generate(const std::vector<GenRequest>& requests) override {
    std::vector<std::string> out;
    for (const auto& r : requests) {
      gen_requests.push_back(r);
      std::string text = tok_.decode(r.context), produced;
      if (responder) {
        produced = responder(text);
      } else {
        for (int p = predicted_byte(text); p >= 0; p = predicted_byte(text)) {
          produced += static_cast<char>(p);
          text += static_cast<char>(p);
          if (std::find(r.stop_ids.begin(), r.stop_ids.end(), p) != r.stop_ids.end()) break;
        }
      }
      if (static_cast<int64_t>(produced.size()) > r.max_new_tokens)
        produced.resize(static_cast<size_t>(r.max_new_tokens));  // one byte = one token
      out.push_back(produced);
    }
    return out;
  }

  int64_t max_length() const override { return max_length_; }
  const Tokenizer& tokenizer() const override { return tok_; }
  void begin_task(const std::string& name) override { tasks_begun.push_back(name); }

  std::vector<LoglikRequest> loglik_requests;
  std::vector<TeacherForcedRequest> teacher_requests;
  std::vector<GenRequest> gen_requests;
  std::vector<std::string> tasks_begun;

 private:
  ByteTokenizer tok_;
  std::vector<std::string> memory_;
  int64_t max_length_;
};

}  // namespace amor::eval::testing

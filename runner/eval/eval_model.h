// The model as the evaluation harness sees it: four questions a language model can answer, in
// token ids of its own tokenizer. The lead implements it over models/ (prefill, decode, greedy
// generation); the tests implement it with a fake whose probabilities are a rule computable by
// hand (runner/eval/fake_eval_model.h).
//
// Conventions (those of lm-evaluation-harness's HFLM, which the tasks' scores are defined against):
// - loglikelihood: the model reads context ++ continuation and scores the continuation tokens:
//   logprob = sum_i log p(cont_i | context, cont_<i); greedy = every cont_i is the argmax of its
//   distribution (ties to the lowest id, as torch.argmax). The harness has already cut the pair to
//   at most max_length() + 1 tokens (the last token is only a target), and the context is never
//   empty (lm-eval scores an empty context after the BOS token, or EOS without one).
// - teacher_forced: for input tokens x[0..T) and targets y[0..T) (kIgnore = -100 where unscored),
//   nll[t] = -log p(y[t] | x[0..t]) (NaN where y[t] < 0) and argmax[t] = argmax_v p(v | x[0..t]).
//   Perplexity by position uses nll (y = x shifted); MQAR accuracy uses argmax (Zoology scores the
//   argmax at the query positions, whose targets are not in the input).
// - generate: greedy decoding from the context for at most max_new_tokens tokens, stopping early
//   at EOS, at a token in stop_ids, or once the decoded new text contains a stop string; the
//   first min_new_tokens tokens are the best ids other than EOS and the stop ids. Returns the
//   decoded new text (special tokens skipped). The harness cuts the text at the first stop
//   string itself, so a model may overshoot.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "kernels/core/error.h"
#include "models/lm/model_kinds.h"

namespace amor::eval {

struct LoglikRequest {
  std::vector<int32_t> context, continuation;
};
struct LoglikResult {
  double logprob = 0;   // sum of log p over the continuation's tokens (natural log)
  bool greedy = false;  // every continuation token was the argmax
};

struct TeacherForcedRequest {
  std::vector<int32_t> tokens, targets;  // same length; targets -100 where unscored
  // Each token's role (data/synthetic/token_roles.h), recorded with the token in run.h5; empty
  // where the task has none.
  std::vector<uint8_t> roles{};
};
struct TeacherForcedResult {
  std::vector<double> nll;      // per position; NaN where the target is -100
  std::vector<int32_t> argmax;  // per position
};

struct GenRequest {
  std::vector<int32_t> context;
  int64_t max_new_tokens = 0;
  std::vector<std::string> stop{};  // stop strings, matched in the decoded new text
  // Token-level ends besides EOS (Hugging Face's eos_token_id list): generation stops when the
  // token just generated is one of these ids (kept; decoded into the text).
  std::vector<int32_t> stop_ids{};
  // The first min_new_tokens generated tokens are never EOS or a stop id: the argmax over the
  // other ids (Hugging Face's min_new_tokens).
  int64_t min_new_tokens = 0;
  // Each context token's role (token_roles.h; generated tokens are recorded as `answer`); empty
  // where the task has none.
  std::vector<uint8_t> roles{};
};

class EvalModel {
 public:
  virtual ~EvalModel() = default;
  virtual std::vector<LoglikResult> loglikelihood(const std::vector<LoglikRequest>& requests) = 0;
  virtual std::vector<TeacherForcedResult> teacher_forced(
      const std::vector<TeacherForcedRequest>& requests) = 0;
  virtual std::vector<std::string> generate(const std::vector<GenRequest>& requests) = 0;
  // Oryx (multi-mixer) models: teacher_forced with each position's mixer given, modes[i][t] = 1
  // for attention, 0 for the linear mixer (oryx_switch). Models without mixer modes refuse.
  virtual std::vector<TeacherForcedResult> teacher_forced_modes(
      const std::vector<TeacherForcedRequest>& /*requests*/,
      const std::vector<std::vector<uint8_t>>& /*modes*/) {
    throw Error("oryx_switch: this model has no mixer modes (only model.kind " +
                model::kinds_with(&model::KindTraits::takes_modes) + " switches mixer)");
  }
  // The context window in tokens: loglikelihood pairs are cut to max_length() + 1 tokens and
  // LongBench prompts to max_length() - max_new_tokens. NIAH, passkey and ppl_by_position are never
  // truncated (their lengths are the experiment). A model without a hard window may return a
  // large number.
  virtual int64_t max_length() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  // Called before a task's requests, so the model can record per-token data (/tokens/<task>/).
  virtual void begin_task(const std::string& /*name*/) {}
};

}  // namespace amor::eval

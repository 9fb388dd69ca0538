// LAMBADA (OpenAI's preprocessing, EleutherAI's lambada_openai jsonl: {"text": ...}), scored as
// lm-evaluation-harness's lambada_openai task (lm_eval/tasks/lambada/lambada_openai.yaml):
//   context = the text up to its last ' ' (text.split(' ')[:-1] joined by ' ')
//   target  = ' ' + the last ' '-separated word
//   acc = mean over examples of [every target token is the greedy prediction]
//   ppl = exp(-mean over examples of log p(target | context))   (lm-eval's `perplexity`
//         aggregation: per-example sums of log p, not per token)
// Per example: acc (0/1), logprob (sum log p of the target's tokens).
#include <cmath>

#include "kernels/core/error.h"
#include "runner/eval/jsonl_records.h"
#include "runner/eval/pair_encoding.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {

TaskResult run_lambada(const TaskSpec& spec, EvalModel& model) {
  const auto records = read_jsonl(spec.path, spec.limit, spec.name);
  std::vector<LoglikRequest> requests;
  for (const auto& r : records) {
    const std::string& text = r.string("text");
    const size_t cut = text.rfind(' ');
    const std::string context = cut == std::string::npos ? "" : text.substr(0, cut);
    const std::string target = " " + (cut == std::string::npos ? text : text.substr(cut + 1));
    requests.push_back(make_loglik_request(model.tokenizer(), context, target, model.max_length(),
                                           r.where()));
  }
  model.begin_task(spec.name);
  const auto results = model.loglikelihood(requests);
  AMOR_CHECK(results.size() == requests.size(), "{}: the model answered {} of {} requests",
             spec.name, results.size(), requests.size());
  TaskResult out;
  auto& acc = out.per_example["acc"];
  auto& logprob = out.per_example["logprob"];
  for (const auto& res : results) {
    acc.push_back(res.greedy ? 1.0 : 0.0);
    logprob.push_back(res.logprob);
  }
  out.metrics["acc"] = mean_or_nan(acc);
  out.metrics["ppl"] = std::exp(-mean_or_nan(logprob));
  return out;
}

}  // namespace amor::eval

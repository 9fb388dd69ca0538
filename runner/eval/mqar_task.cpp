// MQAR accuracy as Zoology measures it (zoology/metrics: the argmax prediction at every labelled
// position, correct / labelled over the whole evaluation set). Examples are Zoology's
// multiquery_ar test split (data/synthetic/mqar.h, seed + 10 as Zoology's test split), scored
// teacher-forced in one pass each.
//   acc = correct / labelled over all examples; per example: that example's own fraction
// Recorded tokens carry MQAR's roles (key, value, query, filler: data/synthetic/token_roles.h).
#include "data/synthetic/mqar.h"
#include "kernels/core/error.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {

TaskResult run_mqar(const TaskSpec& spec, EvalModel& model) {
  synthetic::MqarConfig c;
  c.vocab_size = spec.mqar_vocab_size;
  c.input_seq_len = spec.mqar_seq_len;
  c.num_kv_pairs = spec.mqar_kv_pairs;
  c.num_examples = spec.limit >= 0 ? std::min(spec.limit, spec.mqar_examples) : spec.mqar_examples;
  c.seed = spec.seed + 10;
  c.answers_in_input = spec.mqar_answers_in_input;  // targets stay at the queries: recall is scored
  c.random_non_queries = spec.mqar_random_filler;
  AMOR_CHECK(c.vocab_size <= model.tokenizer().vocab_size(),
             "mqar: mqar_vocab_size {} exceeds the model's vocabulary ({} ids)", c.vocab_size,
             model.tokenizer().vocab_size());
  const synthetic::TokenTask task = synthetic::mqar(c);
  const int64_t n = task.tokens.shape()[0], T = task.tokens.shape()[1];
  const int32_t* tokens = task.tokens.data<int32_t>();
  const int32_t* targets = task.targets.data<int32_t>();
  std::vector<TeacherForcedRequest> requests;
  const uint8_t* roles = task.roles.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    TeacherForcedRequest r{std::vector<int32_t>(tokens + i * T, tokens + (i + 1) * T),
                           std::vector<int32_t>(targets + i * T, targets + (i + 1) * T)};
    r.roles.assign(roles + i * T, roles + (i + 1) * T);
    requests.push_back(std::move(r));
  }
  model.begin_task(spec.name);
  const auto results = model.teacher_forced(requests);
  AMOR_CHECK(results.size() == requests.size(), "mqar: the model answered {} of {} requests",
             results.size(), requests.size());
  std::vector<int32_t> predictions;
  for (const auto& r : results) {
    AMOR_CHECK(static_cast<int64_t>(r.argmax.size()) == T,
               "mqar: the model returned {} predictions for a sequence of {} tokens",
               r.argmax.size(), T);
    predictions.insert(predictions.end(), r.argmax.begin(), r.argmax.end());
  }
  const auto score =
      synthetic::score_tokens(Tensor::from_vector<int32_t>({n, T}, predictions), task.targets);
  TaskResult out;
  out.metrics["acc"] = score.accuracy;
  out.per_example["acc"] = score.per_example;
  return out;
}

}  // namespace amor::eval

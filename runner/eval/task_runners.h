// One function per task family; eval_tasks.cpp dispatches to them by name.
#pragma once
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "data/synthetic/text_task.h"
#include "runner/eval/eval_tasks.h"

namespace amor::eval {

TaskResult run_lambada(const TaskSpec& spec, EvalModel& model);
TaskResult run_multiple_choice(const TaskSpec& spec, EvalModel& model);  // hellaswag ... winogrande
TaskResult run_needle_task(const TaskSpec& spec, EvalModel& model);      // niah_*, passkey
TaskResult run_longbench(const TaskSpec& spec, EvalModel& model);        // longbench_<dataset>
TaskResult run_mqar(const TaskSpec& spec, EvalModel& model);
TaskResult run_ppl_by_position(const TaskSpec& spec, EvalModel& model);
TaskResult run_oryx_switch(const TaskSpec& spec, EvalModel& model);  // needs mode control

// ppl_by_position's text source: num_sequences sequences of seq_len + 1 tokens (input and shifted
// target), documents packed with EOS between them (path: .txt, .jsonl {"text"}, "" = KJV corpus).
std::vector<std::vector<int32_t>> packed_sequences(const std::string& task, const std::string& path,
                                                   int64_t seq_len, int64_t num_sequences,
                                                   const Tokenizer& tokenizer);

// Each prompt token's role (data/synthetic/token_roles.h) from the sample's byte spans and the
// tokens' bytes; empty where the sample has no roles or the tokens' bytes are not the prompt's
// (ill-formed UTF-8 encoded as U+FFFD).
std::vector<uint8_t> prompt_token_roles(const synthetic::TextSample& sample, const std::vector<int32_t>& ids,
                                        const Tokenizer& tok);

// lm-eval's request texts (multiple_choice_task.cpp; also checked by tests/eval_reference):
// hellaswag's preprocess and query, preprocess(activity_label + ": " + ctx_a + " " +
// ctx_b.capitalize()), and winogrande's continuation " " + sentence[sentence.index("_")+1:].strip().
std::string hellaswag_preprocess(std::string_view text);
std::string hellaswag_query(std::string_view activity_label, std::string_view ctx_a,
                            std::string_view ctx_b);
std::string winogrande_continuation(std::string_view sentence);

// The bucket boundaries [a, b) of ppl_by_position: bucket_size wide, the last one cut at seq_len.
std::vector<std::pair<int64_t, int64_t>> position_buckets(int64_t seq_len, int64_t bucket_size);

inline double mean_or_nan(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace amor::eval

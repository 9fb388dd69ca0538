// Text-prompt synthetic tasks (RULER NIAH, passkey): one sample type, RULER's scoring, and the
// conversion to a token task for teacher-forced accuracy.
//
// Lengths are in tokens of whatever tokenizer the caller evaluates with: generators take a
// TokenCounter (text -> token count) and never see token ids.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/synthetic/token_roles.h"
#include "data/synthetic/token_task.h"

namespace amor::synthetic {

using TokenCounter = std::function<size_t(std::string_view)>;
using TokenEncoder = std::function<std::vector<int32_t>(std::string_view)>;

struct TextSample {
  int64_t index = 0;                 // within its (length, depth) cell
  std::string task;                  // "niah_single_1", "passkey", ...
  std::string prompt;                // ends where the model's answer starts (RULER's answer prefix)
  std::vector<std::string> answers;  // strings the generation must contain (string_match_all)
  int64_t max_seq_length = 0;        // the cell's length: prompt_tokens + tokens_to_generate <= it
  int64_t tokens_to_generate = 0;
  int64_t prompt_tokens = 0;          // count(prompt) with the caller's TokenCounter
  double depth_percent = -1;          // the cell's requested depth; -1 where depths were random
  std::vector<double> answer_depths;  // where each answer's needle starts, % of the haystack text
  // What each byte of the prompt is (token_roles.h): spans in order covering the whole prompt
  // (other, haystack, needle, distractor, question); token_roles() maps them to tokens.
  std::vector<RoleSpan> roles{};
};

// RULER's string_match_all for one sample: the fraction of references r with r.lower() in
// pred.lower() (Python's str.lower(), data/text/unicode_text.h: the Kelvin sign K matches k, 'İ'
// lowers to "i̇" and so does not match "i" alone, ...). string_match_part: 1 if any reference
// occurs (RULER's QA metric).
double string_match_all(std::string_view prediction, const std::vector<std::string>& references);
double string_match_part(std::string_view prediction, const std::vector<std::string>& references);

struct TextScore {
  double score = 0;  // mean over samples, in [0, 1] (RULER prints 100 * this)
  std::vector<double> per_example;
};
TextScore score_string_match_all(const std::vector<std::string>& predictions,
                                 const std::vector<TextSample>& samples);

// Teacher-forced token form (lm-eval's pair encoding): context = encode(prompt), continuation =
// encode(" " + answers joined by " "); sequence = context ++ continuation; tokens = sequence[:-1],
// targets = sequence[1:] where the target is a continuation token, -100 elsewhere. Rows are
// right-padded with pad_id (targets -100) to the longest sample.
TokenTask to_token_task(const std::vector<TextSample>& samples, const TokenEncoder& encode,
                        int32_t pad_id);

}  // namespace amor::synthetic

// lm-evaluation-harness's tokenisation of a (context, continuation) pair (lm_eval/models/
// huggingface.py, HFLM._encode_pair and loglikelihood):
//   1. trailing whitespace of the context moves to the front of the continuation
//      ("Question: x\nAnswer: " + "yes" is scored as "Question: x\nAnswer:" + " yes");
//   2. context tokens = encode(context); continuation tokens = encode(context + continuation)
//      [len(context tokens):], so a merge across the boundary is scored with the continuation;
//   3. an empty context becomes a single token, the tokenizer's BOS where it has one, else its
//      EOS (HFLM.prefix_token_id: Llama-3 scores after <|begin_of_text|>, GPT-2 after
//      <|endoftext|>), and the continuation is encoded alone;
//   4. the pair is cut from the left to max_length + 1 tokens (the model reads at most
//      max_length of them; the last is only a target).
// Whitespace in step 1 is Python's str.rstrip() (Unicode: also \x85, NBSP, U+2000-U+200A, U+3000,
// ...; data/text/unicode_text.h).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "runner/eval/eval_model.h"

namespace amor::eval {

LoglikRequest encode_pair(const Tokenizer& tokenizer, std::string_view context,
                          std::string_view continuation);

// Steps 1-3, then step 4 for a model window of max_length tokens. A continuation that is empty or
// longer than max_length tokens is an error naming `what` (the task and example).
LoglikRequest make_loglik_request(const Tokenizer& tokenizer, std::string_view context,
                                  std::string_view continuation, int64_t max_length,
                                  std::string_view what);

}  // namespace amor::eval

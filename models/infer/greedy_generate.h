// Greedy generation for the evaluation harness: for each prompt, prefill it, then repeatedly
// take the argmax token and feed it back until the end-of-sequence id, one of the stop ids, the
// stop predicate (the harness decodes the ids and checks its stop strings) or max_new_tokens.
//
// Stop ids and min_new_tokens are Hugging Face generate's eos_token_id list and min_new_tokens
// (what LongBench's pred.py passes for samsum: eos_token_id = [eos, the id of "\n"],
// min_new_tokens = 1): generation ends when the token just generated IS one of the ids (a
// token-level test: a token whose text merely contains "\n", such as "\n\n", does not stop it),
// and while fewer than min_new_tokens tokens have been generated the argmax skips eos and every
// stop id (MinNewTokensLengthLogitsProcessor sets their logits to -inf), so the first token is
// the best of the others.
//
// Batching: the prompts, ordered by length (stably), decode batch_size at a time in lockstep.
// Within a batch, the prompts of one length are prefilled together in one InferenceSession; the
// sessions then join (InferenceSession::join: each sequence keeps its own position, its KV
// caches their own lengths) and every decode step runs all the batch's sequences at once. A
// sequence that has stopped keeps being fed its last token until its whole batch stops; its
// results are not affected (rows never mix) and those extra steps are not recorded. Results are
// therefore those of one prompt at a time (up to rounding: a batched GEMM may sum in another
// order), in prompt order.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/lm/language_model.h"

namespace amor::model {

// One entry per token the model read: the prompt, then every generated token but the last. Entry
// t is the model's output after reading token t, i.e. about token t + 1.
struct TokenRecords {
  std::vector<double> entropy;                // normalised entropy of the final prediction
  std::vector<double> loss;                   // -log p(token t+1) inside the prompt; 0 elsewhere
  std::vector<int32_t> predictions;           // the greedy next token
  std::vector<std::vector<uint8_t>> gates;    // AMOR: [block][t], 1 = attention fired
  std::vector<std::vector<double>> gate_entropy;  // AMOR: [block][t]
  std::vector<uint8_t> modes;                 // Oryx: 1 = attention
  // The model's per-token rows (LanguageModel::token_rows, in order): [row][t], 0 where undefined.
  std::vector<std::vector<uint8_t>> rows;
};

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  int32_t eos = -1;  // < 0: no end-of-sequence id
  // More ids that end a generation like eos (kept as its last token; stop_reason "stop_id").
  std::vector<int32_t> stop_ids;
  // The first min_new_tokens generated tokens are never eos or a stop id (the argmax over the
  // other ids; LanguageModel::infer's exclude_next); the records' prediction at those
  // positions is that token.
  int64_t min_new_tokens = 0;
  // Called after each new token with all generated ids so far; true stops (that token is kept).
  std::function<bool(const std::vector<int32_t>& generated)> stop;
  int64_t batch_size = 8;  // sequences decoded together (of any prompt lengths)
  // > 0: each prompt is prefilled in calls of at most this many tokens (the activations of one
  // call scale with batch x tokens; a chunked prefill equals one call up to rounding, AMOR's gates
  // and Oryx's modes included). 0: the whole prompt in one call.
  int64_t prefill_chunk = 0;
  // > 0: ids >= decodable_ids are never generated (the argmax over the others at every step).
  // A model's vocabulary may be padded past its tokenizer's (the byte tokenizer's 259 ids in a
  // vocab of 260, or a BPE vocabulary rounded up): those ids have no text, and a model whose
  // argmax lands on one (e.g. untrained weights) would otherwise end the evaluation with a
  // decode error. 0: every id of the model's vocabulary may be generated.
  int64_t decodable_ids = 0;
};

struct Generation {
  std::vector<int32_t> tokens;  // generated ids, including the eos / stopping token
  std::string stop_reason;      // "eos", "stop_id", "stop", "max_new_tokens"
  TokenRecords records;
  // Wall time of the prompt's group (the sequences decoded together share it): the prefill up to
  // its first prediction on the host, and the decode steps after it (each ends when its
  // predictions reach the host, so both include the GPU's work). For progress lines, not results.
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t decode_steps = 0;  // decode steps the group ran (its longest generation's tokens - 1)
  int64_t group_size = 0;    // sequences decoded together with this one (itself included)
  int64_t batch_index = 0;   // which of the call's batches it was decoded in (they run in order)
};

// prompts: token ids, each non-empty. Returns one Generation per prompt, in order.
std::vector<Generation> greedy_generate(LanguageModel& model,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerateOptions& options);

}  // namespace amor::model

// Greedy generation for the evaluation harness: for each prompt, prefill it, then repeatedly
// take the argmax token and feed it back until the end-of-sequence id, the stop predicate (the
// harness decodes the ids and checks its stop strings) or max_new_tokens.
//
// Batching: prompts of equal length run together, up to batch_size per InferenceSession, in
// lockstep (a session's sequences stand at one position, so every cache and position is shared;
// see models/README.md "Inference"). A sequence that has stopped keeps being fed its last token
// until its whole group stops; its results are not affected (rows never mix) and those extra
// steps are not recorded. Results are therefore those of one prompt at a time, in prompt order.
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
  // Called after each new token with all generated ids so far; true stops (that token is kept).
  std::function<bool(const std::vector<int32_t>& generated)> stop;
  int64_t batch_size = 8;  // sequences of equal prompt length decoded together
};

struct Generation {
  std::vector<int32_t> tokens;  // generated ids, including the eos / stopping token
  std::string stop_reason;      // "eos", "stop", "max_new_tokens"
  TokenRecords records;
};

// prompts: token ids, each non-empty. Returns one Generation per prompt, in order.
std::vector<Generation> greedy_generate(LanguageModel& model,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerateOptions& options);

}  // namespace amor::model

// RULER's needle-in-a-haystack tasks (NVIDIA RULER, scripts/data/synthetic/niah.py and the task
// table of scripts/synthetic.yaml), on a length x depth grid.
//
//   task             haystack  key    value  keys values queries
//   niah_single_1    repeat    words  numbers   1     1      1   noise: "The grass is green. ..."
//   niah_single_2    essay     words  numbers   1     1      1
//   niah_single_3    essay     words  uuids     1     1      1
//   niah_multikey_1  essay     words  numbers   4     1      1   3 distractor needles
//   niah_multikey_2  needle    words  numbers   1     1      1   the haystack is distractor needles
//   niah_multikey_3  needle    uuids  uuids     1     1      1
//   niah_multivalue  essay     words  numbers   1     4      1
//   niah_multiquery  essay     words  numbers   4     1      4
//
// Needle: "One of the special magic {numbers|uuids|words} for {key} is: {value}." The prompt is
// RULER's niah template with its answer prefix (base-model template):
//   "Some special magic numbers are hidden within the following text. Make sure to memorize it. I
//    will quiz you about the numbers afterwards.\n{context}\nWhat are all the special magic numbers
//    for {query} mentioned in the provided text? The special magic numbers for {query} mentioned
//    in the provided text are"
// rewritten to the singular ("A special magic number is hidden ...") when one value is asked for,
// by RULER's own string replacements. Repeat and needle haystacks join their sentences with "\n",
// essays with " ". Answers are scored by string_match_all (text_task.h).
//
// Length: like RULER, prompt tokens + tokens_to_generate <= max_seq_length; we size the haystack
// per sample by search (haystack.h) so each prompt is the longest that fits: within one haystack
// unit (an essay word, a noise block, a distractor needle) of the budget, not RULER's 500-word
// steps.
//
// Depth: RULER puts each needle at a depth drawn from round(linspace(0, 100, 40)); so do we when
// depth_percent is unset. With depth_percent = d, the needle holding the first answer goes before
// haystack unit floor(units * d / 100) (RULER's rule for a drawn depth), the other needles at
// drawn depths. Each sample reports where its answers' needles landed (answer_depths).
//
// Choices RULER leaves to chance that we fix: keys of one sample are distinct, and distractor
// needles never reuse a real key (so the answer is never ambiguous); an essay too short for the
// length is an error rather than a silently shorter prompt. Sample i of the cell (length, depth)
// comes from derive_seed(seed, {hash(task name), length, depth, i}): the same on every platform,
// independent of the other cells and of num_samples, and different across tasks.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/synthetic/needle_values.h"
#include "data/synthetic/text_task.h"

namespace amor::synthetic {

enum class HaystackKind { Repeat, Essay, Needle };  // RULER's type_haystack

struct NiahTask {
  std::string name;
  HaystackKind haystack = HaystackKind::Repeat;
  NeedleType key_type = NeedleType::Words;
  NeedleType value_type = NeedleType::Numbers;
  int num_keys = 1;     // RULER's num_needle_k (raised to num_queries, as RULER does)
  int num_values = 1;   // num_needle_v: values per key, each its own needle
  int num_queries = 1;  // num_needle_q: keys asked about
};

NiahTask niah_task(std::string_view name);  // one of niah_task_names(); error lists them
std::vector<std::string> niah_task_names();

struct NiahConfig {
  NiahTask task;
  int64_t max_seq_length = 4096;        // tokens: prompt + tokens_to_generate
  int64_t tokens_to_generate = 128;     // RULER's niah value
  std::optional<double> depth_percent;  // [0, 100]; unset: RULER's random depths
  int64_t num_samples = 1;
  uint64_t seed = 42;
};

// essay: the essay haystack's text (niah_single_2/3, multikey_1, multivalue, multiquery);
// ignored by repeat and needle haystacks.
std::vector<TextSample> niah(const NiahConfig& config, const TokenCounter& count,
                             std::string_view essay = {});

struct NiahGridConfig {
  NiahTask task;
  std::vector<int64_t> lengths;  // max_seq_length of each row
  std::vector<double> depths;    // depth_percent of each column
  int64_t samples_per_cell = 1;
  int64_t tokens_to_generate = 128;
  uint64_t seed = 42;
};

// Every (length, depth) cell in row-major order; cell (L, d) equals niah() with max_seq_length L
// and depth_percent d.
std::vector<TextSample> niah_grid(const NiahGridConfig& config, const TokenCounter& count,
                                  std::string_view essay = {});

}  // namespace amor::synthetic

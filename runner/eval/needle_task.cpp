// RULER's needle-in-a-haystack tasks and passkey retrieval over a length x depth grid (prompts from
// data/synthetic: niah.h, passkey.h), scored as RULER scores them (scripts/eval/synthetic/
// constants.py: string_match_all, the fraction of the sample's answers found in the greedy
// generation, case-insensitively). The model generates tokens_to_generate tokens (RULER's 128 for
// NIAH, 16 for passkey) without stop strings. Lengths are in the model's own tokens; prompts are
// never truncated (the grid's lengths are the experiment).
//   score = mean over every sample of every cell
//   per example: score, length (prompt tokens), depth (the cell's needle depth / 100, in [0, 1])
// Recorded tokens carry the prompt's roles (other, haystack, needle, distractor, question) and
// `answer` for the generated tokens read back (data/synthetic/token_roles.h).
#include <fstream>
#include <sstream>

#include "data/corpus/kjv.h"
#include "data/synthetic/niah.h"
#include "data/synthetic/passkey.h"
#include "kernels/core/error.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {
namespace {

// The essay haystack: the file's text, or the King James Bible's chapters (RULER uses Paul
// Graham's essays, which cannot be shipped; any long prose serves).
std::string essay_text(const TaskSpec& spec) {
  if (!spec.essay_path.empty()) {
    std::ifstream in(spec.essay_path, std::ios::binary);
    AMOR_CHECK(in.good(), "{}: essay file {}: no such file or not readable", spec.name,
               spec.essay_path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string text;
  for (const auto& chapter : corpus::kjv_chapters()) text += chapter.text + "\n";
  return text;
}

}  // namespace

std::vector<uint8_t> prompt_token_roles(const synthetic::TextSample& sample, const std::vector<int32_t>& ids,
                                        const Tokenizer& tok) {
  std::vector<size_t> bytes;
  bytes.reserve(ids.size());
  size_t sum = 0;
  for (int32_t id : ids) sum += bytes.emplace_back(tok.token_bytes(id).size());
  // Ill-formed UTF-8 in the prompt (an essay file) is encoded as U+FFFD: the tokens' bytes are
  // no longer the prompt's, so its roles cannot be placed.
  if (sample.roles.empty() || sum != sample.prompt.size()) return {};
  return synthetic::token_roles(sample.roles, sample.prompt.size(), bytes);
}

TaskResult run_needle_task(const TaskSpec& spec, EvalModel& model) {
  AMOR_CHECK(!spec.lengths.empty() && !spec.depths.empty() && spec.samples_per_cell > 0,
             "{}: the grid needs lengths, depths and samples_per_cell > 0 (got {} lengths, {} "
             "depths, {} samples per cell)",
             spec.name, spec.lengths.size(), spec.depths.size(), spec.samples_per_cell);
  const Tokenizer& tok = model.tokenizer();
  const synthetic::TokenCounter count = [&tok](std::string_view s) { return tok.encode(s).size(); };
  std::vector<synthetic::TextSample> samples;
  if (spec.name == "passkey") {
    for (int64_t length : spec.lengths)
      for (double depth : spec.depths) {
        synthetic::PasskeyConfig c;
        c.max_seq_length = length;
        c.depth_percent = depth;
        c.num_samples = spec.samples_per_cell;
        c.seed = spec.seed;
        for (auto& s : synthetic::passkey(c, count)) samples.push_back(std::move(s));
      }
  } else {
    synthetic::NiahGridConfig c;
    c.task = synthetic::niah_task(spec.name);
    c.lengths = spec.lengths;
    c.depths = spec.depths;
    c.samples_per_cell = spec.samples_per_cell;
    c.seed = spec.seed;
    const std::string essay =
        c.task.haystack == synthetic::HaystackKind::Essay ? essay_text(spec) : std::string();
    samples = synthetic::niah_grid(c, count, essay);
  }
  if (spec.limit >= 0 && static_cast<int64_t>(samples.size()) > spec.limit)
    samples.resize(static_cast<size_t>(spec.limit));
  AMOR_CHECK(!samples.empty(), "{}: no samples (limit {})", spec.name, spec.limit);

  std::vector<GenRequest> requests;
  for (const auto& s : samples) {
    GenRequest r{tok.encode(s.prompt), s.tokens_to_generate, {}};
    r.roles = prompt_token_roles(s, r.context, tok);
    requests.push_back(std::move(r));
  }
  model.begin_task(spec.name);
  const auto predictions = model.generate(requests);
  AMOR_CHECK(predictions.size() == samples.size(), "{}: the model answered {} of {} requests",
             spec.name, predictions.size(), samples.size());
  const auto scored = synthetic::score_string_match_all(predictions, samples);
  TaskResult out;
  out.metrics["score"] = scored.score;
  out.per_example["score"] = scored.per_example;
  for (const auto& s : samples) {
    out.per_example["length"].push_back(static_cast<double>(s.prompt_tokens));
    out.per_example["depth"].push_back(s.depth_percent / 100.0);
  }
  return out;
}

}  // namespace amor::eval

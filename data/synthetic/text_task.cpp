// RULER's string-match scores and the token form of text samples (see text_task.h).
#include "data/synthetic/text_task.h"

#include <algorithm>

#include "data/text/unicode_text.h"
#include "kernels/core/error.h"

namespace amor::synthetic {

double string_match_all(std::string_view prediction, const std::vector<std::string>& references) {
  AMOR_CHECK(!references.empty(), "string_match_all: a sample has no reference answers");
  // Substrings of valid UTF-8 by bytes are substrings by code points (lower() returns valid UTF-8).
  const std::string pred = text::lower(prediction);
  double hits = 0;
  for (const auto& r : references) hits += pred.find(text::lower(r)) != std::string::npos;
  return hits / static_cast<double>(references.size());
}

double string_match_part(std::string_view prediction, const std::vector<std::string>& references) {
  AMOR_CHECK(!references.empty(), "string_match_part: a sample has no reference answers");
  const std::string pred = text::lower(prediction);
  for (const auto& r : references)
    if (pred.find(text::lower(r)) != std::string::npos) return 1.0;
  return 0.0;
}

TextScore score_string_match_all(const std::vector<std::string>& predictions,
                                 const std::vector<TextSample>& samples) {
  AMOR_CHECK(predictions.size() == samples.size(),
             "score_string_match_all: {} predictions for {} samples", predictions.size(),
             samples.size());
  AMOR_CHECK(!samples.empty(), "score_string_match_all: no samples to score");
  TextScore s;
  for (size_t i = 0; i < samples.size(); ++i) {
    AMOR_CHECK(!samples[i].answers.empty(), "score_string_match_all: sample {} ({}) has no answers",
               i, samples[i].task);
    s.per_example.push_back(string_match_all(predictions[i], samples[i].answers));
    s.score += s.per_example.back();
  }
  s.score /= static_cast<double>(samples.size());
  return s;
}

TokenTask to_token_task(const std::vector<TextSample>& samples, const TokenEncoder& encode,
                        int32_t pad_id) {
  AMOR_CHECK(!samples.empty(), "to_token_task: no samples");
  std::vector<std::vector<int32_t>> seqs;
  std::vector<size_t> context_len;
  size_t T = 0;
  for (const auto& s : samples) {
    AMOR_CHECK(!s.answers.empty(), "to_token_task: sample {} ({}) has no answers", s.index, s.task);
    std::string cont;
    for (const auto& a : s.answers) cont += " " + a;
    std::vector<int32_t> seq = encode(s.prompt);
    const std::vector<int32_t> c = encode(cont);
    AMOR_CHECK(!seq.empty() && !c.empty(),
               "to_token_task: sample {} ({}) encodes to {} prompt and {} answer tokens; both must "
               "be non-empty",
               s.index, s.task, seq.size(), c.size());
    context_len.push_back(seq.size());
    seq.insert(seq.end(), c.begin(), c.end());
    T = std::max(T, seq.size() - 1);
    seqs.push_back(std::move(seq));
  }
  const auto n = static_cast<int64_t>(samples.size());
  std::vector<int32_t> tokens(static_cast<size_t>(n) * T, pad_id);
  std::vector<int32_t> targets(tokens.size(), kIgnore);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& seq = seqs[i];
    for (size_t t = 0; t + 1 < seq.size(); ++t) {
      tokens[i * T + t] = seq[t];
      // Position t predicts seq[t + 1]; score it only where that is a continuation token.
      if (t + 1 >= context_len[i]) targets[i * T + t] = seq[t + 1];
    }
  }
  const Shape shape{n, static_cast<int64_t>(T)};
  return {Tensor::from_vector<int32_t>(shape, tokens),
          Tensor::from_vector<int32_t>(shape, targets)};
}

}  // namespace amor::synthetic

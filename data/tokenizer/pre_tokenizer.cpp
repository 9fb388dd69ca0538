// Running the pre-tokenizer steps over text, piece by piece, without copying the text (except
// where ByteLevel prefixes a space).
#include "data/tokenizer/pre_tokenizer.h"

#include <string>

namespace amor::tokenizer {

const std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void PreTokenizer::add_split(std::shared_ptr<const Regex> regex) {
  steps_.push_back({std::move(regex), false});
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  static const auto gpt2 = std::make_shared<const Regex>(kGpt2Pattern, "GPT-2 pre-tokenizer");
  steps_.push_back({use_regex ? gpt2 : nullptr, add_prefix_space});
}

void PreTokenizer::run(std::string_view text,
                       const std::function<void(std::string_view)>& sink) const {
  if (!text.empty()) run_from(0, text, sink);
}

void PreTokenizer::run_from(size_t step, std::string_view piece,
                            const std::function<void(std::string_view)>& sink) const {
  if (step == steps_.size()) {
    sink(piece);
    return;
  }
  const Step& s = steps_[step];
  std::string prefixed;
  if (s.add_prefix_space && piece.front() != ' ') {
    prefixed = " ";
    prefixed += piece;
    piece = prefixed;
  }
  if (!s.regex) {
    run_from(step + 1, piece, sink);
    return;
  }
  std::vector<std::pair<size_t, size_t>> matches;
  s.regex->find_all(piece, matches);
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (b > prev) run_from(step + 1, piece.substr(prev, b - prev), sink);
    run_from(step + 1, piece.substr(b, e - b), sink);
    prev = e;
  }
  if (prev < piece.size()) run_from(step + 1, piece.substr(prev), sink);
}

}  // namespace amor::tokenizer

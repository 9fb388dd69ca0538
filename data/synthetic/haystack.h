// Haystack text for NIAH and passkey prompts, and the search that sizes a haystack to a token
// budget.
//
// Essay haystacks follow RULER: the essay's whitespace runs become single spaces, its first n
// words are taken, and that text is split into sentences so needles go between sentences. RULER
// splits with NLTK's punkt; we split at . ! ? (plus closing quotes/brackets) followed by a space,
// except after common abbreviations or single-letter initials and before a lower-case word, which
// is where punkt's decisions matter for prose.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace amor::synthetic {

class EssayText {
 public:
  explicit EssayText(std::string_view raw);

  size_t num_words() const { return word_end_.size(); }
  // The first n words joined by single spaces.
  std::string_view prefix(size_t n_words) const;
  // The sentences of prefix(n_words), as byte ranges [begin, end) of that prefix.
  std::vector<std::pair<size_t, size_t>> sentences(size_t n_words) const;

 private:
  std::string text_;                  // whitespace-normalised essay
  std::vector<size_t> word_end_;      // byte offset just past word i
  std::vector<size_t> sentence_end_;  // byte offsets just past each sentence terminator
};

// Sentence ranges of an already whitespace-normalised text (exposed for tests).
std::vector<std::pair<size_t, size_t>> split_sentences(std::string_view text);

// Largest n in [0, max_n] with cost(n) <= budget, for a cost that grows with n. The search gallops
// from `hint` (the previous sample's answer), so samples of one length cost a few evaluations
// each. nullopt if even cost(0) exceeds the budget.
std::optional<size_t> fit_largest(const std::function<size_t(size_t)>& cost, size_t budget,
                                  size_t max_n, size_t hint);

}  // namespace amor::synthetic

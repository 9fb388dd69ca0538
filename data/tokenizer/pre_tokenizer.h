// The pre-tokenizer of a byte-level BPE: the steps of a tokenizer.json "pre_tokenizer" (a Split
// by regex, ByteLevel, or a Sequence of them) cutting text into the pieces BPE merges within.
// Each step applies to every piece of the step before, as in Hugging Face's Sequence.
#pragma once
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "data/tokenizer/regex.h"

namespace amor::tokenizer {

// GPT-2's pattern, the one ByteLevel uses when use_regex is true.
extern const std::string_view kGpt2Pattern;

class PreTokenizer {
 public:
  // Split with behavior "Isolated": matches and the text between them are separate pieces.
  void add_split(std::shared_ptr<const Regex> regex);
  // ByteLevel: optionally prefix a space to a piece that does not start with one, optionally
  // split with GPT-2's pattern. (Its byte-to-unicode step is implicit: BPE runs on raw bytes.)
  void add_byte_level(bool add_prefix_space, bool use_regex);

  // Calls sink for each non-empty piece of text (valid UTF-8), in order.
  void run(std::string_view text, const std::function<void(std::string_view)>& sink) const;

  size_t steps() const { return steps_.size(); }

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: no split
    bool add_prefix_space = false;
  };
  void run_from(size_t step, std::string_view piece,
                const std::function<void(std::string_view)>& sink) const;
  std::vector<Step> steps_;
};

}  // namespace amor::tokenizer

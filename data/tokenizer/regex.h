// The pre-tokenizer regex: a Hugging Face tokenizer.json pattern compiled by PCRE2 (UTF + UCP,
// JIT where available), made to match exactly what the JavaScript reference encoders match.
//
// The patterns come from Python/Rust (Oniguruma) but our exactness references run them as
// JavaScript RegExps with the "u" flag, so js_compatible_pattern() rewrites the few constructs
// whose meaning differs (transformers.js applies the same first rewrite):
//   - (?i:'s|'t|'re|'ve|'m|'ll|'d) -> '([sS]|[tT]|...) : JS has no inline (?i:); under PCRE2's
//     Unicode caseless matching "'ſ" (long s) would match, in JS it does not;
//   - \s, \S: JS whitespace includes U+FEFF; PCRE2 Unicode \s does not, and adds U+0085, U+180E;
//   - \d, \w (and \D, \W outside classes): ASCII in JS, Unicode under PCRE2_UCP.
// Left as PCRE2 has them (none occur in GPT-2's or Llama-3's patterns): \b, '.', \S/\D/\W inside
// a character class. \p{L}, \p{N} follow PCRE2's Unicode tables (10.42: Unicode 14), Node's
// follow its ICU (newer), so only characters assigned after Unicode 14 can split differently.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace amor::tokenizer {

std::string js_compatible_pattern(std::string_view pattern);

class Regex {
 public:
  // Compiles js_compatible_pattern(pattern); errors name `source` (e.g. "tokenizer.json:
  // pre_tokenizer.pretokenizers[0].pattern.Regex") and PCRE2's message with its offset.
  Regex(std::string_view pattern, const std::string& source);

  // Appends [begin, end) byte ranges of the successive non-empty matches in text (valid UTF-8),
  // scanning as JavaScript's String.prototype.matchAll does (an empty match moves on by one
  // code point).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::shared_ptr<void> code_;  // pcre2_code_8, freed with pcre2_code_free_8
};

}  // namespace amor::tokenizer

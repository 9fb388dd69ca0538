// PCRE2 compilation and matching of pre-tokenizer patterns, with the JavaScript-compatible
// rewrites described in regex.h.
#include "data/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>

#include "kernels/core/error.h"

namespace amor::tokenizer {

namespace {

// transformers.js's PROBLEMATIC_REGEX_MAP: constructs JavaScript cannot compile, replaced by
// their JS equivalents (Llama-3's contractions; BLOOM's malformed class).
const std::array<std::pair<std::string_view, std::string_view>, 2> kJsRewrites = {{
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))"},
    {" ?[^(\\s|[.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C]"
     ")]+",
     " ?[^\\s.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C]+"},
}};

// JavaScript's \s (WhiteSpace and LineTerminator): PCRE2's Unicode \s lacks U+FEFF and adds
// U+0085 and U+180E. The range comes last so that a '-' after "\s" in a class stays literal.
constexpr std::string_view kJsSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
    "\\x{FEFF}\\x{2000}-\\x{200A}";

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buf{};
  pcre2_get_error_message(code, buf.data(), buf.size());
  return reinterpret_cast<const char*>(buf.data());
}

// Per-thread match state: match data (only the whole-match offsets are read) and a JIT stack
// large enough for very long runs of one character class.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() {
    AMOR_CHECK(data && stack && context, "tokenizer regex: out of memory for PCRE2 match state");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

}  // namespace

std::string js_compatible_pattern(std::string_view pattern) {
  std::string p(pattern);
  for (const auto& [from, to] : kJsRewrites) replace_all(p, from, to);

  // One pass over the pattern, tracking whether we are inside a character class.
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      if (e == 's') {
        out += in_class ? std::string(kJsSpace) : "[" + std::string(kJsSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kJsSpace) + "]";
      } else if (e == 'd') {
        out += in_class ? "0-9" : "[0-9]";
      } else if (e == 'D' && !in_class) {
        out += "[^0-9]";
      } else if (e == 'w') {
        out += in_class ? "A-Za-z0-9_" : "[A-Za-z0-9_]";
      } else if (e == 'W' && !in_class) {
        out += "[^A-Za-z0-9_]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' would be literal in PCRE2 but closes an empty class in JS;
      // PCRE2_ALLOW_EMPTY_CLASS gives the JS meaning, so nothing special to copy here.
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(std::string_view pattern, const std::string& source) : pattern_(pattern) {
  const std::string compiled = js_compatible_pattern(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_ALLOW_EMPTY_CLASS, &error, &offset, nullptr);
  AMOR_CHECK(code != nullptr, "{}: cannot compile the regex '{}' (as PCRE2 '{}'): {} at offset {}",
             source, pattern_, compiled, pcre2_message(error), offset);
  code_ =
      std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
  uint32_t jit = 0;
  pcre2_config(PCRE2_CONFIG_JIT, &jit);
  if (jit) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // on failure pcre2_match interprets
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local MatchState state;
  auto* code = static_cast<pcre2_code*>(code_.get());
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    // The subject was validated once by the caller; checking it again per call is quadratic.
    const int rc = pcre2_match(code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, state.data,
                               state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    AMOR_CHECK(rc >= 0, "tokenizer regex '{}': PCRE2 match failed: {}", pattern_,
               pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    const size_t begin = ov[0], end = ov[1];
    if (end > begin) {
      out.emplace_back(begin, end);
      offset = end;
    } else {
      if (begin >= text.size()) break;
      // Step over one code point (a lead byte and its continuation bytes).
      offset = begin + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80)
        ++offset;
    }
  }
}

}  // namespace amor::tokenizer

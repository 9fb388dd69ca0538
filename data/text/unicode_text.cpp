// Python's str semantics over utf8proc (see unicode_text.h).
#include "data/text/unicode_text.h"

#include <utf8proc.h>

#include <algorithm>

#include "data/text/special_casing.h"
#include "data/tokenizer/utf8.h"

namespace amor::text {
namespace {

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

const detail::SpecialCasing* special_casing(char32_t c) {
  const auto* end = std::end(detail::kSpecialCasing);
  const auto* it = std::lower_bound(std::begin(detail::kSpecialCasing), end, c,
                                    [](const detail::SpecialCasing& s, char32_t cp) {
                                      return s.code_point < cp;
                                    });
  return it != end && it->code_point == c ? it : nullptr;
}

std::u32string from_padded(const std::array<char32_t, 3>& m) {
  std::u32string out;
  for (char32_t c : m)
    if (c != 0) out += c;
  return out;
}

constexpr char32_t kCapitalSigma = 0x03A3, kSmallSigma = 0x03C3, kFinalSigma = 0x03C2;

// CPython's handle_capital_sigma: Σ at text[i] is final when the nearest character before it that
// is not case-ignorable is cased, and the nearest one after it that is not case-ignorable is not
// cased (or there is none).
bool is_final_sigma(std::u32string_view text, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return false;
  size_t k = i + 1;
  while (k < text.size() && is_case_ignorable(text[k])) ++k;
  return k == text.size() || !is_cased(text[k]);
}

void append_lower_at(std::u32string& out, std::u32string_view text, size_t i) {
  if (text[i] == kCapitalSigma)
    out += is_final_sigma(text, i) ? kFinalSigma : kSmallSigma;
  else
    out += lower_full(text[i]);
}

// Walks UTF-8 as code points without repairing it: fn(code point, begin, end) per character,
// where an ill-formed byte is one character with code point -1 (in no class).
template <typename Fn>
void for_each_char(std::string_view s, Fn&& fn) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp = -1;
    const utf8proc_ssize_t n =
        utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    const size_t len = n > 0 ? static_cast<size_t>(n) : 1;
    fn(n > 0 ? cp : -1, i, i + len);
    i += len;
  }
}

bool space_at(utf8proc_int32_t cp) { return cp >= 0 && is_space(static_cast<char32_t>(cp)); }

// Maximal runs of characters for which in_run(cp) holds, as substrings of s.
template <typename Pred>
std::vector<std::string> runs(std::string_view s, Pred&& in_run) {
  std::vector<std::string> out;
  size_t start = 0;
  bool open = false;
  for_each_char(s, [&](utf8proc_int32_t cp, size_t b, size_t e) {
    const bool in = in_run(cp);
    if (in && !open) start = b;
    if (!in && open) out.emplace_back(s.substr(start, b - start));
    open = in;
    (void)e;
  });
  if (open) out.emplace_back(s.substr(start));
  return out;
}

}  // namespace

bool is_space(char32_t c) {
  switch (utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->bidi_class) {
    case UTF8PROC_BIDI_CLASS_WS:
    case UTF8PROC_BIDI_CLASS_B:
    case UTF8PROC_BIDI_CLASS_S:
      return true;
    default:
      return category(c) == UTF8PROC_CATEGORY_ZS;
  }
}

bool is_decimal(char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND; }

bool is_alnum(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool is_word(char32_t c) { return c == U'_' || is_alnum(c); }

bool is_ascii_punctuation(char32_t c) {
  return (c >= U'!' && c <= U'/') || (c >= U':' && c <= U'@') || (c >= U'[' && c <= U'`') ||
         (c >= U'{' && c <= U'~');
}

bool is_case_ignorable(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  // Word_Break MidLetter, MidNumLet and Single_Quote (WordBreakProperty.txt); utf8proc has no
  // word-break table.
  switch (c) {
    case 0x0027: case 0x002E: case 0x003A: case 0x00B7: case 0x0387: case 0x055F: case 0x05F4:
    case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55:
    case 0xFF07: case 0xFF0E: case 0xFF1A:
      return true;
    default:
      return false;
  }
}

bool is_cased(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      break;
  }
  // Other_Lowercase and Other_Uppercase (PropList.txt) outside Lm and Mn, which are
  // case-ignorable: ª º, Roman numerals, circled and squared Latin letters.
  return c == 0x00AA || c == 0x00BA || (c >= 0x2160 && c <= 0x217F) ||
         (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
         (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

std::u32string lower_full(char32_t c) {
  if (c == 0x0130) return U"i\u0307";  // SpecialCasing.txt's one multi-character lowercase entry
  return std::u32string(1, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

std::u32string upper_full(char32_t c) {
  if (const auto* s = special_casing(c)) return from_padded(s->upper);
  return std::u32string(1, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
}

std::u32string title_full(char32_t c) {
  if (const auto* s = special_casing(c)) return from_padded(s->title);
  return std::u32string(1, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
}

std::u32string decode(std::string_view utf8) {
  const std::string valid = tokenizer::sanitize_utf8(utf8);
  std::u32string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size();) out += tokenizer::next_code_point(valid, i);
  return out;
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) tokenizer::append_utf8(out, c);
  return out;
}

std::u32string lower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) append_lower_at(out, text, i);
  return out;
}

std::string lower(std::string_view text) { return encode(lower(decode(text))); }

std::string upper(std::string_view text) {
  std::u32string out;
  for (char32_t c : decode(text)) out += upper_full(c);
  return encode(out);
}

std::string capitalize(std::string_view text) {
  const std::u32string t = decode(text);
  if (t.empty()) return "";
  std::u32string out = title_full(t[0]);
  for (size_t i = 1; i < t.size(); ++i) append_lower_at(out, t, i);
  return encode(out);
}

std::vector<std::string> split(std::string_view text) {
  return runs(text, [](utf8proc_int32_t cp) { return !space_at(cp); });
}

std::string_view lstrip(std::string_view text) {
  size_t begin = text.size();
  bool found = false;
  for_each_char(text, [&](utf8proc_int32_t cp, size_t b, size_t) {
    if (!found && !space_at(cp)) {
      begin = b;
      found = true;
    }
  });
  return text.substr(begin);
}

std::string_view rstrip(std::string_view text) {
  size_t end = 0;
  for_each_char(text, [&](utf8proc_int32_t cp, size_t, size_t e) {
    if (!space_at(cp)) end = e;
  });
  return text.substr(0, end);
}

std::string_view strip(std::string_view text) { return rstrip(lstrip(text)); }

std::vector<std::string> decimal_runs(std::string_view text) {
  return runs(text, [](utf8proc_int32_t cp) {
    return cp >= 0 && is_decimal(static_cast<char32_t>(cp));
  });
}

const char* unicode_version() { return utf8proc_unicode_version(); }

}  // namespace amor::text

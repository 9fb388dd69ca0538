// UTF-8 encoding, decoding and WHATWG-style repair of ill-formed input.
#include "data/tokenizer/utf8.h"

namespace amor::tokenizer {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int extra = b < 0x80 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
  uint32_t cp = extra == 0 ? b : extra == 1 ? (b & 0x1F) : extra == 2 ? (b & 0x0F) : (b & 0x07);
  ++i;
  for (int k = 0; k < extra && i < s.size(); ++k, ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  return cp;
}

namespace {

// For a lead byte: how many continuation bytes follow and the allowed range of the first one
// (the later ones are always 80..BF). need < 0: not a valid lead byte.
struct Lead {
  int need;
  unsigned char lo, hi;
};

Lead lead_of(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};  // excludes the UTF-16 surrogates
  if (b >= 0xE1 && b <= 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};  // nothing above U+10FFFF
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  return {-1, 0, 0};
}

// Length of the well-formed sequence at s[i] (> 0), or -(bytes to replace by one U+FFFD).
long sequence_at(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  const Lead l = lead_of(b);
  if (l.need < 0) return -1;
  size_t j = i + 1;
  for (int k = 0; k < l.need; ++k, ++j) {
    if (j >= s.size()) return -static_cast<long>(j - i);  // truncated at the end: one U+FFFD
    const auto c = static_cast<unsigned char>(s[j]);
    const unsigned char lo = k == 0 ? l.lo : 0x80, hi = k == 0 ? l.hi : 0xBF;
    if (c < lo || c > hi) return -static_cast<long>(j - i);  // c itself is read again
  }
  return static_cast<long>(j - i);
}

}  // namespace

size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const long n = sequence_at(s, i);
    if (n < 0) return i;
    i += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    const long n = sequence_at(s, i);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      append_utf8(out, 0xFFFD);
      i += static_cast<size_t>(-n);
    }
  }
  return out;
}

}  // namespace amor::tokenizer

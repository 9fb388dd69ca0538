// Essay normalisation, sentence splitting and budget fitting (see haystack.h).
#include "data/synthetic/haystack.h"

#include <algorithm>
#include <array>

namespace amor::synthetic {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

bool is_terminator(char c) { return c == '.' || c == '!' || c == '?'; }

// Length of a closing quote/bracket at text[i] (UTF-8 ’ and ” are 3 bytes), or 0.
size_t closer_len(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '"' || c == '\'' || c == ')' || c == ']') return 1;
  if (text.substr(i, 3) == "\xe2\x80\x99" || text.substr(i, 3) == "\xe2\x80\x9d") return 3;
  return 0;
}

// The word ending just before a '.' at `dot`, lower-cased, without leading punctuation.
std::string word_before(std::string_view text, size_t dot) {
  size_t b = dot;
  while (b > 0 && !is_space(text[b - 1])) --b;
  std::string w;
  for (size_t i = b; i < dot; ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if ((c >= 'a' && c <= 'z') || c == '.') w += c;
  }
  return w;
}

bool is_abbreviation(const std::string& w) {
  static constexpr std::array kAbbrev = {"mr", "mrs", "ms",  "dr",  "st",   "jr",  "sr",
                                         "vs", "etc", "e.g", "i.e", "prof", "inc", "ltd",
                                         "co", "mt",  "no",  "fig", "cf",   "al",  "approx"};
  if (w.size() == 1) return true;  // an initial: "J. R. R. Tolkien"
  return std::find(kAbbrev.begin(), kAbbrev.end(), w) != kAbbrev.end();
}

}  // namespace

std::vector<std::pair<size_t, size_t>> split_sentences(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t start = 0;
  while (start < text.size() && is_space(text[start])) ++start;
  for (size_t i = start; i < text.size(); ++i) {
    if (!is_terminator(text[i])) continue;
    const size_t term = i;
    size_t end = i + 1;
    while (end < text.size() && is_terminator(text[end])) ++end;
    for (size_t k; end < text.size() && (k = closer_len(text, end)) > 0;) end += k;
    if (end < text.size() && !is_space(text[end])) continue;  // "3.14", "U.S.A" inside a word
    size_t next = end;
    while (next < text.size() && is_space(text[next])) ++next;
    if (next < text.size()) {
      if (text[next] >= 'a' && text[next] <= 'z') continue;  // the sentence goes on
      if (text[term] == '.' && end == term + 1 && is_abbreviation(word_before(text, term)))
        continue;
    }
    out.emplace_back(start, end);
    start = next;
    i = next == 0 ? 0 : next - 1;
  }
  size_t e = text.size();
  while (e > start && is_space(text[e - 1])) --e;
  if (e > start) out.emplace_back(start, e);
  return out;
}

EssayText::EssayText(std::string_view raw) {
  text_.reserve(raw.size());
  size_t i = 0;
  while (i < raw.size()) {
    while (i < raw.size() && is_space(raw[i])) ++i;
    if (i == raw.size()) break;
    if (!text_.empty()) text_ += ' ';
    while (i < raw.size() && !is_space(raw[i])) text_ += raw[i++];
    word_end_.push_back(text_.size());
  }
  for (const auto& s : split_sentences(text_)) sentence_end_.push_back(s.second);
}

std::string_view EssayText::prefix(size_t n_words) const {
  if (n_words == 0) return {};
  return std::string_view(text_).substr(0, word_end_[std::min(n_words, word_end_.size()) - 1]);
}

std::vector<std::pair<size_t, size_t>> EssayText::sentences(size_t n_words) const {
  // A prefix's sentence breaks are the whole text's breaks inside it (every rule looks back, or
  // at the next word, which the prefix's end replaces with "end of text"), then one last piece.
  const size_t len = prefix(n_words).size();
  std::vector<std::pair<size_t, size_t>> out;
  size_t start = 0;
  for (size_t e : sentence_end_) {
    if (e > len) break;
    out.emplace_back(start, e);
    start = std::min(e + 1, len);  // skip the single space between sentences
  }
  if (start < len) out.emplace_back(start, len);
  return out;
}

std::optional<size_t> fit_largest(const std::function<size_t(size_t)>& cost, size_t budget,
                                  size_t max_n, size_t hint) {
  size_t h = std::min(hint, max_n);
  size_t lo, hi;  // invariant once set: cost(lo) <= budget < cost(hi)
  if (cost(h) <= budget) {
    lo = h;
    size_t step = 1;
    for (;;) {
      if (lo == max_n) return lo;
      const size_t cand = max_n - lo > step ? lo + step : max_n;
      if (cost(cand) > budget) {
        hi = cand;
        break;
      }
      lo = cand;
      step *= 2;
    }
  } else {
    hi = h;
    size_t step = 1;
    for (;;) {
      if (hi == 0) return std::nullopt;
      const size_t cand = hi > step ? hi - step : 0;
      if (cost(cand) <= budget) {
        lo = cand;
        break;
      }
      hi = cand;
      step *= 2;
    }
  }
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (cost(mid) <= budget)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace amor::synthetic

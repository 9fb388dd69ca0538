// LongBench's metrics (see longbench_metrics.h for each definition and its source).
#include "runner/eval/longbench_metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "data/text/unicode_text.h"
#include "kernels/core/error.h"

namespace amor::eval {
namespace {

// str.split() with no argument: runs of (Unicode) whitespace separate, no empty pieces.
std::vector<std::string> split_whitespace(std::string_view s) { return text::split(s); }

// str.split(sep) with an explicit separator: empty pieces kept.
std::vector<std::string> split_on(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// re.findall(r"\d+", s): runs of Unicode decimal digits (category Nd), as written.
std::vector<std::string> digit_runs(std::string_view s) { return text::decimal_runs(s); }

double fraction_equal(const std::vector<std::string>& numbers, std::string_view target) {
  if (numbers.empty()) return 0.0;
  double right = 0;
  for (const auto& n : numbers) right += n == target;
  return right / static_cast<double>(numbers.size());
}

// The rouge package's preprocessing: split at '.', drop empty pieces, collapse each piece's
// whitespace (a piece of spaces only becomes the empty sentence "", which it keeps).
std::vector<std::string> rouge_sentences(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& piece : split_on(text, '.'))
    if (!piece.empty()) out.push_back(join(split_whitespace(piece), " "));
  return out;
}

// The distinct words of the LCS of x (reference) and y (prediction), reconstructed by the rouge
// package's backtrack.
std::set<std::string> lcs_words(const std::vector<std::string>& x, const std::vector<std::string>& y) {
  const size_t n = x.size(), m = y.size();
  std::vector<int> table((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> int& { return table[i * (m + 1) + j]; };
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j)
      at(i, j) = x[i - 1] == y[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
  std::set<std::string> words;
  size_t i = n, j = m;
  while (i > 0 && j > 0) {
    if (x[i - 1] == y[j - 1]) {
      words.insert(x[i - 1]);
      --i;
      --j;
    } else if (at(i - 1, j) > at(i, j - 1)) {
      --i;
    } else {
      --j;
    }
  }
  return words;
}

}  // namespace

std::string normalize_answer(std::string_view s) {
  // lower() first (the final-sigma rule sees the punctuation still in place), then drop
  // string.punctuation.
  std::u32string t;
  for (char32_t c : text::lower(text::decode(s)))
    if (!text::is_ascii_punctuation(c)) t += c;
  // re.sub(r"\b(a|an|the)\b", " ", t): an article is a whole word between characters that are
  // not \w (Unicode letters, digits and '_'; a quotation mark or a combining mark is not one).
  std::u32string u;
  for (size_t i = 0; i < t.size();) {
    bool replaced = false;
    if (i == 0 || !text::is_word(t[i - 1])) {
      for (std::u32string_view w : {U"a", U"an", U"the"}) {
        const size_t e = i + w.size();
        if (t.compare(i, w.size(), w) == 0 && (e == t.size() || !text::is_word(t[e]))) {
          u += U' ';
          i = e;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) u += t[i++];
  }
  return join(split_whitespace(text::encode(u)), " ");
}

double token_f1(const std::vector<std::string>& prediction, const std::vector<std::string>& truth) {
  std::map<std::string, int64_t> pc, tc;
  for (const auto& w : prediction) ++pc[w];
  for (const auto& w : truth) ++tc[w];
  int64_t same = 0;
  for (const auto& [w, c] : pc) {
    auto it = tc.find(w);
    if (it != tc.end()) same += std::min(c, it->second);
  }
  if (same == 0) return 0.0;
  const double precision = 1.0 * static_cast<double>(same) / static_cast<double>(prediction.size());
  const double recall = 1.0 * static_cast<double>(same) / static_cast<double>(truth.size());
  return (2 * precision * recall) / (precision + recall);
}

double qa_f1_score(std::string_view prediction, std::string_view truth) {
  return token_f1(split_whitespace(normalize_answer(prediction)),
                  split_whitespace(normalize_answer(truth)));
}

double rouge_l_score(std::string_view prediction, std::string_view truth) {
  const auto hyp = rouge_sentences(prediction), ref = rouge_sentences(truth);
  if (hyp.empty() || ref.empty()) return 0.0;  // the package raises; LongBench scores 0
  auto distinct_words = [](const std::vector<std::string>& sentences) {
    std::set<std::string> words;
    for (const auto& s : sentences)
      for (auto& w : split_on(s, ' ')) words.insert(std::move(w));
    return words.size();
  };
  const double m = static_cast<double>(distinct_words(ref));
  const double n = static_cast<double>(distinct_words(hyp));
  std::set<std::string> lcs_union;
  for (const auto& r : ref) {
    const auto rw = split_on(r, ' ');
    for (const auto& c : hyp) {
      auto words = lcs_words(rw, split_on(c, ' '));
      lcs_union.insert(words.begin(), words.end());
    }
  }
  const double llcs = static_cast<double>(lcs_union.size());
  const double r_lcs = llcs / m, p_lcs = llcs / n;
  return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
}

int fuzz_ratio(std::string_view a, std::string_view b) {
  if (a == b) return 100;
  const auto x = text::decode(a), y = text::decode(b);
  if (x.empty() || y.empty()) return 0;
  // LCS by rows; the indel distance is |x| + |y| - 2 LCS.
  std::vector<int64_t> prev(y.size() + 1, 0), cur(y.size() + 1, 0);
  for (size_t i = 1; i <= x.size(); ++i) {
    for (size_t j = 1; j <= y.size(); ++j)
      cur[j] = x[i - 1] == y[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    std::swap(prev, cur);
  }
  const auto lensum = static_cast<int64_t>(x.size() + y.size());
  const int64_t dist = lensum - 2 * prev[y.size()];
  const double ratio = static_cast<double>(lensum - dist) / static_cast<double>(lensum);
  return static_cast<int>(std::nearbyint(100 * ratio));  // Python's round: half to even
}

double code_sim_score(std::string_view prediction, std::string_view truth) {
  size_t start = 0;
  while (start < prediction.size() && prediction[start] == '\n') ++start;
  std::string chosen;
  for (const auto& line : split_on(prediction.substr(start), '\n'))
    if (line.find('`') == std::string::npos && line.find('#') == std::string::npos &&
        line.find("//") == std::string::npos) {
      chosen = line;
      break;
    }
  return fuzz_ratio(chosen, truth) / 100.0;
}

double classification_score(std::string_view prediction, std::string_view truth,
                            const std::vector<std::string>& all_classes) {
  std::vector<std::string> matches;
  for (const auto& c : all_classes)
    if (prediction.find(c) != std::string_view::npos) matches.push_back(c);
  // Python's `for t in list: list.remove(t)` advances its index past the removed slot, so the
  // element that slides into it is skipped: reproduce that.
  for (size_t i = 0; i < matches.size(); ++i) {
    const std::string term = matches[i];
    if (truth.find(term) != std::string_view::npos && term != truth)
      matches.erase(std::find(matches.begin(), matches.end(), term));
  }
  if (std::find(matches.begin(), matches.end(), truth) == matches.end()) return 0.0;
  return 1.0 / static_cast<double>(matches.size());
}

double retrieval_score(std::string_view prediction, std::string_view truth) {
  // re.findall(r'Paragraph (\d+)', truth)[0]: the digit run right after the first "Paragraph "
  // that has one (\d: Unicode decimal digits).
  const std::string_view key = "Paragraph ";
  for (size_t at = truth.find(key); at != std::string_view::npos; at = truth.find(key, at + 1)) {
    const std::string_view after = truth.substr(at + key.size());
    const auto runs = digit_runs(after);
    // The first run starts right after the key (it is a prefix of `after`; a run that starts
    // later cannot be, as `after` then starts with a non-digit).
    if (!runs.empty() && after.substr(0, runs[0].size()) == runs[0])
      return fraction_equal(digit_runs(prediction), runs[0]);
  }
  throw Error(fmt::format("retrieval_score: the answer '{}' holds no \"Paragraph N\"", truth));
}

double count_score(std::string_view prediction, std::string_view truth) {
  return fraction_equal(digit_runs(prediction), truth);
}

std::string first_line(std::string_view prediction) {
  size_t start = 0;
  while (start < prediction.size() && prediction[start] == '\n') ++start;
  const size_t end = prediction.find('\n', start);
  return std::string(prediction.substr(start, end == std::string_view::npos ? end : end - start));
}

}  // namespace amor::eval

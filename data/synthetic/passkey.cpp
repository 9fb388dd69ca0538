// Passkey prompt generation (see passkey.h).
#include "data/synthetic/passkey.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "data/synthetic/haystack.h"
#include "data/synthetic/rng.h"
#include "kernels/core/error.h"

namespace amor::synthetic {
namespace {

constexpr std::string_view kTask =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there.";
constexpr std::string_view kGarbage =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
constexpr std::string_view kQuestion = "What is the pass key? The pass key is";

// The first n characters of " ".join([garbage] * many).
std::string filler(size_t n) {
  std::string s;
  s.reserve(n + kGarbage.size() + 1);
  while (s.size() < n) {
    if (!s.empty()) s += ' ';
    s += kGarbage;
  }
  s.resize(n);
  return s;
}

struct Parts {
  std::string info;
  std::optional<double> depth;
  double prefix_draw;  // uniform [0, 1): picks P when the depth is random, at the same relative
                       // place for every filler length the search tries
};

size_t prefix_chars(const Parts& p, size_t total) {
  if (p.depth)
    return static_cast<size_t>(std::floor(static_cast<double>(total) * *p.depth / 100.0));
  return std::min(total, static_cast<size_t>(p.prefix_draw * static_cast<double>(total + 1)));
}

std::string prompt(const Parts& p, size_t total, size_t* info_offset = nullptr) {
  const size_t pre = prefix_chars(p, total);
  std::string s(kTask);
  s += '\n';
  s += filler(pre);
  s += '\n';
  if (info_offset) *info_offset = s.size();
  s += p.info;
  s += '\n';
  s += filler(total - pre);
  s += '\n';
  s += kQuestion;
  return s;
}

}  // namespace

std::vector<TextSample> passkey(const PasskeyConfig& c, const TokenCounter& count) {
  AMOR_CHECK(c.tokens_to_generate >= 0, "passkey: tokens_to_generate must be >= 0, got {}",
             c.tokens_to_generate);
  AMOR_CHECK(c.max_seq_length > c.tokens_to_generate,
             "passkey: max_seq_length {} must exceed tokens_to_generate {}", c.max_seq_length,
             c.tokens_to_generate);
  AMOR_CHECK(c.num_samples >= 1, "passkey: num_samples must be at least 1, got {}", c.num_samples);
  AMOR_CHECK(c.passkey_min >= 0 && c.passkey_min <= c.passkey_max,
             "passkey: passkey_min {} and passkey_max {} must satisfy 0 <= min <= max",
             c.passkey_min, c.passkey_max);
  if (c.depth_percent)
    AMOR_CHECK(*c.depth_percent >= 0 && *c.depth_percent <= 100,
               "passkey: depth_percent {} is outside [0, 100]", *c.depth_percent);
  const uint64_t depth_key = c.depth_percent
                                 ? static_cast<uint64_t>(std::llround(*c.depth_percent * 1000))
                                 : std::numeric_limits<uint64_t>::max();
  const size_t budget = static_cast<size_t>(c.max_seq_length - c.tokens_to_generate);
  // Filler characters per token are a handful for any tokenizer; 64 per token bounds the search
  // for counters that merge long runs.
  const size_t max_chars = budget * 64;
  std::optional<size_t> hint;
  std::vector<TextSample> out;
  for (int64_t i = 0; i < c.num_samples; ++i) {
    Rng rng(derive_seed(
        c.seed, {static_cast<uint64_t>(c.max_seq_length), depth_key, static_cast<uint64_t>(i)}));
    const std::string key = std::to_string(rng.between(c.passkey_min, c.passkey_max));
    Parts p{fmt::format("The pass key is {0}. Remember it. {0} is the pass key.", key),
            c.depth_percent, rng.uniform()};
    auto cost = [&](size_t n) { return count(prompt(p, n)); };
    if (!hint) {
      const double per_char = static_cast<double>(count(filler(4096))) / 4096.0;
      const size_t fixed = cost(0);
      hint =
          fixed < budget
              ? static_cast<size_t>(static_cast<double>(budget - fixed) / std::max(per_char, 1e-3))
              : 0;
    }
    const auto n = fit_largest(cost, budget, max_chars, *hint);
    AMOR_CHECK(
        n.has_value(),
        "passkey: max_seq_length {} is too small: the prompt without filler takes {} tokens, "
        "and tokens_to_generate {} must fit too",
        c.max_seq_length, cost(0), c.tokens_to_generate);
    hint = *n;
    TextSample s;
    s.index = i;
    s.task = "passkey";
    size_t info_at = 0;
    s.prompt = prompt(p, *n, &info_at);
    s.answers = {key};
    s.max_seq_length = c.max_seq_length;
    s.tokens_to_generate = c.tokens_to_generate;
    s.prompt_tokens = static_cast<int64_t>(count(s.prompt));
    s.depth_percent = c.depth_percent ? *c.depth_percent : -1.0;
    // The haystack is prefix \n info \n suffix: the text between the task line and the question.
    const size_t hay_begin = kTask.size() + 1, hay_end = s.prompt.size() - kQuestion.size() - 1;
    s.answer_depths = {100.0 * static_cast<double>(info_at - hay_begin) /
                       static_cast<double>(hay_end - hay_begin)};
    // Roles: the task line (other), filler and line breaks (haystack), the pass key sentence
    // (needle), the line break and question (question).
    const size_t info_end = info_at + p.info.size(), question = hay_end;
    s.roles = {{0, hay_begin, TokenRole::Other},
               {hay_begin, info_at, TokenRole::Haystack},
               {info_at, info_end, TokenRole::Needle},
               {info_end, question, TokenRole::Haystack},
               {question, s.prompt.size(), TokenRole::Question}};
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace amor::synthetic

// Helpers shared by the synthetic-task tests: stand-in tokenizers and a test essay. Any tokenizer
// works with the generators; these are simple and exact so the tests can reason about lengths.
#pragma once
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/error.h"

namespace amor::synthetic::testing {

// The message of the amor::Error f throws, or "no error".
inline std::string error_of(auto f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// One token per run of letters/digits and one per other non-space byte, like a word-level
// pre-tokenizer: "One of the magic numbers is: 12." -> 9 tokens.
inline size_t word_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (std::isalnum(c)) {
      while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
      ++n;
    } else {
      n += !std::isspace(c);
      ++i;
    }
  }
  return n;
}

// A byte tokenizer: one token per byte.
inline size_t byte_count(std::string_view s) { return s.size(); }
inline std::vector<int32_t> byte_encode(std::string_view s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

// Plain prose with abbreviations, quotes and numbers (the sentence splitter's cases), repeated
// `copies` times with the copy number in it so that the text does not repeat exactly.
inline std::string test_essay(int copies) {
  std::string out;
  for (int i = 0; i < copies; ++i) {
    out += "Part " + std::to_string(i) + " begins here. ";
    out +=
        "The best way to learn something is to try to build it. Mr. Smith said so in 1998, and "
        "he was right about it.\nMost people who start a company do not know what they are doing "
        "at first. That is fine: nobody does!  What matters is whether they learn fast enough.\n\n"
        "\"Make something people want,\" the founders were told. They wrote it on the wall. Over "
        "the years the rule held up better than 3.5 other rules put together. Why would that be? "
        "Perhaps because it is simple. ";
  }
  return out;
}

}  // namespace amor::synthetic::testing

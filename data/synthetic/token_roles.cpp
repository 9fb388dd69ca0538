// Token roles of the synthetic tasks (see token_roles.h).
#include "data/synthetic/token_roles.h"

#include <array>

#include "data/synthetic/token_task.h"
#include "kernels/core/error.h"

namespace amor::synthetic {
namespace {

constexpr size_t kRoles = 11;

// Specificity of each role (higher wins when a token straddles spans), indexed by code.
constexpr std::array<int, kRoles> kRank = {
    /*none*/ 0, /*other*/ 1,    /*key*/ 6,        /*value*/ 5,     /*query*/ 8,  /*filler*/ 2,
    /*needle*/ 10, /*distractor*/ 9, /*haystack*/ 3, /*question*/ 7, /*answer*/ 4};

}  // namespace

const std::vector<std::string>& token_role_names() {
  static const std::vector<std::string> names = {"none",   "other",      "key",      "value",
                                                 "query",  "filler",     "needle",   "distractor",
                                                 "haystack", "question", "answer"};
  return names;
}

const std::string& token_role_name(TokenRole role) {
  const auto code = static_cast<size_t>(role);
  AMOR_CHECK(code < kRoles, "token_role_name: no role with code {}", code);
  return token_role_names()[code];
}

std::vector<uint8_t> mqar_roles(std::span<const int32_t> targets, int64_t num_kv_pairs,
                                bool answers_follow_queries) {
  const auto T = static_cast<int64_t>(targets.size());
  AMOR_CHECK(num_kv_pairs >= 1 && 2 * num_kv_pairs <= T,
             "mqar_roles: {} key-value pairs do not fit a sequence of {} positions", num_kv_pairs, T);
  std::vector<uint8_t> roles(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const bool labelled = targets[static_cast<size_t>(t)] != kIgnore;
    TokenRole r;
    if (t < 2 * num_kv_pairs) {
      AMOR_CHECK(!labelled, "mqar_roles: position {} lies in the key-value pairs but has a target", t);
      r = t % 2 == 0 ? TokenRole::Key : TokenRole::Value;
    } else {
      const bool after_query = answers_follow_queries && t > 2 * num_kv_pairs &&
                               targets[static_cast<size_t>(t - 1)] != kIgnore;
      r = labelled ? TokenRole::Query : after_query ? TokenRole::Answer : TokenRole::Filler;
    }
    roles[static_cast<size_t>(t)] = static_cast<uint8_t>(r);
  }
  return roles;
}

void check_role_partition(const std::vector<RoleSpan>& spans, size_t text_bytes) {
  size_t at = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    AMOR_CHECK(spans[i].begin == at && spans[i].end >= spans[i].begin,
               "role spans: span {} is [{}, {}) but the previous one ends at {}", i, spans[i].begin,
               spans[i].end, at);
    at = spans[i].end;
  }
  AMOR_CHECK(at == text_bytes, "role spans: cover {} bytes of a {}-byte text", at, text_bytes);
}

std::vector<uint8_t> token_roles(const std::vector<RoleSpan>& spans, size_t text_bytes,
                                 std::span<const size_t> token_bytes) {
  size_t sum = 0;
  for (size_t n : token_bytes) sum += n;
  AMOR_CHECK(sum == text_bytes, "token_roles: the tokens hold {} bytes, the text {}", sum, text_bytes);
  for (size_t i = 0; i < spans.size(); ++i) {
    AMOR_CHECK(spans[i].begin <= spans[i].end && spans[i].end <= text_bytes &&
                   (i == 0 || spans[i - 1].end <= spans[i].begin),
               "token_roles: span {} [{}, {}) is out of order, overlaps or passes the text's {} bytes", i,
               spans[i].begin, spans[i].end, text_bytes);
    AMOR_CHECK(static_cast<size_t>(spans[i].role) < kRoles, "token_roles: span {} has no role code {}", i,
               static_cast<int>(spans[i].role));
  }
  std::vector<uint8_t> out;
  out.reserve(token_bytes.size());
  size_t pos = 0, s = 0;  // s: the first span that may still overlap [pos, ...)
  for (size_t n : token_bytes) {
    const size_t end = pos + n;
    TokenRole best = TokenRole::None;  // also for bytes outside every span, and empty tokens
    while (s < spans.size() && spans[s].end <= pos) ++s;
    for (size_t j = s; j < spans.size() && spans[j].begin < end; ++j)
      if (spans[j].end > pos && kRank[static_cast<size_t>(spans[j].role)] > kRank[static_cast<size_t>(best)])
        best = spans[j].role;
    out.push_back(static_cast<uint8_t>(best));
    pos = end;
  }
  return out;
}

}  // namespace amor::synthetic

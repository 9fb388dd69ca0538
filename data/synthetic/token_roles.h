// The role of each position of a synthetic task's sequence (what the token is for), so that
// per-token records (run.h5 /tokens/<set>/role) can be broken down by role: does AMOR's gate fire
// where recall happens (MQAR's queries, NIAH's question) or on the filler?
//
// One code table for every task (run.h5 stores it as the `names` attribute of each role dataset,
// names[code]):
//
//   code name        where
//   0    none        a task without roles (corpus text, lambada, ...), or tokens not labelled
//   1    other       text of a role-bearing prompt that is none of the roles below: the NIAH
//                    and passkey instruction before the haystack ("A special magic number is
//                    hidden ... afterwards.\n", "There is an important info ... there.\n")
//   2    key         MQAR: the key of a key-value pair, positions 2j (j < num_kv_pairs)
//   3    value       MQAR: the value of a pair, positions 2j + 1
//   4    query       MQAR: a key asked again; the position whose target is that key's value,
//                    i.e. where the model must recall
//   5    filler      MQAR: every other position after the pairs (token 0, or a random token with
//                    random_non_queries); no target
//   6    needle      NIAH: a needle sentence whose key is asked about ("One of the special magic
//                    numbers for K is: V."); passkey: "The pass key is N. Remember it. N is the
//                    pass key."
//   7    distractor  NIAH: a needle sentence whose key is not asked about (niah_multikey_1's three
//                    other keys; the whole haystack of niah_multikey_2/3)
//   8    haystack    NIAH: the essay or noise sentences and the separators between haystack units
//                    and needles; passkey: the filler text and the line breaks around the needle
//   9    question    NIAH and passkey: the question after the haystack with its answer prefix
//                    ("\nWhat is the special magic number for K ... is"; "\nWhat is the pass
//                    key? The pass key is")
//   10   answer      tokens after the prompt: generated tokens the model read back while
//                    decoding (generation records), or the reference answer (teacher-forced);
//                    MQAR with answers_in_input (`data.mqar.layout: lm`): the value written right
//                    after a query
//
// A role belongs to the input token at that position: the gate decision and entropy recorded
// there are those of the prediction made after reading it (so an MQAR query is where the value
// is predicted).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace amor::synthetic {

enum class TokenRole : uint8_t {
  None = 0,
  Other = 1,
  Key = 2,
  Value = 3,
  Query = 4,
  Filler = 5,
  Needle = 6,
  Distractor = 7,
  Haystack = 8,
  Question = 9,
  Answer = 10,
};

// names[code] for every code above, in code order ("none", "other", "key", ...).
const std::vector<std::string>& token_role_names();
const std::string& token_role_name(TokenRole role);

// A byte range [begin, end) of a text prompt with one role.
struct RoleSpan {
  size_t begin = 0, end = 0;
  TokenRole role = TokenRole::None;
  bool operator==(const RoleSpan&) const = default;
};

// MQAR roles of one sequence from its targets (mqar.h's layout): key / value alternating over the
// first 2 * num_kv_pairs positions, then query where a target is set and filler elsewhere.
// With answers_follow_queries (mqar.h's answers_in_input) the position right after each query is
// answer. Errors if the pairs do not fit or a target is set inside the pairs.
std::vector<uint8_t> mqar_roles(std::span<const int32_t> targets, int64_t num_kv_pairs,
                                bool answers_follow_queries = false);

// Per-token roles of a prompt from its byte spans and its tokens' byte lengths (the tokens'
// bytes concatenated are the prompt). The spans must be sorted and not overlap; bytes outside
// every span have role None. A token takes the role of its bytes; one whose bytes straddle spans
// (a BPE token " One" joining a separator and a needle) takes the most specific of them, in the
// order needle, distractor, query, question, key, value, answer, haystack, filler, other, none.
// A token of zero bytes is None. Errors if the lengths do not add up to `text_bytes`.
std::vector<uint8_t> token_roles(const std::vector<RoleSpan>& spans, size_t text_bytes,
                                 std::span<const size_t> token_bytes);

// Checks that spans cover [0, text_bytes) exactly, in order, without gaps (what the generators
// promise); errors name the first gap or overlap.
void check_role_partition(const std::vector<RoleSpan>& spans, size_t text_bytes);

// The roles of one token sequence (tokens, targets) of a task, or empty where it has none: how
// the runner labels sequences it gets from a batch source (data.source: mqar).
using RoleRule =
    std::function<std::vector<uint8_t>(std::span<const int32_t> tokens, std::span<const int32_t> targets)>;

}  // namespace amor::synthetic

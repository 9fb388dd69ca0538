// lm-eval's pair encoding and left truncation (see pair_encoding.h).
#include "runner/eval/pair_encoding.h"

#include <string>

#include "data/json/json.h"
#include "data/text/unicode_text.h"
#include "kernels/core/error.h"

namespace amor::eval {

LoglikRequest encode_pair(const Tokenizer& tokenizer, std::string_view context,
                          std::string_view continuation) {
  LoglikRequest r;
  if (context.empty()) {
    // lm-eval's HFLM.prefix_token_id: the tokenizer's BOS where it has one, else its EOS.
    const int32_t prefix = tokenizer.bos_id() >= 0 ? tokenizer.bos_id() : tokenizer.eos_id();
    AMOR_CHECK(prefix >= 0,
               "encode_pair: an empty context is scored after the BOS (or else EOS) token, but "
               "tokenizer '{}' has neither",
               tokenizer.name());
    r.context = {prefix};
    r.continuation = tokenizer.encode(continuation);
    return r;
  }
  // n_spaces = len(context) - len(context.rstrip())
  const size_t keep = text::rstrip(context).size();
  const std::string cont = std::string(context.substr(keep)) + std::string(continuation);
  const std::string_view ctx = context.substr(0, keep);
  // A context of whitespace only: lm-eval moves all of it, leaving "" to be encoded as no tokens.
  r.context = tokenizer.encode(ctx);
  std::vector<int32_t> whole = tokenizer.encode(std::string(ctx) + cont);
  AMOR_CHECK(whole.size() >= r.context.size(),
             "encode_pair: context + continuation encodes to fewer tokens ({}) than the context "
             "alone ({})",
             whole.size(), r.context.size());
  r.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(r.context.size()), whole.end());
  return r;
}

LoglikRequest make_loglik_request(const Tokenizer& tokenizer, std::string_view context,
                                  std::string_view continuation, int64_t max_length,
                                  std::string_view what) {
  LoglikRequest r = encode_pair(tokenizer, context, continuation);
  AMOR_CHECK(!r.continuation.empty(),
             "{}: the continuation {} encodes to no tokens of its own (context {} chars)", what,
             json::quote(continuation), context.size());
  const auto window = static_cast<size_t>(max_length) + 1;
  // At least one context token must remain to predict the continuation's first token.
  AMOR_CHECK(r.continuation.size() < window,
             "{}: the continuation has {} tokens; the model's window of {} tokens leaves no context",
             what, r.continuation.size(), max_length);
  if (r.context.size() + r.continuation.size() > window) {
    const size_t drop = r.context.size() + r.continuation.size() - window;
    r.context.erase(r.context.begin(), r.context.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  return r;
}

}  // namespace amor::eval

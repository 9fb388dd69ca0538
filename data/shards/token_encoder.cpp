// make_encoder: a Tokenizer from make_tokenizer seen as a TokenEncoder (see token_encoder.h).
#include "data/shards/token_encoder.h"

#include <memory>

#include "data/tokenizer/tokenizer.h"
#include "kernels/core/error.h"

namespace amor::shards {

TokenEncoder make_encoder(const std::string& spec) {
  std::shared_ptr<const Tokenizer> tok = make_tokenizer(spec);
  AMOR_CHECK(tok->eos_id() >= 0, "tokenizer '{}' has no EOS id: token shards need one to separate documents",
             tok->name());
  AMOR_CHECK(tok->vocab_size() > 0 && tok->vocab_size() <= 0x7fffffff,
             "tokenizer '{}': vocabulary size {} is out of range", tok->name(), tok->vocab_size());
  TokenEncoder e;
  e.name = tok->name();
  e.vocab_size = static_cast<uint32_t>(tok->vocab_size());
  e.eos_id = static_cast<uint32_t>(tok->eos_id());
  e.encode = [tok](std::string_view text) { return tok->encode(text); };
  return e;
}

}  // namespace amor::shards

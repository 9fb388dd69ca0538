// The little the converter needs from a tokenizer: a name for the shard header, the vocabulary
// size, the EOS id that separates documents, and text -> ids.
//
// A plain struct of values and a function, so that shards and their tests do not depend on the
// tokenizer classes; make_encoder(spec) is the one place a --tokenizer spec becomes an encoder.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace amor::shards {

struct TokenEncoder {
  std::string name;  // recorded in each shard's header ("byte", "gpt2", "llama3", a file stem)
  uint32_t vocab_size = 0;
  uint32_t eos_id = 0;
  std::function<std::vector<int32_t>(std::string_view)> encode;
};

// A --tokenizer spec, through amor::make_tokenizer: "byte", "gpt2", "llama3" or a path to a
// tokenizer.json. Special-token names written in the text stay plain text (so a corpus cannot
// forge document separators). A tokenizer without an EOS id is an error: shards need it.
TokenEncoder make_encoder(const std::string& spec);

}  // namespace amor::shards

// The non-virtual parts of the Tokenizer interface.
#include "data/tokenizer/tokenizer.h"

namespace amor {

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  encode_into(text, ids, options);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    out += token_bytes(id);
  }
  return out;
}

}  // namespace amor

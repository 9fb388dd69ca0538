// ByteTokenizer: bytes are ids; three special tokens above them.
#include "data/tokenizer/byte_tokenizer.h"

#include "kernels/core/error.h"

namespace amor {

ByteTokenizer::ByteTokenizer() {
  for (int b = 0; b < 256; ++b) bytes_[b] = std::string(1, static_cast<char>(b));
  bytes_[kEos] = "<|eos|>";
  bytes_[kBos] = "<|bos|>";
  bytes_[kPad] = "<|pad|>";
}

void ByteTokenizer::encode_into(std::string_view text, std::vector<int32_t>& out,
                                const EncodeOptions& options) const {
  out.reserve(out.size() + text.size());
  for (size_t i = 0; i < text.size();) {
    if (options.special_tokens && text[i] == '<') {
      bool matched = false;
      for (int32_t id = 256; id < kVocabSize && !matched; ++id) {
        if (text.substr(i, bytes_[id].size()) == bytes_[id]) {
          out.push_back(id);
          i += bytes_[id].size();
          matched = true;
        }
      }
      if (matched) continue;
    }
    out.push_back(static_cast<unsigned char>(text[i]));
    ++i;
  }
}

std::string_view ByteTokenizer::token_bytes(int32_t id) const {
  AMOR_CHECK(id >= 0 && id < kVocabSize,
             "tokenizer 'byte': id {} is outside the vocabulary [0, {})", id, kVocabSize);
  return bytes_[id];
}

int32_t ByteTokenizer::special_id(std::string_view content) const {
  for (int32_t id = 256; id < kVocabSize; ++id)
    if (bytes_[id] == content) return id;
  return -1;
}

}  // namespace amor

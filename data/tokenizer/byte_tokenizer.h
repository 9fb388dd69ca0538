// The byte tokenizer (synthetic tasks, byte-level baselines): id b for byte b (0..255), then
//   256 <|eos|>  end of text, the document separator in shards (as the shards' byte encoder)
//   257 <|bos|>  beginning of text
//   258 <|pad|>  padding
// so vocab_size() is 259. With EncodeOptions::special_tokens the three names written in the text
// become their ids; otherwise every byte of the text is its own id.
#pragma once
#include <array>
#include <string>

#include "data/tokenizer/tokenizer.h"

namespace amor {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEos = 256, kBos = 257, kPad = 258, kVocabSize = 259;

  ByteTokenizer();
  const std::string& name() const override { return name_; }
  int64_t vocab_size() const override { return kVocabSize; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  void encode_into(std::string_view text, std::vector<int32_t>& out,
                   const EncodeOptions& options = {}) const override;
  std::string_view token_bytes(int32_t id) const override;
  bool is_special(int32_t id) const override { return id >= 256 && id < kVocabSize; }
  int32_t special_id(std::string_view content) const override;

 private:
  std::string name_ = "byte";
  std::array<std::string, kVocabSize> bytes_;
};

}  // namespace amor

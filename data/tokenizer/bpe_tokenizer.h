// Byte-level BPE (GPT-2, Llama-3 and their kin), loaded from a Hugging Face tokenizer.json or
// from GPT-2's encoder.json + vocab.bpe, with ids equal to the reference encoders' (see
// tests/tokenizer_oracle/). Encoding: split out added tokens (special ones only with
// EncodeOptions::special_tokens) -> pre-tokenize (PCRE2) -> BPE merges on raw bytes.
//
// Supported tokenizer.json: model.type "BPE" (merges as "a b" strings or [a, b] pairs, optional
// ignore_merges); no normalizer; pre_tokenizer ByteLevel, Split (Regex or String pattern,
// behavior Isolated) or a Sequence of them with a ByteLevel step; added_tokens with lstrip/rstrip.
// Anything else is an error naming the file and the key, never a silent approximation.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer/bpe_model.h"
#include "data/tokenizer/pre_tokenizer.h"
#include "data/tokenizer/tokenizer.h"

namespace amor {

class BpeTokenizer final : public Tokenizer {
 public:
  struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = false, lstrip = false, rstrip = false;
  };

  // Everything a loader reads from its files, in the files' spelling (byte-level strings).
  struct Spec {
    std::string name;
    std::string source;  // the file errors name
    std::vector<std::pair<std::string, int32_t>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;  // rank order
    std::vector<std::string> merge_where;  // per merge: where it is, e.g. "model.merges[3]"
    bool ignore_merges = false;
    tokenizer::PreTokenizer pre_tokenizer;
    std::vector<AddedToken> added;
    std::optional<std::string> bos_token, eos_token;  // token texts
    std::string bos_where, eos_where;                 // where they came from, for errors
  };

  // A tokenizer.json; BOS/EOS from tokenizer_config.json beside it when present, else from a
  // TemplateProcessing post-processor, else from well-known special token names.
  static std::unique_ptr<BpeTokenizer> from_tokenizer_json(const std::string& path,
                                                           const std::string& name);
  // GPT-2's files; "<|endoftext|>" is the (special) BOS and EOS.
  static std::unique_ptr<BpeTokenizer> from_gpt2_files(const std::string& encoder_json,
                                                       const std::string& vocab_bpe,
                                                       const std::string& name = "gpt2");
  // Validates spec (unknown merge tokens, missing bytes, clashing ids) and builds.
  explicit BpeTokenizer(Spec spec);

  const std::string& name() const override { return name_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(bytes_.size()); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  void encode_into(std::string_view text, std::vector<int32_t>& out,
                   const EncodeOptions& options = {}) const override;
  std::string_view token_bytes(int32_t id) const override;
  bool is_special(int32_t id) const override;
  int32_t special_id(std::string_view content) const override;

  size_t merge_count() const { return model_->merge_count(); }

 private:
  enum Kind : uint8_t { kHole, kModel, kAdded, kSpecial };
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;

  std::string name_;
  std::vector<std::string> bytes_;  // per id
  std::vector<uint8_t> kind_;       // per id
  std::unique_ptr<tokenizer::BpeModel> model_;
  tokenizer::PreTokenizer pre_;
  std::vector<AddedToken> added_;
  std::array<std::vector<uint32_t>, 256>
      added_by_first_byte_;  // indices into added_, longest first
  int32_t bos_ = -1, eos_ = -1;
};

}  // namespace amor

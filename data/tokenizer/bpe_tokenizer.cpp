// BpeTokenizer: validation of a loaded Spec, added-token splitting and the encode pipeline.
#include "data/tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/utf8.h"
#include "kernels/core/error.h"

namespace amor {

namespace {

// JavaScript's String.prototype.trim set (WhiteSpace + LineTerminator), which transformers.js
// applies around added tokens with lstrip/rstrip.
bool is_js_space(uint32_t cp) {
  return cp == 0x09 || cp == 0x0A || cp == 0x0B || cp == 0x0C || cp == 0x0D || cp == 0x20 ||
         cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

std::string_view trim_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_js_space(tokenizer::next_code_point(s, j))) break;
    i = j;
  }
  return s.substr(i);
}

std::string_view trim_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t j = start;
    if (!is_js_space(tokenizer::next_code_point(s, j))) break;
    end = start;
  }
  return s.substr(0, end);
}

}  // namespace

BpeTokenizer::BpeTokenizer(Spec spec)
    : name_(std::move(spec.name)),
      pre_(std::move(spec.pre_tokenizer)),
      added_(std::move(spec.added)) {
  const std::string& src = spec.source;
  int64_t max_id = -1;
  for (const auto& [tok, id] : spec.vocab) max_id = std::max<int64_t>(max_id, id);
  for (const auto& a : added_) max_id = std::max<int64_t>(max_id, a.id);
  AMOR_CHECK(max_id >= 0, "{}: the vocabulary is empty", src);
  // Ids index a table: a stray huge id would allocate gigabytes instead of failing.
  const size_t listed = spec.vocab.size() + added_.size();
  AMOR_CHECK(static_cast<size_t>(max_id) < 2 * listed + 1024,
             "{}: id {} is far beyond the {} tokens listed; ids must be (nearly) contiguous", src,
             max_id, listed);
  bytes_.resize(static_cast<size_t>(max_id) + 1);
  kind_.assign(bytes_.size(), kHole);

  // Keys view spec's strings, which outlive this constructor's use of the map.
  std::unordered_map<std::string_view, int32_t> by_spelling;
  std::unordered_map<std::string, int32_t> by_bytes;
  by_spelling.reserve(spec.vocab.size() * 2);
  by_bytes.reserve(spec.vocab.size() * 2);
  for (const auto& [tok, id] : spec.vocab) {
    AMOR_CHECK(id >= 0, "{}: vocabulary token '{}' has the negative id {}", src, tok, id);
    auto bytes = tokenizer::token_to_bytes(tok);
    AMOR_CHECK(bytes.has_value(),
               "{}: vocabulary token '{}' (id {}) holds a character outside the byte-level "
               "alphabet, so this is not a byte-level BPE vocabulary",
               src, tok, id);
    AMOR_CHECK(kind_[id] == kHole, "{}: id {} is given to both '{}' and '{}'", src, id, tok,
               tokenizer::bytes_to_token(bytes_[id]));
    AMOR_CHECK(by_spelling.emplace(tok, id).second, "{}: vocabulary token '{}' appears twice", src,
               tok);
    kind_[id] = kModel;
    by_bytes.emplace(*bytes, id);
    bytes_[id] = std::move(*bytes);
  }

  std::array<int32_t, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    AMOR_CHECK(it != by_bytes.end(),
               "{}: the vocabulary has no token for byte 0x{:02X} ('{}'), so it is not a "
               "byte-level BPE vocabulary",
               src, b, tokenizer::bytes_to_token(std::string(1, static_cast<char>(b))));
    byte_ids[b] = it->second;
  }

  std::vector<tokenizer::BpeMerge> merges;
  merges.reserve(spec.merges.size());
  std::string joined;
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const auto& [a, b] = spec.merges[r];
    const std::string& where = spec.merge_where[r];
    auto ia = by_spelling.find(a), ib = by_spelling.find(b);
    AMOR_CHECK(ia != by_spelling.end(), "{}: {} ('{} {}'): '{}' is not in the vocabulary", src,
               where, a, b, a);
    AMOR_CHECK(ib != by_spelling.end(), "{}: {} ('{} {}'): '{}' is not in the vocabulary", src,
               where, a, b, b);
    joined.assign(a).append(b);
    auto im = by_spelling.find(joined);
    AMOR_CHECK(im != by_spelling.end(),
               "{}: {} ('{} {}'): the merged token '{}' is not in the vocabulary", src, where, a, b,
               joined);
    merges.push_back({ia->second, ib->second, im->second});
  }
  model_ = std::make_unique<tokenizer::BpeModel>(std::move(by_bytes), byte_ids, merges,
                                                 spec.ignore_merges);

  for (size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& a = added_[i];
    AMOR_CHECK(!a.content.empty(), "{}: added token id {} has empty content", src, a.id);
    AMOR_CHECK(tokenizer::first_invalid_utf8(a.content) == std::string_view::npos,
               "{}: added token id {} is not valid UTF-8", src, a.id);
    AMOR_CHECK(kind_[a.id] == kHole || kind_[a.id] == kModel,
               "{}: id {} is given to two added tokens ('{}' and '{}')", src, a.id, bytes_[a.id],
               a.content);
    // An added token decodes to its text, also where it shares an id with a vocabulary entry
    // (GPT-2's "<|endoftext|>"), as HF's and transformers.js's decoders do.
    bytes_[a.id] = a.content;
    kind_[a.id] = a.special ? kSpecial : kAdded;
    added_by_first_byte_[static_cast<unsigned char>(a.content[0])].push_back(
        static_cast<uint32_t>(i));
  }
  for (auto& list : added_by_first_byte_)  // longest match first, as transformers.js's trie
    std::stable_sort(list.begin(), list.end(), [&](uint32_t x, uint32_t y) {
      return added_[x].content.size() > added_[y].content.size();
    });

  auto resolve = [&](const std::optional<std::string>& tok, const std::string& where) -> int32_t {
    if (!tok) return -1;
    for (const auto& a : added_)
      if (a.content == *tok) return a.id;
    auto it = by_spelling.find(*tok);
    AMOR_CHECK(it != by_spelling.end(), "{}: {} names '{}', which is not a token", src, where,
               *tok);
    return it->second;
  };
  bos_ = resolve(spec.bos_token, spec.bos_where);
  eos_ = resolve(spec.eos_token, spec.eos_where);
}

void BpeTokenizer::encode_into(std::string_view text, std::vector<int32_t>& out,
                               const EncodeOptions& options) const {
  std::string repaired;
  if (tokenizer::first_invalid_utf8(text) != std::string_view::npos) {
    repaired = tokenizer::sanitize_utf8(text);
    text = repaired;
  }
  out.reserve(out.size() + text.size() / 3);

  // Sections: text between added tokens, and the added tokens (leftmost, longest first).
  struct Section {
    std::string_view text;
    const AddedToken* added;
  };
  std::vector<Section> sections;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = nullptr;
    for (uint32_t k : added_by_first_byte_[static_cast<unsigned char>(text[i])]) {
      const AddedToken& a = added_[k];
      if ((options.special_tokens || !a.special) &&
          text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start) sections.push_back({text.substr(start, i - start), nullptr});
    sections.push_back({text.substr(i, hit->content.size()), hit});
    i += hit->content.size();
    start = i;
  }
  if (start < text.size()) sections.push_back({text.substr(start), nullptr});

  for (size_t s = 0; s < sections.size(); ++s) {
    if (const AddedToken* a = sections[s].added) {
      if (a->lstrip && s > 0 && !sections[s - 1].added)
        sections[s - 1].text = trim_end(sections[s - 1].text);
      if (a->rstrip && s + 1 < sections.size() && !sections[s + 1].added)
        sections[s + 1].text = trim_start(sections[s + 1].text);
    }
  }
  for (const Section& s : sections) {
    if (s.added)
      out.push_back(s.added->id);
    else
      encode_text(s.text, out);
  }
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  pre_.run(text, [&](std::string_view piece) { model_->encode(piece, out); });
}

std::string_view BpeTokenizer::token_bytes(int32_t id) const {
  AMOR_CHECK(id >= 0 && static_cast<size_t>(id) < bytes_.size() && kind_[id] != kHole,
             "tokenizer '{}': id {} is not a token (vocabulary size {})", name_, id, bytes_.size());
  return bytes_[id];
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < kind_.size() && kind_[id] == kSpecial;
}

int32_t BpeTokenizer::special_id(std::string_view content) const {
  for (const auto& a : added_)
    if (a.content == content) return a.id;
  return -1;
}

}  // namespace amor

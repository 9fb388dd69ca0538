// Dataset statistics with a full integrity scan (see shard_stats.h).
#include "data/shards/shard_stats.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "data/shards/shard_files.h"
#include "data/shards/shard_reader.h"
#include "kernels/core/error.h"

namespace fs = std::filesystem;

namespace amor::shards {
namespace {

// Reads every token (the reader rejects ids outside the vocabulary) and counts EOS.
void scan_shard(const TokenShard& s) {
  constexpr uint64_t kChunk = 1 << 20;
  std::vector<int32_t> buf(kChunk);
  uint64_t eos = 0;
  const auto eos_id = static_cast<int32_t>(s.header().eos_id);
  for (uint64_t at = 0; at < s.size(); at += kChunk) {
    uint64_t n = std::min(kChunk, s.size() - at);
    s.read(at, n, buf.data());
    eos += static_cast<uint64_t>(std::count(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n), eos_id));
  }
  AMOR_CHECK(eos == s.header().document_count,
             "{}: corrupted token shard: the header says {} documents but the tokens hold {} EOS ids", s.path(),
             s.header().document_count, eos);
  AMOR_CHECK(s.size() == 0 || s.at(s.size() - 1) == eos_id,
             "{}: corrupted token shard: the last token is not EOS (documents end with EOS id {})", s.path(),
             eos_id);
}

void add_shard(DatasetSummary& d, SplitSummary& split, const std::string& path, std::string& first) {
  TokenShard s(path);
  const ShardHeader& h = s.header();
  if (first.empty()) {
    first = path;
    d.tokenizer = h.tokenizer;
    d.vocab_size = h.vocab_size;
    d.eos_id = h.eos_id;
    d.token_bytes = h.token_bytes;
  } else {
    AMOR_CHECK(h.tokenizer == d.tokenizer && h.vocab_size == d.vocab_size && h.eos_id == d.eos_id,
               "{}: tokenizer '{}' (vocabulary {}, EOS {}) differs from {}'s '{}' (vocabulary {}, EOS {})", path,
               h.tokenizer, h.vocab_size, h.eos_id, first, d.tokenizer, d.vocab_size, d.eos_id);
  }
  scan_shard(s);
  split.shards++;
  split.documents += h.document_count;
  split.tokens += h.token_count;
  split.bytes += kHeaderBytes + h.token_count * h.token_bytes;
}

}  // namespace

DatasetSummary summarize_shards(const std::string& path) {
  DatasetSummary d;
  d.path = path;
  std::string first;
  std::error_code ec;
  AMOR_CHECK(fs::exists(path, ec), "{}: no such file or directory", path);
  if (fs::is_directory(path, ec)) {
    for (const std::string& split : list_splits(path)) {
      SplitSummary s;
      s.split = split;
      for (const std::string& f : list_shard_files(path, split)) add_shard(d, s, f, first);
      d.splits.push_back(s);
    }
    AMOR_CHECK(!d.splits.empty(), "{}: no token shards here (train-NNNNN.tok, valid-NNNNN.tok)", path);
  } else {
    SplitSummary s;
    s.split = fs::path(path).filename().string();
    add_shard(d, s, path, first);
    d.splits.push_back(s);
  }
  return d;
}

std::string format_summary(const DatasetSummary& d) {
  std::string r = fmt::format("{}\ntokenizer {} (vocabulary {}, EOS {}, {}-byte tokens)\n", d.path, d.tokenizer,
                              d.vocab_size, d.eos_id, d.token_bytes);
  r += fmt::format("{:<16} {:>7} {:>12} {:>14} {:>12} {:>14}\n", "split", "shards", "documents", "tokens",
                   "tokens/doc", "bytes");
  for (const SplitSummary& s : d.splits) {
    double per_doc = s.documents ? static_cast<double>(s.tokens) / static_cast<double>(s.documents) : 0.0;
    r += fmt::format("{:<16} {:>7} {:>12} {:>14} {:>12.1f} {:>14}\n", s.split, s.shards, s.documents, s.tokens,
                     per_doc, s.bytes);
  }
  return r;
}

}  // namespace amor::shards

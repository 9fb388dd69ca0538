// Text -> token shards (see convert.h).
#include "data/shards/convert.h"

#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "data/shards/corpus_inputs.h"
#include "data/shards/shard_files.h"
#include "data/shards/shard_writer.h"
#include "kernels/core/error.h"

namespace fs = std::filesystem;

namespace amor::shards {
namespace {

// The shards of one split, opened one after another as they fill up.
class SplitWriter {
 public:
  SplitWriter(std::string dir, std::string split, ShardInfo info, uint64_t shard_tokens)
      : dir_(std::move(dir)), split_(std::move(split)), info_(std::move(info)), shard_tokens_(shard_tokens) {}

  void add(const std::vector<int32_t>& doc, SplitStats& stats) {
    uint64_t n = doc.size() + 1;
    bool full = !shards_.empty() && shards_.back()->token_count() + n > shard_tokens_;
    if (full) shards_.back()->finish();  // closes its file: one shard open at a time
    if (shards_.empty() || full) {
      std::string path = (fs::path(dir_) / shard_file_name(split_, shards_.size())).string();
      shards_.push_back(std::make_unique<ShardWriter>(path, info_));
      stats.files.push_back(path);
    }
    shards_.back()->add_document(doc);
    stats.documents++;
    stats.tokens += n;
  }
  void finish() {
    for (auto& s : shards_) s->finish();
  }
  void commit() {
    for (auto& s : shards_) s->commit();
  }

 private:
  std::string dir_, split_;
  ShardInfo info_;
  uint64_t shard_tokens_;
  std::vector<std::unique_ptr<ShardWriter>> shards_;
};

// Removes the output folder on failure if this conversion created it and left it empty.
struct CreatedDir {
  std::string path;
  bool created = false;
  bool keep = false;
  ~CreatedDir() {
    std::error_code ec;
    if (created && !keep && fs::is_empty(path, ec)) fs::remove(path, ec);
  }
};

}  // namespace

bool is_validation_document(uint64_t i, double f) {
  if (f <= 0) return false;
  if (i == 0) return true;
  return std::floor(static_cast<double>(i) * f) > std::floor(static_cast<double>(i - 1) * f);
}

ConvertStats convert_corpus(const ConvertOptions& o, const TokenEncoder& enc) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  AMOR_CHECK(o.valid_fraction >= 0 && o.valid_fraction < 1,
             "--valid-fraction must be in [0, 1), got {}", o.valid_fraction);
  AMOR_CHECK(o.shard_tokens > 0, "--shard-tokens must be positive");
  AMOR_CHECK(!o.inputs.empty(), "no inputs: name text files, folders or .jsonl files to convert");
  AMOR_CHECK(!o.out_dir.empty(), "no output folder (--out)");
  AMOR_CHECK(enc.encode != nullptr && enc.vocab_size > 0, "tokenizer '{}' has no encoder", enc.name);

  // Every input is checked to exist before anything is written.
  std::vector<InputFile> files = list_inputs(o.inputs);

  CreatedDir out{o.out_dir};
  std::error_code ec;
  if (fs::exists(o.out_dir, ec)) {
    AMOR_CHECK(fs::is_directory(o.out_dir, ec), "{}: --out exists and is not a folder", o.out_dir);
  } else {
    fs::create_directories(o.out_dir, ec);
    AMOR_CHECK(!ec, "{}: cannot create the output folder: {}", o.out_dir, ec.message());
    out.created = true;
  }
  std::vector<std::string> old_shards = list_all_shard_files(o.out_dir);
  AMOR_CHECK(old_shards.empty() || o.overwrite,
             "{}: already holds token shards ({}, ...); choose another --out or pass --overwrite",
             o.out_dir, fs::path(old_shards.front()).filename().string());

  ConvertStats st;
  st.tokenizer = enc.name;
  st.vocab_size = enc.vocab_size;
  st.input_files = files.size();
  for (const auto& f : files) st.input_bytes += f.bytes;

  ShardInfo info{enc.name, enc.vocab_size, enc.eos_id};
  SplitWriter train(o.out_dir, "train", info, o.shard_tokens);
  SplitWriter valid(o.out_dir, "valid", info, o.shard_tokens);

  ConvertProgress prog;
  prog.bytes_total = st.input_bytes;
  auto last_report = clock::now();
  auto report = [&](bool force) {
    auto now = clock::now();
    if (!o.progress || (!force && now - last_report < std::chrono::milliseconds(250))) return;
    last_report = now;
    prog.seconds = std::chrono::duration<double>(now - t0).count();
    o.progress(prog);
  };

  uint64_t doc_index = 0, bytes_before_file = 0;
  for (const InputFile& f : files) {
    uint64_t in_file = 0;
    read_documents(f, ReadOptions{o.jsonl_field, o.text_docs}, [&](std::string_view text, const std::string& where, uint64_t bytes) {
      in_file += bytes;
      prog.bytes_done = bytes_before_file + std::min(in_file, f.bytes);
      if (text.empty()) {
        st.empty_documents++;
        return;
      }
      std::vector<int32_t> ids;
      try {
        ids = enc.encode(text);
      } catch (const std::exception& e) {
        throw Error(fmt::format("{}: tokenizer '{}': {}", where, enc.name, e.what()));
      }
      bool is_valid = is_validation_document(doc_index++, o.valid_fraction);
      try {
        (is_valid ? valid : train).add(ids, is_valid ? st.valid : st.train);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", where, e.what()));
      }
      prog.documents++;
      prog.tokens += ids.size() + 1;
      report(false);
    });
    bytes_before_file += f.bytes;
    prog.bytes_done = bytes_before_file;
  }

  AMOR_CHECK(!files.empty(), "empty corpus: no files found in {}", fmt::join(o.inputs, ", "));
  AMOR_CHECK(doc_index > 0, "empty corpus: the {} input file(s) hold no text (first: {})", files.size(),
             files.front().path);
  AMOR_CHECK(st.train.documents > 0,
             "only {} document(s): none left for training after the validation split (--valid-fraction {}); a "
             "text file is one document unless --text-docs paragraphs or lines splits it",
             doc_index, o.valid_fraction);

  train.finish();
  valid.finish();
  // Everything is on disk under temporary names: now swap the new set in.
  std::set<std::string> fresh(st.train.files.begin(), st.train.files.end());
  fresh.insert(st.valid.files.begin(), st.valid.files.end());
  train.commit();
  valid.commit();
  out.keep = true;
  for (const std::string& p : old_shards)
    if (!fresh.count(p)) fs::remove(p, ec);
  sync_directory(o.out_dir);

  st.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  report(true);
  return st;
}

std::string format_convert_stats(const ConvertStats& s) {
  auto per_doc = [](const SplitStats& x) {
    return x.documents ? static_cast<double>(x.tokens) / static_cast<double>(x.documents) : 0.0;
  };
  std::string r;
  r += fmt::format("tokenizer      {} (vocabulary {})\n", s.tokenizer, s.vocab_size);
  r += fmt::format("inputs         {} file(s), {} bytes\n", s.input_files, s.input_bytes);
  r += fmt::format("{:<8} {:>7} {:>12} {:>14} {:>12}\n", "split", "shards", "documents", "tokens", "tokens/doc");
  for (auto [name, x] : {std::pair<const char*, const SplitStats*>{"train", &s.train}, {"valid", &s.valid}})
    r += fmt::format("{:<8} {:>7} {:>12} {:>14} {:>12.1f}\n", name, x->files.size(), x->documents, x->tokens,
                     per_doc(*x));
  uint64_t tokens = s.train.tokens + s.valid.tokens;
  r += fmt::format("bytes/token    {:.3f} (EOS included)\n",
                   tokens ? static_cast<double>(s.input_bytes) / static_cast<double>(tokens) : 0.0);
  if (s.empty_documents) r += fmt::format("skipped        {} empty document(s)\n", s.empty_documents);
  r += fmt::format("time           {:.1f} s\n", s.seconds);
  return r;
}

}  // namespace amor::shards

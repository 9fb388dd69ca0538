#include "runner/train/data_setup.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "data/corpus/kjv.h"
#include "data/loader/token_dataset.h"
#include "data/shards/convert.h"
#include "data/shards/shard_files.h"
#include "data/shards/token_encoder.h"
#include "data/synthetic/mqar.h"
#include "kernels/core/error.h"

namespace amor {

namespace fs = std::filesystem;

std::string builtin_corpus_dir(const std::string& tokenizer) {
  fs::path cache;
  if (const char* c = std::getenv("AMOR_CACHE"); c && *c) {
    cache = c;
  } else {
    const char* home = std::getenv("HOME");
    cache = fs::path(home && *home ? home : "/tmp") / ".cache" / "amor-run";
  }
  std::string name = fs::path(tokenizer).stem().string();
  fs::path dir = cache / "corpus" / ("kjv-" + name);
  if (fs::is_directory(dir) && !shards::list_shard_files(dir.string(), "train").empty())
    return dir.string();
  fs::create_directories(dir.parent_path());
  fs::path tmp = dir.parent_path() / (".kjv-" + name + ".tmp." + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::string jsonl = (tmp / "kjv.jsonl").string();
  corpus::write_jsonl(corpus::kjv_chapters(), jsonl);
  shards::ConvertOptions opt;
  opt.inputs = {jsonl};
  opt.out_dir = (tmp / "shards").string();
  opt.valid_fraction = 0.01;  // as scripts/prepare_corpus.sh: 12 of 1,189 chapters
  shards::convert_corpus(opt, shards::make_encoder(tokenizer));
  std::error_code ec;
  fs::rename(tmp / "shards", dir, ec);  // another process may have won the race: fine
  fs::remove_all(tmp);
  AMOR_CHECK(!shards::list_shard_files(dir.string(), "train").empty(),
             "data: could not prepare the built-in corpus in {}", dir.string());
  return dir.string();
}

RunData make_run_data(const config::RunConfig& cfg, int rank, int world) {
  const auto& d = cfg.data;
  const uint64_t seed = static_cast<uint64_t>(cfg.train.seed);
  RunData out;
  if (d.source == "mqar") {
    synthetic::MqarConfig m;
    m.vocab_size = cfg.model.vocab;
    m.input_seq_len = d.seq_len;
    m.num_kv_pairs = d.mqar.num_kv_pairs;
    m.power_a = d.mqar.power_a;
    m.random_non_queries = d.mqar.random_filler;
    m.answers_in_input = d.mqar.layout == "lm";
    m.seed = seed;
    m.num_examples = d.mqar.num_train;
    m.next_token_targets = m.answers_in_input;  // lm: trained on every next token
    m.pair_targets = d.mqar.pair_targets;       // (lm) false: but not on the pairs'
    auto train = synthetic::mqar(m);
    m.next_token_targets = false;  // validation scores recall at the queries in both layouts
    m.pair_targets = true;
    m.first_example = d.mqar.num_train;  // validation examples are never trained on
    m.num_examples = d.mqar.num_valid;
    auto valid = synthetic::mqar(m);
    out.train = example_source(std::move(train), cfg.train.micro_batch, rank, world, seed, true);
    out.valid = example_source(std::move(valid), cfg.train.micro_batch, rank, world, seed, false);
    out.recall_task = true;
    out.roles = [k = m.num_kv_pairs, answers = m.answers_in_input](std::span<const int32_t>,
                                                                  std::span<const int32_t> targets) {
      return synthetic::mqar_roles(targets, k, answers);
    };
    return out;
  }
  std::string path = d.path;
  if (d.source == "corpus" && path.empty()) path = builtin_corpus_dir(d.tokenizer);
  AMOR_CHECK(!path.empty(), "data.path: source '{}' needs a shard folder", d.source);
  auto train = data::TokenDataset::open(path, "train", cfg.model.vocab);
  auto valid = data::TokenDataset::open(path, "valid", cfg.model.vocab);
  out.train = stream_source(std::move(train), d.seq_len, cfg.train.micro_batch, rank, world, seed, true);
  out.valid = stream_source(std::move(valid), d.seq_len, cfg.train.micro_batch, rank, world, seed, false);
  return out;
}

}  // namespace amor

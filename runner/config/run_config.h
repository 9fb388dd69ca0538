// The resolved configuration of one run: every key a sweep file can set, with its default.
//
// A key's dotted name follows the nesting (`train.lr`, `model.amor.kappa`, `device`); the schema
// (schema.h) lists every key with its type and allowed values, and that table is the single place
// that maps names to these fields. Defaults here are what a key is when no file sets it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/core/config.h"

namespace amor::config {

// `model.*`: exactly the model's own config, plus the scale preset's name.
struct ModelSection : amor::model::ModelConfig {
  // A scale preset ("" = none) that fills the dimensions; kept as a string here (the preset table
  // lives with the models). Keys set explicitly in a sweep file win over the preset.
  std::string preset;
};

struct MqarConfig {
  int64_t num_kv_pairs = 8;
  int64_t num_train = 2000;   // training examples
  int64_t num_valid = 200;    // validation examples
  double power_a = 0.01;      // Zoology's power-law exponent for query/key gaps
};

struct DataConfig {
  std::string source = "corpus";    // corpus | mqar | shards
  std::string path;                 // shards directory; "" with source corpus = the built-in corpus
  std::string tokenizer = "byte";   // byte | gpt2 | llama3 | a tokenizer.json path
  int64_t seq_len = 256;
  MqarConfig mqar;                  // vocabulary: model.vocab
};

struct TrainConfig {
  int64_t steps = 1000;             // optimizer steps
  int64_t micro_batch = 8;          // sequences per rank per micro-step
  int64_t grad_accum = 1;           // micro-steps per optimizer step
  double lr = 1e-3;                 // peak learning rate
  double min_lr_ratio = 0.1;        // cosine decays to lr * min_lr_ratio
  int64_t warmup_steps = 0;
  double weight_decay = 0.1;        // matrices only
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double clip = 1.0;                // global gradient-norm clip; 0 = off
  int64_t seed = 0;
  // f32 | f64 (cpu), bf16 | f32 (cuda; f32 to compare with the cpu). "auto" resolves to f32 on
  // cpu and bf16 on cuda when the run is resolved, so a resolved config never holds "auto".
  std::string dtype = "auto";
  int64_t log_every = 10;           // a progress line every this many steps
  int64_t eval_every = 0;           // 0 = evaluate only at the end
};

struct EvalConfig {
  std::vector<std::string> tasks;   // evaluation task names, run in this order
  int64_t max_examples = 0;         // per task; 0 = all
};

struct CheckpointConfig {
  int64_t every = 0;                // steps between checkpoints; 0 = only at the end
  int64_t keep = 2;                 // the newest this many are kept
  std::string signal = "SIGUSR1";   // SIGUSR1 | SIGUSR2 | "": the user signal that asks for
                                    // checkpoint-and-exit (SIGTERM always does)
};

struct ParallelConfig {
  int64_t ranks_per_run = 1;        // MPI ranks that shard one run
};

struct RunConfig {
  ModelSection model;
  DataConfig data;
  TrainConfig train;
  EvalConfig eval;
  CheckpointConfig checkpoint;
  ParallelConfig parallel;
  std::string device = "cpu";       // cpu | cuda
};

}  // namespace amor::config

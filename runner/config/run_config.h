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

// `eval.*`: what to evaluate after training (runner/eval/README.md has each task's definition),
// and existing weights to evaluate without training (train.steps: 0). Per-task options live in
// one section per task family; 0 / "" / [] mean "derived from the run" where a comment says so.
struct EvalFileTask {
  std::string path;                 // the task's jsonl file (lm-eval's public format)
  int64_t limit = 0;                // first this many examples; 0 = eval.max_examples (0 = all)
};

struct EvalNeedleConfig {           // niah_* and passkey (RULER's grid)
  std::vector<int64_t> lengths = {256, 512};   // context lengths in tokens
  std::vector<double> depths = {0, 50, 100};   // needle depths in percent
  int64_t samples_per_cell = 1;
  std::string essay_path;           // haystack text for the essay variants; "" = the KJV corpus
};

struct EvalMqarConfig {             // the harness's mqar (Zoology's test split, seed eval.seed + 10)
  int64_t vocab_size = 0;           // 0 = model.vocab (at most the tokenizer's ids)
  int64_t seq_len = 0;              // 0 = data.seq_len
  int64_t kv_pairs = 0;             // 0 = data.mqar.num_kv_pairs
  int64_t examples = 256;
};

struct EvalPplConfig {              // ppl_by_position
  std::string path;                 // .txt or .jsonl {"text"}; "" = the built-in KJV corpus
  int64_t seq_len = 0;              // 0 = 4 * data.seq_len (beyond the training length)
  int64_t bucket_size = 0;          // 0 = data.seq_len
  int64_t num_sequences = 8;
};

struct EvalOryxSwitchConfig {       // oryx_switch (model.kind oryx only)
  std::string path;                 // as ppl_by_position's
  int64_t seq_len = 0;              // 0 = 2 * data.seq_len
  int64_t switch_at = 0;            // the switch position s; 0 = seq_len / 2
  int64_t window = 0;               // offsets -window .. window-1 around s; 0 = s and seq_len - s
  std::string before = "linear";    // linear | attention: the mixer of positions < s
  std::string after = "attention";  // the mixer of positions >= s
  int64_t num_sequences = 8;
};

struct EvalConfig {
  std::vector<std::string> tasks;   // evaluation task names, run in this order
  int64_t max_examples = 0;         // validation sequences and the default per-task limit; 0 = all
  int64_t tokens_per_task = 16;     // sequences per task recorded in run.h5 /tokens/<task>
  int64_t max_length = 2048;        // context window (lm-eval HFLM's default when a model has none)
  int64_t batch_size = 8;           // sequences per forward / decode batch
  int64_t seed = 42;                // generated tasks (niah, passkey, mqar)
  std::string weights;              // a safetensors file (models/io/model_weights.h) to start from
  std::string checkpoint;           // a run folder or checkpoint folder to evaluate (train.steps: 0)
  EvalFileTask lambada, hellaswag, piqa, arc_easy, arc_challenge, winogrande;
  std::string longbench_dir;        // LongBench's data/ folder: longbench_<d> reads <dir>/<d>.jsonl
  int64_t longbench_limit = 0;
  EvalNeedleConfig niah;
  EvalMqarConfig mqar;
  EvalPplConfig ppl_by_position;
  EvalOryxSwitchConfig oryx_switch;
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

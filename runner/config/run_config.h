// The resolved configuration of one run: every key a sweep file can set, with its default.
//
// Each struct is followed by its declare_keys listing (models/core/config_keys.h): one line per
// member with its key, the values it may take and a one-line doc; the member initialiser is the
// key's default. A key's dotted name follows the sections (`train.lr`, `model.amor.kappa`,
// `device`). The schema (schema.h), the canonical JSON and the README's key table are built from
// these listings, so adding a key is adding a member and its line here (or in
// models/core/config.h for model.*).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "models/core/config.h"
#include "models/core/config_keys.h"

namespace amor::config {

// `model.*`: exactly the model's own config, plus the scale preset's name.
struct ModelSection : amor::model::ModelConfig {
  // A scale preset ("" = none) that fills the dimensions; kept as a string here (the preset table
  // lives with the models). Keys set explicitly in a sweep file win over the preset.
  std::string preset;
};

template <class V>
void declare_keys(std::type_identity<ModelSection>, V& v) {
  using namespace keys;
  v.key("preset", &ModelSection::preset, anything(),
        "scale preset name; keys set explicitly win over it");
  visit_keys<model::ModelConfig>(v);
}

struct MqarConfig {
  int64_t num_kv_pairs = 8;
  int64_t num_train = 2000;
  int64_t num_valid = 200;
  double power_a = 0.01;
  std::string layout = "zoology";
  bool random_filler = true;
  bool pair_targets = true;
};

template <class V>
void declare_keys(std::type_identity<MqarConfig>, V& v) {
  using namespace keys;
  using C = MqarConfig;
  v.key("num_kv_pairs", &C::num_kv_pairs, at_least(1), "vocabulary: `model.vocab`");
  v.key("num_train", &C::num_train, at_least(1), "training examples");
  v.key("num_valid", &C::num_valid, at_least(1), "validation examples");
  v.key("power_a", &C::power_a, positive(), "Zoology's power-law exponent of key-query gaps");
  v.key("layout", &C::layout, omitted_at_default(one_of("zoology|lm")),
        "lm: each query's value follows it and training targets every next token (validation "
        "and the harness's mqar still score the queries)");
  v.key("random_filler", &C::random_filler, omitted_at_default(anything()),
        "false: filler positions hold token 0 (Zoology's random_non_queries)");
  v.key("pair_targets", &C::pair_targets, omitted_at_default(anything()),
        "layout lm only; false: the key-value pairs get no training target (their next tokens "
        "are random), so the loss is the queries', the answers' and the filler's");
}

struct DataConfig {
  std::string source = "corpus";
  std::string path;
  std::string tokenizer = "byte";
  int64_t seq_len = 256;
  MqarConfig mqar;
};

template <class V>
void declare_keys(std::type_identity<DataConfig>, V& v) {
  using namespace keys;
  using C = DataConfig;
  v.key("source", &C::source, one_of("corpus|mqar|shards"), "");
  v.key("path", &C::path, anything(), "shards directory; \"\" = built-in corpus");
  v.key("tokenizer", &C::tokenizer, anything(), "byte, gpt2, llama3 or a tokenizer.json path");
  v.key("seq_len", &C::seq_len, size_from(1), "");
  v.section("mqar", &C::mqar);
}

struct TrainConfig {
  int64_t steps = 1000;
  int64_t micro_batch = 8;
  int64_t grad_accum = 1;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup_steps = 0;
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double clip = 1.0;
  int64_t seed = 0;
  // f32 | f64 (cpu), bf16 | f32 (cuda; f32 to compare with the cpu). "auto" resolves to f32 on
  // cpu and bf16 on cuda when the run is resolved, so a resolved config never holds "auto".
  std::string dtype = "auto";
  int64_t log_every = 10;
  int64_t eval_every = 0;
};

template <class V>
void declare_keys(std::type_identity<TrainConfig>, V& v) {
  using namespace keys;
  using C = TrainConfig;
  v.key("steps", &C::steps, at_least(0), "optimizer steps");
  v.key("micro_batch", &C::micro_batch, size_from(1), "sequences per rank per micro-step");
  v.key("grad_accum", &C::grad_accum, at_least(1), "micro-steps per optimizer step");
  v.key("lr", &C::lr, at_least(0), "peak");
  v.key("min_lr_ratio", &C::min_lr_ratio, in_range(0, 1), "cosine floor: lr · min_lr_ratio");
  v.key("warmup_steps", &C::warmup_steps, at_least(0), "");
  v.key("weight_decay", &C::weight_decay, at_least(0), "matrices only");
  v.key("beta1", &C::beta1, below(0, 1), "");
  v.key("beta2", &C::beta2, below(0, 1), "");
  v.key("eps", &C::eps, positive(), "");
  v.key("clip", &C::clip, at_least(0), "global-norm clip; 0 = off");
  v.key("seed", &C::seed, at_least(0), "`sweep.seeds` sets it");
  v.key("dtype", &C::dtype, one_of("auto|f32|f64|bf16"), "auto: f32 on cpu, bf16 on cuda");
  v.key("log_every", &C::log_every, at_least(1), "a progress line every this many steps");
  v.key("eval_every", &C::eval_every, at_least(0), "0 = at the end only");
}

// `eval.*`: what to evaluate after training (runner/eval/README.md has each task's definition),
// and existing weights to evaluate without training (train.steps: 0). Per-task options live in
// one section per task family; 0 / "" / [] mean "derived from the run" where a comment says so.
struct EvalFileTask {
  std::string path;
  int64_t limit = 0;
};

template <class V>
void declare_keys(std::type_identity<EvalFileTask>, V& v) {
  using namespace keys;
  v.key("path", &EvalFileTask::path, anything(),
        "the task's jsonl (required when the task is in `eval.tasks`)");
  v.key("limit", &EvalFileTask::limit, at_least(0), "first N examples; 0 = `eval.max_examples`");
}

struct EvalNeedleConfig {           // niah_* and passkey (RULER's grid)
  std::vector<int64_t> lengths = {256, 512};
  std::vector<double> depths = {0, 50, 100};
  int64_t samples_per_cell = 1;
  std::string essay_path;
};

template <class V>
void declare_keys(std::type_identity<EvalNeedleConfig>, V& v) {
  using namespace keys;
  using C = EvalNeedleConfig;
  v.key("lengths", &C::lengths, at_least(1), "niah_* and passkey: context lengths (tokens)");
  v.key("depths", &C::depths, in_range(0, 100), "needle depths (percent)");
  v.key("samples_per_cell", &C::samples_per_cell, at_least(1), "");
  v.key("essay_path", &C::essay_path, anything(), "haystack text; \"\" = the KJV corpus");
}

struct EvalMqarConfig {             // the harness's mqar (Zoology's test split, seed eval.seed + 10)
  int64_t vocab_size = 0;
  int64_t seq_len = 0;
  int64_t kv_pairs = 0;
  int64_t examples = 256;
};

template <class V>
void declare_keys(std::type_identity<EvalMqarConfig>, V& v) {
  using namespace keys;
  using C = EvalMqarConfig;
  v.key("vocab_size", &C::vocab_size, at_least(0), "0 = `model.vocab` (at most the tokenizer's ids)");
  v.key("seq_len", &C::seq_len, at_least(0), "0 = `data.seq_len`");
  v.key("kv_pairs", &C::kv_pairs, at_least(0), "0 = `data.mqar.num_kv_pairs`");
  v.key("examples", &C::examples, at_least(1), "");
}

struct EvalPplConfig {              // ppl_by_position
  std::string path;
  int64_t seq_len = 0;
  int64_t bucket_size = 0;
  int64_t num_sequences = 8;
};

template <class V>
void declare_keys(std::type_identity<EvalPplConfig>, V& v) {
  using namespace keys;
  using C = EvalPplConfig;
  v.key("path", &C::path, anything(), ".txt or .jsonl `{\"text\"}`; \"\" = the KJV corpus");
  v.key("seq_len", &C::seq_len, at_least(0), "0 = 4 × `data.seq_len` (beyond the training length)");
  v.key("bucket_size", &C::bucket_size, at_least(0), "0 = `data.seq_len`");
  v.key("num_sequences", &C::num_sequences, at_least(1), "");
}

struct EvalOryxSwitchConfig {       // oryx_switch (model.kind oryx only)
  std::string path;
  int64_t seq_len = 0;
  int64_t switch_at = 0;
  int64_t window = 0;
  std::string before = "linear";
  std::string after = "attention";
  int64_t num_sequences = 8;
};

template <class V>
void declare_keys(std::type_identity<EvalOryxSwitchConfig>, V& v) {
  using namespace keys;
  using C = EvalOryxSwitchConfig;
  v.key("path", &C::path, anything(), "as ppl_by_position's");
  v.key("seq_len", &C::seq_len, at_least(0), "0 = 2 × `data.seq_len`");
  v.key("switch_at", &C::switch_at, at_least(0), "switch position s; 0 = seq_len / 2");
  v.key("window", &C::window, at_least(0), "offsets −w … w−1; 0 = as wide as fits");
  v.key("before", &C::before, one_of("linear|attention"), "mixer at positions < s");
  v.key("after", &C::after, one_of("attention|linear"), "mixer at positions ≥ s");
  v.key("num_sequences", &C::num_sequences, at_least(1), "");
}

struct EvalConfig {
  std::vector<std::string> tasks;
  int64_t max_examples = 0;
  int64_t tokens_per_task = 16;
  int64_t max_length = 2048;
  int64_t batch_size = 8;
  int64_t prefill_chunk = 0;
  int64_t seed = 42;
  std::string weights;
  std::string checkpoint;
  std::string router;
  std::string dtype = "master";
  EvalFileTask lambada, hellaswag, piqa, arc_easy, arc_challenge, winogrande;
  std::string longbench_dir;
  int64_t longbench_limit = 0;
  EvalNeedleConfig niah;
  EvalMqarConfig mqar;
  EvalPplConfig ppl_by_position;
  EvalOryxSwitchConfig oryx_switch;
};

template <class V>
void declare_keys(std::type_identity<EvalConfig>, V& v) {
  using namespace keys;
  using C = EvalConfig;
  v.key("tasks", &C::tasks, anything(), "harness tasks, in order (see \"Evaluation\" below)");
  v.key("max_examples", &C::max_examples, at_least(0),
        "validation sequences, and every task's default limit; 0 = all");
  v.key("tokens_per_task", &C::tokens_per_task, at_least(0),
        "sequences per task recorded in run.h5 `/tokens/<task>`");
  v.key("max_length", &C::max_length, at_least(1),
        "context window: loglikelihood pairs cut to it + 1, LongBench prompts to it − max_gen");
  v.key("batch_size", &C::batch_size, at_least(1), "sequences per scoring forward / decode batch");
  v.key("prefill_chunk", &C::prefill_chunk, omitted_at_default(at_least(0)),
        "generation prefills prompts in calls of this many tokens (bounds the prefill's activations "
        "at long prompts and large batches); 0 = each prompt in one call");
  v.key("seed", &C::seed, at_least(0), "generated tasks (niah, passkey; mqar uses seed + 10)");
  v.key("weights", &C::weights, anything(),
        "safetensors weights to start from (with `train.steps: 0`: evaluate them)");
  v.key("checkpoint", &C::checkpoint, anything(),
        "a run folder or checkpoint folder to evaluate; needs `train.steps: 0`");
  v.key("router", &C::router, omitted_at_default(anything()),
        "an AMOR run's fitted entropy router (`amor-run fit-router`: `<run>/router.safetensors`): "
        "the gates read its predicted entropy instead of the LM head's at evaluation; \"\" = the LM head");
  v.key("dtype", &C::dtype, omitted_at_default(one_of("master|compute")),
        "the evaluation replica's dtype: master = the master weights' (f32: exact, the default), "
        "compute = `train.dtype` (bf16 on cuda: the speed of the training forward, e.g. 32K-token NIAH at 1.5B)");
  v.section("lambada", &C::lambada);
  v.section("hellaswag", &C::hellaswag);
  v.section("piqa", &C::piqa);
  v.section("arc_easy", &C::arc_easy);
  v.section("arc_challenge", &C::arc_challenge);
  v.section("winogrande", &C::winogrande);
  v.key("longbench.dir", &C::longbench_dir, anything(),
        "LongBench's `data/` folder: `longbench_<d>` reads `<dir>/<d>.jsonl`");
  v.key("longbench.limit", &C::longbench_limit, at_least(0), "0 = `eval.max_examples`");
  v.section("niah", &C::niah);
  v.section("mqar", &C::mqar);
  v.section("ppl_by_position", &C::ppl_by_position);
  v.section("oryx_switch", &C::oryx_switch);
}

struct CheckpointConfig {
  int64_t every = 0;
  int64_t keep = 2;
  std::string signal = "SIGUSR1";
};

template <class V>
void declare_keys(std::type_identity<CheckpointConfig>, V& v) {
  using namespace keys;
  using C = CheckpointConfig;
  v.key("every", &C::every, at_least(0), "0 = at the end only");
  v.key("keep", &C::keep, at_least(1), "the newest this many are kept");
  v.key("signal", &C::signal, one_of("SIGUSR1|SIGUSR2|"),
        "checkpoint-and-exit signal (SIGTERM always)");
}

struct ParallelConfig {
  int64_t ranks_per_run = 1;
};

template <class V>
void declare_keys(std::type_identity<ParallelConfig>, V& v) {
  using namespace keys;
  v.key("ranks_per_run", &ParallelConfig::ranks_per_run, at_least(1), "MPI ranks that shard one run");
}

struct RunConfig {
  ModelSection model;
  DataConfig data;
  TrainConfig train;
  EvalConfig eval;
  CheckpointConfig checkpoint;
  ParallelConfig parallel;
  std::string device = "cpu";
};

template <class V>
void declare_keys(std::type_identity<RunConfig>, V& v) {
  using namespace keys;
  v.section("model", &RunConfig::model);
  v.section("data", &RunConfig::data);
  v.section("train", &RunConfig::train);
  v.section("eval", &RunConfig::eval);
  v.section("checkpoint", &RunConfig::checkpoint);
  v.section("parallel", &RunConfig::parallel);
  v.key("device", &RunConfig::device, one_of("cpu|cuda"),
        "cuda: one GPU per rank, NCCL between them");
}

}  // namespace amor::config

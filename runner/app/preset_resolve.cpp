#include "runner/app/preset_resolve.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "models/presets/param_count.h"
#include "models/presets/presets.h"
#include "runner/config/config_error.h"
#include "runner/config/schema.h"

namespace amor {

void apply_model_preset(config::RunConfig& cfg, const config::KeyLocations& set_at) {
  if (cfg.model.preset.empty()) return;
  model::ModelConfig p;
  try {
    p = model::apply_preset(cfg.model, cfg.model.preset);
  } catch (const Error& e) {
    auto it = set_at.find("model.preset");
    throw config::ConfigError(it != set_at.end() ? it->second.str() + ": " + e.what() : e.what());
  }
  // Each key the presets set (models/presets/presets.h), unless the run set it itself.
  config::RunConfig from = cfg;
  static_cast<model::ModelConfig&>(from.model) = p;
  for (const std::string& key : model::preset_keys()) {
    if (set_at.count(key)) continue;
    const config::Field* f = config::find_field(key);
    if (!f) throw std::logic_error("preset key not in the schema: " + key);
    f->set(cfg, f->get(from));
  }
}

namespace {

// The config key a model error is about: the first key the run set explicitly (full name, then
// the name without "model.", then its last part) that the message names as a word; else the
// first model size key set; else "".
std::string key_named_in(const std::string& msg, const config::KeyLocations& set_at) {
  auto word_at = [&](const std::string& w) -> size_t {
    for (size_t p = msg.find(w); p != std::string::npos; p = msg.find(w, p + 1)) {
      const bool l = p == 0 || !(std::isalnum(static_cast<unsigned char>(msg[p - 1])) ||
                                 msg[p - 1] == '_' || msg[p - 1] == '.');
      const size_t e = p + w.size();
      const bool r = e >= msg.size() || !(std::isalnum(static_cast<unsigned char>(msg[e])) ||
                                          msg[e] == '_');
      if (l && r) return p;
    }
    return std::string::npos;
  };
  for (int form = 0; form < 3; ++form) {
    std::string best;
    size_t best_at = std::string::npos;
    for (const auto& [k, loc] : set_at) {
      if (k.rfind("model.", 0) != 0) continue;
      std::string w = form == 0 ? k : form == 1 ? k.substr(6) : k.substr(k.rfind('.') + 1);
      const size_t at = form == 0 ? msg.find(w) : word_at(w);
      if (at != std::string::npos && at < best_at) best = k, best_at = at;
    }
    if (!best.empty()) return best;
  }
  for (const char* k : {"model.d_model", "model.preset", "model.kind"})
    if (set_at.count(k)) return k;
  return "";
}

}  // namespace

void check_model_shapes(const config::RunSpec& spec) {
  const config::RunConfig& cfg = spec.config;
  const model::ModelConfig& m = cfg.model;
  auto refuse = [&](const std::string& key, const std::string& what) {
    auto it = key.empty() ? spec.set_at.end() : spec.set_at.find(key);
    const std::string where = it != spec.set_at.end() ? it->second.str() : spec.sweep_file;
    throw config::ConfigError(fmt::format("{}: {}run '{}': {}", where,
                                          key.empty() ? "" : "key '" + key + "': ", spec.id(),
                                          what));
  };
  // Each size is at most 2^40 and n_layers at most 2^20 by its declared range (models/core/
  // config.h), so the products below stay in range; what is left are products of several keys.
  constexpr double kMaxSize = keys::kMaxSize;
  if (m.gdn.v_expand * static_cast<double>(m.gdn.head_dim) > kMaxSize)
    refuse("model.gdn.v_expand", fmt::format("{} * gdn.head_dim {} is beyond any model that can run",
                                             m.gdn.v_expand, m.gdn.head_dim));
  int64_t params = 0;
  try {
    params = model::count_parameters(m);  // the checks the model constructors make
  } catch (const Error& e) {
    refuse(key_named_in(e.what(), spec.set_at), e.what());
  }
  // The largest of the keys set explicitly, by value: the likely culprit of a size that cannot fit.
  auto largest = [&](std::initializer_list<std::pair<const char*, int64_t>> keys) {
    std::string best;
    int64_t bv = -1;
    for (const auto& [k, v] : keys)
      if (spec.set_at.count(k) && v > bv) best = k, bv = v;
    return best;
  };
  constexpr double kMaxParams = 1e12, kMaxBytes = 1024.0 * 1024 * 1024 * 1024;  // 1 TiB per rank
  if (static_cast<double>(params) > kMaxParams)
    refuse(largest({{"model.n_layers", m.n_layers}, {"model.d_model", m.d_model},
                    {"model.d_ff", m.d_ff}, {"model.vocab", m.vocab},
                    {"model.mamba2.d_state", m.mamba2.d_state},
                    {"model.mamba2.expand", m.mamba2.expand},
                    {"model.mamba2.n_groups", m.mamba2.n_groups},
                    {"model.preset", 0}}),
           fmt::format("the model has {} parameters, more than the 1e12 any run can hold", params));
  const double bytes = estimate_bytes_per_rank(cfg, params);
  if (bytes > kMaxBytes)
    refuse(largest({{"train.micro_batch", cfg.train.micro_batch}, {"data.seq_len", cfg.data.seq_len},
                    {"model.n_layers", m.n_layers}, {"model.d_model", m.d_model},
                    {"model.d_ff", m.d_ff}, {"model.vocab", m.vocab}, {"model.preset", 0}}),
           fmt::format("about {:.3g} GiB per rank (parameters, gradients, Adam moments and "
                       "activations at micro_batch {} x seq_len {}), beyond the 1 TiB a rank can hold",
                       bytes / (1024.0 * 1024 * 1024), cfg.train.micro_batch, cfg.data.seq_len));
}

double estimate_bytes_per_rank(const config::RunConfig& cfg, int64_t params) {
  const model::ModelConfig& m = cfg.model;
  const double ranks = static_cast<double>(std::max<int64_t>(1, cfg.parallel.ranks_per_run));
  // f32 parameters, gradients and two Adam moments, sharded over the run's ranks
  const double states = 16.0 * static_cast<double>(params) / ranks;
  // activations kept for backward, at least: the f32 layer inputs and one more value per token,
  // width and layer (with recompute the rest is rebuilt layer by layer), plus a logits chunk. A
  // lower estimate on purpose: it refuses only runs that clearly cannot fit.
  const double tokens = static_cast<double>(cfg.train.micro_batch) *
                        static_cast<double>(cfg.data.seq_len);
  const double width = static_cast<double>(std::max(m.d_model, m.d_ff));
  const double acts = 4.0 * tokens *
                      (2.0 * width * static_cast<double>(m.n_layers) +
                       static_cast<double>(std::min(m.vocab, std::max<int64_t>(1, m.vocab_chunk))));
  return states + acts;
}

}  // namespace amor

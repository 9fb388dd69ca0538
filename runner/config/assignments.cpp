// Run-config mappings -> typed assignments -> a resolved RunConfig (see assignments.h).
#include "runner/config/assignments.h"

#include <fmt/format.h>

#include "models/lm/model_kinds.h"

namespace amor::config {

Location value_location(const YAML::Node& value, const Location& key_at) {
  // Line 0: a source without lines (a command-line override), whatever the node's mark says.
  if (key_at.line == 0 || !value.IsDefined() || value.IsNull() || value.Mark().line < 0)
    return key_at;
  return {key_at.file, value.Mark().line + 1};
}

void walk_config(const YAML::Node& map, const std::string& prefix, const std::string& file,
                 const std::string& context, const LeafFn& leaf) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node k = it->first;  // copies: the iterator yields temporaries
    const YAML::Node v = it->second;
    Location key_at{file, k.Mark().line >= 0 ? k.Mark().line + 1 : 0};
    if (!k.IsScalar() || k.Scalar().empty())
      fail(key_at, context + "expected a key name, got " + describe_node(k));
    std::string key = prefix.empty() ? k.Scalar() : prefix + "." + k.Scalar();
    if (const Field* f = find_field(key)) {
      leaf(*f, v, key_at);
    } else if (is_section(key)) {
      if (!v.IsMap())
        fail(value_location(v, key_at), context + "key '" + key + "': expected a mapping of " +
                                            key + ".* keys, got " + describe_node(v));
      walk_config(v, key, file, context, leaf);
    } else {
      std::string hint = suggest_config_key(key);
      fail(key_at, context + "unknown key '" + key + "'" +
                       (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  }
}

std::vector<Assignment> read_config_map(const YAML::Node& map, const std::string& file,
                                        const std::string& context) {
  std::vector<Assignment> out;
  KeyLocations seen;
  walk_config(map, "", file, context,
              [&](const Field& f, const YAML::Node& v, const Location& key_at) {
                auto [it, fresh] = seen.emplace(f.key, key_at);
                if (!fresh)
                  fail(key_at, context + "key '" + f.key + "' is set twice (first at " +
                                   it->second.str() + ")");
                Location at = value_location(v, key_at);
                out.push_back({&f, parse_value(f, v, at, context), at});
              });
  return out;
}

void apply(RunConfig& config, const std::vector<Assignment>& assignments, KeyLocations& set_at) {
  for (const Assignment& a : assignments) {
    a.field->set(config, a.value);
    set_at[a.field->key] = a.where;
  }
}

void finalize(RunConfig& c, const KeyLocations& set_at, const Location& fallback) {
  auto at = [&](const std::string& key) {
    auto it = set_at.find(key);
    return it != set_at.end() ? it->second : fallback;
  };
  // Of two keys that conflict, blame the one set explicitly (the later-named one if both are).
  auto blame = [&](const std::string& a, const std::string& b) {
    return set_at.count(b) ? b : set_at.count(a) ? a : b;
  };

  auto& dtype = c.train.dtype;
  if (dtype == "auto") dtype = c.device == "cuda" ? "bf16" : "f32";
  if (c.device == "cpu" && dtype == "bf16")
    fail(at("train.dtype"), "key 'train.dtype': bf16 needs device cuda (cpu runs f32 or f64)");
  if (c.device == "cuda" && dtype == "f64")
    fail(at("train.dtype"), "key 'train.dtype': f64 is not available with device cuda (cuda runs "
                            "bf16, or f32 to compare with the cpu)");

  if (model::kind_traits(c.model.kind).needs_pattern && c.model.pattern.empty()) {
    std::string k = blame("model.pattern", "model.kind");
    fail(at(k), "key '" + k + "': model.kind " + c.model.kind + " needs model.pattern (e.g. MMMA)");
  }
  if (!c.data.mqar.pair_targets && c.data.mqar.layout != "lm") {
    std::string k = blame("data.mqar.layout", "data.mqar.pair_targets");
    fail(at(k), "key '" + k + "': data.mqar.pair_targets false needs data.mqar.layout lm (Zoology's "
                "layout trains the queries only)");
  }
  if (c.data.source == "shards" && c.data.path.empty()) {
    std::string k = blame("data.path", "data.source");
    fail(at(k), "key '" + k + "': data.source shards needs data.path (the shards directory)");
  }

  auto ordered = [&](const std::string& lo_key, double lo, const std::string& hi_key, double hi) {
    if (lo <= hi) return;
    std::string k = blame(lo_key, hi_key);
    fail(at(k), fmt::format("key '{}': {} ({}) must not exceed {} ({})", k, lo_key,
                            format_double(lo), hi_key, format_double(hi)));
  };
  ordered("model.mamba2.dt_min", c.model.mamba2.dt_min, "model.mamba2.dt_max",
          c.model.mamba2.dt_max);
  ordered("model.mamba2.a_min", c.model.mamba2.a_min, "model.mamba2.a_max", c.model.mamba2.a_max);
  ordered("model.gdn.dt_min", c.model.gdn.dt_min, "model.gdn.dt_max", c.model.gdn.dt_max);
  ordered("model.gdn.a_min", c.model.gdn.a_min, "model.gdn.a_max", c.model.gdn.a_max);
}

void check_tokenizer_vocab(const RunConfig& c, const KeyLocations& set_at,
                           const Location& fallback) {
  auto at = [&](const std::string& key) {
    auto it = set_at.find(key);
    return it != set_at.end() ? it->second : fallback;
  };
  auto blame = [&](const std::string& a, const std::string& b) {
    return set_at.count(b) ? b : set_at.count(a) ? a : b;
  };
  // Corpus and shard tokens are the tokenizer's ids, so the model needs at least that many rows.
  // Known here for the named tokenizers; a tokenizer.json path is checked when the run loads it.
  if (c.data.source != "mqar") {
    int64_t ids = c.data.tokenizer == "byte"     ? 259
                  : c.data.tokenizer == "gpt2"   ? 50257
                  : c.data.tokenizer == "llama3" ? 128256
                                                 : 0;
    if (c.model.vocab < ids) {
      std::string k = blame("data.tokenizer", "model.vocab");
      fail(at(k), fmt::format("key '{}': model.vocab {} is smaller than tokenizer {}'s {} ids; set "
                              "model.vocab to at least {}",
                              k, c.model.vocab, c.data.tokenizer, ids, ids));
    }
  }
}

}  // namespace amor::config

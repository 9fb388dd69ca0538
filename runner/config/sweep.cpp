// Expanding sweep files and overrides into runs (see sweep.h).
#include "runner/config/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "models/lm/model_kinds.h"
#include "runner/config/canonical.h"
#include "runner/config/run_name.h"
#include "runner/config/sweep_file.h"

namespace amor::config {

std::vector<Assignment> parse_overrides(const std::vector<std::string>& overrides) {
  std::vector<Assignment> out;
  // Each key once: a key given twice (train.lr=1e-3 ... train.lr=3e-3) is more likely a slip than
  // a wish for the last value, and the run's recorded overrides would hold both.
  std::map<std::string, std::string> given;  // key -> the override that set it
  for (const std::string& arg : overrides) {
    std::string source = "override '" + arg + "'";
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) fail({source, 0}, "expected key=value");
    std::string key = arg.substr(0, eq), text = arg.substr(eq + 1);
    YAML::Node value;
    try {
      // `key=` means the empty string (the shell has already eaten any quotes).
      value = YAML::Load(text.empty() ? std::string("''") : text);
    } catch (const YAML::ParserException& e) {
      fail({source, 0}, "not valid YAML: " + e.msg);
    }
    YAML::Node map(YAML::NodeType::Map);
    map[key] = value;
    auto a = read_config_map(map, source);
    for (const Assignment& x : a) {
      auto [it, fresh] = given.emplace(x.field->key, source);
      if (!fresh)
        fail({source, 0}, fmt::format("key '{}' is already set by {}: give each key once",
                                      x.field->key, it->second));
    }
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

namespace {

// Whether the run's model reads `key` (keys outside model.* always count).
bool uses_key(const RunConfig& c, const std::string& key) {
  if (key.rfind("model.", 0) != 0) return true;
  return model::kind_uses_key(c.model.kind, key.substr(6));
}

// The swept keys whose values differ between two runs (by their overrides).
std::vector<std::string> differing_keys(const RunSpec& a, const RunSpec& b) {
  std::map<std::string, std::string> va(a.overrides.begin(), a.overrides.end());
  std::map<std::string, std::string> vb(b.overrides.begin(), b.overrides.end());
  std::vector<std::string> out;
  for (const auto& [k, v] : va)
    if (!vb.count(k) || vb.at(k) != v) out.push_back(k);
  for (const auto& [k, v] : vb)
    if (!va.count(k)) out.push_back(k);
  return out;
}

// Expands one sweep file, appending to `runs`.
void expand_file(const std::string& path, const std::vector<Assignment>& cli,
                 const ExpandOptions& options, std::vector<RunSpec>& runs) {
  SweepDef def = read_sweep_file(path);
  std::set<std::string> cli_keys;
  for (const Assignment& a : cli) cli_keys.insert(a.field->key);

  // Swept keys that name runs: all but those the command line overrides.
  std::vector<std::string> named_keys;
  auto add_named = [&](const std::string& key) {
    if (!cli_keys.count(key) &&
        std::find(named_keys.begin(), named_keys.end(), key) == named_keys.end())
      named_keys.push_back(key);
  };
  for (const Axis& axis : def.axes) {
    for (const AxisKey& k : axis.keys) add_named(k.field->key);
    for (const Variant& v : axis.variants)
      for (const Assignment& a : v.set) add_named(a.field->key);
  }
  std::vector<std::string> shorts = short_names(named_keys);
  std::map<std::string, std::string> short_of;
  for (size_t i = 0; i < named_keys.size(); ++i) short_of[named_keys[i]] = shorts[i];

  size_t total = 1;
  for (const Axis& axis : def.axes) {
    total *= axis.size();
    if (total > options.max_runs)
      fail(def.name_at, fmt::format("sweep '{}' expands to more than {} runs", def.name,
                                    options.max_runs));
  }

  std::vector<size_t> index(def.axes.size(), 0);
  for (size_t r = 0; r < total; ++r) {
    RunSpec spec;
    spec.sweep = def.name;
    spec.sweep_file = def.file;
    std::vector<Assignment> swept;
    // Name parts in sweep order: a swept key's value, or a named variant's name (nullptr field).
    std::vector<std::pair<const Assignment*, std::string>> named;
    for (size_t a = 0; a < def.axes.size(); ++a) {
      const Axis& axis = def.axes[a];
      if (!axis.variants.empty()) {
        const Variant& v = axis.variants[index[a]];
        bool all_overridden = true;
        for (const Assignment& as : v.set) {
          swept.push_back(as);
          all_overridden = all_overridden && cli_keys.count(as.field->key);
          if (cli_keys.count(as.field->key)) continue;
          spec.overrides.emplace_back(as.field->key, format_value(as.value));
          if (v.name.empty()) named.emplace_back(&as, "");
        }
        if (!v.name.empty() && !(all_overridden && !v.set.empty())) named.emplace_back(nullptr, v.name);
        continue;
      }
      for (const AxisKey& k : axis.keys) {
        const FieldValue& v = k.values[index[a]];
        swept.push_back({k.field, v, k.value_at[index[a]]});
        if (cli_keys.count(k.field->key)) continue;
        spec.overrides.emplace_back(k.field->key, format_value(v));
      }
    }
    for (const Assignment& a : cli) spec.overrides.emplace_back(a.field->key, format_value(a.value));

    apply(spec.config, def.base, spec.set_at);
    apply(spec.config, swept, spec.set_at);
    apply(spec.config, cli, spec.set_at);
    if (options.resolve) options.resolve(spec.config, spec.set_at);
    finalize(spec.config, spec.set_at, {def.file, 0});

    // The name, from the values that matter for this run: a model key its kind does not read
    // (model.amor.* beside a transformer) names nothing (run_name.h).
    std::vector<std::string> parts;
    size_t n = 0;  // index into `named` for variants, walked in step with the axes
    for (size_t a = 0; a < def.axes.size(); ++a) {
      const Axis& axis = def.axes[a];
      if (!axis.variants.empty()) {
        for (; n < named.size(); ++n) {
          const auto& [as, label] = named[n];
          if (!as) {
            parts.push_back(label);
            continue;
          }
          if (uses_key(spec.config, as->field->key))
            parts.push_back(name_part(short_of.at(as->field->key), *as->field, as->value));
        }
        continue;
      }
      for (const AxisKey& k : axis.keys) {
        if (cli_keys.count(k.field->key) || !uses_key(spec.config, k.field->key)) continue;
        parts.push_back(name_part(short_of.at(k.field->key), *k.field, k.values[index[a]]));
      }
    }
    spec.name = join_run_name(parts);
    spec.canonical = canonical_json(spec.config);
    spec.hash8 = hash8(spec.canonical);
    runs.push_back(std::move(spec));

    for (size_t a = def.axes.size(); a-- > 0;) {  // odometer: the last axis moves fastest
      if (++index[a] < def.axes[a].size()) break;
      index[a] = 0;
    }
  }
}

}  // namespace

std::vector<RunSpec> expand_sweep(const std::vector<std::string>& paths,
                                  const std::vector<std::string>& overrides,
                                  const ExpandOptions& options) {
  std::vector<Assignment> cli = parse_overrides(overrides);
  std::vector<RunSpec> all;
  for (const std::string& path : paths) expand_file(path, cli, options, all);

  // Per sweep name: a run name stands for one config, and a config has one name.
  std::vector<RunSpec> runs;
  std::map<std::pair<std::string, std::string>, size_t> by_name, by_config;
  for (RunSpec& spec : all) {
    auto name_key = std::make_pair(spec.sweep, spec.name);
    auto config_key = std::make_pair(spec.sweep, spec.canonical);
    auto n = by_name.find(name_key);
    auto c = by_config.find(config_key);
    if (n != by_name.end() && c != by_config.end() && n->second == c->second) continue;
    if (n != by_name.end()) {
      // Runs that differ only in keys their model does not read train the same model.
      const RunSpec& other = runs[n->second];
      std::vector<std::string> diff = differing_keys(other, spec);
      bool unused = !diff.empty() && other.config.model.kind == spec.config.model.kind;
      std::string keys;
      for (const std::string& k : diff) {
        unused = unused && !uses_key(spec.config, k);
        keys += (keys.empty() ? "" : ", ") + k;
      }
      if (unused)
        fail({spec.sweep_file, 0},
             fmt::format("sweep '{}': two runs named '{}' differ only in {}, which model.kind {} "
                         "does not use (the same model trained twice); sweep such keys only with "
                         "the kinds that use them (sweep.variants)",
                         spec.sweep, spec.name, keys, spec.config.model.kind));
    }
    if (n != by_name.end())
      fail({spec.sweep_file, 0},
           fmt::format("sweep '{}': two different runs are named '{}' (their values differ only "
                       "in characters a file name cannot hold, or past 200 bytes); change the "
                       "values",
                       spec.sweep, spec.name));
    if (c != by_config.end())
      fail({spec.sweep_file, 0},
           fmt::format("sweep '{}': runs '{}' and '{}' resolve to the same config", spec.sweep,
                       runs[c->second].name, spec.name));
    by_name.emplace(name_key, runs.size());
    by_config.emplace(config_key, runs.size());
    runs.push_back(std::move(spec));
  }
  // After the other checks, so that a run that cannot be (above) is named first.
  if (options.check_tokenizer_vocab)
    for (const RunSpec& r : runs) check_tokenizer_vocab(r.config, r.set_at, {r.sweep_file, 0});
  return runs;
}

}  // namespace amor::config

// Expanding sweep files and overrides into runs (see sweep.h).
#include "runner/config/sweep.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "runner/config/canonical.h"
#include "runner/config/run_name.h"
#include "runner/config/sweep_file.h"

namespace amor::config {

std::vector<Assignment> parse_overrides(const std::vector<std::string>& overrides) {
  std::vector<Assignment> out;
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
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

namespace {

// Expands one sweep file, appending to `runs`.
void expand_file(const std::string& path, const std::vector<Assignment>& cli,
                 const ExpandOptions& options, std::vector<RunSpec>& runs) {
  SweepDef def = read_sweep_file(path);
  std::set<std::string> cli_keys;
  for (const Assignment& a : cli) cli_keys.insert(a.field->key);

  // Swept keys that name runs: all but those the command line overrides.
  std::vector<std::string> named_keys;
  for (const Axis& axis : def.axes)
    for (const AxisKey& k : axis.keys)
      if (!cli_keys.count(k.field->key)) named_keys.push_back(k.field->key);
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
    std::vector<std::string> parts;
    for (size_t a = 0; a < def.axes.size(); ++a) {
      for (const AxisKey& k : def.axes[a].keys) {
        const FieldValue& v = k.values[index[a]];
        swept.push_back({k.field, v, k.value_at[index[a]]});
        if (cli_keys.count(k.field->key)) continue;
        parts.push_back(name_part(short_of.at(k.field->key), *k.field, v));
        spec.overrides.emplace_back(k.field->key, format_value(v));
      }
    }
    for (const Assignment& a : cli) spec.overrides.emplace_back(a.field->key, format_value(a.value));

    apply(spec.config, def.base, spec.set_at);
    apply(spec.config, swept, spec.set_at);
    apply(spec.config, cli, spec.set_at);
    if (options.resolve) options.resolve(spec.config, spec.set_at);
    finalize(spec.config, spec.set_at, {def.file, 0});
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

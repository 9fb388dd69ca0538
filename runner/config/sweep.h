// Sweep expansion: sweep files + command-line overrides -> the list of runs, each with its name,
// resolved config, canonical text, hash and output directory.
//
//   auto runs = amor::config::expand_sweep({"experiments/a.yaml"}, {"train.steps=50"});
//   for (const auto& r : runs) std::cout << r.id() << "  " << r.dir("results") << "\n";
//
// Order is deterministic: files in the order given; within a file the cartesian product of the
// axes with the first axis slowest (the variants, grid keys in file order, the zip group, seeds).
// Run names leave out the model keys the run's kind does not read (run_name.h); two runs that
// differ only in such keys are an error naming them.
// Overrides (`key=value`, the value read as YAML and typed by the schema; `key=` is the empty
// string) apply to every run after its sweep values. An override of a swept key wins and takes
// that key out of the run names; runs that become identical (same name and config) are listed
// once. Two runs of one sweep with the same name but different configs, or the same config under
// different names, are errors.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runner/config/assignments.h"

namespace amor::config {

struct RunSpec {
  std::string sweep;        // the sweep's name
  std::string sweep_file;   // the file that defined it
  std::string name;         // run name (run_name.h), e.g. "amor-d_model768-seed1"
  std::string hash8;        // first 8 hex digits of fnv1a64(canonical)
  // The key=value pairs that made this run differ from the base: its swept values (sweep order),
  // then the command-line overrides (command-line order). Values as format_value writes them.
  std::vector<std::pair<std::string, std::string>> overrides;
  RunConfig config;         // resolved (defaults, includes, base, sweep values, overrides)
  std::string canonical;    // canonical_json(config)
  KeyLocations set_at;      // every key set explicitly, and where it was last set

  std::string id() const { return name + "-" + hash8; }
  // <output>/<sweep>/<name>-<hash8>
  std::filesystem::path dir(const std::filesystem::path& output) const {
    return output / sweep / id();
  }
};

struct ExpandOptions {
  // Called on each run's config after all assignments and before derived values, checks and
  // hashing, with the keys set explicitly: the place to fill a scale preset's dimensions without
  // overwriting keys a file set. It may throw ConfigError (e.g. at set_at.at("model.preset")).
  std::function<void(RunConfig&, const KeyLocations& set_at)> resolve;
  size_t max_runs = 100000;  // a sweep expanding to more is an error (almost surely a typo)
  // Refuse corpus and shards runs whose model.vocab is below the tokenizer's ids (byte 259; the
  // default 256 is kept so existing configs keep their hashes). Off only in tests about other
  // things that expand the defaults.
  bool check_tokenizer_vocab = true;
};

std::vector<RunSpec> expand_sweep(const std::vector<std::string>& paths,
                                  const std::vector<std::string>& overrides,
                                  const ExpandOptions& options = {});

// `key=value` arguments as typed assignments (errors name the argument and the key).
std::vector<Assignment> parse_overrides(const std::vector<std::string>& overrides);

}  // namespace amor::config

// Reading a sweep file: its name, its base config (with included files merged in), and its sweep
// axes, all validated against the schema with errors naming file, line and key.
//
//   name: mqar-small                 # required, [A-Za-z0-9_.-]+
//   description: free text           # optional, ignored
//   include: [common/model.yaml]     # relative to this file; their `base` is applied first,
//                                    # depth-first in list order (an included file may itself
//                                    # include; it may hold only include, base, description)
//   base: {model: {kind: amor}, train.steps: 200}   # a partial run config; defaults fill the rest
//   sweep:
//     grid: {model.kind: [gdn, amor], model.d_model: [64, 128]}   # cartesian product
//     zip:  {train.lr: [1e-3, 5e-4], train.warmup_steps: [10, 20]}  # paired, equal lengths
//     seeds: [0, 1]                                                 # train.seed
#pragma once
#include <string>
#include <vector>

#include "runner/config/assignments.h"

namespace amor::config {

// One swept key: its values in file order.
struct AxisKey {
  const Field* field = nullptr;
  std::vector<FieldValue> values;
  std::vector<Location> value_at;  // per value
  Location key_at;
};

// A dimension of the sweep: one grid key, the whole zip group (keys advance together), or seeds.
struct Axis {
  std::string section;            // "sweep.grid", "sweep.zip" or "sweep.seeds"
  std::vector<AxisKey> keys;
  size_t size() const { return keys.front().values.size(); }
};

struct SweepDef {
  std::string file;               // as given
  std::string name;
  Location name_at;
  std::vector<Assignment> base;   // included files' base first, then this file's; later wins
  std::vector<Axis> axes;         // grid keys in file order, then zip, then seeds; empty = 1 run
};

SweepDef read_sweep_file(const std::string& path);

}  // namespace amor::config

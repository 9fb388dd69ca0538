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
//     variants:                      # override sets, one run each (crossed with grid, zip, seeds)
//       - {model.kind: gdn}                                   # anonymous: named by its values
//       - {name: amor-k3, model.kind: amor, model.amor.kappa: 0.3}   # named: `name` names it
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

// One item of sweep.variants: the keys it sets (the others keep the base's values).
struct Variant {
  std::string name;               // its `name`, or "" (anonymous: named by its values)
  Location at;                    // the item
  std::vector<Assignment> set;    // in file order
};

// A dimension of the sweep: one grid key, the whole zip group (keys advance together), the
// variants (one per item), or seeds.
struct Axis {
  std::string section;            // "sweep.grid", "sweep.zip", "sweep.variants" or "sweep.seeds"
  std::vector<AxisKey> keys;      // empty for variants
  std::vector<Variant> variants;  // sweep.variants only
  size_t size() const { return section == "sweep.variants" ? variants.size() : keys.front().values.size(); }
};

struct SweepDef {
  std::string file;               // as given
  std::string name;
  Location name_at;
  std::vector<Assignment> base;   // included files' base first, then this file's; later wins
  std::vector<Axis> axes;         // variants, grid keys in file order, zip, seeds; empty = 1 run
};

SweepDef read_sweep_file(const std::string& path);

}  // namespace amor::config

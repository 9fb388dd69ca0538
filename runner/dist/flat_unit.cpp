// build_flat_units: parameters of each unit laid end to end, padded, split into W shards.
#include "runner/dist/flat_unit.h"

#include <algorithm>

#include "kernels/core/error.h"

namespace amor::dist {

std::vector<FlatUnit> build_flat_units(const model::ParamStore& store, int world, int rank) {
  AMOR_CHECK(world >= 1 && rank >= 0 && rank < world, "fsdp: rank {} of world size {} is not a rank",
             rank, world);
  std::vector<FlatUnit> units(store.unit_names().size());
  for (size_t u = 0; u < units.size(); ++u) {
    units[u].index = static_cast<int>(u);
    units[u].name = store.unit_names()[u];
  }
  for (const auto& p : store.params()) {
    AMOR_CHECK(p->unit >= 0 && p->unit < static_cast<int>(units.size()),
               "fsdp: parameter '{}' names unit {} but the store has {} units", p->name, p->unit,
               units.size());
    AMOR_CHECK(p->value.defined(), "fsdp: parameter '{}' has no value (already sharded?)", p->name);
    FlatUnit& fu = units[static_cast<size_t>(p->unit)];
    FlatParam fp{p.get(), p->name, p->value.shape(), fu.numel, p->value.numel(), p->weight_decay};
    fu.numel += fp.numel;
    fu.params.push_back(std::move(fp));
  }
  for (FlatUnit& fu : units) {
    fu.padded = (fu.numel + world - 1) / world * world;
    fu.shard_numel = fu.padded / world;
    const int64_t lo = static_cast<int64_t>(rank) * fu.shard_numel, hi = lo + fu.shard_numel;
    for (const FlatParam& fp : fu.params) {
      const int64_t b = std::max(lo, fp.offset), e = std::min(hi, fp.offset + fp.numel);
      if (b < e) fu.segments.push_back({b - lo, e - b, fp.weight_decay});
    }
  }
  return units;
}

}  // namespace amor::dist

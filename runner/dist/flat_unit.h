// The layout of FSDP's flat parameter units (design §4): every ParamStore unit (the embedding, a
// layer, an AMOR block, a norm) becomes one flat vector, its parameters back to back in store
// order, zero-padded to a multiple of the world size W, and split into W equal shards: rank r
// owns elements [r*S, (r+1)*S), S = padded / W.
//
// A parameter can straddle two shards. The segments of a rank are the pieces of its shard that
// belong to parameters (padding belongs to none), each with the parameter's weight-decay flag:
// AdamW runs on each segment as a slice of the flat shard, so decay applies exactly where the
// one-rank optimizer applies it and padding never moves.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/core/param_store.h"

namespace amor::dist {

struct FlatParam {
  model::Param* param = nullptr;
  std::string name;
  Shape shape;
  int64_t offset = 0;  // first element in the unit's flat vector
  int64_t numel = 0;
  bool weight_decay = true;
};

struct ShardSegment {
  int64_t begin = 0;   // in shard coordinates, [0, shard_numel)
  int64_t length = 0;
  bool weight_decay = true;
};

struct FlatUnit {
  int index = 0;
  std::string name;
  std::vector<FlatParam> params;
  int64_t numel = 0;        // sum of its parameters' elements
  int64_t padded = 0;       // numel rounded up to a multiple of W
  int64_t shard_numel = 0;  // padded / W
  std::vector<ShardSegment> segments;  // this rank's parameter pieces, in order
};

// One FlatUnit per ParamStore unit, in unit order, for rank `rank` of `world`.
std::vector<FlatUnit> build_flat_units(const model::ParamStore& store, int world, int rank);

}  // namespace amor::dist

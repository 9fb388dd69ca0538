// Shard file naming inside a dataset folder: <split>-NNNNN.tok ("train-00000.tok",
// "valid-00000.tok"), numbered from 0 without gaps.
#pragma once
#include <string>
#include <vector>

namespace amor::shards {

std::string shard_file_name(const std::string& split, size_t index);

// The paths of `split`'s shards in `dir`, in order. A gap in the numbering (a shard lost in a
// copy) is an error naming the missing file; no shards at all gives an empty list.
std::vector<std::string> list_shard_files(const std::string& dir, const std::string& split);

// Every file in `dir` named like a shard of any split (no gap checks): what an overwrite replaces.
std::vector<std::string> list_all_shard_files(const std::string& dir);

// Every split that has shards in `dir` ("train", "valid", ...), sorted with train first.
std::vector<std::string> list_splits(const std::string& dir);

}  // namespace amor::shards

// Whole-file atomic writes for the data tools' small outputs (jsonl exports): a hidden temporary
// file in the same folder, fsynced, then renamed over the target, so a reader never sees half a
// file. (models/io has the same for checkpoints; data/ cannot depend on models/.)
#pragma once
#include <string>

namespace amor::shards {

void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace amor::shards

// Weights in and out as safetensors files (the Hugging Face format: an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the raw
// little-endian data), so a model can be compared with, or moved to and from, PyTorch.
//
// Writes are atomic: a temporary file in the same folder, flushed, then renamed over the target.
// Reads validate everything a truncated or foreign file could get wrong and name the file and
// tensor in the error.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order (CPU tensors)
  std::map<std::string, std::string> metadata;
  const Tensor* find(const std::string& name) const;
};

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);

// Writes bytes to path atomically (temp file + fsync + rename). Shared by checkpoints and results.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace amor

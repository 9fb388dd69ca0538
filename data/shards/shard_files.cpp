// Shard file naming and listing (see shard_files.h).
#include "data/shards/shard_files.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

#include "kernels/core/error.h"

namespace fs = std::filesystem;

namespace amor::shards {
namespace {

// split -> {index -> path} for every *.tok named <split>-<digits>.tok in dir.
std::map<std::string, std::map<size_t, std::string>> scan(const std::string& dir) {
  static const std::regex name_re(R"(^([A-Za-z0-9_]+)-([0-9]{5,})\.tok$)");
  std::map<std::string, std::map<size_t, std::string>> found;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  AMOR_CHECK(!ec, "{}: cannot list the folder: {}", dir, ec.message());
  for (; it != end; it.increment(ec)) {
    AMOR_CHECK(!ec, "{}: cannot list the folder: {}", dir, ec.message());
    std::smatch m;
    std::string name = it->path().filename().string();
    if (std::regex_match(name, m, name_re)) found[m[1]][std::stoull(m[2])] = it->path().string();
  }
  return found;
}

}  // namespace

std::string shard_file_name(const std::string& split, size_t index) {
  return fmt::format("{}-{:05d}.tok", split, index);
}

std::vector<std::string> list_shard_files(const std::string& dir, const std::string& split) {
  auto found = scan(dir);
  std::vector<std::string> paths;
  auto it = found.find(split);
  if (it == found.end()) return paths;
  size_t expect = 0;
  for (const auto& [index, path] : it->second) {
    AMOR_CHECK(index == expect, "{}: shard {} is missing (the {} shards are numbered from 0 without gaps)",
               dir, shard_file_name(split, expect), split);
    paths.push_back(path);
    ++expect;
  }
  return paths;
}

std::vector<std::string> list_all_shard_files(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& [split, shards] : scan(dir))
    for (const auto& [index, path] : shards) paths.push_back(path);
  return paths;
}

std::vector<std::string> list_splits(const std::string& dir) {
  std::vector<std::string> splits;
  for (const auto& [split, _] : scan(dir)) splits.push_back(split);
  std::stable_partition(splits.begin(), splits.end(), [](const std::string& s) { return s == "train"; });
  return splits;
}

}  // namespace amor::shards

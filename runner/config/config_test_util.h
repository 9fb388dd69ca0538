// Shared by the runner/config tests: a temporary directory for YAML fixtures and a helper that
// returns a ConfigError's message.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runner/config/config_error.h"

namespace amor::config::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/amor_config_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to <dir>/<name> (creating subdirectories) and returns the full path.
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::path p = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string path(const std::string& name = "") const {
    return name.empty() ? path_ : (std::filesystem::path(path_) / name).string();
  }

 private:
  std::string path_;
};

// The message of the ConfigError `f` throws; a test failure (and "") if it throws nothing.
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

}  // namespace amor::config::testing

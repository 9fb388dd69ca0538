// Writes every registered op's oracle cases under the folder given as argv[1];
// tests/torch_oracle.py then checks them against PyTorch autograd.
#include <cstdio>
#include <filesystem>

#include "tests/common/oracle.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::remove_all(argv[1]);
  std::filesystem::create_directories(argv[1]);
  amor::testing::OracleWriter writer(argv[1]);
  try {
    for (auto& [op, fn] : amor::testing::oracle_registry()) {
      int before = writer.cases();
      fn(writer);
      std::printf("%-24s %d cases\n", op.c_str(), writer.cases() - before);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oracle_dump: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %d cases to %s\n", writer.cases(), argv[1]);
  return writer.cases() > 0 ? 0 : 1;
}

#include "models/io/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/common/random.h"

namespace amor {
namespace {

std::string tmpdir() {
  auto d = std::filesystem::temp_directory_path() / ("amor_st_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  std::string path = tmpdir() + "/w.safetensors";
  Tensor a = testing::randn({3, 5}, 1, DType::F32);
  Tensor b = testing::randn({7}, 2, DType::F64);
  Tensor c = testing::randn({2, 2}, 3, DType::F32).to(DType::BF16);
  Tensor d = testing::randint({4}, 4, 100);
  Tensor e = Tensor::zeros({0}, DType::F32);
  save_safetensors(path, {{"a", a}, {"b.weight", b}, {"c", c}, {"d", d}, {"e", e}}, {{"kind", "gdn"}});
  SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 5u);
  EXPECT_EQ(f.tensors[1].first, "b.weight");
  EXPECT_EQ(f.metadata.at("kind"), "gdn");
  EXPECT_EQ(f.find("a")->to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(f.find("b.weight")->to_vector<double>(), b.to_vector<double>());
  EXPECT_EQ(f.find("c")->str(), "bf16[2,2]@cpu");
  EXPECT_EQ(f.find("c")->to(DType::F32).to_vector<float>(), c.to(DType::F32).to_vector<float>());
  EXPECT_EQ(f.find("d")->to_vector<int32_t>(), d.to_vector<int32_t>());
  EXPECT_EQ(f.find("e")->numel(), 0);
  // No temporary file is left beside the target.
  int files = 0;
  for (auto& p : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    (void)p;
    files++;
  }
  EXPECT_EQ(files, 1);
}

TEST(Safetensors, TruncatedAndForeignFilesAreClearErrors) {
  std::string dir = tmpdir();
  std::string path = dir + "/t.safetensors";
  save_safetensors(path, {{"w", testing::randn({64}, 5, DType::F32)}});
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 10));
  }
  try {
    load_safetensors(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'w'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  {
    std::ofstream f(path, std::ios::binary);
    f << "hello";
  }
  EXPECT_THROW(load_safetensors(path), Error);
  {
    std::ofstream f(path, std::ios::binary);
    f << std::string("\x05\0\0\0\0\0\0\0{abc}", 13);
  }
  EXPECT_THROW(load_safetensors(path), Error);
  EXPECT_THROW(load_safetensors(dir + "/missing.safetensors"), Error);
}

}  // namespace
}  // namespace amor

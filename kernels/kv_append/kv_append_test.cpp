#include "kernels/kv_append/kv_append.h"

#include <gtest/gtest.h>

#include "tests/common/random.h"

namespace amor {
namespace {

// Each sequence's token lands in row lengths[b] of its own storage, which then advances; the
// other rows are untouched. Any dtype on the cpu.
TEST(KvAppend, WritesRowLengthAndAdvancesIt) {
  for (DType dt : {DType::F64, DType::F32}) {
    const int64_t B = 3, C = 5, H = 2, D = 4;
    Tensor kc = testing::randn({B, C, H, D}, 1).to(dt), vc = testing::randn({B, C, H, D}, 2).to(dt);
    const Tensor k0 = kc.clone(), v0 = vc.clone();
    Tensor k = testing::randn({B, 1, H, D}, 3).to(dt), v = testing::randn({B, 1, H, D}, 4).to(dt);
    Tensor lengths = Tensor::from_vector<int32_t>({B}, {0, 4, 2});
    kv_append_step(kc, vc, k, v, lengths);
    EXPECT_EQ(lengths.to_vector<int32_t>(), (std::vector<int32_t>{1, 5, 3}));
    const int64_t row = H * D;
    const std::vector<int32_t> at = {0, 4, 2};
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < C; ++r)
        for (int64_t e = 0; e < row; ++e) {
          const int64_t i = (b * C + r) * row + e;
          const double wk = r == at[size_t(b)] ? k.item(b * row + e) : k0.item(i);
          const double wv = r == at[size_t(b)] ? v.item(b * row + e) : v0.item(i);
          EXPECT_EQ(kc.item(i), wk) << b << " " << r << " " << e;
          EXPECT_EQ(vc.item(i), wv) << b << " " << r << " " << e;
        }
  }
}

// A full sequence is refused before anything is written; shapes, dtypes and devices are checked.
TEST(KvAppend, RefusesAFullSequenceAndBadArguments) {
  const int64_t B = 2, C = 3, H = 1, D = 2;
  Tensor kc = Tensor::zeros({B, C, H, D}, DType::F32), vc = Tensor::zeros({B, C, H, D}, DType::F32);
  Tensor k = Tensor::full<float>({B, 1, H, D}, 1.0f), v = Tensor::full<float>({B, 1, H, D}, 2.0f);
  Tensor lengths = Tensor::from_vector<int32_t>({B}, {1, 3});
  try {
    kv_append_step(kc, vc, k, v, lengths);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1 holds 3 of the cache's 3 rows"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(lengths.to_vector<int32_t>(), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(kc.item(2), 0.0);
  Tensor ok = Tensor::from_vector<int32_t>({B}, {0, 0});
  EXPECT_THROW(kv_append_step(kc, vc, Tensor::zeros({B, 2, H, D}, DType::F32), v, ok), Error);
  EXPECT_THROW(kv_append_step(kc, vc, k.to(DType::F64), v, ok), Error);
  EXPECT_THROW(kv_append_step(kc, vc, k, v, Tensor::zeros({B}, DType::I64)), Error);
  EXPECT_THROW(kv_append_step(kc, Tensor::zeros({B, C + 1, H, D}, DType::F32), k, v, ok), Error);
  EXPECT_THROW(kv_append_step(kc, vc, k, v, Tensor::from_vector<int32_t>({B}, {0, -1})), Error);
}

}  // namespace
}  // namespace amor

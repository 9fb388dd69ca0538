// Copying task: layout, targets only on the copy, determinism and parameter errors.
#include <gtest/gtest.h>

#include "data/synthetic/copying.h"

namespace amor::synthetic {
namespace {

TEST(SyntheticCopying, LayoutAndTargets) {
  CopyingConfig c;
  c.vocab_size = 20;
  c.copy_length = 7;
  c.num_examples = 50;
  c.seed = 2;
  const TokenTask t = copying(c);
  ASSERT_EQ(t.tokens.shape(), (Shape{50, 14}));
  const auto x = t.tokens.to_vector<int32_t>(), y = t.targets.to_vector<int32_t>();
  for (int64_t e = 0; e < 50; ++e) {
    const int32_t* xe = x.data() + e * 14;
    const int32_t* ye = y.data() + e * 14;
    for (int i = 0; i < 7; ++i) {
      EXPECT_GE(xe[i], 0);
      EXPECT_LT(xe[i], 19) << "the string never holds the separator";
      EXPECT_EQ(ye[i], kIgnore) << "the string itself is not scored";
      EXPECT_EQ(ye[7 + i], xe[i]) << "position 7+i predicts string token i";
    }
    EXPECT_EQ(xe[7], 19) << "separator = vocab_size - 1";
    for (int i = 0; i < 6; ++i) EXPECT_EQ(xe[8 + i], xe[i]) << "the input repeats the string";
  }
}

TEST(SyntheticCopying, DeterministicAndSliceable) {
  CopyingConfig c;
  c.num_examples = 6;
  c.seed = 9;
  const auto a = copying(c).tokens.to_vector<int32_t>();
  EXPECT_EQ(copying(c).tokens.to_vector<int32_t>(), a);
  c.first_example = 2;
  c.num_examples = 4;
  const auto s = copying(c).tokens.to_vector<int32_t>();
  EXPECT_EQ(s, std::vector<int32_t>(a.begin() + 2 * 64, a.end()));
  c.seed = 10;
  EXPECT_NE(copying(c).tokens.to_vector<int32_t>(), s);
}

TEST(SyntheticCopying, BadParameters) {
  auto msg = [](CopyingConfig c) {
    try {
      copying(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CopyingConfig c;
  c.vocab_size = 1;
  EXPECT_NE(msg(c).find("vocab_size must be in [2, 2^31), got 1"), std::string::npos) << msg(c);
  c = {};
  c.copy_length = 0;
  EXPECT_NE(msg(c).find("copy_length must be at least 1"), std::string::npos) << msg(c);
  c = {};
  c.num_examples = 0;
  EXPECT_NE(msg(c).find("num_examples must be at least 1"), std::string::npos) << msg(c);
}

}  // namespace
}  // namespace amor::synthetic

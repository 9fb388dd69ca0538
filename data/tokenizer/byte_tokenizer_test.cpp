// ByteTokenizer: bytes are ids, three documented specials, exact round trips.
#include "data/tokenizer/byte_tokenizer.h"

#include <gtest/gtest.h>

#include "data/tokenizer/test_util.h"

namespace amor {
namespace {

using Ids = std::vector<int32_t>;

TEST(ByteTokenizer, BytesAreIds) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.name(), "byte");
  EXPECT_EQ(tok.vocab_size(), 259);
  EXPECT_EQ(tok.eos_id(), 256);
  EXPECT_EQ(tok.bos_id(), 257);
  EXPECT_EQ(tok.encode("Az\n"), (Ids{65, 122, 10}));
  EXPECT_EQ(tok.encode("\xC3\xA9"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(tok.encode(std::string("\0\xFF", 2)), (Ids{0, 255}));
  EXPECT_EQ(tok.encode(""), Ids{});
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok.decode(tok.encode(all)), all);
}

TEST(ByteTokenizer, SpecialTokensOnlyWhenAsked) {
  ByteTokenizer tok;
  const std::string text = "a<|eos|><|bos|><|pad|><|eo";
  EXPECT_EQ(tok.encode(text).size(), text.size());
  EXPECT_EQ(tok.encode(text, {.special_tokens = true}),
            (Ids{'a', 256, 257, 258, '<', '|', 'e', 'o'}));
  EXPECT_EQ(tok.decode(Ids{'a', 256, 'b'}), "a<|eos|>b");
  EXPECT_EQ(tok.decode(Ids{'a', 256, 'b', 258}, /*skip_special=*/true), "ab");
  EXPECT_EQ(tok.special_id("<|pad|>"), 258);
  EXPECT_EQ(tok.special_id("<|nope|>"), -1);
  EXPECT_TRUE(tok.is_special(257));
  EXPECT_FALSE(tok.is_special(255));
}

TEST(ByteTokenizer, RejectsIdsOutsideTheVocabulary) {
  ByteTokenizer tok;
  tokenizer::testing::expect_error([&] { tok.decode(Ids{259}); },
                                   {"tokenizer 'byte'", "id 259", "[0, 259)"});
  tokenizer::testing::expect_error([&] { tok.token_bytes(-3); }, {"id -3"});
}

}  // namespace
}  // namespace amor

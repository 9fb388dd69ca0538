// UTF-8 encoding/repair and GPT-2's byte <-> code point map.
#include <gtest/gtest.h>

#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/utf8.h"

namespace amor::tokenizer {
namespace {

TEST(Utf8, EncodesAndDecodesEveryLength) {
  for (uint32_t cp : {0x24u, 0x7Fu, 0xA2u, 0x7FFu, 0x20ACu, 0xFFFDu, 0x10348u, 0x10FFFFu}) {
    std::string s;
    append_utf8(s, cp);
    EXPECT_EQ(first_invalid_utf8(s), std::string_view::npos) << cp;
    size_t i = 0;
    EXPECT_EQ(next_code_point(s, i), cp);
    EXPECT_EQ(i, s.size());
  }
  std::string euro;
  append_utf8(euro, 0x20AC);
  EXPECT_EQ(euro, "\xE2\x82\xAC");
  std::string gothic;
  append_utf8(gothic, 0x10348);
  EXPECT_EQ(gothic, "\xF0\x90\x8D\x88");
}

TEST(Utf8, RepairsLikeTextDecoder) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  // The example of Unicode 15 section 3.9, Table 3-8 (maximal subparts, one U+FFFD each).
  EXPECT_EQ(sanitize_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), r + r + r);          // an encoded surrogate
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), r + r);                  // overlong '/'
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(sanitize_utf8("ok\xE2\x82"), "ok" + r);             // truncated at the end
  EXPECT_EQ(sanitize_utf8("\xFF"), r);
  EXPECT_EQ(sanitize_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_EQ(first_invalid_utf8("abc\xC3"), 3u);
  EXPECT_EQ(first_invalid_utf8("\xC3\xA9\x80"), 2u);
  EXPECT_EQ(first_invalid_utf8(""), std::string_view::npos);
}

TEST(ByteLevel, MatchesGpt2Alphabet) {
  // Well-known spellings: space 'Ġ', newline 'Ċ', tab 'ĉ', NUL U+0100, printable ASCII itself.
  EXPECT_EQ(byte_to_code_point(' '), 0x120u);
  EXPECT_EQ(byte_to_code_point('\n'), 0x10Au);
  EXPECT_EQ(byte_to_code_point('\t'), 0x109u);
  EXPECT_EQ(byte_to_code_point(0), 0x100u);
  EXPECT_EQ(byte_to_code_point('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(byte_to_code_point(0xE9), 0xE9u);
  EXPECT_EQ(byte_to_code_point(0x7F), 0x121u);  // DEL follows the 33 controls and space
  EXPECT_EQ(byte_to_code_point(0xAD), 0x143u);  // soft hyphen is the last remapped byte
  for (int b = 0; b < 256; ++b) EXPECT_EQ(code_point_to_byte(byte_to_code_point(b)), b);
  EXPECT_EQ(bytes_to_token(" the\n"), "\xC4\xA0the\xC4\x8A");  // "Ġthe" + "Ċ"
  EXPECT_EQ(token_to_bytes("\xC4\xA0the"), " the");
  EXPECT_FALSE(token_to_bytes("\xE2\x96\x81the").has_value());  // SentencePiece's U+2581
  EXPECT_FALSE(token_to_bytes("\xFF").has_value());
  EXPECT_FALSE(code_point_to_byte(0x20).has_value());  // space is spelled U+0120, not itself
}

}  // namespace
}  // namespace amor::tokenizer

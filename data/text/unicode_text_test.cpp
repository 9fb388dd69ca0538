// Python's str semantics over utf8proc: a few hand-checked examples per function (the exhaustive
// comparison with Python is tests/eval_reference's unicode_text_python).
#include "data/text/unicode_text.h"

#include <gtest/gtest.h>

namespace amor::text {
namespace {

using Strings = std::vector<std::string>;

TEST(UnicodeText, Classes) {
  for (char32_t c : {U' ', U'\t', U'\x1c', U'\x85', U'\u00a0', U'\u2003', U'\u2028', U'\u3000'})
    EXPECT_TRUE(is_space(c)) << static_cast<uint32_t>(c);
  for (char32_t c : {U'\u200b', U'\ufeff', U'\u180e', U'a'}) EXPECT_FALSE(is_space(c));
  for (char32_t c : {U'7', U'\u0663', U'\uff12', U'\U0001D7D0'}) EXPECT_TRUE(is_decimal(c));
  for (char32_t c : {U'\u00b2', U'\u00bd', U'\u216b', U'x'}) EXPECT_FALSE(is_decimal(c));
  EXPECT_TRUE(is_word(U'_'));
  EXPECT_TRUE(is_word(U'\u00e9'));
  EXPECT_TRUE(is_word(U'\u00b2'));   // No: isnumeric
  EXPECT_FALSE(is_word(U'\u0301'));  // a combining mark is not \w
  EXPECT_FALSE(is_word(U'\u201c'));
  EXPECT_TRUE(is_ascii_punctuation(U'_'));
  EXPECT_FALSE(is_ascii_punctuation(U'\u201c'));
  EXPECT_TRUE(is_case_ignorable(U'\''));
  EXPECT_TRUE(is_case_ignorable(U'\u0301'));
  EXPECT_FALSE(is_case_ignorable(U','));
  EXPECT_TRUE(is_cased(U'\u2160'));  // Ⅰ, Other_Uppercase
  EXPECT_FALSE(is_cased(U'1'));
}

TEST(UnicodeText, CaseMappings) {
  EXPECT_EQ(lower("CAFÉ \u212a İ"), "café k i\u0307");
  EXPECT_EQ(lower("ΟΔΥΣΣΕΥΣ Σ ΑΣ'Β ΑΣ."), "οδυσσευς σ ασ'β ας.");
  EXPECT_EQ(upper("straße ﬁ"), "STRASSE FI");
  EXPECT_EQ(capitalize("ßTRASSE"), "Sstrasse");
  EXPECT_EQ(capitalize("ǆUNGLA"), "ǅungla");
  EXPECT_EQ(capitalize("éLAN ΣΑΣ"), "Élan σας");
  EXPECT_EQ(capitalize(""), "");
}

TEST(UnicodeText, SplitStripDigits) {
  EXPECT_EQ(split("a\u00a0b\u200bc\u3000 d\u0085"), (Strings{"a", "b\u200bc", "d"}));
  EXPECT_EQ(split(" \u2003 "), Strings{});
  EXPECT_EQ(strip("\u3000 x y\u00a0\n"), "x y");
  EXPECT_EQ(lstrip("\u2028x "), "x ");
  EXPECT_EQ(rstrip("Answer:\u00a0"), "Answer:");
  EXPECT_EQ(rstrip("Answer:\u200b"), "Answer:\u200b");
  EXPECT_EQ(decimal_runs("12٣ x ５ ² 7"), (Strings{"12٣", "５", "7"}));
  // Ill-formed bytes are characters of no class: kept in pieces, never split at or stripped.
  EXPECT_EQ(split("a\xff b"), (Strings{"a\xff", "b"}));
  EXPECT_EQ(rstrip("a\xff "), "a\xff");
  EXPECT_EQ(lower("A\xff"), "a\ufffd");
}

}  // namespace
}  // namespace amor::text

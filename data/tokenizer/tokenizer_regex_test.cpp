// Pre-tokenizer regexes: PCRE2 with the JavaScript-compatible rewrites, and the GPT-2 and
// Llama-3 splits worked out by hand from the patterns.
#include <gtest/gtest.h>

#include "data/tokenizer/pre_tokenizer.h"
#include "data/tokenizer/regex.h"
#include "data/tokenizer/test_util.h"

namespace amor::tokenizer {
namespace {

const std::string kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::vector<std::string> matches(const Regex& re, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all(text, m);
  std::vector<std::string> out;
  for (auto [b, e] : m) out.emplace_back(text.substr(b, e - b));
  return out;
}

std::vector<std::string> pieces(const PreTokenizer& pre, std::string_view text) {
  std::vector<std::string> out;
  pre.run(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using V = std::vector<std::string>;

TEST(TokenizerRegex, RewritesWhatJavaScriptReadsDifferently) {
  EXPECT_EQ(js_compatible_pattern("(?i:'s|'t|'re|'ve|'m|'ll|'d)|x"),
            "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))|x");
  const Regex contractions("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "test");
  EXPECT_EQ(matches(contractions, "'S 'Re 'LL 'd"), (V{"'S", "'Re", "'LL", "'d"}));
  EXPECT_EQ(matches(contractions, "'\xC5\xBF"), V{});  // long s: caseless PCRE2 would match

  const Regex space("\\s", "test");
  EXPECT_EQ(matches(space, "\xEF\xBB\xBF").size(), 1u);  // U+FEFF is JS whitespace
  EXPECT_EQ(matches(space, "\xC2\x85").size(), 0u);      // U+0085 is not
  EXPECT_EQ(matches(space, "\xE1\xA0\x8E").size(), 0u);  // nor U+180E
  EXPECT_EQ(matches(space, "\t\n\x0B\x0C\r \xC2\xA0\xE3\x80\x80\xE2\x80\xA8\xE2\x80\x8A").size(),
            10u);
  const Regex not_space("\\S+", "test");
  EXPECT_EQ(matches(not_space,
                    "a\xEF\xBB\xBF"
                    "b\xC2\x85"),
            (V{"a", "b\xC2\x85"}));
  const Regex digits("\\d+", "test");
  EXPECT_EQ(matches(digits,
                    "12\xD9\xA3"
                    "4"),
            (V{"12", "4"}));  // Arabic-Indic 3 is not \d in JS
  const Regex word("\\w+", "test");
  EXPECT_EQ(matches(word, "ab_9\xC3\xA9x"), (V{"ab_9", "x"}));
  const Regex hyphen("[\\s-]+", "test");  // '-' after \s stays a literal
  EXPECT_EQ(matches(hyphen, "a - b"), (V{" - "}));
}

TEST(TokenizerRegex, EmptyMatchesMoveOnByOneCodePoint) {
  const Regex maybe_x("x*", "test");
  EXPECT_EQ(matches(maybe_x, "ab\xC3\xA9xx"), (V{"xx"}));
  const Regex a_or_nothing("a|", "test");
  EXPECT_EQ(matches(a_or_nothing, "bab"), (V{"a"}));
}

TEST(TokenizerRegex, BadPatternNamesItsSource) {
  testing::expect_error([] { Regex("(unclosed", "tok.json: key 'pre_tokenizer.pattern.Regex'"); },
                        {"tok.json: key 'pre_tokenizer.pattern.Regex'", "(unclosed", "offset"});
}

TEST(PreTokenizer, Gpt2Split) {
  PreTokenizer pre;
  pre.add_byte_level(false, true);
  // \s+(?!\S) gives up the whitespace before a word, so "\n\nx" is "\n", "\n", "x".
  EXPECT_EQ(pieces(pre, "Hello world's  123 ok!?\n\nx"),
            (V{"Hello", " world", "'s", " ", " 123", " ok", "!?", "\n", "\n", "x"}));
  EXPECT_EQ(pieces(pre, "I'M"), (V{"I", "'", "M"}));  // GPT-2's contractions are lower case
  EXPECT_EQ(pieces(pre, "   "), (V{"   "}));
  EXPECT_EQ(pieces(pre, ""), V{});
}

TEST(PreTokenizer, Llama3Split) {
  PreTokenizer pre;
  pre.add_split(std::make_shared<const Regex>(kLlama3Pattern, "llama3"));
  pre.add_byte_level(false, false);
  EXPECT_EQ(pieces(pre, "a  \n\n  b"), (V{"a", "  \n\n", " ", " b"}));
  EXPECT_EQ(pieces(pre, "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(pieces(pre, "I'M don't"), (V{"I", "'M", " don", "'t"}));
  EXPECT_EQ(pieces(pre, "(x)...\n"), (V{"(x", ")...\n"}));
}

TEST(PreTokenizer, AddPrefixSpaceAndSequence) {
  PreTokenizer pre;
  pre.add_split(std::make_shared<const Regex>(",", "test"));
  pre.add_byte_level(true, true);
  // Split isolates the comma; ByteLevel then prefixes each piece lacking a space.
  EXPECT_EQ(pieces(pre, "ab,cd"), (V{" ab", " ,", " cd"}));
  EXPECT_EQ(pieces(pre, " ab"), (V{" ab"}));
}

TEST(PreTokenizer, LongRunsStayLinear) {
  PreTokenizer pre;
  pre.add_split(std::make_shared<const Regex>(kLlama3Pattern, "llama3"));
  const std::string text = std::string(1 << 20, ' ') + "x" + std::string(1 << 20, '\n');
  size_t total = 0, count = 0;
  pre.run(text, [&](std::string_view p) { total += p.size(), ++count; });
  EXPECT_EQ(total, text.size());
  EXPECT_EQ(count, 3u);  // spaces but the last, " x", the newlines
}

}  // namespace
}  // namespace amor::tokenizer

// Python's str semantics over UTF-8 text, from utf8proc's Unicode tables: the character classes
// and case mappings that the reference scorers (LongBench's metrics.py, RULER's string_match_*,
// lm-evaluation-harness's request building) get from Python's str methods and re module.
//
// Text is UTF-8. Functions that return new text first repair ill-formed input to U+FFFD
// (tokenizer::sanitize_utf8, as a decoder would); those that return pieces of their input (split,
// strip, decimal_runs) treat each ill-formed byte as one character that is in no class.
//
// The Unicode version is utf8proc's (unicode_version()); a Python of another Unicode version
// differs only on the code points that one version assigns and the other does not. Every class and
// mapping here is compared with /usr/bin/python3's for every code point by the ctest
// unicode_text_python (tests/eval_reference/check_unicode_text.py).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace amor::text {

// ---- One code point.
// str.isspace(): bidirectional class WS, B or S, or general category Zs (CPython's definition).
// That is \t \n \v \f \r, \x1c-\x1f, space, \x85, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000; str.split(), strip() and rstrip() without arguments split and strip them.
bool is_space(char32_t c);
// re's \d on str patterns, str.isdecimal(): general category Nd (Arabic-Indic, fullwidth, ... digits).
bool is_decimal(char32_t c);
// str.isalnum(): categories L* and N* (isalpha or isdecimal or isdigit or isnumeric; the same set).
bool is_alnum(char32_t c);
// re's \w on str patterns (and so \b's notion of a word): is_alnum or '_'. Combining marks are not
// word characters.
bool is_word(char32_t c);
// string.punctuation: the 32 ASCII characters !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ and nothing else.
bool is_ascii_punctuation(char32_t c);
// Unicode's Case_Ignorable: categories Mn, Me, Cf, Lm, Sk and the word-break MidLetter, MidNumLet
// and Single_Quote characters (' . : and 14 others).
bool is_case_ignorable(char32_t c);
// Unicode's Cased (Lowercase, Uppercase or Lt) for every character that is not Case_Ignorable, the
// only ones CPython's final-sigma rule asks about: Lu, Ll, Lt, ª, º, the Roman numerals U+2160-217F
// and the circled / squared Latin letters.
bool is_cased(char32_t c);
// Full case mappings without context (Unicode's SpecialCasing.txt unconditional entries, else
// UnicodeData's simple mapping): lower_full(U+0130 'İ') = "i\u0307", upper_full('ß') = "SS",
// title_full('ß') = "Ss".
std::u32string lower_full(char32_t c);
std::u32string upper_full(char32_t c);
std::u32string title_full(char32_t c);

// ---- Text.
std::u32string decode(std::string_view utf8);  // ill-formed sequences become U+FFFD
std::string encode(std::u32string_view text);

// str.lower(): lower_full of each character, except that a capital sigma Σ becomes final ς where
// it ends a word (CPython's rule: a cased letter before it, past case-ignorable ones, and none after
// it) and σ elsewhere.
std::u32string lower(std::u32string_view text);
std::string lower(std::string_view text);
// str.upper(): upper_full of each character.
std::string upper(std::string_view text);
// str.capitalize() (Python >= 3.8): title_full of the first character, lower() of the rest (with
// the final-sigma rule seeing the whole string).
std::string capitalize(std::string_view text);

// str.split() without arguments: maximal runs of non-is_space characters.
std::vector<std::string> split(std::string_view text);
// str.strip(), lstrip(), rstrip() without arguments: is_space characters off the ends.
std::string_view strip(std::string_view text);
std::string_view lstrip(std::string_view text);
std::string_view rstrip(std::string_view text);
// re.findall(r"\d+", text): maximal runs of is_decimal characters, as they are written.
std::vector<std::string> decimal_runs(std::string_view text);

// utf8proc's Unicode version, e.g. "15.0.0".
const char* unicode_version();

}  // namespace amor::text

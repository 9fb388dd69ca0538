// UTF-8 helpers for the tokenizers: encoding a code point, reading one, and repairing invalid
// input the way a browser's (and Node's) TextDecoder does, so that text which is not valid UTF-8
// tokenises exactly as the JavaScript reference encoders see it after decoding.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace amor::tokenizer {

// Appends the UTF-8 encoding of code point cp (0..0x10FFFF, no check) to out.
void append_utf8(std::string& out, uint32_t cp);

// Reads the code point starting at s[i] of valid UTF-8 and advances i past it.
uint32_t next_code_point(std::string_view s, size_t& i);

// Offset of the first ill-formed sequence, or npos when s is valid UTF-8.
size_t first_invalid_utf8(std::string_view s);

// s with every ill-formed subsequence replaced by U+FFFD following the WHATWG Encoding standard's
// UTF-8 decoder ("maximal subpart" replacement, Unicode §3.9 U+FFFD substitution).
std::string sanitize_utf8(std::string_view s);

}  // namespace amor::tokenizer

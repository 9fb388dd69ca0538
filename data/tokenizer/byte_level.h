// GPT-2's byte-to-unicode map: byte-level BPE vocabularies spell every byte as one printable
// code point (printable Latin-1 bytes as themselves, the other 68 as U+0100.. in byte order), so
// a token string such as "Ġthe" is the bytes " the".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace amor::tokenizer {

// The code point that spells byte b.
uint32_t byte_to_code_point(uint8_t b);

// The byte spelled by code point cp, or nothing if cp is not one of the 256.
std::optional<uint8_t> code_point_to_byte(uint32_t cp);

// The byte-level spelling (UTF-8) of raw bytes: "\x20the" -> "Ġthe".
std::string bytes_to_token(std::string_view bytes);

// The raw bytes a byte-level token spells, or nothing if it holds a code point outside the map
// (or is not valid UTF-8).
std::optional<std::string> token_to_bytes(std::string_view token);

}  // namespace amor::tokenizer

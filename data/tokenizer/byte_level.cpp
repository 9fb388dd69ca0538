// The byte <-> code point tables of byte-level BPE (GPT-2's bytes_to_unicode()).
#include "data/tokenizer/byte_level.h"

#include <array>

#include "data/tokenizer/utf8.h"

namespace amor::tokenizer {

namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // every mapped code point is below 0x100 + 68

  Tables() {
    from_cp.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) to_cp[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
    for (int b = 0; b < 256; ++b) from_cp[to_cp[b]] = static_cast<int16_t>(b);
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) { return tables().to_cp[b]; }

std::optional<uint8_t> code_point_to_byte(uint32_t cp) {
  if (cp >= tables().from_cp.size() || tables().from_cp[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().from_cp[cp]);
}

std::string bytes_to_token(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_code_point(b));
  return out;
}

std::optional<std::string> token_to_bytes(std::string_view token) {
  if (first_invalid_utf8(token) != std::string_view::npos) return std::nullopt;
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    const auto b = code_point_to_byte(next_code_point(token, i));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace amor::tokenizer

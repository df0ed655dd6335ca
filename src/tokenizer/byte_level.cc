// Tables of the GPT-2 byte <-> unicode map (bytes_to_unicode in the GPT-2 release).
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace specd::tok {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_char{};
  std::array<std::string, 256> byte_utf8;
  std::array<int16_t, 512> char_byte{};  // every code point of the alphabet is below 512

  Tables() {
    char_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      char32_t c = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      byte_char[b] = c;
      char_byte[c] = static_cast<int16_t>(b);
      append_utf8(byte_utf8[b], c);
    }
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

char32_t byte_to_char(uint8_t b) { return tables().byte_char[b]; }

std::string_view byte_to_utf8(uint8_t b) { return tables().byte_utf8[b]; }

int char_to_byte(char32_t c) { return c < 512 ? tables().char_byte[c] : -1; }

void append_byte_level(std::string& out, std::string_view bytes) {
  const Tables& t = tables();
  for (char c : bytes) out.append(t.byte_utf8[static_cast<uint8_t>(c)]);
}

bool byte_level_to_bytes(std::string_view text, std::string& out) {
  const Tables& t = tables();
  for (size_t pos = 0; pos < text.size();) {
    char32_t c = next_code_point(text, pos);
    int b = c < 512 ? t.char_byte[c] : -1;
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace specd::tok
